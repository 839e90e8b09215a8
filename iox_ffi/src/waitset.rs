//! The WaitSet from C: one thread sleeps until any attached descriptor is readable
//! (a subscriber's or listener's readiness descriptor, or any other), a deadline of one
//! is missed, or an interval ticks, with no busy-waiting. It is `iox_service`'s
//! `WaitSet` (epoll plus timers), with attachments named by ids.
//!
//! An attached descriptor is duplicated first: the WaitSet keeps its own copy, so a
//! port dropped while attached never leaves a stale descriptor number that could name
//! another file. A port empties its doorbell when it is dropped, so such an attachment
//! stops firing; detach it to let go of the copy.
//!
//! Invariant: each attachment's guard borrows the boxed `WaitSet` and its own boxed
//! descriptor, which are dropped only after it (field order), so the lifetimes erased
//! for keeping them together are never outlived.

use std::cell::RefCell;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use iox_service::{CallbackProgression, WaitSet, WaitSetBuilder, WaitSetGuard, WaitSetRunResult, Waker};

use crate::handle::{Slots, drop_handle, hand_out, live, marker, non_null, take, timeout};
use crate::status::{IoxStatus, fail, guard, refuse};

/// A round found events: `*count` entries describe them.
pub const IOX_WAIT_EVENTS: u32 = 0;
/// The wait's time passed with nothing to report.
pub const IOX_WAIT_TIMEOUT: u32 = 1;
/// SIGINT or SIGTERM arrived (a WaitSet created with `termination_signals`).
pub const IOX_WAIT_TERMINATION: u32 = 2;
/// Another thread woke the WaitSet through its `IoxWaker`.
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
const WAKER: u64 = marker(b"iox-wkr\0");

/// Wakes a WaitSet from any thread (opaque): its wait returns `IOX_WAIT_INTERRUPT`.
pub struct IoxWaker {
    waker: Waker,
}

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
        let make = || {
            let ws = WaitSetBuilder::new()
                .termination_signals(termination_signals)
                .create()
                .map_err(|e| fail(IoxStatus::WaitSetFailed, e))?;
            Ok(IoxWaitSet {
                attachments: RefCell::new(Slots::new()),
                waitset: Box::new(ws),
            })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, WAITSET, make) }
    })
}

impl IoxWaitSet {
    /// Keeps `guard` (of `fd`, if any) as a new attachment; its id.
    fn keep(&self, guard: WaitSetGuard<'_, '_>, fd: Option<Box<OwnedFd>>) -> Result<u64, IoxStatus> {
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
            return refuse(
                IoxStatus::InvalidArgument,
                format!("{fd} is not a file descriptor"),
            );
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
        let attached = match timeout(deadline_ns) {
            None => self.waitset.attach_notification(attached_fd),
            Some(deadline) => self.waitset.attach_deadline(attached_fd, deadline),
        };
        let guard = attached.map_err(|e| fail(IoxStatus::WaitSetFailed, e))?;
        self.keep(guard, Some(copy))
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
        let w = unsafe { live(ws, WAITSET, true) }?;
        let id = non_null(id, "id")?;
        let attached = w.attach_fd(fd, deadline_ns)?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { id.write(attached) };
        Ok(())
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
        let w = unsafe { live(ws, WAITSET, true) }?;
        let id = non_null(id, "id")?;
        let g = w
            .waitset
            .attach_interval(Duration::from_nanos(period_ns))
            .map_err(|e| fail(IoxStatus::WaitSetFailed, e))?;
        let attached = w.keep(g, None)?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { id.write(attached) };
        Ok(())
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
        let w = unsafe { live(ws, WAITSET, true) }?;
        drop(take(
            &w.attachments,
            id,
            "no such attachment: detached already, or of another WaitSet",
        )?);
        Ok(())
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
        let w = unsafe { live(ws, WAITSET, true) }?;
        let (count, result) = (non_null(count, "count")?, non_null(result, "result")?);
        if capacity > 0 {
            non_null(events, "events (with a capacity)")?;
        }
        let attachments = w.attachments.borrow();
        let mut news: Vec<IoxWaitSetEvent> = Vec::new();
        let mut note = |id: iox_service::AttachmentId| {
            for (key, a) in attachments.iter() {
                let (fired, missed) = (id.has_event_from(&a.guard), id.has_missed_deadline(&a.guard));
                if !(fired || missed) {
                    continue;
                }
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
            CallbackProgression::Continue
        };
        let ran = if timeout_ns == u64::MAX {
            w.waitset.wait_and_process_once(&mut note)
        } else {
            w.waitset
                .wait_and_process_once_with_timeout(&mut note, Duration::from_nanos(timeout_ns))
        };
        let code = match ran.map_err(|e| fail(IoxStatus::WaitSetFailed, e))? {
            WaitSetRunResult::Timeout => IOX_WAIT_TIMEOUT,
            WaitSetRunResult::TerminationRequest => IOX_WAIT_TERMINATION,
            WaitSetRunResult::Interrupt => IOX_WAIT_INTERRUPT,
            _ => IOX_WAIT_EVENTS,
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
        Ok(())
    })
}

/// A waker of `ws`, for other threads: [`iox_waker_wake`] ends its current or next
/// wait with `IOX_WAIT_INTERRUPT`. It may outlive the WaitSet (waking nothing then).
///
/// # Safety
/// `ws` is a pointer from [`iox_waitset_create`]; `out` points to writable memory for a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_waker(ws: *mut IoxWaitSet, out: *mut *mut IoxWaker) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = unsafe { live(ws, WAITSET, true) }?;
        // SAFETY: the caller's contract.
        unsafe {
            hand_out(out, WAKER, || {
                Ok(IoxWaker {
                    waker: w.waitset.waker(),
                })
            })
        }
    })
}

/// Wakes the waker's WaitSet. Any thread.
///
/// # Safety
/// `waker` is a pointer from [`iox_waitset_waker`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waker_wake(waker: *mut IoxWaker) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { live(waker, WAKER, false) }?.waker.wake();
        Ok(())
    })
}

/// Drops the waker. Any thread.
///
/// # Safety
/// `waker` is NULL or a pointer from [`iox_waitset_waker`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waker_drop(waker: *mut IoxWaker) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(waker, WAKER, false) })
}

/// Drops the WaitSet and its attachments (from its own thread).
///
/// # Safety
/// `ws` is NULL or a pointer from [`iox_waitset_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_waitset_drop(ws: *mut IoxWaitSet) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(ws, WAITSET, true) })
}
