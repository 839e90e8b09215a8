//! Listeners: take the event ids pending for them, waiting if asked to.
//!
//! Taking: `try_wait_all` swaps each non-zero word of the pending set with 0 and
//! reports its ids, lowest first; `try_wait_one` clears the lowest pending id only
//! (words are visited round-robin from where the last one was found, so a busy id
//! does not starve higher words). Waiting (`timed_wait_*`, `blocking_wait_*`): count
//! in the slot's `waiting` word (SeqCst), fence, look again, sleep on the slot's
//! `wake` futex word; notifiers bump and wake it (see the parent module for why the
//! futex). A signal that interrupts the sleep makes a blocking wait return empty
//! (`None` or 0), so a program's signal handling gets a chance to run.
//!
//! Readiness descriptor (`AsFd`, `AsRawFd`): the listener's doorbell socket, with the
//! subscriber's semantics: the first `as_fd()` arms it (and makes it readable at once
//! if ids are pending); from then on a `try_wait_*` that finds nothing consumes its
//! tokens and re-arms it before looking once more. So an event loop (epoll, mio,
//! tokio's `AsyncFd`, the WaitSet) takes until empty, then waits for readability.
//!
//! When a `try_wait_*` finds nothing, and before a blocking wait sleeps, the listener
//! looks at the service's lifecycle word: a removed service (`iox remove --force`) is
//! [`ListenError::ServiceRemoved`], as for subscribers.
//!
//! A `Listener` is `Send` but not `Sync` (its cursor and armed flag are `Cell`s; one
//! slot has one consumer). Dropping it closes and frees its slot and clears its set.

use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::{EventId, pending_set};
use crate::doorbell::Doorbell;
use crate::dynamic::PortHeader;
use crate::port::{self, PortCreateError, Shared, Side};
use crate::slot_claim::SlotClaim;

/// Builds a [`Listener`].
#[derive(Debug)]
pub struct ListenerBuilder {
    service: Shared,
}

/// Why taking or waiting for events failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ListenError {
    /// Nothing was pending and the service was removed (e.g. `iox remove --force`)
    /// after this listener's handle opened it: drop the listener and the handle and
    /// open the service again.
    #[error(
        "the service was removed after this listener's handle opened it (drop the listener and the handle, and open the service again)"
    )]
    ServiceRemoved,
    /// This process is a fork of the one that made the listener.
    #[error(
        "this listener belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
    /// Sleeping on the futex failed.
    #[error("waiting for an event failed: {0}")]
    Wait(std::io::Error),
}

impl ListenerBuilder {
    pub(crate) fn new(service: Shared) -> Self {
        Self { service }
    }

    /// Claims a listener slot and binds its readiness socket. The listener sees the
    /// events notified from now on.
    pub fn create(self) -> Result<Listener, PortCreateError> {
        let claim = SlotClaim::new(&self.service, Side::Receiving, "listener")?;
        let d = self.service.dynamic();
        let doorbell = claim.doorbell(claim.slot())?;
        // What a previous owner of the slot left is not for us.
        pending_set::clear(d.pending(claim.slot()));
        let (slot, generation) = claim.activate(None);
        Ok(Listener {
            fork_generation: self.service.fork_generation,
            ids: d.regions::<super::layout::EventLayout>().event_ids,
            service: self.service,
            slot,
            generation,
            doorbell,
            cursor: Cell::new(0),
            armed_mode: Cell::new(false),
        })
    }
}

/// Takes the event ids notified to it, or waits for them.
///
/// ```
/// use iox_service::{EventId, Service};
/// use std::time::Duration;
/// let dir = tempfile::tempdir().unwrap();
/// let event = Service::named("door").unwrap().root(dir.path()).event().open_or_create().unwrap();
/// let listener = event.listener_builder().create().unwrap();
/// let notifier = event.notifier_builder().create().unwrap();
/// assert_eq!(listener.timed_wait_one(Duration::from_millis(1)).unwrap(), None);
/// notifier.notify_with_custom_event_id(EventId::new(2)).unwrap();
/// notifier.notify_with_custom_event_id(EventId::new(9)).unwrap();
/// let mut seen = Vec::new();
/// listener.timed_wait_all(|id| seen.push(id.as_value()), Duration::from_secs(1)).unwrap();
/// assert_eq!(seen, [2, 9]);
/// ```
#[derive(Debug)]
pub struct Listener {
    service: Shared,
    slot: usize,
    generation: u64,
    /// `event_id_max + 1`.
    ids: u32,
    fork_generation: u64,
    /// The readiness socket (see [`crate::doorbell`]); removed when the listener goes.
    doorbell: Doorbell,
    /// The word `try_wait_one` looks at first.
    cursor: Cell<usize>,
    /// The readiness descriptor was handed out: an empty look arms it.
    armed_mode: Cell<bool>,
}

impl Listener {
    fn header(&self) -> &PortHeader {
        self.service.dynamic().receiver(self.slot)
    }

    fn set(&self) -> &[AtomicU64] {
        self.service.dynamic().pending(self.slot)
    }

    fn check_process(&self) -> Result<(), ListenError> {
        if crate::fork::is_same_process(self.fork_generation) {
            Ok(())
        } else {
            Err(ListenError::ForkedProcess)
        }
    }

    /// Takes up to `limit` pending ids (1 or all), calling `f` with each; how many.
    fn take(&self, limit: usize, f: &mut dyn FnMut(EventId)) -> usize {
        let set = self.set();
        if limit == 1 {
            let Some((word, id)) = pending_set::take_one(set, self.ids, self.cursor.get()) else {
                return 0;
            };
            self.cursor.set(word);
            f(EventId::new(id));
            return 1;
        }
        pending_set::take_all(set, self.ids, |id| f(EventId::new(id)))
    }

    /// [`take`](Self::take), then, if nothing was there: re-arm the descriptor (if
    /// handed out) and look again, then look at the lifecycle word.
    fn try_take(&self, limit: usize, f: &mut dyn FnMut(EventId)) -> Result<usize, ListenError> {
        self.check_process()?;
        let n = self.take(limit, f);
        if n > 0 {
            return Ok(n);
        }
        if self.armed_mode.get() {
            self.doorbell.rearm(&self.header().waiting);
            // Armed: a notifier that set its bit before it saw ours is found here.
            let n = self.take(limit, f);
            if n > 0 {
                return Ok(n);
            }
        }
        if self.service.is_removed() {
            return Err(ListenError::ServiceRemoved);
        }
        Ok(0)
    }

    /// Takes up to `limit` ids, sleeping until some are pending, `deadline` passes
    /// (`None`: no limit) or a signal interrupts the sleep.
    fn wait_take(
        &self,
        limit: usize,
        f: &mut dyn FnMut(EventId),
        deadline: Option<Instant>,
    ) -> Result<usize, ListenError> {
        let header = self.header();
        loop {
            let n = self.try_take(limit, f)?;
            if n > 0 {
                return Ok(n);
            }
            let seen = header.wake.load(Ordering::Acquire);
            // The notifier sees us counted, or we see its bit (`pending_set`).
            let ready = pending_set::counted_look(self.set(), self.ids, &header.waiting);
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let result = if ready || left == Some(Duration::ZERO) {
                Ok(())
            } else {
                port::futex_sleep(&header.wake, seen, left)
            };
            header.waiting.fetch_sub(1, Ordering::Relaxed);
            let interrupted = match result {
                Ok(()) => false,
                Err(rustix::io::Errno::INTR) => true,
                Err(e) => return Err(ListenError::Wait(e.into())),
            };
            let n = self.take(limit, f);
            if n > 0 || interrupted || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(n);
            }
        }
    }

    /// Takes every pending id, lowest first, calling `f` with each; returns how many.
    /// Never blocks. Once the readiness descriptor was handed out ([`AsFd`]), a call
    /// that finds nothing re-arms it.
    pub fn try_wait_all(&self, mut f: impl FnMut(EventId)) -> Result<usize, ListenError> {
        self.try_take(usize::MAX, &mut f)
    }

    /// Takes one pending id, if any. Never blocks.
    pub fn try_wait_one(&self) -> Result<Option<EventId>, ListenError> {
        let mut got = None;
        self.try_take(1, &mut |id| got = Some(id))?;
        Ok(got)
    }

    /// Takes every pending id as [`try_wait_all`](Self::try_wait_all) does, waiting up
    /// to `timeout` for one if none is pending (asleep, no busy-waiting). Returns how
    /// many: 0 on timeout or when a signal interrupted the wait.
    pub fn timed_wait_all(
        &self,
        mut f: impl FnMut(EventId),
        timeout: Duration,
    ) -> Result<usize, ListenError> {
        self.wait_take(usize::MAX, &mut f, Instant::now().checked_add(timeout))
    }

    /// Takes one pending id, waiting up to `timeout` for one; `None` on timeout or
    /// when a signal interrupted the wait.
    pub fn timed_wait_one(&self, timeout: Duration) -> Result<Option<EventId>, ListenError> {
        let mut got = None;
        self.wait_take(1, &mut |id| got = Some(id), Instant::now().checked_add(timeout))?;
        Ok(got)
    }

    /// Takes every pending id, waiting without limit for one; 0 only when a signal
    /// interrupted the wait.
    pub fn blocking_wait_all(&self, mut f: impl FnMut(EventId)) -> Result<usize, ListenError> {
        self.wait_take(usize::MAX, &mut f, None)
    }

    /// Takes one pending id, waiting without limit for one; `None` only when a signal
    /// interrupted the wait.
    pub fn blocking_wait_one(&self) -> Result<Option<EventId>, ListenError> {
        let mut got = None;
        self.wait_take(1, &mut |id| got = Some(id), None)?;
        Ok(got)
    }

    /// Whether any id is pending (a snapshot; takes nothing).
    pub fn has_pending(&self) -> bool {
        pending_set::any(self.set(), self.ids)
    }

    /// The largest id this service takes.
    pub fn event_id_max(&self) -> EventId {
        EventId::new(self.ids - 1)
    }

    /// Whether the service was removed (e.g. `iox remove --force`) after this
    /// listener's handle opened it.
    pub fn is_service_removed(&self) -> bool {
        self.service.is_removed()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if !self.service.is_own_process() {
            return; // a forked child dropping its copy: the port is the parent's
        }
        let d = self.service.dynamic();
        let header = self.header();
        port::close(header, self.generation);
        pending_set::clear(self.set());
        port::free(header, self.generation);
        port::announce(d);
        // The doorbell's socket file goes when the field drops, after this.
    }
}

/// The readiness descriptor: readable when an id is pending. The first call arms it
/// (and makes it readable at once if ids are pending already); from then on a
/// `try_wait_*` that finds nothing re-arms it. Put it in epoll, mio, tokio
/// (`AsyncFd`) or a WaitSet; on readability, take until empty. A wake-up may find
/// nothing (an id taken by a look that raced the ring).
impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        if !self.armed_mode.replace(true) {
            self.doorbell.rearm(&self.header().waiting);
            if self.has_pending() {
                self.doorbell.ring_self();
            }
        }
        self.doorbell.as_fd()
    }
}

impl AsRawFd for Listener {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}
