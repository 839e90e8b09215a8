//! Subscribers: take chunk handles from their queues, read the payload in place.
//!
//! `receive` polls the queue from each publisher slot, round-robin from where it last
//! found a sample, so samples of one publisher arrive in the order they were sent and
//! no publisher starves another (publishers with samples waiting take turns). It
//! skips the slots no publisher ever had (the publishers-seen set of the dynamic
//! header, see `shm::publishers_seen`): a service has room for several publishers
//! (two by default) and often one sends, and looking at a queue nobody ever pushed to
//! was a third of a receive's instructions. A receive that finds nothing looks at
//! every queue once more before it says so, so a set read a moment too early never
//! hides a sample. Taking an entry moves its hold on the chunk to this
//! subscriber's owner bit (see [`crate::queue`]); dropping the sample clears the bit,
//! which frees the chunk if no one else holds it. Recovery of a dead subscriber clears
//! its bit everywhere, so nothing it held or had queued is lost.
//!
//! `receive_timeout` blocks without busy-waiting: it announces itself in the `waiting`
//! counter of its slot (a SeqCst RMW), checks the queues once more, and sleeps on the
//! slot's `wake` futex word (shared, not process-private). A publisher that pushed a
//! sample fences (SeqCst) and then reads `waiting`; so either the publisher sees the
//! waiter and wakes it, or the waiter's second check sees the sample.
//!
//! Claims held by others: a publisher dropping the oldest entry of a full queue, or a
//! port draining, claims the queue's read word for a few instructions (see
//! [`crate::queue`]); a claimer that died holds it for good. A receive that finds a
//! claim notes it; `receive_timeout` then sleeps at most `STUCK_RECOVERY_PERIOD`
//! (10 ms; a live claimer's push wakes it sooner) and runs the service's recovery
//! itself at most that often, so what a dead claimer held back arrives without a third
//! process. It looks at queued entries including one under a claim (a queue of one
//! whose entry is claimed has nothing "pending" but still something to get). Decision:
//! a receive armed for an event loop runs that recovery at once when it still finds a
//! claim (the descriptor has no timer to bring it back); a claimer that dies after
//! that receive leaves its entry until the loop's next wake (a push by any publisher,
//! or `receive_timeout`/`iox clean`): the descriptor cannot become readable by itself.
//!
//! Readiness descriptor: every subscriber binds a socket under the root (see
//! [`crate::doorbell`] for why a socket, and the arming protocol). The descriptor
//! (`AsFd`) is armed from the first `as_fd()` on; from then on a `receive` that finds
//! nothing consumes its tokens and re-arms it before it looks once more, so an event
//! loop that receives until `None` and then waits never misses a sample. Subscribers
//! that never hand out the descriptor never arm it: their publishers never ring.
//!
//! Creating a subscriber drains whatever a previous owner of the slot left in its
//! queues, then marks the slot active and sets its bit in the connected-subscriber set
//! (`shm::connected`), which is what publishers deliver by. Dropping it clears that
//! bit and marks the slot closing (publishers stop delivering, and drain what they
//! pushed meanwhile) and drains its queues; the slot is freed when the last sample
//! received through it is dropped too.
//!
//! Decision (removed services): when `receive` finds nothing, and before
//! `receive_timeout` sleeps, the subscriber looks at the service's lifecycle word (one
//! load of a line written only at creation and removal, see `iox_core::lifecycle`); if the
//! service was removed (`iox remove --force`) it returns
//! [`ReceiveError::ServiceRemoved`], so the program can open the service again instead
//! of waiting on an incarnation no new publisher can reach. Samples already queued are
//! still returned first; a receive that finds one does not look (the hot path is
//! unchanged). `Subscriber::is_service_removed` asks at any time.
//!
//! Ownership and threads: samples share the port's state with the subscriber through an
//! `Arc`, so a `Sample` is `'static`: it can be stored, moved to another thread
//! (`Send`; it only reads a payload that is `Sync`, and dropping it is one atomic step
//! on the chunk's word and the `Arc`'s count) and handed to code that takes ownership.
//! Samples held are counted by that `Arc` (strong count - 1) and bounded by the
//! service's `max_held`. The `Subscriber` itself is `Send` but not `Sync`: it keeps its
//! round-robin cursor in a `Cell`, and one subscriber slot has one consumer.

use std::cell::Cell;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use iox_core::chunk_guard::ChunkGuard;
use iox_mempool::{Located, PoolInfo, PoolPin};

use crate::doorbell::Doorbell;
use crate::dynamic::{PortHeader, QueueColumnOffset};
use crate::port::{self, PortCreateError, PortSlot, Shared, Side, WaitForPortsError};
use crate::queue::{self, Popped};
use crate::sample::Sample;
use crate::slot_claim::SlotClaim;
use crate::user_header::{UserHeader, offset_for};
use crate::valid::check_values;
use crate::{Payload, ZeroCopySafe};

/// How often a subscriber whose queue is claimed by someone else looks for a dead
/// claimer (runs the service's recovery; see `Subscriber::resolve_stuck`).
mod claims;
mod errors;
mod guarded;

pub use errors::ReceiveError;

const STUCK_RECOVERY_PERIOD: Duration = Duration::from_millis(10);

/// Builds a [`Subscriber`].
#[derive(Debug)]
pub struct SubscriberBuilder<P: ?Sized, H = ()> {
    service: Shared,
    pin: bool,
    _payload: crate::user_header::Marker<P, H>,
}

impl<P: ?Sized + Payload, H: UserHeader> SubscriberBuilder<P, H> {
    pub(crate) fn new(service: Shared) -> Self {
        Self {
            service,
            pin: false,
            _payload: PhantomData,
        }
    }

    /// Pins the service's pool (once per process) when the subscriber is created, so
    /// the first sample costs no more than later ones.
    pub fn pin_memory(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Claims a subscriber slot (and pins, if asked).
    pub fn create(self) -> Result<Subscriber<P, H>, PortCreateError> {
        port::check_host_port(&self.service)?;
        self.build()
    }

    /// [`create`](Self::create) without refusing a device-memory service (for the
    /// device ports, which hand out device addresses only).
    pub(crate) fn build(self) -> Result<Subscriber<P, H>, PortCreateError> {
        let claim = SlotClaim::new(&self.service, Side::Receiving, "subscriber")?;
        let d = self.service.dynamic();
        let doorbell = claim.doorbell(claim.slot())?;
        let pin = claim.pin(self.pin)?;
        let (owner, slot) = (claim.owner(), claim.slot());
        // What a previous owner of the slot left in its queues is not for us, and
        // neither is its may-wait bit (see `shm::may_wait`).
        port::drain_receiver_queues(d, self.service.pool.book(), slot, owner);
        d.may_wait().reset(slot);
        // Publishers deliver from the connected set on (see `shm::connected`): joined
        // before waiters hear of the port, so a publisher they wake delivers to it.
        let guard = super::publisher::chunk_guard(&self.service)?;
        let history = d.regions::<super::layout::PubSubLayout>().history > 0;
        let (slot, generation) = claim.activate_then(pin.as_ref(), || d.connected().connect(slot));
        Ok(Subscriber {
            port: Arc::new(SubscriberPort {
                max_held: super::config::of(&self.service.config).max_held as usize,
                plain_generation: match guard {
                    None => self.service.fork_generation,
                    Some(_) => super::publisher::NOT_A_GENERATION,
                },
                guard,
                history,
                queues: d.queue_column_offset(slot),
                doorbell,
                base: PortSlot::new(self.service, pin, slot, generation, owner),
            }),
            cursor: Cell::new(0),
            armed_mode: Cell::new(false),
            stuck: Cell::new(0),
            last_recovery: Cell::new(None),
            _payload: PhantomData,
        })
    }
}

/// Receives samples of `P` from every publisher of the service. `H` is the service's
/// user header (`()`: none).
#[derive(Debug)]
pub struct Subscriber<P: ?Sized, H = ()> {
    port: Arc<SubscriberPort>,
    /// The publisher slot to look at first.
    cursor: Cell<usize>,
    /// The readiness descriptor was handed out: an empty receive arms it.
    armed_mode: Cell<bool>,
    /// Publisher slots whose queue to us the last receive found claimed by someone
    /// else (a bit each): a live claimer finishes within instructions, a dead one never
    /// does (see [`Subscriber::resolve_stuck`]).
    stuck: Cell<u64>,
    /// When this subscriber last ran recovery for a stuck queue.
    last_recovery: Cell<Option<Instant>>,
    _payload: crate::user_header::Marker<P, H>,
}

/// The state of a subscriber port, shared by the subscriber and the samples received
/// through it; the slot is freed when the last of them goes.
#[derive(Debug)]
pub(crate) struct SubscriberPort {
    base: PortSlot,
    /// Where the queues from the publishers to this slot are (checked once, here).
    queues: QueueColumnOffset,
    max_held: usize,
    /// The service keeps a history per publisher: entries from a publisher count only
    /// once it gave this port its history ([`SubscriberPort::given_history_by`]).
    history: bool,
    /// The chunk guard of a service whose access policy names readers
    /// (`iox_core::chunk_guard`): every chunk this port hands out is locked for reading
    /// from its take to its release.
    guard: Option<Box<ChunkGuard>>,
    /// What a receive and a sample's release compare with the process's fork
    /// generation: the port's fork generation without a guard, else a value no
    /// generation takes, so that the one test each makes first also takes a guarded
    /// port to its own path (`Subscriber::receive_other`, `drop_guarded_sample`), at no
    /// cost to the others.
    plain_generation: u64,
    /// The readiness socket (see [`crate::doorbell`]); removed when the port goes.
    doorbell: Doorbell,
}

impl std::ops::Deref for SubscriberPort {
    type Target = PortSlot;
    #[inline]
    fn deref(&self) -> &PortSlot {
        &self.base
    }
}

impl SubscriberPort {
    fn header(&self) -> &PortHeader {
        self.service.dynamic().receiver(self.slot)
    }

    /// Whether publisher slot `p` gave this port its history (a service with history):
    /// entries it pushed before are strays, meant for an earlier port of this slot.
    #[cold]
    fn given_history_by(&self, p: usize) -> bool {
        // Relaxed: the pop's Acquire of the write index orders the publisher's store
        // of this word (before its pushes to us) before our look.
        self.service
            .dynamic()
            .history_given(p, self.slot)
            .load(Ordering::Relaxed)
            == self.generation
    }

    /// Before arming the descriptor or sleeping: publishers look at this port's
    /// `waiting` word from now on (see `shm::may_wait`).
    #[inline]
    fn may_wait(&self) {
        self.service.dynamic().may_wait().announce(self.slot);
    }

    /// Releases everything queued for this slot (entries someone else is taking right
    /// now stay for them).
    fn drain(&self) {
        port::drain_receiver_queues(self.service.dynamic(), self.pool.book(), self.slot, self.owner);
    }

    /// Releases a received sample's chunk.
    #[inline]
    pub(crate) fn drop_sample(&self, chunk: &Located) {
        // The fork check, and the guard test (see `plain_generation`).
        if !crate::fork::is_same_process(self.plain_generation) {
            return guarded::drop_guarded_sample(self, chunk);
        }
        // SAFETY: the chunk was located by `self.pool` at receive, which this port
        // keeps mapped.
        let _ = unsafe { chunk.release(self.owner) };
    }

    pub(crate) fn pool(&self) -> &iox_mempool::Pool {
        &self.pool
    }

    /// Bytes per payload element, as the static config records it.
    pub(crate) fn element_size(&self) -> usize {
        self.service.config.payload.element_size()
    }

    /// The payload type the static config records.
    pub(crate) fn recorded_payload(&self) -> &crate::PayloadType {
        &self.service.config.payload
    }

    /// The user header the static config records.
    pub(crate) fn recorded_header(&self) -> Option<&crate::HeaderType> {
        self.service.config.user_header.as_ref()
    }

    /// Where the payload starts in a chunk (0 without a user header).
    pub(crate) fn payload_offset(&self) -> usize {
        crate::user_header::payload_offset_of(&self.service.config)
    }

    /// The device address of the pool's first byte, if this port pinned the pool with
    /// a pinner that gives one (learned at pinning; no call into the pinner here).
    #[inline]
    pub(crate) fn device_base(&self) -> Option<u64> {
        self.pin.as_ref()?.device_base()
    }

    /// Whether this port holds its maximum of samples, received and not yet dropped:
    /// the subscriber holds one reference, each sample one more.
    #[inline]
    fn at_max_held(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) > self.max_held
    }
}

impl<P: ?Sized + Payload, H: UserHeader> Subscriber<P, H> {
    /// The service handle, slot and generation of this port (for the device ports).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn port_identity(&self) -> (&Shared, usize, u64) {
        (&self.port.service, self.port.slot, self.port.generation)
    }

    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.port.pool.info()
    }

    /// Whether the service was removed (e.g. `iox remove --force`) after this
    /// subscriber's handle opened it. Then no new publisher can reach it: open the
    /// service again.
    pub fn is_service_removed(&self) -> bool {
        self.port.service.is_removed()
    }

    /// Whether this subscriber pinned the pool.
    pub fn is_pinned(&self) -> bool {
        self.port.pin.as_ref().is_some_and(PoolPin::is_pinned)
    }

    /// Samples waiting in this subscriber's queues (a snapshot).
    pub fn pending(&self) -> usize {
        let d = self.port.service.dynamic();
        (0..d.layout().sending)
            .map(|p| d.queue(p, self.port.slot).len() as usize)
            .sum()
    }

    /// Samples this subscriber missed because its queue was full when a publisher
    /// sent, since the subscriber was created: under `Overflow::DropOldest` the oldest
    /// entries dropped to make room, under `Overflow::Reject` the samples refused (and
    /// a sample is also missed when the subscriber was caught in the middle of taking
    /// its oldest entry). Publishers count it in shared memory, only on that path,
    /// so the count is exact across processes and costs a send that fits nothing.
    /// `iox show` lists it per subscriber.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::Service;
    /// let svc = Service::named("doc/missed")?
    ///     .root(dir.path())
    ///     .publish_subscribe::<u64>()
    ///     .subscriber_buffer(2)
    ///     .create()?;
    /// let subscriber = svc.subscriber_builder().create()?;
    /// let publisher = svc.publisher_builder().create()?;
    /// for i in 0..5 {
    ///     publisher.loan_uninit()?.write_payload(i).send()?;
    /// }
    /// assert_eq!(subscriber.missed(), 3); // 0, 1 and 2 were dropped for 3 and 4
    /// assert_eq!(*subscriber.receive()?.unwrap(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn missed(&self) -> u64 {
        self.port
            .service
            .dynamic()
            .receiver(self.port.slot)
            .missed
            .load(Ordering::Relaxed)
    }

    /// Waits until at least `n` publishers are connected, at most `timeout`, and
    /// returns how many are (fewer than `n` on timeout). Sleeps while it waits (see
    /// [`crate::Publisher::wait_for_subscribers`]).
    pub fn wait_for_publishers(&self, n: usize, timeout: Duration) -> Result<usize, WaitForPortsError> {
        let max = self.port.service.dynamic().layout().sending;
        port::wait_for_ports(&self.port.service, n, timeout, |d| {
            port::active_count((0..max).map(|p| d.sender(p)))
        })
    }

    /// Takes the next sample, if one is waiting. Never blocks.
    ///
    /// Once the readiness descriptor was handed out ([`AsFd`]), a receive that finds
    /// nothing also re-arms it: the descriptor becomes readable when the next sample
    /// arrives. So an event loop receives until `None`, then waits for readability.
    #[inline]
    pub fn receive(&self) -> Result<Option<Sample<P, H>>, ReceiveError> {
        // The fork check, and the guard test (see `plain_generation`).
        if !crate::fork::is_same_process(self.port.plain_generation) {
            return self.receive_other();
        }
        self.receive_with::<false>()
    }

    /// The receive of a port of this process; `GUARDED`: it has a chunk guard, and
    /// locks what it hands out (see [`Self::take`]).
    #[inline(always)]
    fn receive_with<const GUARDED: bool>(&self) -> Result<Option<Sample<P, H>>, ReceiveError> {
        let port = &self.port;
        if port.at_max_held() {
            return Err(ReceiveError::TooManyHeld { max: port.max_held });
        }
        let seen = port.service.dynamic().publishers_seen().load();
        if let Some(sample) = self.take::<GUARDED>(seen)? {
            return Ok(Some(sample));
        }
        self.found_nothing::<GUARDED>(seen)
    }

    /// The end of a receive that found nothing in the queues of the publisher slots
    /// in `seen` (the publishers-seen set it read), off the hot path: looks at the
    /// other queues too, re-arms the readiness descriptor if it is in use, and looks
    /// at the service's lifecycle.
    #[cold]
    #[inline(never)]
    fn found_nothing<const GUARDED: bool>(&self, seen: u64) -> Result<Option<Sample<P, H>>, ReceiveError> {
        let port = &self.port;
        if self.still_stuck() && self.resolve_stuck(false) {
            // A dead claimer's claim was resolved: what was behind it is ours now.
            if let Some(sample) = self.take::<GUARDED>(u64::MAX)? {
                return Ok(Some(sample));
            }
        }
        let unseen = !seen & crate::shm::connected::all(port.service.dynamic().layout().sending);
        if unseen != 0
            && let Some(sample) = self.take::<GUARDED>(unseen)?
        {
            return Ok(Some(sample));
        }
        if self.armed_mode.get() {
            port.may_wait();
            port.doorbell.rearm(&port.header().waiting);
            // Armed: a publisher that pushed before it saw the bit is found here.
            if let Some(sample) = self.take::<GUARDED>(u64::MAX)? {
                return Ok(Some(sample));
            }
            // An event loop waits for the descriptor alone, with no timer to come back
            // by: if a queue is still claimed, look for a dead claimer now (a live one
            // pushes and rings when it is done; a dead one would leave what is behind
            // its claim unread until some other process recovered it).
            if self.still_stuck()
                && self.resolve_stuck(true)
                && let Some(sample) = self.take::<GUARDED>(u64::MAX)?
            {
                return Ok(Some(sample));
            }
        }
        if port.service.is_removed() {
            return Err(ReceiveError::ServiceRemoved);
        }
        Ok(None)
    }

    /// Takes the next sample from the queues of the publisher slots in `slots` (a bit
    /// each), round-robin; `GUARDED`: locks it for reading before it hands it out.
    #[inline(always)]
    fn take<const GUARDED: bool>(&self, slots: u64) -> Result<Option<Sample<P, H>>, ReceiveError> {
        let port = &self.port;
        let d = port.service.dynamic();
        // Round-robin over the slots in `slots` (a bit per publisher slot; those past
        // `max_publishers` dropped), from the cursor on and around: the set rotated
        // so the cursor's bit is bit 0, each slot then found with one bit scan (no
        // step per empty slot; the cursor is at most 64, so `& 63` wraps it).
        let cursor = self.cursor.get();
        let mut rotated = (slots & d.layout().publisher_mask).rotate_right(cursor as u32);
        loop {
            if rotated == 0 {
                return Ok(None);
            }
            let p = (rotated.trailing_zeros() as usize + cursor) & 63;
            rotated &= rotated - 1;
            let mut taken = None;
            let mut stray = false;
            let raw = match d.queue_to(port.queues, p).pop(queue::BY_CONSUMER, |e| {
                // One lookup of the chunk for the take, its length and its address.
                // The payload's line is asked for first, so that it travels while
                // the take's atomic step waits for the ownership word's line.
                taken = port
                    .pool
                    .chunk_ref_from_raw(queue::entry_chunk(e))
                    .inspect(|c| c.prefetch(offset_for::<H, P::Element>()))
                    .filter(|c| c.take_queued(port.owner).is_ok());
                // With history: an entry is ours only once this publisher gave us its
                // history; looked at under our claim (see `pubsub::publisher::history`).
                stray = port.history && taken.is_some() && !port.given_history_by(p);
            }) {
                Popped::Took(raw) => raw,
                Popped::Empty => continue,
                Popped::Busy => {
                    self.note_stuck(p);
                    continue;
                }
            };
            // Start after this publisher next time, so none starves the others.
            self.cursor.set(p + 1);
            let corrupt = |what| ReceiveError::Corrupt {
                raw,
                publisher: p,
                what,
            };
            let chunk = taken.ok_or(corrupt("no such chunk, or a duplicate entry"))?;
            if stray {
                let _ = chunk.release(port.owner);
                // This publisher's queue once more: what follows may be ours.
                rotated |= 1 << (p.wrapping_sub(cursor) & 63);
                continue;
            }
            let len = chunk.user_word();
            let chunk_size = chunk.size();
            // The header's room in front of the payload: a constant, 0 without a
            // header (a raw port of a service with one checks its own offset when it
            // makes the raw sample, `pubsub::raw`).
            let room = offset_for::<H, P::Element>();
            let fits = if P::IS_SLICE {
                // Checked against the recorded type, which for a Rust slice is `P`'s
                // element and for a raw port (`[u8]` of a type known at run time) is
                // that type: its sample's bytes are then known to fit.
                port.recorded_payload()
                    .bytes_of(len as usize)
                    .is_some_and(|b| chunk_size.checked_sub(room).is_some_and(|r| b <= r))
            } else {
                len == 1 && room + size_of::<P::Element>() <= chunk_size
            };
            if !fits {
                let _ = chunk.release(port.owner);
                return Err(corrupt("payload length does not fit the chunk"));
            }
            // A type with bytes that are no value is checked before it is handed out
            // (`zero_copy`: readers never trust writers); nothing for other types.
            // SAFETY: the header and `len` payload elements fit the chunk (just
            // checked), which our owner bit holds; the publisher wrote them before
            // its Release push, which our Acquire pop saw.
            if let Err(source) = unsafe { check_values::<P, H>(chunk.addr(), len as usize) } {
                let _ = chunk.release(port.owner);
                return Err(ReceiveError::InvalidValue { publisher: p, source });
            }
            // With a guard: locked for reading, last, so that no check above needs to
            // unlock; refused if a publisher is writing it (no publisher pushed such an
            // entry). Its values are checked again under the lock: a publisher may
            // have rewritten it (its word cleared under us) before we locked.
            if GUARDED {
                if !guarded::read_lock(port, &chunk) {
                    return Err(corrupt(
                        "a chunk a publisher is still writing (an entry no publisher pushed)",
                    ));
                }
                // SAFETY: as above; the chunk is still ours, and now locked.
                if let Err(source) = unsafe { check_values::<P, H>(chunk.addr(), len as usize) } {
                    guarded::end_read(port, &chunk);
                    let _ = chunk.release(port.owner);
                    return Err(ReceiveError::InvalidValue { publisher: p, source });
                }
            }
            return Ok(Some(Sample::new(
                Arc::clone(port),
                chunk.located(),
                len as usize,
                p,
            )));
        }
    }

    /// Takes the next sample, waiting up to `timeout` for one to arrive. Sleeps on a
    /// futex meanwhile (no busy-waiting). Returns `None` on timeout.
    pub fn receive_timeout(&self, timeout: Duration) -> Result<Option<Sample<P, H>>, ReceiveError> {
        // A timeout too large to represent (e.g. Duration::MAX) waits without limit.
        let deadline = Instant::now().checked_add(timeout);
        if !self.port.is_own_process() {
            return Err(ReceiveError::ForkedProcess);
        }
        let header = self.port.header();
        loop {
            // Only try when something is queued (a claimed entry too: the try finds the
            // claim), or to report TooManyHeld.
            let worth_trying = self.queued_or_claimed() || self.port.at_max_held();
            // Whether this round finds a queue claimed by someone else.
            self.stuck.set(0);
            if worth_trying && let Some(s) = self.receive()? {
                return Ok(Some(s));
            }
            crate::testing::stall_point(crate::testing::Stall::ReceiveBeforeWait);
            // About to sleep: no publisher of a removed service would wake us.
            if self.port.service.is_removed() {
                return Err(ReceiveError::ServiceRemoved);
            }
            let seen = header.wake.load(Ordering::Acquire);
            self.port.may_wait();
            header.waiting.fetch_add(1, Ordering::SeqCst);
            // Pairs with the publisher's fence after its push (store-buffering pattern).
            fence(Ordering::SeqCst);
            // Entries queued behind someone else's claim are not ready: sleep (the
            // claimer's push wakes us if it lives; if it died, the next receive after
            // at most a recovery period resolves its claim). A claim looked at again
            // after the fence: one that ended before it let through what was behind it
            // (ready), and one that ends after it is followed by its claimer's push,
            // whose fence sees us waiting and wakes us.
            // Ready: an entry in a queue no one else claims (another queue's claim
            // holds back only what is behind it).
            let stuck = self.still_stuck();
            let ready = self.ready_outside_stuck();
            let mut left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if stuck {
                left = Some(left.map_or(STUCK_RECOVERY_PERIOD, |l| l.min(STUCK_RECOVERY_PERIOD)));
            }
            let result = if ready || left == Some(Duration::ZERO) {
                Ok(())
            } else {
                crate::testing::stall_point(crate::testing::Stall::ReceiveBeforeSleep);
                port::futex_sleep(&header.wake, seen, left)
            };
            header.waiting.fetch_sub(1, Ordering::Relaxed);
            match result {
                Ok(()) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(ReceiveError::Wait(e.into())),
            }
            if let Some(s) = self.receive()? {
                return Ok(Some(s));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }
}

impl<P: ?Sized, H> Subscriber<P, H> {
    /// The payload recorded in the service's static config (`pubsub::raw`).
    pub(crate) fn recorded_payload(&self) -> &crate::PayloadType {
        &self.port.service.config.payload
    }
}

impl<T: ZeroCopySafe, H: UserHeader> Subscriber<[T], H> {
    /// Most elements one sample can hold.
    pub fn max_slice_len(&self) -> usize {
        let chunk = self.port.pool.layout().max_chunk_size();
        chunk.saturating_sub(offset_for::<H, T>()) / size_of::<T>().max(1)
    }
}

impl<P: ?Sized, H> Drop for Subscriber<P, H> {
    fn drop(&mut self) {
        let port = &self.port;
        if !port.service.is_own_process() {
            return; // a forked child dropping its copy: the port is the parent's
        }
        // Publishers stop delivering, and what they queued goes back. Samples still
        // held keep the slot (and their chunks' owner bit) until they are dropped.
        port.service.dynamic().connected().disconnect(port.slot);
        port::close(port.header(), port.generation);
        port::announce(port.service.dynamic());
        port.drain();
    }
}

/// The readiness descriptor: readable when a sample is waiting. The first call arms
/// it (and makes it readable at once if samples are already queued); from then on a
/// [`Subscriber::receive`] that finds nothing re-arms it. Put it in epoll, mio, tokio
/// (`AsyncFd`) or a [`crate::WaitSet`]; on readability, receive until `None`. A
/// wake-up may find nothing (a sample taken by a receive that raced the ring).
impl<P: ?Sized + Payload, H: UserHeader> AsFd for Subscriber<P, H> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        if !self.armed_mode.replace(true) {
            self.port.may_wait();
            self.port.doorbell.rearm(&self.port.header().waiting);
            if self.pending() > 0 {
                self.port.doorbell.ring_self();
            }
        }
        self.port.doorbell.as_fd()
    }
}

impl<P: ?Sized + Payload, H: UserHeader> AsRawFd for Subscriber<P, H> {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl Drop for SubscriberPort {
    fn drop(&mut self) {
        if !self.service.is_own_process() {
            return;
        }
        // The subscriber and every sample are gone (a sample leaked with `mem::forget`
        // leaks its reference, so then this never runs: the slot stays taken until the
        // process ends and recovery returns it). A publisher may have pushed between
        // the subscriber's drain and now: drain once more, then clear our bit
        // everywhere.
        self.drain();
        self.release_chunks();
        self.free_slot(Side::Receiving, || {});
    }
}
