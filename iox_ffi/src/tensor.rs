//! Host tensor services from C: a slice-of-numbers service created with
//! `IoxPubSubOptions.tensors` set, whose every sample carries its tensor (element
//! type, shape and strides in elements), as a `CudaDevice` service's do: the same
//! calls with host addresses and no streams, so a C or C++ camera publishes typed
//! tensors to a Python model on a machine without a GPU.
//!
//! - A tensor publisher loans a chunk for a tensor ([`IoxTensor`], checked against the
//!   service's element type and largest sample: `IOX_STATUS_INVALID_TENSOR` naming the
//!   sizes), to be written at `data` (its span, `len_bytes`) and sent or discarded by
//!   `id`. It is the only publisher such a service takes (a plain one is refused).
//! - A tensor subscriber receives a sample with its tensor read back and checked
//!   against the service and the sample's bytes (a damaged record is
//!   `IOX_STATUS_INVALID_TENSOR`, and the sample is released); read `data`, then
//!   release it by `id`. A plain subscriber of the service reads the bytes alone.
//!
//! Loans and samples are ids the port keeps (see `handle`); dropping the port discards
//! its loans and releases its samples. Ports are used from the thread that created them.

use std::cell::RefCell;
use std::ffi::c_void;

use iox_service::{TensorLoan, TensorPublisher, TensorSample, TensorSubscriber};

use crate::device::{IoxElement, IoxTensor, element_of, tensor_error};
use crate::handle::{Slots, drop_handle, hand_out, live, marker, non_null, put, take, timeout};
use crate::service::{IoxPubSubService, SERVICE};
use crate::status::{IoxStatus, fail, guard, port_failed};

/// A loaned chunk for a host tensor: write `len_bytes` bytes at `data`, then send or
/// discard it by `id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxTensorLoan {
    /// The tensor's first byte (host memory, aligned for the element type).
    pub data: *mut c_void,
    /// Bytes loaned (the tensor's span).
    pub len_bytes: u64,
    /// What the publisher knows this loan by.
    pub id: u64,
    /// The tensor the sample will carry.
    pub tensor: IoxTensor,
}

/// A received host tensor: read `len_bytes` bytes at `data` as `tensor` says, then
/// release it by `id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxTensorSample {
    /// The tensor's first byte (read-only).
    pub data: *const c_void,
    /// Bytes sent (the tensor's span).
    pub len_bytes: u64,
    /// What the subscriber knows this sample by.
    pub id: u64,
    /// Its tensor (checked against the service and the sample's bytes).
    pub tensor: IoxTensor,
}

/// A tensor publisher (opaque): used from the thread that created it.
pub struct IoxTensorPublisher {
    publisher: TensorPublisher,
    loans: RefCell<Slots<TensorLoan>>,
}

/// A tensor subscriber (opaque): used from the thread that created it.
pub struct IoxTensorSubscriber {
    subscriber: TensorSubscriber,
    samples: RefCell<Slots<TensorSample>>,
}

const TENSOR_PUBLISHER: u64 = marker(b"iox-tpub");
const TENSOR_SUBSCRIBER: u64 = marker(b"iox-tsub");
const NO_LOAN: &str = "no such loan: it was sent or discarded already, or belongs to another port";
const NO_SAMPLE: &str = "no such sample: it was released already, or belongs to another subscriber";

/// Creates a tensor publisher of `service` (a host tensor service: `tensors` set when
/// it was created); `*out` is the publisher. Another service is
/// `IOX_STATUS_PORT_CREATE_FAILED`, saying why.
///
/// # Safety
/// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
/// a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_publisher_create(
    service: *mut IoxPubSubService,
    out: *mut *mut IoxTensorPublisher,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, SERVICE, false) }?.service;
        let make = || {
            let publisher = service.tensor_publisher_builder().create().map_err(port_failed)?;
            Ok(IoxTensorPublisher {
                publisher,
                loans: RefCell::new(Slots::new()),
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, TENSOR_PUBLISHER, make) }
    })
}

/// The service's element type and its largest tensor in bytes (each out pointer may be
/// NULL).
///
/// # Safety
/// `publisher` is a pointer from [`iox_tensor_publisher_create`]; the others are NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_publisher_info(
    publisher: *mut IoxTensorPublisher,
    element: *mut IoxElement,
    max_bytes: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = &unsafe { live(publisher, TENSOR_PUBLISHER, true) }?.publisher;
        // SAFETY: the caller's contract: each NULL or writable.
        unsafe {
            put(element, element_of(Some(p.element_type())));
            put(max_bytes, p.max_bytes() as u64);
        }
        Ok(())
    })
}

/// Loans a chunk for `tensor`; `*loan` is filled. Write all of its `len_bytes` bytes
/// before sending it.
///
/// # Safety
/// `publisher` is a pointer from [`iox_tensor_publisher_create`]; `tensor` points to a
/// readable `IoxTensor`; `loan` points to writable memory for an `IoxTensorLoan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_publisher_loan(
    publisher: *mut IoxTensorPublisher,
    tensor: *const IoxTensor,
    loan: *mut IoxTensorLoan,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, TENSOR_PUBLISHER, true) }?;
        let tensor = non_null(tensor.cast_mut(), "tensor")?;
        let loan = non_null(loan, "loan")?;
        // SAFETY: the caller's contract: readable; not NULL (checked).
        let layout = unsafe { tensor.read() }.layout()?;
        let mut made = p.publisher.loan_tensor(&layout).map_err(|e| match e {
            iox_service::TensorLoanError::Tensor(t) => tensor_error(t),
            e => fail(IoxStatus::LoanFailed, e),
        })?;
        let (data, len_bytes) = (made.as_mut_ptr().cast::<c_void>(), made.len() as u64);
        let tensor = IoxTensor::of(made.tensor());
        let id = p.loans.borrow_mut().insert(made)?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe {
            loan.write(IoxTensorLoan {
                data,
                len_bytes,
                id,
                tensor,
            })
        };
        Ok(())
    })
}

/// Sends loan `id`, every one of whose bytes the caller wrote; `*delivered` (if not
/// NULL) is how many subscribers got it. The id is stale afterwards.
///
/// # Safety
/// `publisher` is a pointer from [`iox_tensor_publisher_create`]; all `len_bytes`
/// bytes of the loan were written; `delivered` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_publisher_send(
    publisher: *mut IoxTensorPublisher,
    id: u64,
    delivered: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, TENSOR_PUBLISHER, true) }?;
        let loan = take(&p.loans, id, NO_LOAN)?;
        // SAFETY: the caller's contract: every byte written (typed readers of a `bool`
        // tensor check each byte themselves).
        let n = unsafe { loan.send() }.map_err(|e| fail(IoxStatus::SendFailed, e))?;
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(delivered, n as u64) };
        Ok(())
    })
}

/// Gives loan `id` back unsent. The id is stale afterwards.
///
/// # Safety
/// `publisher` is a pointer from [`iox_tensor_publisher_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_publisher_discard(
    publisher: *mut IoxTensorPublisher,
    id: u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, TENSOR_PUBLISHER, true) }?;
        drop(take(&p.loans, id, NO_LOAN)?);
        Ok(())
    })
}

/// Waits up to `timeout_ns` until `n` subscribers are connected; `*connected` (if not
/// NULL) is how many are.
///
/// # Safety
/// `publisher` is a pointer from [`iox_tensor_publisher_create`]; `connected` NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_publisher_wait_for_subscribers(
    publisher: *mut IoxTensorPublisher,
    n: u64,
    timeout_ns: u64,
    connected: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, TENSOR_PUBLISHER, true) }?;
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
/// `publisher` is NULL or a pointer from [`iox_tensor_publisher_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_publisher_drop(publisher: *mut IoxTensorPublisher) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(publisher, TENSOR_PUBLISHER, true) })
}

/// Creates a tensor subscriber of `service` (a host tensor service); `*out` is the
/// subscriber.
///
/// # Safety
/// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for
/// a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_subscriber_create(
    service: *mut IoxPubSubService,
    out: *mut *mut IoxTensorSubscriber,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, SERVICE, false) }?.service;
        let make = || {
            let subscriber = service
                .tensor_subscriber_builder()
                .create()
                .map_err(port_failed)?;
            Ok(IoxTensorSubscriber {
                subscriber,
                samples: RefCell::new(Slots::new()),
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, TENSOR_SUBSCRIBER, make) }
    })
}

/// Receives the next tensor, waiting up to `timeout_ns` (0: do not wait) without
/// spinning; `*received` says whether `*sample` was filled.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_tensor_subscriber_create`]; `sample` and
/// `received` point to writable memory for an `IoxTensorSample` and a `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_subscriber_receive(
    subscriber: *mut IoxTensorSubscriber,
    timeout_ns: u64,
    sample: *mut IoxTensorSample,
    received: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(subscriber, TENSOR_SUBSCRIBER, true) }?;
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
        // A damaged record: the sample is released (dropped here) with the error.
        let tensor = IoxTensor::of(&got.tensor().map_err(tensor_error)?);
        let (data, len_bytes) = (got.as_ptr().cast::<c_void>(), got.len() as u64);
        let id = s.samples.borrow_mut().insert(got)?;
        // SAFETY: the caller's contract; neither is NULL (checked).
        unsafe {
            sample.write(IoxTensorSample {
                data,
                len_bytes,
                id,
                tensor,
            });
            received.write(true);
        }
        Ok(())
    })
}

/// Releases sample `id`. The id is stale afterwards.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_tensor_subscriber_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_subscriber_release(
    subscriber: *mut IoxTensorSubscriber,
    id: u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(subscriber, TENSOR_SUBSCRIBER, true) }?;
        drop(take(&s.samples, id, NO_SAMPLE)?);
        Ok(())
    })
}

/// Drops the subscriber and releases its samples (from its own thread).
///
/// # Safety
/// `subscriber` is NULL or a pointer from [`iox_tensor_subscriber_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_tensor_subscriber_drop(subscriber: *mut IoxTensorSubscriber) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(subscriber, TENSOR_SUBSCRIBER, true) })
}
