//! Loans and samples kept in the caller's memory: the path of the C++ layer, whose
//! move-only `iox::Loan` and `iox::Sample` already rule out what the ids of `handle`
//! check at run time (a second send or release, a copy used after its original).
//!
//! An [`IoxHeldLoan`] or [`IoxHeldSample`] is a struct the caller owns; a loan or
//! receive call moves the port's loan or sample into its opaque `state` and sets its
//! `live` word; sending, discarding or releasing moves it out and clears `live`. So no
//! table is looked up or changed per message, and nothing but the struct is moved.
//!
//! Invariants and what they rest on:
//! - `state` holds a `RawLoan` / `RawSample` exactly while `live` is [`LOAN_LIVE`] /
//!   [`SAMPLE_LIVE`]; these calls never read `state` otherwise.
//! - A held loan or sample keeps its port's state alive by itself (the core's loan
//!   and sample hold a reference to it), so it may outlive the `IoxPublisher` or
//!   `IoxSubscriber` it came from: sending or releasing it then works as in Rust.
//! - A held loan is used from the thread that loaned it (its port state is
//!   single-threaded; the thread is recorded in the struct and checked); a held sample
//!   from any thread, one at a time.
//! - What the caller must not do (the C++ types cannot): copy the struct and use both
//!   copies (the second would send or release the same chunk again), or write into
//!   `state`. A spent struct, or one whose `live` word is 0 (zeroed, or the C++
//!   types' empty ones), is refused by its `live` word; nothing else of it is read
//!   then. The structs are passed aligned as their type.
//! - A held loan that its thread never sends or discards (a C++ `Loan` destroyed on
//!   another thread is refused) keeps its chunk until the process exits, when the
//!   pool's recovery takes it back as for any dead process's loan.

use std::ffi::c_void;
use std::mem::{align_of, size_of};

use iox_service::{RawLoan, RawSample};

use crate::handle::{live, non_null, put, this_thread};
use crate::publisher::{IoxPublisher, PUBLISHER, loan_checked, loan_header};
use crate::status::{IoxStatus, guard, refuse, write_device_ptr};
use crate::subscriber::{IoxSubscriber, SUBSCRIBER, receive_checked, sample_header};

/// Opaque room for the port's loan or sample (8-byte aligned).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxHeldState {
    /// Not to be read or written by the caller.
    pub opaque: [u64; 8],
}

const _: () = assert!(size_of::<RawLoan>() <= size_of::<IoxHeldState>());
const _: () = assert!(align_of::<RawLoan>() <= align_of::<IoxHeldState>());
const _: () = assert!(size_of::<RawSample>() <= size_of::<IoxHeldState>());
const _: () = assert!(align_of::<RawSample>() <= align_of::<IoxHeldState>());

/// `live` of a filled [`IoxHeldLoan`].
const LOAN_LIVE: u64 = crate::handle::marker(b"iox-loan");
/// `live` of a filled [`IoxHeldSample`].
const SAMPLE_LIVE: u64 = crate::handle::marker(b"iox-smpl");

/// The refusal of a held sample that is not live.
const NO_SAMPLE: &str = "this sample is not live: it was released already, or never filled";

/// A loan kept by the caller (see the module docs): write `len_bytes` bytes at `data`
/// (and, for a service with a user header, `header_len` bytes at `header`), then send
/// or discard it exactly once.
#[repr(C)]
#[derive(Debug)]
pub struct IoxHeldLoan {
    /// The payload's first byte, aligned for the service's type.
    pub data: *mut c_void,
    /// The payload's length in bytes.
    pub len_bytes: u64,
    /// The user header's first byte, aligned for its type (not initialised: write all
    /// `header_len` bytes before sending); NULL for a service without a header.
    pub header: *mut c_void,
    /// The user header's length in bytes (0 without one).
    pub header_len: u64,
    /// Non-zero while the struct holds a loan.
    pub live: u64,
    /// The thread that loaned it.
    pub thread: u64,
    /// The loan itself.
    pub state: IoxHeldState,
}

/// A received sample kept by the caller (see the module docs): read `len_bytes` bytes
/// at `data` (and the user header's `header_len` bytes at `header`), then release it
/// exactly once.
#[repr(C)]
#[derive(Debug)]
pub struct IoxHeldSample {
    /// The payload's first byte (read-only).
    pub data: *const c_void,
    /// The payload's length in bytes.
    pub len_bytes: u64,
    /// Its length in elements of the service's type (1 for a value).
    pub len: u64,
    /// The user header's first byte (read-only, aligned for its type); NULL for a
    /// service without a header.
    pub header: *const c_void,
    /// The user header's length in bytes (0 without one).
    pub header_len: u64,
    /// Non-zero while the struct holds a sample.
    pub live: u64,
    /// The sample itself.
    pub state: IoxHeldState,
}

/// Loans a chunk for `len_bytes` bytes (as `iox_publisher_loan`) into `*loan`, which
/// must not hold a loan.
///
/// # Safety
/// `publisher` is a pointer from `iox_publisher_create`; `loan` points to writable
/// memory for an `IoxHeldLoan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_publisher_loan_held(
    publisher: *mut IoxPublisher,
    len_bytes: u64,
    loan: *mut IoxHeldLoan,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { live(publisher, PUBLISHER, true) }?;
        let loan = non_null(loan, "loan")?;
        let mut raw = loan_checked(p, len_bytes)?;
        let (header, header_len) = loan_header(&mut raw);
        // SAFETY: the caller's contract: writable; not NULL (checked). The loan moves
        // into `state` (room and alignment asserted above) and `live` says so.
        unsafe {
            let (data, len) = (raw.as_mut_ptr().cast(), raw.len_bytes() as u64);
            (&raw mut (*loan).state).cast::<RawLoan>().write(raw);
            (&raw mut (*loan).data).write(data);
            (&raw mut (*loan).len_bytes).write(len);
            (&raw mut (*loan).header).write(header);
            (&raw mut (*loan).header_len).write(header_len);
            (&raw mut (*loan).thread).write(this_thread() as u64);
            (&raw mut (*loan).live).write(LOAN_LIVE);
        }
        Ok(())
    })
}

/// The live loan in `*loan` (not NULL), borrowed, if it is live and this is its thread.
///
/// # Safety
/// `loan` points to an `IoxHeldLoan` (see the module docs).
#[inline(always)]
unsafe fn live_loan<'a>(loan: *mut IoxHeldLoan) -> Result<&'a RawLoan, IoxStatus> {
    // SAFETY: the caller's contract: readable, `live` initialised.
    if unsafe { (&raw const (*loan).live).read() } != LOAN_LIVE {
        return refuse(
            IoxStatus::StaleHandle,
            "this loan is not live: it was sent or discarded already, or never filled",
        );
    }
    // SAFETY: `live` says the loan call wrote `thread` (read only now: an unfilled
    // struct may leave it uninitialised).
    if unsafe { (&raw const (*loan).thread).read() } != this_thread() as u64 {
        return refuse(
            IoxStatus::WrongThread,
            "a loan is used from the thread that loaned it",
        );
    }
    // SAFETY: `live` says `state` holds a RawLoan (module invariant).
    Ok(unsafe { &*(&raw const (*loan).state).cast::<RawLoan>() })
}

/// The loan in `*loan`, taken out (the struct is spent from here on).
///
/// # Safety
/// `loan` is NULL or points to an `IoxHeldLoan` (see the module docs).
#[inline(always)]
unsafe fn take_loan(loan: *mut IoxHeldLoan) -> Result<RawLoan, IoxStatus> {
    let loan = non_null(loan, "loan")?;
    // SAFETY: the caller's contract.
    let raw: *const RawLoan = unsafe { live_loan(loan) }?;
    // SAFETY: `raw` is the live loan in `state`; it is moved out and `live` cleared
    // first, so it is never read again.
    unsafe {
        (&raw mut (*loan).live).write(0);
        Ok(raw.read())
    }
}

/// The sample in `*sample`, if it is live (borrowed while the caller keeps the
/// struct).
///
/// # Safety
/// `sample` points to an `IoxHeldSample` (see the module docs).
#[inline(always)]
unsafe fn live_sample<'a>(sample: *mut IoxHeldSample) -> Result<&'a RawSample, IoxStatus> {
    // SAFETY: the caller's contract: readable, `live` initialised.
    if unsafe { (&raw const (*sample).live).read() } != SAMPLE_LIVE {
        return refuse(IoxStatus::StaleHandle, NO_SAMPLE);
    }
    // SAFETY: `live` says `state` holds a RawSample (module invariant).
    Ok(unsafe { &*(&raw const (*sample).state).cast::<RawSample>() })
}

/// The device address of the held loan's payload (as `iox_publisher_device_ptr`): for a
/// loan of a publisher that pinned a `CudaPinned` pool, where a kernel writes it.
/// `IOX_STATUS_NO_DEVICE_POINTER` if it did not pin, or its pinner gives none.
///
/// # Safety
/// `loan` is NULL (refused) or points to an `IoxHeldLoan` (see the module docs);
/// `device_ptr` points to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_held_loan_device_ptr(
    loan: *const IoxHeldLoan,
    device_ptr: *mut u64,
) -> IoxStatus {
    guard(|| {
        let loan = non_null(loan.cast_mut(), "loan")?;
        let device_ptr = non_null(device_ptr, "device_ptr")?;
        // SAFETY: the caller's contract: readable; a live loan is borrowed here while
        // the caller keeps the struct, on the thread that owns it (checked).
        let raw = unsafe { live_loan(loan) }?;
        // SAFETY: the caller's contract: writable; not NULL (checked).
        unsafe { write_device_ptr(device_ptr, raw.device_ptr()) }
    })
}

/// Sends the loan in `*loan` (as `iox_publisher_send`); `*delivered` (if not NULL) is
/// how many subscribers got it. The struct is spent afterwards, whether the send
/// succeeded or not, unless the call was refused before the send: NULL, a struct that
/// is not live (`IOX_STATUS_STALE_HANDLE`), or a call from another thread than the
/// loaning one (`IOX_STATUS_WRONG_THREAD`: the loan stays, for that thread).
///
/// # Safety
/// `loan` was filled by [`iox_publisher_loan_held`] (or is spent: refused); all of its
/// `len_bytes` bytes were written with a valid value of the service's type, and all of
/// its `header_len` header bytes with a valid value of the header's type;
/// `delivered` is NULL or points to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_held_loan_send(loan: *mut IoxHeldLoan, delivered: *mut u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let raw = unsafe { take_loan(loan) }?;
        // SAFETY: the caller's contract: every byte of the payload and the header was
        // written with a valid value.
        let (result, n) = crate::status::sent(unsafe { raw.send() });
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(delivered, n) };
        result
    })
}

/// Gives the loan in `*loan` back unsent; the struct is spent afterwards (refusals as
/// [`iox_held_loan_send`]).
///
/// # Safety
/// As [`iox_held_loan_send`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_held_loan_discard(loan: *mut IoxHeldLoan) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        drop(unsafe { take_loan(loan) }?);
        Ok(())
    })
}

/// Receives the next sample (as `iox_subscriber_receive`) into `*sample`, which must
/// not hold one; `*received` says whether it was filled.
///
/// # Safety
/// `subscriber` is a pointer from `iox_subscriber_create`; `sample` and `received`
/// point to writable memory for an `IoxHeldSample` and a `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_subscriber_receive_held(
    subscriber: *mut IoxSubscriber,
    timeout_ns: u64,
    sample: *mut IoxHeldSample,
    received: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { live(subscriber, SUBSCRIBER, true) }?;
        let (sample, received) = (non_null(sample, "sample")?, non_null(received, "received")?);
        let got = receive_checked(s, timeout_ns)?;
        // SAFETY: the caller's contract: writable; neither is NULL (checked). The sample
        // moves into `state` (room and alignment asserted above) and `live` says so.
        unsafe {
            match got {
                Some(raw) => {
                    let (data, len_bytes, len) =
                        (raw.as_ptr().cast(), raw.len_bytes() as u64, raw.len() as u64);
                    let (header, header_len) = sample_header(&raw);
                    (&raw mut (*sample).state).cast::<RawSample>().write(raw);
                    (&raw mut (*sample).data).write(data);
                    (&raw mut (*sample).len_bytes).write(len_bytes);
                    (&raw mut (*sample).len).write(len);
                    (&raw mut (*sample).header).write(header);
                    (&raw mut (*sample).header_len).write(header_len);
                    (&raw mut (*sample).live).write(SAMPLE_LIVE);
                    received.write(true);
                }
                None => received.write(false),
            }
        }
        Ok(())
    })
}

/// Releases the sample in `*sample` (its chunk returns to the pool once no one else
/// holds it); the struct is spent afterwards. Works after its subscriber was dropped.
///
/// # Safety
/// `sample` is NULL (refused) or points to an `IoxHeldSample` filled by
/// [`iox_subscriber_receive_held`] (or spent: refused), used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_held_sample_release(sample: *mut IoxHeldSample) -> IoxStatus {
    guard(|| {
        let sample = non_null(sample, "sample")?;
        // SAFETY: the caller's contract: readable and writable.
        let raw: *const RawSample = unsafe { live_sample(sample) }?;
        // SAFETY: `raw` is the live sample in `state`; it is moved out and `live`
        // cleared first, so it is never read again.
        drop(unsafe {
            (&raw mut (*sample).live).write(0);
            raw.read()
        });
        Ok(())
    })
}

/// The device address of the held sample's payload (as `iox_subscriber_device_ptr`):
/// for a sample of a subscriber that pinned a `CudaPinned` pool.
/// `IOX_STATUS_NO_DEVICE_POINTER` if it did not pin, or its pinner gives none.
///
/// # Safety
/// `sample` is NULL (refused) or points to an `IoxHeldSample` (see
/// [`iox_held_sample_release`]); `device_ptr` points to writable memory for a
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_held_sample_device_ptr(
    sample: *const IoxHeldSample,
    device_ptr: *mut u64,
) -> IoxStatus {
    guard(|| {
        let sample = non_null(sample.cast_mut(), "sample")?;
        let device_ptr = non_null(device_ptr, "device_ptr")?;
        // SAFETY: the caller's contract: readable.
        let raw = unsafe { live_sample(sample) }?;
        // SAFETY: the caller's contract: writable; not NULL (checked).
        unsafe { write_device_ptr(device_ptr, raw.device_ptr()) }
    })
}
