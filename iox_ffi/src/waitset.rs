//! The WaitSet from C: one thread sleeps until any attached descriptor is readable
//! (a subscriber's or listener's readiness descriptor, or any other), a deadline of one
//! is missed, or an interval ticks, with no busy-waiting. It is `iox_service`'s
//! `WaitSet` (epoll plus timers), with attachments named by ids.
//!
//! An attached descriptor is duplicated first: the WaitSet keeps its own copy, so a
//! port dropped while attached leaves an attachment that never fires rather than a
//! stale descriptor number that could name another file. Detach it (or drop the
//! WaitSet) to let go of the copy.
//!
//! Invariant: each attachment's guard borrows the boxed `WaitSet` and its own boxed
//! descriptor, which are dropped only after it (field order), so the lifetimes erased
//! for keeping them together are never outlived.

use std::cell::RefCell;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use iox_service::{CallbackProgression, WaitSet, WaitSetBuilder, WaitSetGuard, WaitSetRunResult};

use crate::handle::{Marked, Slots, marker};
use crate::status::{IoxStatus, fail, guard};

/// A round found events: `*count` entries describe them.
pub const IOX_WAIT_EVENTS: u32 = 0;
/// The wait's time passed with nothing to report.
pub const IOX_WAIT_TIMEOUT: u32 = 1;
/// SIGINT or SIGTERM arrived (a WaitSet created with `termination_signals`).
pub const IOX_WAIT_TERMINATION: u32 = 2;
/// Another thread interrupted the wait.
pub const IOX_WAIT_INTERRUPT: u32 = 3;

/// One attachment's news from a wait.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IoxWaitSetEvent {
    /// The attachment (as `iox_waitset_attach_*` returned it).
    pub id: u64,
    /// Its descriptor is readable, or its interval ticked.
    pub fired: bool,
    /// Its deadline passed with its descriptor unreadable.
    pub missed_deadline: bool,
}

struct Attachment {
    // Dropped before `_fd`, which it borrows.
    guard: WaitSetGuard<'static, 'static>,
    _fd: Option<Box<OwnedFd>>,
}

/// A WaitSet (opaque): used from the thread that created it.
pub struct IoxWaitSet {
    // Dropped before `waitset`, which every guard borrows.
    attachments: RefCell<Slots<Attachment>>,
    waitset: Box<WaitSet>,
}

const WAITSET: u64 = marker(b"iox-wts\0");

/// Creates a WaitSet; with `termination_signals`, SIGINT and SIGTERM end its waits
/// with `IOX_WAIT_TERMINATION` (and no longer terminate the process while it lives).
///
/// # Safety
/// `out` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_create(
    termination_signals: bool,
    out: *mut *mut IoxWaitSet,
) -> IoxStatus {
    guard(|| {
        if out.is_null() {
            return fail(IoxStatus::NullPointer, "out must not be NULL");
        }
        match WaitSetBuilder::new()
            .termination_signals(termination_signals)
            .create()
        {
            Ok(ws) => {
                let p = Marked::into_raw(
                    WAITSET,
                    IoxWaitSet {
                        attachments: RefCell::new(Slots::new()),
                        waitset: Box::new(ws),
                    },
                );
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { out.write(p.cast()) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::WaitSetFailed, e),
        }
    })
}

/// # Safety
/// `ws` is a pointer from [`iox_waitset_create`].
unsafe fn waitset<'a>(ws: *mut IoxWaitSet) -> Result<&'a IoxWaitSet, IoxStatus> {
    // SAFETY: the caller's contract.
    unsafe { Marked::<IoxWaitSet>::get(ws.cast(), WAITSET, true) }.map(|m| &m.inner)
}

impl IoxWaitSet {
    /// Keeps `guard` (of `fd`, if any) as a new attachment; its id.
    fn keep(&self, guard: WaitSetGuard<'_, '_>, fd: Option<Box<OwnedFd>>) -> u64 {
        // SAFETY: only lifetimes change. The guard borrows `self.waitset` (boxed, dropped
        // after every attachment) and `fd` (boxed beside it in the attachment and dropped
        // after it), so neither borrow is outlived (see the module docs).
        let guard: WaitSetGuard<'static, 'static> = unsafe { std::mem::transmute(guard) };
        self.attachments
            .borrow_mut()
            .insert(Attachment { guard, _fd: fd })
    }

    /// Attaches a copy of `fd`, with a deadline if `deadline_ns` is not 0.
    fn attach_fd(&self, fd: i32, deadline_ns: u64) -> Result<u64, IoxStatus> {
        if fd < 0 {
            return Err(fail(
                IoxStatus::InvalidArgument,
                format!("{fd} is not a file descriptor"),
            ));
        }
        // SAFETY: the descriptor is only borrowed for the duplication below; an fd
        // that is not open makes the duplication fail (EBADF), which is reported.
        let copy = unsafe { BorrowedFd::borrow_raw(fd) }
            .try_clone_to_owned()
            .map_err(|e| {
                fail(
                    IoxStatus::InvalidArgument,
                    format!("cannot duplicate descriptor {fd}: {e}"),
                )
            })?;
        let copy = Box::new(copy);
        // SAFETY: a reference to the boxed descriptor that does not borrow the box: its
        // heap address stays the same when the box moves into the attachment, which
        // drops it only after the guard that uses this reference.
        let attached_fd: &OwnedFd = unsafe { &*std::ptr::from_ref::<OwnedFd>(&copy) };
        let attached = if deadline_ns == 0 {
            self.waitset.attach_notification(attached_fd)
        } else {
            self.waitset
                .attach_deadline(attached_fd, Duration::from_nanos(deadline_ns))
        };
        let guard = attached.map_err(|e| fail(IoxStatus::WaitSetFailed, e))?;
        Ok(self.keep(guard, Some(copy)))
    }
}

/// Attaches descriptor `fd` (e.g. from `iox_subscriber_fd` or `iox_listener_fd`): a
/// wait reports it `fired` while it is readable. With `deadline_ns` not 0, a wait also
/// reports `missed_deadline` whenever it stays unreadable that long. `*id` names the
/// attachment.
///
/// # Safety
/// `ws` is a pointer from [`iox_waitset_create`]; `id` points to writable memory for a
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_attach_fd(
    ws: *mut IoxWaitSet,
    fd: i32,
    deadline_ns: u64,
    id: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = match unsafe { waitset(ws) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if id.is_null() {
            return fail(IoxStatus::NullPointer, "id must not be NULL");
        }
        match w.attach_fd(fd, deadline_ns) {
            Ok(attached) => {
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { id.write(attached) };
                IoxStatus::Ok
            }
            Err(status) => status,
        }
    })
}

/// Attaches an interval: a wait reports it `fired` every `period_ns` nanoseconds, the
/// first time one period from now.
///
/// # Safety
/// `ws` is a pointer from [`iox_waitset_create`]; `id` points to writable memory for a
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_attach_interval(
    ws: *mut IoxWaitSet,
    period_ns: u64,
    id: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = match unsafe { waitset(ws) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if id.is_null() {
            return fail(IoxStatus::NullPointer, "id must not be NULL");
        }
        match w.waitset.attach_interval(Duration::from_nanos(period_ns)) {
            Ok(g) => {
                let attached = w.keep(g, None);
                // SAFETY: the caller's contract; not NULL (checked).
                unsafe { id.write(attached) };
                IoxStatus::Ok
            }
            Err(e) => fail(IoxStatus::WaitSetFailed, e),
        }
    })
}

/// Detaches attachment `id` (closing the WaitSet's copy of its descriptor).
///
/// # Safety
/// `ws` is a pointer from [`iox_waitset_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_detach(ws: *mut IoxWaitSet, id: u64) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = match unsafe { waitset(ws) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        match w.attachments.borrow_mut().remove(id) {
            Some(a) => {
                drop(a);
                IoxStatus::Ok
            }
            None => fail(
                IoxStatus::StaleHandle,
                "no such attachment: detached already, or of another WaitSet",
            ),
        }
    })
}

/// Waits up to `timeout_ns` nanoseconds (`UINT64_MAX`: without limit, 0: only looks)
/// for something to happen, sleeping. `*result` is one of `IOX_WAIT_*`; with
/// `IOX_WAIT_EVENTS`, the first `capacity` attachments with news are written to
/// `events` and `*count` is how many had news (more than `capacity` means some were
/// not written: give room for every attachment to see them all).
///
/// # Safety
/// `ws` is a pointer from [`iox_waitset_create`]; `events` points to writable memory
/// for `capacity` `IoxWaitSetEvent`s (or is NULL with `capacity` 0); `count` and
/// `result` point to writable memory for a `size_t` and a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_wait(
    ws: *mut IoxWaitSet,
    timeout_ns: u64,
    events: *mut IoxWaitSetEvent,
    capacity: usize,
    count: *mut usize,
    result: *mut u32,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = match unsafe { waitset(ws) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if count.is_null() || result.is_null() || (events.is_null() && capacity > 0) {
            return fail(
                IoxStatus::NullPointer,
                "events (with a capacity), count and result must not be NULL",
            );
        }
        let attachments = w.attachments.borrow();
        let mut news: Vec<IoxWaitSetEvent> = Vec::new();
        let mut note = |id: iox_service::AttachmentId| {
            for (key, a) in attachments.iter() {
                let (fired, missed) = (id.has_event_from(&a.guard), id.has_missed_deadline(&a.guard));
                if fired || missed {
                    match news.iter_mut().find(|e| e.id == key) {
                        Some(e) => {
                            e.fired |= fired;
                            e.missed_deadline |= missed;
                        }
                        None => news.push(IoxWaitSetEvent {
                            id: key,
                            fired,
                            missed_deadline: missed,
                        }),
                    }
                }
            }
            CallbackProgression::Continue
        };
        let ran = if timeout_ns == u64::MAX {
            w.waitset.wait_and_process_once(&mut note)
        } else {
            w.waitset
                .wait_and_process_once_with_timeout(&mut note, Duration::from_nanos(timeout_ns))
        };
        let code = match ran {
            Ok(WaitSetRunResult::Timeout) => IOX_WAIT_TIMEOUT,
            Ok(WaitSetRunResult::TerminationRequest) => IOX_WAIT_TERMINATION,
            Ok(WaitSetRunResult::Interrupt) => IOX_WAIT_INTERRUPT,
            Ok(_) => IOX_WAIT_EVENTS,
            Err(e) => return fail(IoxStatus::WaitSetFailed, e),
        };
        // SAFETY: the caller's contract: `events` has room for `capacity` entries;
        // `count` and `result` are not NULL (checked).
        unsafe {
            for (i, e) in news.iter().take(capacity).enumerate() {
                events.add(i).write(*e);
            }
            count.write(news.len());
            result.write(code);
        }
        IoxStatus::Ok
    })
}

/// Drops the WaitSet and its attachments (from its own thread).
///
/// # Safety
/// `ws` is NULL or a pointer from [`iox_waitset_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_drop(ws: *mut IoxWaitSet) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { Marked::<IoxWaitSet>::drop_raw(ws.cast(), WAITSET, true) })
}
