//! Publishers from C: loan, write in place, send; or discard.
//!
//! A loan is an [`IoxLoan`]: the payload's address and length, and an id the publisher
//! keeps it under (see `handle`). Sending or discarding it ends the id: a second send
//! of the same loan is `IOX_STATUS_STALE_HANDLE`, never a second delivery. Dropping
//! the publisher discards its loans.

pub use crate::handle::IoxLoan;
use std::cell::RefCell;
use std::ffi::c_void;

use iox_service::{PayloadType, Publisher, RawLoan};

use crate::handle::{Slots, bytes, drop_handle, hand_out, lend, live, marker, non_null, put, take};
use crate::service::{IoxPoolInfo, IoxPubSubService, SERVICE};
use crate::status::{IoxStatus, fail, guard, port_failed, refuse, write_device_ptr};

/// A publisher (opaque): used from the thread that created it.
pub struct IoxPublisher {
    publisher: Publisher<[u8]>,
    /// The size of the service's value type; `None` for a slice service.
    value_size: Option<u64>,
    loans: RefCell<Slots<RawLoan>>,
}

pub(crate) const PUBLISHER: u64 = marker(b"iox-pub\0");

/// The refusal of a loan id that is not live.
pub(crate) const NO_LOAN: &str = "no such loan: it was sent or discarded already, or belongs to another port";

/// Creates a publisher of `service` (pinning its pool once if `pin_memory`); `*out` is
/// the publisher, usable from this thread only.
///
/// # Safety
/// `service` is a pointer from `iox_pubsub_open` (checked as far as the crate docs
/// say); `out` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_create(
    service: *mut IoxPubSubService,
    pin_memory: bool,
    out: *mut *mut IoxPublisher,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let service = &unsafe { live(service, SERVICE, false) }?.service;
        let value_size = match &service.static_config().payload {
            PayloadType::Typed { size, .. } => Some(*size),
            PayloadType::Slice { .. } => None,
        };
        let make = || {
            let publisher = service
                .publisher_builder()
                .pin_memory(pin_memory)
                .create()
                .map_err(port_failed)?;
            Ok(IoxPublisher {
                publisher,
                value_size,
                loans: RefCell::new(Slots::new()),
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, PUBLISHER, make) }
    })
}

/// Loans a chunk for `len_bytes` bytes: the type's size for a value, a multiple of the
/// element size for a slice. `*loan` is filled on success. The bytes are not
/// initialised: write all of them, and the user header's (`loan->header`, if the
/// service has one), before sending.
///
/// # Safety
/// `publisher` is a pointer from [`iox_publisher_create`]; `loan` points to writable
/// memory for an `IoxLoan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_loan(
    publisher: *mut IoxPublisher,
    len_bytes: u64,
    loan: *mut IoxLoan,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, PUBLISHER, true) }?;
        let loan = non_null(loan, "loan")?;
        let mut raw = loan_checked(p, len_bytes)?;
        let (data, len) = (raw.as_mut_ptr().cast(), raw.len_bytes());
        let header = loan_header(&mut raw);
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { lend(&p.loans, raw, data, len, header, loan) }
    })
}

/// A loan of `len_bytes` bytes from `p`'s publisher, the length checked against the
/// service's type.
#[inline(always)]
pub(crate) fn loan_checked(p: &IoxPublisher, len_bytes: u64) -> Result<RawLoan, IoxStatus> {
    if let Some(size) = p.value_size
        && size != len_bytes
    {
        return refuse(
            IoxStatus::InvalidArgument,
            format!("a loan of this service's value type is exactly its size, {size} bytes, not {len_bytes}"),
        );
    }
    p.publisher
        .loan_raw(bytes(len_bytes)?)
        .map_err(|e| fail(IoxStatus::LoanFailed, e))
}

/// The loan's user header for C: its address and length, or NULL and 0 for a service
/// without one.
#[inline(always)]
pub(crate) fn loan_header(raw: &mut RawLoan) -> (*mut c_void, u64) {
    match raw.header_len() {
        0 => (std::ptr::null_mut(), 0),
        n => (raw.header_ptr().cast(), n as u64),
    }
}

/// Sends the loan `id` to every connected subscriber; `*delivered` (if not NULL) is how
/// many got it. The id is stale afterwards, whether the send succeeded or not.
///
/// # Safety
/// `publisher` is a pointer from [`iox_publisher_create`]; all of the loan's
/// `len_bytes` bytes were written with a valid value of the service's type, and all
/// of its `header_len` header bytes with a valid value of the header's type;
/// `delivered` is NULL or points to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_send(
    publisher: *mut IoxPublisher,
    id: u64,
    delivered: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, PUBLISHER, true) }?;
        let raw = take(&p.loans, id, NO_LOAN)?;
        // SAFETY: the caller's contract: every byte of the payload and the header was
        // written with a valid value.
        let (result, n) = crate::status::sent(unsafe { raw.send() });
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(delivered, n) };
        result
    })
}

/// Gives the loan `id` back unsent. The id is stale afterwards.
///
/// # Safety
/// `publisher` is a pointer from [`iox_publisher_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_discard(publisher: *mut IoxPublisher, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, PUBLISHER, true) }?;
        drop(take(&p.loans, id, NO_LOAN)?);
        Ok(())
    })
}

/// The device address of loan `id`'s payload, for a publisher that pinned a
/// `CudaPinned` pool (`pin_memory`): where a kernel writes it, with no copy (finish
/// that work before sending). `IOX_STATUS_NO_DEVICE_POINTER` if the publisher did not
/// pin, or its pinner gives none.
///
/// # Safety
/// `publisher` is a pointer from [`iox_publisher_create`]; `device_ptr` points to
/// writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_device_ptr(
    publisher: *mut IoxPublisher,
    id: u64,
    device_ptr: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, PUBLISHER, true) }?;
        let device_ptr = non_null(device_ptr, "device_ptr")?;
        let loans = p.loans.borrow();
        let Some(loan) = loans.get(id) else {
            return refuse(IoxStatus::StaleHandle, NO_LOAN);
        };
        // SAFETY: the caller's contract: writable; not NULL (checked).
        unsafe { write_device_ptr(device_ptr, loan.device_ptr()) }
    })
}

/// The publisher's view of the pool (see `IoxPoolInfo`).
///
/// # Safety
/// `publisher` is a pointer from [`iox_publisher_create`]; `info` points to writable
/// memory for an `IoxPoolInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_pool_info(
    publisher: *mut IoxPublisher,
    info: *mut IoxPoolInfo,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, PUBLISHER, true) }?;
        let info = non_null(info, "info")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { info.write(IoxPoolInfo::of(&p.publisher.pool_info())) };
        Ok(())
    })
}

/// Drops the publisher and every loan it still holds (from its own thread).
///
/// # Safety
/// `publisher` is NULL or a pointer from [`iox_publisher_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_drop(publisher: *mut IoxPublisher) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(publisher, PUBLISHER, true) })
}
