//! Device-memory services from C (`CudaDevice`, memory type 3): tensors in GPU memory,
//! loaned and sent on the caller's CUDA streams, received and read in stream order.
//!
//! A stream is a `CUstream` as `void *` (NULL: the legacy default stream), of a
//! context of the service's GPU, alive while iox uses it (until the send, the wait or
//! the release that names it).
//!
//! - A device publisher loans a chunk for a tensor ([`IoxTensor`]: element type, shape,
//!   strides in elements), checked against the service's element type and largest
//!   sample (`IOX_STATUS_INVALID_TENSOR` naming the sizes), or for plain bytes
//!   ([`iox_device_publisher_loan_bytes`], recorded as a 1-D tensor of the service's
//!   element type). The loan's stream waits for the chunk's last readers; work
//!   enqueued on it after the call may write `device_ptr`. The send records the end of
//!   the writes on the stream it is given, then sends. Nothing waits on the host.
//! - A device subscriber receives a sample with its tensor (a service whose payload is
//!   not a slice of numbers: `IOX_ELEMENT_NONE`, one dimension of `len_bytes`; a damaged
//!   record is `IOX_STATUS_INVALID_TENSOR` and the sample is released). Read it with
//!   work enqueued after [`iox_device_subscriber_wait`] on a stream; release it on the
//!   stream the reads were enqueued on (`iox_device_subscriber_release_on`) or with
//!   [`iox_device_subscriber_release`], which records on the stream last waited on.
//!
//! Loans and samples are ids the port keeps (see `handle`), ended by the send, discard
//! or release; dropping the port discards its loans and releases its samples. Ports are
//! used from the thread that created them.

use std::cell::RefCell;
use std::ffi::c_void;

use iox_service::cuda::Stream;
use iox_service::tensor::{DType, TensorError, TensorLayout};
use iox_service::{DeviceLoan, DevicePublisher, DeviceSample, DeviceSubscriber};

use crate::handle::{Slots, drop_handle, hand_out, live, marker, non_null, put, take, timeout};
use crate::service::{IoxPubSubService, SERVICE};
use crate::status::{IoxStatus, fail, guard, port_failed, refuse};

/// Most dimensions of a tensor.
pub const IOX_TENSOR_MAX_DIMS: usize = 8;

/// A tensor's element type (DLPack's types of these sizes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoxElement {
    /// No element type: the service's payload is not a slice of numbers.
    None = 0,
    Bool = 1,
    U8 = 2,
    U16 = 3,
    U32 = 4,
    U64 = 5,
    I8 = 6,
    I16 = 7,
    I32 = 8,
    I64 = 9,
    F16 = 10,
    Bf16 = 11,
    F32 = 12,
    F64 = 13,
}

const ELEMENTS: [(IoxElement, DType); 13] = [
    (IoxElement::Bool, DType::Bool),
    (IoxElement::U8, DType::U8),
    (IoxElement::U16, DType::U16),
    (IoxElement::U32, DType::U32),
    (IoxElement::U64, DType::U64),
    (IoxElement::I8, DType::I8),
    (IoxElement::I16, DType::I16),
    (IoxElement::I32, DType::I32),
    (IoxElement::I64, DType::I64),
    (IoxElement::F16, DType::F16),
    (IoxElement::Bf16, DType::BF16),
    (IoxElement::F32, DType::F32),
    (IoxElement::F64, DType::F64),
];

pub(crate) fn element_of(d: Option<DType>) -> IoxElement {
    ELEMENTS
        .iter()
        .find(|(_, t)| Some(*t) == d)
        .map_or(IoxElement::None, |(e, _)| *e)
}

/// A tensor: element type, `ndim` sizes and strides (in elements, row-major for a
/// contiguous tensor: the last dimension's stride is 1).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxTensor {
    /// An `IoxElement` (a plain integer here, so that any value C writes is defined;
    /// one that is no element is refused).
    pub element: u32,
    pub ndim: u32,
    pub shape: [u64; IOX_TENSOR_MAX_DIMS],
    pub strides: [i64; IOX_TENSOR_MAX_DIMS],
}

impl IoxTensor {
    pub(crate) fn of(t: &TensorLayout) -> Self {
        let mut out = Self {
            element: element_of(Some(t.dtype())) as u32,
            ndim: t.shape().len() as u32,
            shape: [0; IOX_TENSOR_MAX_DIMS],
            strides: [0; IOX_TENSOR_MAX_DIMS],
        };
        out.shape[..t.shape().len()].copy_from_slice(t.shape());
        out.strides[..t.strides().len()].copy_from_slice(t.strides());
        out
    }

    pub(crate) fn layout(&self) -> Result<TensorLayout, IoxStatus> {
        let dtype = ELEMENTS
            .iter()
            .find(|(e, _)| *e as u32 == self.element)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                fail(
                    IoxStatus::InvalidTensor,
                    format!(
                        "tensor.element is {}, not an element type (IOX_ELEMENT_NONE is 0): give one of IoxElement's",
                        self.element
                    ),
                )
            })?;
        let ndim = self.ndim as usize;
        if ndim > IOX_TENSOR_MAX_DIMS {
            return Err(tensor_error(TensorError::TooManyDims { ndim }));
        }
        let shape: Vec<usize> = self.shape[..ndim].iter().map(|&d| d as usize).collect();
        TensorLayout::strided(dtype, &shape, &self.strides[..ndim]).map_err(tensor_error)
    }
}

pub(crate) fn tensor_error(e: TensorError) -> IoxStatus {
    fail(IoxStatus::InvalidTensor, e)
}

/// A loaned chunk of GPU memory: write it with work on the loan's stream, then send
/// or discard it by `id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxDeviceLoan {
    /// The chunk's device address (in this process's context of the service's GPU).
    pub device_ptr: u64,
    /// Bytes loaned (the tensor's span).
    pub len_bytes: u64,
    /// What the publisher knows this loan by.
    pub id: u64,
    /// The tensor the sample will carry.
    pub tensor: IoxTensor,
}

/// A received tensor in GPU memory: read it with work enqueued after a wait on a
/// stream, then release it by `id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxDeviceSample {
    /// The sample's device address (in this process's context of the service's GPU).
    pub device_ptr: u64,
    /// Bytes sent.
    pub len_bytes: u64,
    /// What the subscriber knows this sample by.
    pub id: u64,
    /// This process's ordinal of the GPU.
    pub device: i32,
    /// Its tensor (checked against the service and the sample's bytes).
    pub tensor: IoxTensor,
}

/// A device publisher (opaque): used from the thread that created it.
pub struct IoxDevicePublisher {
    publisher: DevicePublisher,
    loans: RefCell<Slots<DeviceLoan>>,
}

/// A device subscriber (opaque): used from the thread that created it.
pub struct IoxDeviceSubscriber {
    subscriber: DeviceSubscriber,
    samples: RefCell<Slots<DeviceSample>>,
}

const DEVICE_PUBLISHER: u64 = marker(b"iox-dpub");
const DEVICE_SUBSCRIBER: u64 = marker(b"iox-dsub");
const NO_LOAN: &str = "no such loan: it was sent or discarded already, or belongs to another port";
const NO_SAMPLE: &str = "no such sample: it was released already, or belongs to another subscriber";

fn stream(raw: *mut c_void) -> Stream {
    // SAFETY: the module's contract: a stream of the service's GPU (or NULL, the
    // legacy default), alive while iox uses it.
    unsafe { Stream::from_raw(raw) }
}

/// Creates a device publisher of `service` (a `CudaDevice` service); `*out` is the
/// publisher. Fails (`IOX_STATUS_PORT_CREATE_FAILED`) where this process has no CUDA
/// driver or not the service's GPU, naming it.
///
/// # Safety
/// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
/// a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_create(
    service: *mut IoxPubSubService,
    out: *mut *mut IoxDevicePublisher,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, SERVICE, false) }?.service;
        let make = || {
            let publisher = service.device_publisher_builder().create().map_err(port_failed)?;
            Ok(IoxDevicePublisher {
                publisher,
                loans: RefCell::new(Slots::new()),
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, DEVICE_PUBLISHER, make) }
    })
}

/// The service's element type (`IOX_ELEMENT_NONE`: not a slice of numbers), its
/// largest sample in bytes and this process's ordinal of its GPU (each out pointer may
/// be NULL).
///
/// # Safety
/// `publisher` is a pointer from [`iox_device_publisher_create`]; the others are NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_info(
    publisher: *mut IoxDevicePublisher,
    element: *mut IoxElement,
    max_bytes: *mut u64,
    device: *mut i32,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = &unsafe { live(publisher, DEVICE_PUBLISHER, true) }?.publisher;
        // SAFETY: the caller's contract: each NULL or writable.
        unsafe {
            put(element, element_of(p.element_type()));
            put(max_bytes, p.max_bytes() as u64);
            put(device, p.device_ordinal());
        }
        Ok(())
    })
}

/// Loans a chunk for `tensor` on `stream` (see the module docs); `*loan` is filled.
///
/// # Safety
/// `publisher` is a pointer from [`iox_device_publisher_create`]; `tensor` points to a
/// readable `IoxTensor`; `stream` is as the module docs say; `loan` points to writable
/// memory for an `IoxDeviceLoan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_loan(
    publisher: *mut IoxDevicePublisher,
    stream: *mut c_void,
    tensor: *const IoxTensor,
    loan: *mut IoxDeviceLoan,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, DEVICE_PUBLISHER, true) }?;
        let tensor = non_null(tensor.cast_mut(), "tensor")?;
        let loan = non_null(loan, "loan")?;
        // SAFETY: the caller's contract: readable; not NULL (checked).
        let layout = unsafe { tensor.read() }.layout()?;
        let made = p
            .publisher
            .loan_tensor_on(self::stream(stream), &layout)
            .map_err(loan_error)?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { keep(p, made, loan) }
    })
}

/// Loans a chunk for `len_bytes` bytes on `stream`: a 1-D tensor of the service's
/// element type (`len_bytes` a multiple of its size); `*loan` is filled.
///
/// # Safety
/// As [`iox_device_publisher_loan`], without `tensor`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_loan_bytes(
    publisher: *mut IoxDevicePublisher,
    stream: *mut c_void,
    len_bytes: u64,
    loan: *mut IoxDeviceLoan,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, DEVICE_PUBLISHER, true) }?;
        let loan = non_null(loan, "loan")?;
        let bytes = crate::handle::bytes(len_bytes)?;
        let made = p
            .publisher
            .loan_on(self::stream(stream), bytes)
            .map_err(loan_error)?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { keep(p, made, loan) }
    })
}

fn loan_error(e: iox_service::DeviceLoanError) -> IoxStatus {
    match e {
        iox_service::DeviceLoanError::Tensor(t) => tensor_error(t),
        e => fail(IoxStatus::LoanFailed, e),
    }
}

/// Keeps `made` in `p`'s table and describes it in `*out`.
///
/// # Safety
/// `out` points to writable memory for an `IoxDeviceLoan`.
unsafe fn keep(
    p: &IoxDevicePublisher,
    mut made: DeviceLoan,
    out: *mut IoxDeviceLoan,
) -> Result<(), IoxStatus> {
    let (device_ptr, len_bytes) = (made.device_ptr(), made.len() as u64);
    let tensor = made.tensor().map_or(
        IoxTensor {
            element: IoxElement::None as u32,
            ndim: 1,
            shape: [len_bytes, 0, 0, 0, 0, 0, 0, 0],
            strides: [1, 0, 0, 0, 0, 0, 0, 0],
        },
        IoxTensor::of,
    );
    let id = p.loans.borrow_mut().insert(made)?;
    // SAFETY: the caller's contract.
    unsafe {
        out.write(IoxDeviceLoan {
            device_ptr,
            len_bytes,
            id,
            tensor,
        })
    };
    Ok(())
}

/// Records the end of the writes on `stream` and sends loan `id`; `*delivered` (if not
/// NULL) is how many subscribers got it. The id is stale afterwards.
///
/// # Safety
/// `publisher` is a pointer from [`iox_device_publisher_create`]; `stream` as the
/// module docs say; `delivered` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_send(
    publisher: *mut IoxDevicePublisher,
    id: u64,
    stream: *mut c_void,
    delivered: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, DEVICE_PUBLISHER, true) }?;
        let loan = take(&p.loans, id, NO_LOAN)?;
        let n = loan
            .send_on(self::stream(stream))
            .map_err(|e| fail(IoxStatus::SendFailed, e))?;
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(delivered, n as u64) };
        Ok(())
    })
}

/// Gives loan `id` back unsent (work still writing it must be done, or ordered before
/// the chunk's next loan, by the caller). The id is stale afterwards.
///
/// # Safety
/// `publisher` is a pointer from [`iox_device_publisher_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_discard(
    publisher: *mut IoxDevicePublisher,
    id: u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, DEVICE_PUBLISHER, true) }?;
        drop(take(&p.loans, id, NO_LOAN)?);
        Ok(())
    })
}

/// Waits up to `timeout_ns` until `n` subscribers are connected; `*connected` (if not
/// NULL) is how many are.
///
/// # Safety
/// `publisher` is a pointer from [`iox_device_publisher_create`]; `connected` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_wait_for_subscribers(
    publisher: *mut IoxDevicePublisher,
    n: u64,
    timeout_ns: u64,
    connected: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, DEVICE_PUBLISHER, true) }?;
        let got = p
            .publisher
            .wait_for_subscribers(n as usize, std::time::Duration::from_nanos(timeout_ns))
            .map_err(|e| fail(IoxStatus::InvalidArgument, e))?;
        // SAFETY: the caller's contract.
        unsafe { put(connected, got as u64) };
        Ok(())
    })
}

/// Drops the publisher and discards its loans (from its own thread).
///
/// # Safety
/// `publisher` is NULL or a pointer from [`iox_device_publisher_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_publisher_drop(publisher: *mut IoxDevicePublisher) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(publisher, DEVICE_PUBLISHER, true) })
}

/// Creates a device subscriber of `service` (a `CudaDevice` service); `*out` is the
/// subscriber.
///
/// # Safety
/// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
/// a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_subscriber_create(
    service: *mut IoxPubSubService,
    out: *mut *mut IoxDeviceSubscriber,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, SERVICE, false) }?.service;
        let make = || {
            let subscriber = service
                .device_subscriber_builder()
                .create()
                .map_err(port_failed)?;
            Ok(IoxDeviceSubscriber {
                subscriber,
                samples: RefCell::new(Slots::new()),
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, DEVICE_SUBSCRIBER, make) }
    })
}

/// Receives the next sample, waiting up to `timeout_ns` (0: do not wait) without
/// spinning; `*received` says whether `*sample` was filled.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_device_subscriber_create`]; `sample` and
/// `received` point to writable memory for an `IoxDeviceSample` and a `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_subscriber_receive(
    subscriber: *mut IoxDeviceSubscriber,
    timeout_ns: u64,
    sample: *mut IoxDeviceSample,
    received: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(subscriber, DEVICE_SUBSCRIBER, true) }?;
        let (sample, received) = (non_null(sample, "sample")?, non_null(received, "received")?);
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { received.write(false) };
        let got = match timeout(timeout_ns) {
            None => s.subscriber.receive(),
            Some(t) => s.subscriber.receive_timeout(t),
        }
        .map_err(|e| fail(IoxStatus::ReceiveFailed, e))?;
        let Some(got) = got else {
            return Ok(());
        };
        let tensor = match got.tensor() {
            Ok(t) => IoxTensor::of(&t),
            Err(TensorError::NotATensorService { .. }) => IoxTensor {
                element: IoxElement::None as u32,
                ndim: 1,
                shape: [got.len() as u64, 0, 0, 0, 0, 0, 0, 0],
                strides: [1, 0, 0, 0, 0, 0, 0, 0],
            },
            // The sample is released (dropped here): its tensor cannot be described.
            Err(e) => return Err(tensor_error(e)),
        };
        let (device_ptr, len_bytes, device) = (got.device_ptr(), got.len() as u64, got.device_ordinal());
        let id = s.samples.borrow_mut().insert(got)?;
        // SAFETY: the caller's contract; neither is NULL (checked).
        unsafe {
            sample.write(IoxDeviceSample {
                device_ptr,
                len_bytes,
                id,
                device,
                tensor,
            });
            received.write(true);
        }
        Ok(())
    })
}

/// Makes `stream` wait for the publisher's write of sample `id`: work enqueued on it
/// afterwards may read the sample.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_device_subscriber_create`]; `stream` as the
/// module docs say.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_subscriber_wait(
    subscriber: *mut IoxDeviceSubscriber,
    id: u64,
    stream: *mut c_void,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(subscriber, DEVICE_SUBSCRIBER, true) }?;
        let mut samples = s.samples.borrow_mut();
        let Some(sample) = samples.get_mut(id) else {
            return refuse(IoxStatus::StaleHandle, NO_SAMPLE);
        };
        sample
            .wait_on(self::stream(stream))
            .map_err(|e| fail(IoxStatus::ReceiveFailed, e))
    })
}

/// Releases sample `id`, recording the end of its reads on the stream it was last
/// waited on (nothing if it never was: it was not read on the GPU). The id is stale
/// afterwards.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_device_subscriber_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_subscriber_release(
    subscriber: *mut IoxDeviceSubscriber,
    id: u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(subscriber, DEVICE_SUBSCRIBER, true) }?;
        drop(take(&s.samples, id, NO_SAMPLE)?);
        Ok(())
    })
}

/// Releases sample `id` after the reads enqueued on `stream`. The id is stale
/// afterwards (also when the driver refused the record: the sample is released).
///
/// # Safety
/// `subscriber` is a pointer from [`iox_device_subscriber_create`]; `stream` as the
/// module docs say.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_subscriber_release_on(
    subscriber: *mut IoxDeviceSubscriber,
    id: u64,
    stream: *mut c_void,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(subscriber, DEVICE_SUBSCRIBER, true) }?;
        take(&s.samples, id, NO_SAMPLE)?
            .release_on(self::stream(stream))
            .map_err(|e| fail(IoxStatus::ReceiveFailed, e))
    })
}

/// Drops the subscriber and releases its samples (from its own thread).
///
/// # Safety
/// `subscriber` is NULL or a pointer from [`iox_device_subscriber_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_device_subscriber_drop(subscriber: *mut IoxDeviceSubscriber) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(subscriber, DEVICE_SUBSCRIBER, true) })
}
