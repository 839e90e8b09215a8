//! What every call of the C ABI returns, and the message of the last failure.
//!
//! Each function returns an [`IoxStatus`]; `IOX_STATUS_OK` is 0, everything else names
//! what went wrong, and [`iox_last_error`] gives the message of the calling thread's last
//! failure (the same text the Rust error's `Display` shows, which says what to do). A
//! call that succeeds leaves the last message as it was.
//!
//! Invariant: nothing unwinds across the boundary. Every exported function runs its
//! body in `guard`, which turns a panic into `IOX_STATUS_PANIC` with the panic's
//! message.

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The outcome of a call. Values are stable: new ones are only ever appended.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoxStatus {
    /// The call did what it says.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullPointer = 1,
    /// A port or service pointer that this library did not make, or one already
    /// dropped (checked by a marker word: best effort, see the crate docs).
    InvalidHandle = 2,
    /// A loan or sample id that is not live: already sent, discarded or released, or
    /// of another port.
    StaleHandle = 3,
    /// A port used from a thread other than the one that created it.
    WrongThread = 4,
    /// An argument was refused (a name that is not valid UTF-8 or not a service name,
    /// an unknown open mode, options that do not describe a type).
    InvalidArgument = 5,
    /// Opening or creating the service failed.
    OpenFailed = 6,
    /// Creating a port failed.
    PortCreateFailed = 7,
    /// A loan failed.
    LoanFailed = 8,
    /// A send failed.
    SendFailed = 9,
    /// A receive failed.
    ReceiveFailed = 10,
    /// The library panicked (a bug in iox): the message says where.
    Panic = 11,
    /// A notify failed.
    NotifyFailed = 12,
    /// A listener's wait failed.
    ListenFailed = 13,
    /// Creating, attaching to or waiting on a WaitSet failed.
    WaitSetFailed = 14,
    /// A device pointer was asked of a loan or sample whose port did not pin the pool with a
    /// pinner that gives one (e.g. CUDA's).
    NoDevicePointer = 15,
    /// A tensor that does not fit the service (another element type, more bytes than
    /// its largest sample, strides past its end, more than 8 dimensions, a negative
    /// stride), or a received tensor record that does not describe its sample.
    InvalidTensor = 16,
    /// A send of a service with the `IOX_OVERFLOW_REJECT` policy found some subscribers'
    /// queues full: they did not get the sample (the call's `delivered` says how many
    /// did). Send again once they made room, or use the default policy, which drops
    /// their oldest sample instead.
    QueueFull = 17,
    /// A publisher was refused by the service's access policy
    /// (`IoxPubSubOptions::access`): this process is a reader in it, so it may
    /// subscribe but never publish (its descriptor of the pool is read-only), or, a
    /// publisher in it, it opened the service when only readers held it. The message
    /// says which, naming its identity and the policy.
    NotAPublisher = 18,
    /// Opening a service was refused because its access policy names neither this
    /// process's uid nor any of its groups. The message names its identity and the
    /// policy; run as a user or group the policy names, or ask the service's creator to
    /// name yours.
    NotInAccessPolicy = 19,
    /// Creating a service on huge pages (`IoxPubSubOptions::page_size`
    /// `IOX_PAGE_SIZE_HUGE_2MIB` or `IOX_PAGE_SIZE_HUGE_1GIB`) found too few of them
    /// free, or none of that size in this kernel. The message says how many the pool
    /// needs, how many are free, and how to reserve more (as root: `echo N >
    /// /proc/sys/vm/nr_hugepages`, or `hugepages=N` on the kernel's command line).
    NoHugePages = 20,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as this thread's last error and returns `status`.
pub(crate) fn fail(status: IoxStatus, message: impl Display) -> IoxStatus {
    let text = message.to_string().replace('\0', " ");
    let text = CString::new(text).unwrap_or_default();
    // `try_with`: during a thread's teardown (a C++ `thread_local` port dropped at
    // exit) the message is lost rather than the process aborted.
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = text);
    status
}

/// `Err` with `status` after recording `message` (see [`fail`]).
pub(crate) fn refuse<T>(status: IoxStatus, message: impl Display) -> Result<T, IoxStatus> {
    Err(fail(status, message))
}

/// Runs `body`: `Ok` is [`IoxStatus::Ok`], `Err` its status (its message recorded by
/// whoever made it), a panic [`IoxStatus::Panic`]. Inlined into each exported function
/// (one call less per call from C).
#[inline(always)]
pub(crate) fn guard(body: impl FnOnce() -> Result<(), IoxStatus>) -> IoxStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => IoxStatus::Ok,
        Ok(Err(status)) => status,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            fail(
                IoxStatus::Panic,
                format!("iox panicked (a bug, please report it): {what}"),
            )
        }
    }
}

/// The message of this thread's last failed call ("" if none failed yet). The text
/// stays valid until the next failing call on this thread; copy it to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn iox_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|l| l.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// A short, constant name of a status value (e.g. `"IOX_STATUS_STALE_HANDLE"`), for
/// logs; `"IOX_STATUS_UNKNOWN"` for a value that is none. Takes the plain integer, so
/// any value a C caller passes is defined.
#[unsafe(no_mangle)]
pub extern "C" fn iox_status_name(status: i32) -> *const c_char {
    let name: &'static [u8] = match status {
        0 => b"IOX_STATUS_OK\0",
        1 => b"IOX_STATUS_NULL_POINTER\0",
        2 => b"IOX_STATUS_INVALID_HANDLE\0",
        3 => b"IOX_STATUS_STALE_HANDLE\0",
        4 => b"IOX_STATUS_WRONG_THREAD\0",
        5 => b"IOX_STATUS_INVALID_ARGUMENT\0",
        6 => b"IOX_STATUS_OPEN_FAILED\0",
        7 => b"IOX_STATUS_PORT_CREATE_FAILED\0",
        8 => b"IOX_STATUS_LOAN_FAILED\0",
        9 => b"IOX_STATUS_SEND_FAILED\0",
        10 => b"IOX_STATUS_RECEIVE_FAILED\0",
        11 => b"IOX_STATUS_PANIC\0",
        12 => b"IOX_STATUS_NOTIFY_FAILED\0",
        13 => b"IOX_STATUS_LISTEN_FAILED\0",
        14 => b"IOX_STATUS_WAIT_SET_FAILED\0",
        15 => b"IOX_STATUS_NO_DEVICE_POINTER\0",
        16 => b"IOX_STATUS_INVALID_TENSOR\0",
        17 => b"IOX_STATUS_QUEUE_FULL\0",
        18 => b"IOX_STATUS_NOT_A_PUBLISHER\0",
        19 => b"IOX_STATUS_NOT_IN_ACCESS_POLICY\0",
        20 => b"IOX_STATUS_NO_HUGE_PAGES\0",
        _ => b"IOX_STATUS_UNKNOWN\0",
    };
    name.as_ptr().cast()
}

/// A publish-subscribe send's outcome for C: how many subscribers got the sample, or
/// the status of why not; a full queue (`IOX_OVERFLOW_REJECT`) is its own status, with
/// the subscribers that did get it counted.
pub(crate) fn sent(result: Result<usize, iox_service::SendError>) -> (Result<(), IoxStatus>, u64) {
    match result {
        Ok(n) => (Ok(()), n as u64),
        Err(e @ iox_service::SendError::QueueFull { delivered, .. }) => {
            (Err(fail(IoxStatus::QueueFull, e)), delivered as u64)
        }
        Err(e) => (Err(fail(IoxStatus::SendFailed, e)), 0),
    }
}

/// A port's creation failure for C: `IOX_STATUS_NOT_A_PUBLISHER` for a publisher the
/// service's access policy refuses, else `IOX_STATUS_PORT_CREATE_FAILED`; the message
/// recorded.
pub(crate) fn port_failed(e: iox_service::PortCreateError) -> IoxStatus {
    let status = match e {
        iox_service::PortCreateError::NotAPublisher { .. } => IoxStatus::NotAPublisher,
        _ => IoxStatus::PortCreateFailed,
    };
    fail(status, e)
}

/// Writes a loan's or sample's device address to `out`, or fails with
/// `IOX_STATUS_NO_DEVICE_POINTER` saying why there is none (the four
/// `iox_*_device_ptr` calls).
///
/// # Safety
/// `out` is not NULL and points to writable memory for a `uint64_t`.
pub(crate) unsafe fn write_device_ptr(
    out: *mut u64,
    ptr: Result<u64, iox_service::DevicePtrError>,
) -> Result<(), IoxStatus> {
    let p = ptr.map_err(|e| fail(IoxStatus::NoDevicePointer, e))?;
    // SAFETY: the caller's contract.
    unsafe { out.write(p) };
    Ok(())
}
