//! Subscribers from C: receive (at once, or waiting up to a timeout without spinning),
//! read in place, release.
//!
//! A received sample is an [`IoxSample`]: the payload's address and length, and an id
//! the subscriber keeps it under (see `handle`). Releasing it ends the id: a second
//! release, or a release of another subscriber's sample, is `IOX_STATUS_STALE_HANDLE`.
//! A sample's bytes stay valid until it is released or its subscriber is dropped;
//! dropping the subscriber releases its samples.

pub use crate::handle::IoxSample;
use std::cell::RefCell;
use std::ffi::c_void;
use std::os::fd::{AsFd, AsRawFd};

use iox_service::{RawSample, Subscriber};

use crate::handle::{Slots, drop_handle, hand_out, live, marker, non_null, show, take, timeout};
use crate::service::{IoxPoolInfo, IoxPubSubService, SERVICE};
use crate::status::{IoxStatus, fail, guard, port_failed, refuse, write_device_ptr};

/// A subscriber (opaque): used from the thread that created it.
pub struct IoxSubscriber {
    subscriber: Subscriber<[u8]>,
    samples: RefCell<Slots<RawSample>>,
}

pub(crate) const SUBSCRIBER: u64 = marker(b"iox-sub\0");

/// The refusal of a sample id that is not live.
const NO_SAMPLE: &str = "no such sample: it was released already, or belongs to another subscriber";

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
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, SERVICE, false) }?.service;
        let make = || {
            let subscriber = service
                .subscriber_builder()
                .pin_memory(pin_memory)
                .create()
                .map_err(port_failed)?;
            Ok(IoxSubscriber {
                subscriber,
                samples: RefCell::new(Slots::new()),
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, SUBSCRIBER, make) }
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
        let s = unsafe { live(subscriber, SUBSCRIBER, true) }?;
        let (sample, received) = (non_null(sample, "sample")?, non_null(received, "received")?);
        let got = receive_checked(s, timeout_ns)?;
        let got_one = got.is_some();
        // SAFETY: the caller's contract; neither is NULL (checked).
        unsafe {
            if let Some(raw) = got {
                let (data, len_bytes, len) = (raw.as_ptr().cast(), raw.len_bytes(), raw.len());
                let header = sample_header(&raw);
                show(&s.samples, raw, data, len_bytes, len, header, sample)?;
            }
            received.write(got_one);
        }
        Ok(())
    })
}

/// The sample's user header for C: its address and length, or NULL and 0 for a
/// service without one.
#[inline(always)]
pub(crate) fn sample_header(raw: &RawSample) -> (*const c_void, u64) {
    match raw.header_len() {
        0 => (std::ptr::null(), 0),
        n => (raw.header_ptr().cast(), n as u64),
    }
}

/// The next sample of `s`'s subscriber, waiting up to `timeout_ns` (0: not at all).
#[inline(always)]
pub(crate) fn receive_checked(s: &IoxSubscriber, timeout_ns: u64) -> Result<Option<RawSample>, IoxStatus> {
    match timeout(timeout_ns) {
        None => s.subscriber.receive_raw(),
        Some(t) => s.subscriber.receive_timeout_raw(t),
    }
    .map_err(|e| fail(IoxStatus::ReceiveFailed, e))
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
        let s = unsafe { live(subscriber, SUBSCRIBER, true) }?;
        drop(take(&s.samples, id, NO_SAMPLE)?);
        Ok(())
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
        let s = unsafe { live(subscriber, SUBSCRIBER, true) }?;
        let info = non_null(info, "info")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { info.write(IoxPoolInfo::of(&s.subscriber.pool_info())) };
        Ok(())
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
        let s = unsafe { live(subscriber, SUBSCRIBER, true) }?;
        let device_ptr = non_null(device_ptr, "device_ptr")?;
        let samples = s.samples.borrow();
        let Some(sample) = samples.get(id) else {
            return refuse(IoxStatus::StaleHandle, NO_SAMPLE);
        };
        // SAFETY: the caller's contract: writable; not NULL (checked).
        unsafe { write_device_ptr(device_ptr, sample.device_ptr()) }
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
        let s = unsafe { live(subscriber, SUBSCRIBER, true) }?;
        let fd = non_null(fd, "fd")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { fd.write(s.subscriber.as_fd().as_raw_fd()) };
        Ok(())
    })
}

/// Drops the subscriber and releases every sample it still holds (from its own thread).
///
/// # Safety
/// `subscriber` is NULL or a pointer from [`iox_subscriber_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_drop(subscriber: *mut IoxSubscriber) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(subscriber, SUBSCRIBER, true) })
}
