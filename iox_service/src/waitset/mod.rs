//! The [`WaitSet`]: one thread sleeps until any of many things happens: a sample for
//! one of its subscribers, readability of any descriptor, an interval's tick, a
//! deadline missed, a [`Waker`], or SIGINT/SIGTERM.
//!
//! **Mechanism.** One epoll instance (level-triggered) holding the attached
//! descriptors, the [`Waker`]'s eventfd and, with termination handling, this
//! WaitSet's signal socket (see [`signals`]). Timers (intervals, deadlines) bound
//! epoll's timeout through a lazy min-heap on the monotonic clock (see [`timers`]).
//! Nothing spins: with nothing due, the thread is asleep in `epoll_wait`.
//!
//! **One round** (`wait_and_process_once*`): wait for readiness or the earliest
//! timer; a termination notice ends the round at once; otherwise call the callback
//! once per ready attachment (a deadline attachment's readability also pushes its
//! deadline out), then once per timer due; return. Work per round is O(ready +
//! expired · log n): no step scans the attachments.
//!
//! **Contract for descriptors** (iox subscribers, listeners, sockets): the callback
//! must consume what made the descriptor readable (for an iox port: receive until
//! `None`), or the next round reports it again (level-triggered). A wake-up may be
//! spurious (an iox port whose sample was taken by a racing receive): receiving finds
//! nothing, which re-arms the port.
//!
//! **Timer resolution** is epoll's: one millisecond, rounded up, so timers never fire
//! early. Intervals keep their phase (no drift); ticks missed while the callback was
//! busy collapse into one.
//!
//! **Threads.** A WaitSet is `Send` but not `Sync`: one thread waits on it. Attaching
//! and detaching take `&self`, so the callback may drop guards (detach) or attach
//! more; state is borrowed only between callback calls. The [`Waker`] is the handle
//! other threads use.
//!
//! Decisions: epoll directly (rustix), no async runtime; keys with generations so a
//! stale event never reaches the wrong attachment; guards borrow the attached object,
//! so it cannot be dropped while its descriptor sits in the epoll set.

mod attachment;
mod errors;
pub(crate) mod signals;
pub(crate) mod timers;
mod waker;

use std::cell::RefCell;
use std::marker::PhantomData;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::io::Errno;

pub use attachment::{AttachmentId, WaitSetGuard};
use attachment::{Entry, Event, Kind, Slab};
pub use errors::{WaitSetAttachError, WaitSetCreateError, WaitSetRunError};
use signals::TerminationNotice;
use timers::{Lookup, Timers};
pub use waker::Waker;

/// The epoll data of the waker's eventfd.
const WAKER_KEY: u64 = u64::MAX;
/// The epoll data of the termination socket.
const SIGNAL_KEY: u64 = u64::MAX - 1;
/// Events taken per `epoll_wait`; more ready descriptors are reported next round.
const EVENTS_PER_WAIT: usize = 256;

/// What the callback tells the WaitSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackProgression {
    /// Go on with the next event.
    Continue,
    /// Return [`WaitSetRunResult::StopRequest`] now (events not yet processed are
    /// reported by the next wait).
    Stop,
}

/// Why a wait returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitSetRunResult {
    /// SIGINT or SIGTERM arrived: leave the event loop, drop the ports, exit.
    TerminationRequest,
    /// The WaitSet's [`Waker`] was used.
    Interrupt,
    /// The callback returned [`CallbackProgression::Stop`].
    StopRequest,
    /// One round ran: every event it found was given to the callback.
    AllEventsHandled,
    /// The bounded wait's time passed with nothing to report.
    Timeout,
}

/// Builds a [`WaitSet`].
#[derive(Debug, Clone)]
pub struct WaitSetBuilder {
    termination_signals: bool,
}

impl Default for WaitSetBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitSetBuilder {
    /// Default: SIGINT/SIGTERM end waits with a termination request.
    pub fn new() -> Self {
        Self {
            termination_signals: true,
        }
    }

    /// Whether SIGINT/SIGTERM end this WaitSet's waits (default `true`). The first
    /// WaitSet created with `true` installs the process's handlers; while any such
    /// WaitSet is alive, the signals no longer terminate the process by default (see
    /// [`WaitSet`]). With `false` this WaitSet neither installs nor sees them: use
    /// `false` in programs that handle SIGINT/SIGTERM themselves (`tokio::signal`,
    /// `ctrlc`), since once installed, iox's handling terminates the process on those
    /// signals whenever no such WaitSet is alive, after the program's own handlers.
    pub fn termination_signals(mut self, on: bool) -> Self {
        self.termination_signals = on;
        self
    }

    /// Creates the WaitSet.
    pub fn create(self) -> Result<WaitSet, WaitSetCreateError> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let epoll =
            epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| WaitSetCreateError::Epoll(e.into()))?;
        let waker = Waker::new().map_err(WaitSetCreateError::Waker)?;
        add(&epoll, waker.fd(), WAKER_KEY).map_err(|e| WaitSetCreateError::Waker(e.into()))?;
        let termination = if self.termination_signals {
            let notice = TerminationNotice::register().map_err(WaitSetCreateError::Signals)?;
            add(&epoll, notice.socket().as_fd(), SIGNAL_KEY)
                .map_err(|e| WaitSetCreateError::Signals(e.into()))?;
            Some(notice)
        } else {
            None
        };
        Ok(WaitSet {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            epoll,
            waker,
            termination,
            state: RefCell::new(State::default()),
            events: RefCell::new(Vec::with_capacity(EVENTS_PER_WAIT)),
        })
    }
}

fn add(epoll: &OwnedFd, fd: BorrowedFd<'_>, key: u64) -> rustix::io::Result<()> {
    epoll::add(epoll, fd, epoll::EventData::new_u64(key), epoll::EventFlags::IN)
}

#[derive(Debug, Default)]
struct State {
    attachments: Slab,
    timers: Timers,
}

/// Waits for many things at once and calls back for each that happened. Attach
/// subscribers (or any [`AsFd`]) as notifications, with a deadline, or intervals;
/// each attach returns a guard that detaches when dropped.
///
/// SIGINT and SIGTERM end the wait with [`WaitSetRunResult::TerminationRequest`]
/// (unless built with [`WaitSetBuilder::termination_signals`]`(false)`): the first
/// WaitSet installs the handlers, once per process, and while any WaitSet is alive
/// they replace the default Ctrl-C termination. A second signal while a request is
/// still pending (no wait has reported it yet) terminates the process the default way,
/// unless it comes within 300 ms of the pending one (the same request: `timeout`
/// signals the process and then its group).
///
/// ```
/// use iox_service::{Service, WaitSet, WaitSetRunResult, CallbackProgression};
/// use std::time::Duration;
/// # let dir = tempfile::tempdir().unwrap();
/// let service = Service::named("doc/waitset").unwrap()
/// #   .root(dir.path())
///     .publish_subscribe::<u64>()
///     .open_or_create()
///     .unwrap();
/// let subscriber = service.subscriber_builder().create().unwrap();
/// let publisher = service.publisher_builder().create().unwrap();
///
/// let waitset = WaitSet::new().unwrap();
/// let on_sample = waitset.attach_notification(&subscriber).unwrap();
/// let heartbeat = waitset.attach_interval(Duration::from_millis(100)).unwrap();
/// publisher.loan_uninit().unwrap().write_payload(42).send().unwrap();
///
/// let result = waitset
///     .wait_and_process(|id| {
///         if id.has_event_from(&on_sample) {
///             // Readable: receive until None.
///             while let Some(sample) = subscriber.receive().unwrap() {
///                 assert_eq!(*sample, 42);
///                 return CallbackProgression::Stop;
///             }
///         } else if id.has_event_from(&heartbeat) {
///             println!("tick");
///         }
///         CallbackProgression::Continue
///     })
///     .unwrap();
/// assert_eq!(result, WaitSetRunResult::StopRequest);
/// ```
pub struct WaitSet {
    /// Tells this WaitSet's guards and ids from another's.
    id: u64,
    epoll: OwnedFd,
    waker: Waker,
    termination: Option<TerminationNotice>,
    state: RefCell<State>,
    /// `epoll_wait`'s buffer, taken out while a round runs.
    events: RefCell<Vec<epoll::Event>>,
}

impl std::fmt::Debug for WaitSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitSet")
            .field("id", &self.id)
            .field("attachments", &self.len())
            .field("termination_signals", &self.termination.is_some())
            .finish_non_exhaustive()
    }
}

impl WaitSet {
    /// A WaitSet with termination handling ([`WaitSetBuilder::new`]).
    pub fn new() -> Result<Self, WaitSetCreateError> {
        WaitSetBuilder::new().create()
    }

    /// A [`Waker`] that ends this WaitSet's wait from any thread.
    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// How many attachments it holds.
    pub fn len(&self) -> usize {
        self.state.borrow().attachments.len()
    }

    /// Whether it holds no attachment.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Wakes when `attachment`'s descriptor is readable (for an iox subscriber: a
    /// sample is waiting; receive until `None`).
    pub fn attach_notification<'ws, 'a, T: AsFd + ?Sized>(
        &'ws self,
        attachment: &'a T,
    ) -> Result<WaitSetGuard<'ws, 'a>, WaitSetAttachError> {
        self.attach(Kind::Notification, Some(attachment.as_fd()))
    }

    /// Like [`WaitSet::attach_notification`], and also reports a missed deadline
    /// ([`AttachmentId::has_missed_deadline`]) whenever the descriptor stays
    /// unreadable for `deadline`; each readable round restarts the deadline. After a
    /// miss the next one is due `deadline` later.
    ///
    /// ```
    /// use iox_service::{Service, WaitSet, CallbackProgression};
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let service = Service::named("doc/deadline").unwrap()
    /// #   .root(dir.path())
    ///     .publish_subscribe::<u64>()
    ///     .open_or_create()
    ///     .unwrap();
    /// let subscriber = service.subscriber_builder().create().unwrap();
    /// let waitset = WaitSet::new().unwrap();
    /// let guard = waitset.attach_deadline(&subscriber, Duration::from_millis(20)).unwrap();
    /// let mut missed = false;
    /// waitset
    ///     .wait_and_process_once_with_timeout(
    ///         |id| {
    ///             missed |= id.has_missed_deadline(&guard);
    ///             CallbackProgression::Continue
    ///         },
    ///         Duration::from_secs(5),
    ///     )
    ///     .unwrap();
    /// assert!(missed, "no publisher: the deadline passes");
    /// ```
    pub fn attach_deadline<'ws, 'a, T: AsFd + ?Sized>(
        &'ws self,
        attachment: &'a T,
        deadline: Duration,
    ) -> Result<WaitSetGuard<'ws, 'a>, WaitSetAttachError> {
        if deadline.is_zero() {
            return Err(WaitSetAttachError::ZeroDuration { what: "deadline" });
        }
        self.attach(Kind::Deadline { timeout: deadline }, Some(attachment.as_fd()))
    }

    /// Ticks every `period` ([`AttachmentId::has_event_from`] its guard), first one
    /// period from now.
    pub fn attach_interval(&self, period: Duration) -> Result<WaitSetGuard<'_, 'static>, WaitSetAttachError> {
        if period.is_zero() {
            return Err(WaitSetAttachError::ZeroDuration { what: "interval" });
        }
        self.attach(Kind::Interval { period }, None)
    }

    fn attach<'a>(
        &self,
        kind: Kind,
        fd: Option<BorrowedFd<'a>>,
    ) -> Result<WaitSetGuard<'_, 'a>, WaitSetAttachError> {
        let due = match kind {
            Kind::Notification => None,
            Kind::Interval { period: d } | Kind::Deadline { timeout: d } => {
                // A duration past the clock's range never falls due.
                Instant::now().checked_add(d)
            }
        };
        let mut state = self.state.borrow_mut();
        let key = state
            .attachments
            .insert(Entry { kind, due })
            .ok_or(WaitSetAttachError::WatchLimit)?;
        if let Some(fd) = fd
            && let Err(e) = add(&self.epoll, fd, key)
        {
            state.attachments.remove(key);
            return Err(match e {
                Errno::EXIST => WaitSetAttachError::AlreadyAttached,
                Errno::PERM => WaitSetAttachError::NotPollable,
                Errno::NOSPC => WaitSetAttachError::WatchLimit,
                e => WaitSetAttachError::Epoll(e.into()),
            });
        }
        if let Some(due) = due {
            state.timers.insert(due, key);
        }
        Ok(WaitSetGuard {
            waitset: self,
            key,
            fd,
            _attached: PhantomData,
        })
    }

    /// A guard's drop.
    fn detach(&self, key: u64, fd: Option<BorrowedFd<'_>>) {
        if let Some(fd) = fd {
            // Fails only if the descriptor is not in the set, which a guard rules out.
            let _ = epoll::delete(&self.epoll, fd);
        }
        self.state.borrow_mut().attachments.remove(key);
    }

    /// Runs rounds until the callback stops, a termination signal arrives, the
    /// [`Waker`] is used, or an error occurs; never returns `AllEventsHandled` or
    /// `Timeout`. With nothing attached it still ends on a signal or the waker.
    pub fn wait_and_process(
        &self,
        mut callback: impl FnMut(AttachmentId) -> CallbackProgression,
    ) -> Result<WaitSetRunResult, WaitSetRunError> {
        loop {
            match self.round(&mut callback, None)? {
                WaitSetRunResult::AllEventsHandled | WaitSetRunResult::Timeout => {}
                other => return Ok(other),
            }
        }
    }

    /// One round: waits (without limit) until something happens, processes all of it,
    /// returns.
    pub fn wait_and_process_once(
        &self,
        mut callback: impl FnMut(AttachmentId) -> CallbackProgression,
    ) -> Result<WaitSetRunResult, WaitSetRunError> {
        self.round(&mut callback, None)
    }

    /// One round, waiting at most `timeout` for something to happen:
    /// [`WaitSetRunResult::Timeout`] if nothing did. `Duration::ZERO` only looks.
    ///
    /// ```
    /// use iox_service::{WaitSet, WaitSetRunResult, CallbackProgression};
    /// use std::time::Duration;
    /// let waitset = WaitSet::new().unwrap();
    /// let result = waitset
    ///     .wait_and_process_once_with_timeout(|_| CallbackProgression::Continue, Duration::from_millis(5))
    ///     .unwrap();
    /// assert_eq!(result, WaitSetRunResult::Timeout);
    /// ```
    pub fn wait_and_process_once_with_timeout(
        &self,
        mut callback: impl FnMut(AttachmentId) -> CallbackProgression,
        timeout: Duration,
    ) -> Result<WaitSetRunResult, WaitSetRunError> {
        self.round(&mut callback, Some(timeout))
    }

    fn round(
        &self,
        callback: &mut dyn FnMut(AttachmentId) -> CallbackProgression,
        timeout: Option<Duration>,
    ) -> Result<WaitSetRunResult, WaitSetRunError> {
        // A limit too far to represent waits without one.
        let until = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut events = std::mem::take(&mut *self.events.borrow_mut());
        let result = self.round_with(callback, until, &mut events);
        events.clear();
        *self.events.borrow_mut() = events;
        result
    }

    fn round_with(
        &self,
        callback: &mut dyn FnMut(AttachmentId) -> CallbackProgression,
        until: Option<Instant>,
        events: &mut Vec<epoll::Event>,
    ) -> Result<WaitSetRunResult, WaitSetRunError> {
        loop {
            let wake_at = match (self.state.borrow().timers.next(), until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = wake_at.map(|at| {
                let d = at.saturating_duration_since(Instant::now());
                rustix::event::Timespec {
                    tv_sec: d.as_secs().min(i64::MAX as u64) as _,
                    tv_nsec: d.subsec_nanos() as _,
                }
            });
            events.clear();
            if events.capacity() < EVENTS_PER_WAIT {
                events.reserve(EVENTS_PER_WAIT);
            }
            match epoll::wait(&self.epoll, spare_capacity(events), sleep.as_ref()) {
                Ok(_) => {}
                // A signal handler ran (ours, or another): our notice, if any, is
                // readable next time round.
                Err(Errno::INTR) => {}
                Err(e) => return Err(WaitSetRunError::Wait(e.into())),
            }
            if let Some(result) = self.dispatch(callback, events) {
                return Ok(result);
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                return Ok(WaitSetRunResult::Timeout);
            }
            // Nothing to report (a timer entry that came up early, a stale event):
            // sleep again.
        }
    }

    /// Gives one round's events, then its due timers, to the callback; `None` when
    /// there was nothing to report.
    fn dispatch(
        &self,
        callback: &mut dyn FnMut(AttachmentId) -> CallbackProgression,
        events: &[epoll::Event],
    ) -> Option<WaitSetRunResult> {
        let mut interrupted = false;
        for event in events {
            match event.data.u64() {
                SIGNAL_KEY if self.termination.as_ref().is_some_and(TerminationNotice::take) => {
                    return Some(WaitSetRunResult::TerminationRequest);
                }
                WAKER_KEY => interrupted |= self.waker.take(),
                _ => {}
            }
        }
        let mut handled = false;
        let mut now = None;
        for event in events {
            let key = event.data.u64();
            if key == SIGNAL_KEY || key == WAKER_KEY {
                continue;
            }
            {
                let mut state = self.state.borrow_mut();
                // Detached since (by an earlier callback of this round): skip.
                let Some(entry) = state.attachments.get_mut(key) else {
                    continue;
                };
                if let Kind::Deadline { timeout } = entry.kind {
                    let now = *now.get_or_insert_with(Instant::now);
                    entry.due = now.checked_add(timeout);
                }
            }
            handled = true;
            if callback(self.attachment_id(key, Event::Readable)) == CallbackProgression::Stop {
                return Some(WaitSetRunResult::StopRequest);
            }
        }
        // Timers due (the clock is read only when some timer exists).
        let now = self.state.borrow().timers.next().map(|_| Instant::now());
        while let Some((key, event)) = now.and_then(|now| self.pop_due(now)) {
            handled = true;
            if callback(self.attachment_id(key, event)) == CallbackProgression::Stop {
                return Some(WaitSetRunResult::StopRequest);
            }
        }
        if interrupted {
            Some(WaitSetRunResult::Interrupt)
        } else if handled {
            Some(WaitSetRunResult::AllEventsHandled)
        } else {
            None
        }
    }

    /// The next timed attachment due at `now` (its next due time already set).
    fn pop_due(&self, now: Instant) -> Option<(u64, Event)> {
        let mut state = self.state.borrow_mut();
        let State { attachments, timers } = &mut *state;
        let mut fired = Event::Tick;
        let key = timers.pop_due(now, |key| {
            let Some(entry) = attachments.get_mut(key) else {
                return Lookup::Gone;
            };
            let (next, event) = match (entry.kind, entry.due) {
                (_, None) | (Kind::Notification, _) => return Lookup::Gone,
                (_, Some(due)) if due > now => return Lookup::NotYet(due),
                (Kind::Interval { period }, Some(due)) => (timers::next_tick(due, period, now), Event::Tick),
                (Kind::Deadline { timeout }, Some(_)) => (now + timeout, Event::DeadlineMissed),
            };
            entry.due = Some(next);
            fired = event;
            Lookup::Fired(next)
        })?;
        Some((key, fired))
    }

    fn attachment_id(&self, key: u64, event: Event) -> AttachmentId {
        AttachmentId {
            waitset: self.id,
            key,
            event,
        }
    }
}
