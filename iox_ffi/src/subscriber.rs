//! Subscribers from C: receive (at once, or waiting up to a timeout without spinning),
//! read in place, release.
//!
//! A received sample is an [`IoxSample`]: the payload's address and length, and an id
//! the subscriber keeps it under (see `handle`). Releasing it ends the id: a second
//! release, or a release of another subscriber's sample, is `IOX_STATUS_STALE_HANDLE`.
//! A sample's bytes stay valid until it is released or its subscriber is dropped;
//! dropping the subscriber releases its samples.

use std::cell::RefCell;
use std::ffi::c_void;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use iox_service::{RawSample, Subscriber};

use crate::handle::{Marked, Slots, marker};
use crate::service::{IoxPoolInfo, IoxPubSubService, service};
use crate::status::{IoxStatus, fail, guard};

/// A subscriber (opaque): used from the thread that created it.
pub struct IoxSubscriber {
    subscriber: Subscriber<[u8]>,
    samples: RefCell<Slots<RawSample>>,
}

const SUBSCRIBER: u64 = marker(b"iox-sub\0");

/// A received sample: read `len_bytes` bytes at `data`, then release it by `id`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxSample {
    /// The payload's first byte (read-only).
    pub data: *const c_void,
    /// The payload's length in bytes.
    pub len_bytes: u64,
    /// Its length in elements of the service's type (1 for a value).
    pub len: u64,
    /// What the subscriber knows this sample by.
    pub id: u64,
}

/// Creates a subscriber of `service` (pinning its pool once if `pin_memory`); `*out` is
/// the subscriber, usable from this thread only.
///
/// # Safety
/// `service` is a pointer from `iox_pubsub_open`; `out` points to writable memory for a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_create(
    service: *mut IoxPubSubService,
    pin_memory: bool,
    out: *mut *mut IoxSubscriber,
) -> IoxStatus {
    guard(|| {
        if out.is_null() {
            return fail(IoxStatus::NullPointer, "out must not be NULL");
        }
        // SAFETY: the caller's contract.
        let service = match unsafe { self::service(service) } {
            Ok(s) => s,
            Err(status) => return status,
        };
        match service.subscriber_builder().pin_memory(pin_memory).create() {
            Ok(subscriber) => {
                let s = Marked::into_raw(
                    SUBSCRIBER,
                    IoxSubscriber {
                        subscriber,
                        samples: RefCell::new(Slots::new()),
                    },
                );
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(s.cast()) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::PortCreateFailed, e),
        }
    })
}

/// Receives the next sample, waiting up to `timeout_ns` nanoseconds (0: do not wait)
/// without spinning. `*received` says whether `*sample` was filled.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_subscriber_create`]; `sample` and `received`
/// point to writable memory for an `IoxSample` and a `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_receive(
    subscriber: *mut IoxSubscriber,
    timeout_ns: u64,
    sample: *mut IoxSample,
    received: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { Marked::<IoxSubscriber>::get(subscriber.cast(), SUBSCRIBER, true) } {
            Ok(m) => &m.inner,
            Err(status) => return status,
        };
        if sample.is_null() || received.is_null() {
            return fail(IoxStatus::NullPointer, "sample and received must not be NULL");
        }
        let got = if timeout_ns == 0 {
            s.subscriber.receive_raw()
        } else {
            s.subscriber.receive_timeout_raw(Duration::from_nanos(timeout_ns))
        };
        match got {
            Ok(Some(raw)) => {
                let (data, len_bytes, len) = (raw.as_ptr().cast(), raw.len_bytes() as u64, raw.len() as u64);
                let id = s.samples.borrow_mut().insert(raw);
                // SAFETY: the caller's contract; neither is NULL (checked).
                unsafe {
                    sample.write(IoxSample {
                        data,
                        len_bytes,
                        len,
                        id,
                    });
                    received.write(true);
                }
                IoxStatus::Ok
            }
            Ok(None) => {
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { received.write(false) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::ReceiveFailed, e),
        }
    })
}

/// Releases the sample `id` (its chunk returns to the pool once no one else holds it).
/// The id is stale afterwards.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_subscriber_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_release(subscriber: *mut IoxSubscriber, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { Marked::<IoxSubscriber>::get(subscriber.cast(), SUBSCRIBER, true) } {
            Ok(m) => &m.inner,
            Err(status) => return status,
        };
        match s.samples.borrow_mut().remove(id) {
            Some(raw) => {
                drop(raw);
                IoxStatus::Ok
            }
            None => fail(
                IoxStatus::StaleHandle,
                "no such sample: it was released already, or belongs to another subscriber",
            ),
        }
    })
}

/// The subscriber's view of the pool (see `IoxPoolInfo`).
///
/// # Safety
/// `subscriber` is a pointer from [`iox_subscriber_create`]; `info` points to writable
/// memory for an `IoxPoolInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_pool_info(
    subscriber: *mut IoxSubscriber,
    info: *mut IoxPoolInfo,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { Marked::<IoxSubscriber>::get(subscriber.cast(), SUBSCRIBER, true) } {
            Ok(m) => &m.inner,
            Err(status) => return status,
        };
        if info.is_null() {
            return fail(IoxStatus::NullPointer, "info must not be NULL");
        }
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { info.write(IoxPoolInfo::of(&s.subscriber.pool_info())) };
        IoxStatus::Ok
    })
}

/// The device address of sample `id`'s payload, for a subscriber that pinned a
/// `CudaPinned` pool (`pin_memory`): what a kernel reads it through, with no copy.
/// `IOX_STATUS_NO_DEVICE_POINTER` if the subscriber did not pin, or its pinner gives
/// none.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_subscriber_create`]; `device_ptr` points to
/// writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_device_ptr(
    subscriber: *mut IoxSubscriber,
    id: u64,
    device_ptr: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { Marked::<IoxSubscriber>::get(subscriber.cast(), SUBSCRIBER, true) } {
            Ok(m) => &m.inner,
            Err(status) => return status,
        };
        if device_ptr.is_null() {
            return fail(IoxStatus::NullPointer, "device_ptr must not be NULL");
        }
        let samples = s.samples.borrow();
        let Some(sample) = samples.iter().find_map(|(i, smp)| (i == id).then_some(smp)) else {
            return fail(
                IoxStatus::StaleHandle,
                "no such sample: it was released already, or belongs to another subscriber",
            );
        };
        match sample.device_ptr() {
            Ok(p) => {
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { device_ptr.write(p) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::NoDevicePointer, e),
        }
    })
}

/// The subscriber's readiness descriptor, for `poll`/`epoll` or an `IoxWaitSet`: it
/// becomes readable when a sample arrives; receive until none is left, then wait
/// again. Owned by the subscriber (do not close it); valid until it is dropped.
///
/// # Safety
/// `subscriber` is a pointer from [`iox_subscriber_create`]; `fd` points to writable
/// memory for an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_fd(subscriber: *mut IoxSubscriber, fd: *mut i32) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { Marked::<IoxSubscriber>::get(subscriber.cast(), SUBSCRIBER, true) } {
            Ok(m) => &m.inner,
            Err(status) => return status,
        };
        if fd.is_null() {
            return fail(IoxStatus::NullPointer, "fd must not be NULL");
        }
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(s.subscriber.as_fd().as_raw_fd()) };
        IoxStatus::Ok
    })
}

/// Drops the subscriber and releases every sample it still holds (from its own thread).
///
/// # Safety
/// `subscriber` is NULL or a pointer from [`iox_subscriber_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_drop(subscriber: *mut IoxSubscriber) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { Marked::<IoxSubscriber>::drop_raw(subscriber.cast(), SUBSCRIBER, true) })
}
