//! Publishers: loan a chunk, write it in place, send its handle to every subscriber.
//!
//! Hot path (`loan` + `send`), with no lock, no syscall unless a subscriber sleeps, no
//! allocation and no zero-fill:
//! - loan: claim a free chunk for this publisher's owner bit (one CAS on the chunk's
//!   word, see `iox_mempool::owners`).
//! - send: write the entry about to be sent into the slot's journal (its own cache
//!   line); push the entry into each active subscriber's queue from this publisher;
//!   then, in one atomic step on the chunk's word, add one queue hold per delivery and
//!   drop the publisher's own bit; clear the journal. One SeqCst fence; then per
//!   subscriber pushed to: if it closed meanwhile, drain what we pushed (so nothing
//!   leaks), and if it is blocked in `receive_timeout` or armed its descriptor, wake
//!   it. The subscribers delivered to are the connected-subscriber set of the dynamic
//!   header (one word, one bit per slot, see `shm::connected`), read once before the
//!   pushes and once after the fence: slots that are not connected cost nothing.
//! - A sample dropped without being sent becomes the publisher's spare (below) if it
//!   has none, else it returns its chunk to the pool.
//! - In `send`, before the push, the publisher loans the next chunk of the same class
//!   (its "spare") from the sent chunk's line of ownership words, which the hand-off
//!   writes next, so the next `loan` of that class is local. The pool is sized with
//!   one spare per publisher.
//!
//! Crash safety: every chunk this publisher holds carries its owner bit, so recovery
//! releases them all by clearing that bit; a send interrupted between the journal and
//! the hand-off is finished by recovery, which counts the queues whose last entry is
//! the journaled one (each entry carries this publisher's send sequence number, so an
//! earlier send of the same chunk does not match).
//!
//! Decision: under `Overflow::DropOldest`, if a subscriber's queue is full *and* that
//! subscriber is taking its oldest entry at this very moment for longer than a short
//! spin (it was preempted mid-take, or died there), the new sample is not delivered to
//! it rather than waiting on it; `send` still succeeds.
//!
//! Decision (removed services): when a send reached no subscriber, the publisher looks
//! at the service's lifecycle word (one load of a line written only at creation and
//! removal, see `iox_core::lifecycle`); if the service was removed (`iox remove --force`),
//! `send` returns [`SendError::ServiceRemoved`] instead of `Ok(0)`, so a program does
//! not keep sending into an incarnation that no new subscriber can reach. A send that
//! reached a subscriber does not look (the hot path is unchanged): subscribers of the
//! removed incarnation find out when they next wait, and once they are gone, so does
//! the publisher. `Publisher::is_service_removed` asks at any time.
//!
//! History (`.history(n)` on the service): see [`history`]. A service without history
//! takes the plain path, at no extra instruction: the fork check `send` makes
//! first doubles as the history test (`send_generation`), and a publisher with history
//! leaves there for its own path.
//!
//! Ownership and threads: a `Publisher` and its loans share the port's state through
//! an `Rc`, so a loan is `'static` (it can be stored, returned, kept in a queue) and the
//! port stays claimed until the publisher *and* every loan are gone. The send path
//! keeps its sequence number, the class hint, the spare chunk and the cached read
//! indices in `Cell`s, and one publisher slot has one send journal and is the single
//! producer of its queues: two threads must never send through one port at once. So a
//! `Publisher` and its loans are neither `Send` nor `Sync` (as iceoryx2's ports): to
//! publish from another thread, move a clone of the service handle there (it is
//! `Send + Sync`) and build a publisher in that thread. Loans outstanding are counted by
//! the `Rc` itself (strong count - 1), bounded by the service's `max_loans`.

use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use iox_core::chunk_guard::ChunkGuard;
use iox_mempool::{ChunkHandle, Located, Pool, PoolInfo, PoolPin};
use thiserror::Error;

use crate::doorbell::{self, Ringer};
use crate::dynamic::{Dynamic, PortHeader, PortHeaderOffset, QueueRowOffset};
use crate::port::{self, LoanError, PortCreateError, PortSlot, Shared, Side, WaitForPortsError};
use crate::queue::{self, Pushed};
use crate::sample::SampleMutUninit;
use crate::shm::connected;
use crate::slot_claim::SlotClaim;
use crate::user_header::{UserHeader, offset_for};
use crate::{Overflow, Payload, ZeroCopySafe};

mod bytes;
mod guarded;
mod history;
mod sendable;
mod spare;

pub(crate) use guarded::chunk_guard;
pub(crate) use history::NOT_A_GENERATION;

pub use bytes::SendBytesError;
pub use sendable::SendablePublisher;

/// Builds a [`Publisher`].
#[derive(Debug)]
pub struct PublisherBuilder<P: ?Sized, H = ()> {
    service: Shared,
    pin: bool,
    _payload: crate::user_header::Marker<P, H>,
}

/// Why a send did not reach every subscriber.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SendError {
    /// The send reached no subscriber because the service was removed (e.g.
    /// `iox remove --force`) after this publisher's handle opened it: drop the
    /// publisher and the handle and open the service again (a new opener creates a
    /// fresh one). Only a send that reached no subscriber looks; see the module docs.
    #[error(
        "the service was removed after this publisher's handle opened it; the sample reached no one (drop the publisher and the handle, and open the service again)"
    )]
    ServiceRemoved,
    /// With `Overflow::Reject`: some subscribers' buffers were full.
    #[error("{rejected} subscriber(s) had a full buffer and did not get the sample ({delivered} did)")]
    QueueFull {
        /// Subscribers that got it.
        delivered: usize,
        /// Subscribers that did not.
        rejected: usize,
    },
    /// This process is a fork of the one that loaned the sample: nothing was sent.
    #[error("this loan belongs to the process this one was forked from; nothing was sent")]
    ForkedProcess,
}

/// Why [`Publisher::update_connections`] failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum UpdateConnectionsError {
    /// This process is a fork of the one that made the publisher: nothing was sent.
    #[error(
        "this publisher belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
}

impl<P: ?Sized + Payload, H: UserHeader> PublisherBuilder<P, H> {
    pub(crate) fn new(service: Shared) -> Self {
        Self {
            service,
            pin: false,
            _payload: PhantomData,
        }
    }

    /// Pins the service's pool (once per process) when the publisher is created.
    pub fn pin_memory(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Claims a publisher slot (and pins, if asked).
    pub fn create(self) -> Result<Publisher<P, H>, PortCreateError> {
        port::check_host_port(&self.service)?;
        port::check_plain_publisher(&self.service)?;
        self.build()
    }

    /// [`create`](Self::create) without refusing a device-memory or tensor service (for
    /// the device and tensor ports, which hand out device addresses only, or record
    /// each sample's tensor).
    pub(crate) fn build(self) -> Result<Publisher<P, H>, PortCreateError> {
        let claim = SlotClaim::new(&self.service, Side::Sending, "publisher")?;
        let d = self.service.dynamic();
        let max_subscribers = d.layout().receiving;
        // Before any push: subscribers poll this slot's queues from now on.
        d.publishers_seen().mark(claim.slot());
        claim.make_writable()?;
        let pin = claim.pin(self.pin)?;
        let owner = claim.owner();
        let (slot, generation) = claim.activate(pin.as_ref());
        let (queues, header) = (d.queue_row_offset(slot), d.sender_offset(slot));
        let ringer = Ringer::new(&self.service.root, &self.service.stem, max_subscribers);
        let read_cache = Box::new(std::array::from_fn(|_| Cell::new(0)));
        let section = super::config::of(&self.service.config);
        let history = (section.history > 0).then(|| Box::new(history::State::new(max_subscribers)));
        let guard = chunk_guard(&self.service)?;
        Ok(Publisher {
            port: Rc::new(PublisherPort {
                send_generation: match (&history, &guard) {
                    (None, None) => self.service.fork_generation,
                    _ => history::NOT_A_GENERATION,
                },
                guard,
                max_loans: section.max_loans as usize,
                drop_oldest: section.overflow == Overflow::DropOldest,
                history,
                queues,
                header,
                seq: Cell::new(crate::node::random_u32() | 1),
                hint: Cell::new(0),
                spare: spare::Spare::new(),
                read_cache,
                ringer,
                base: PortSlot::new(self.service, pin, slot, generation, owner),
            }),
            _payload: PhantomData,
        })
    }
}

/// Sends samples of `P` to every subscriber of the service. Not `Send`: see the
/// module docs.
///
/// ```compile_fail
/// fn needs_send<T: Send>() {}
/// needs_send::<iox_service::Publisher<u64>>(); // a publisher stays on its thread
/// ```
/// ```compile_fail
/// fn needs_send<T: Send>() {}
/// needs_send::<iox_service::SampleMut<u64>>(); // and so do its loans
/// ```
///
/// `H` is the service's user header (`()`: none): loans carry one to write.
#[derive(Debug)]
pub struct Publisher<P: ?Sized, H = ()> {
    port: Rc<PublisherPort>,
    _payload: crate::user_header::Marker<P, H>,
}

/// The state of a publisher port, shared by the publisher and its loans; the slot is
/// released when the last of them goes.
#[derive(Debug)]
pub(crate) struct PublisherPort {
    base: PortSlot,
    /// Where this slot's queues to the subscribers are (checked once, here).
    queues: QueueRowOffset,
    /// Where this slot's header is (checked once, here).
    header: PortHeaderOffset,
    /// What `send` compares with the process's fork generation: `fork_generation`
    /// without history or guard; with either a value no generation takes, so that the
    /// one test `send` makes first also takes such a publisher to its own path, at no
    /// cost to the others (see [`history`]).
    send_generation: u64,
    /// The chunk guard of a service whose access policy names readers
    /// (`iox_core::chunk_guard`): every chunk this port writes is locked for writing
    /// from its loan to its send. Such a port keeps no spare loaned ahead.
    guard: Option<Box<ChunkGuard>>,
    max_loans: usize,
    /// The service's overflow policy is to drop the oldest sample.
    drop_oldest: bool,
    /// What a publisher of a service with history keeps in the process (`None`
    /// without history).
    history: Option<Box<history::State>>,
    /// Sequence number of the last send, tagged onto queue entries: odd, so never 0
    /// (it starts odd and steps by two, one addition per send; it repeats after 2^31
    /// sends, and only an entry's difference from the one pushed before it matters).
    seq: Cell<u32>,
    hint: Cell<usize>,
    /// A chunk loaned ahead after the last send.
    spare: spare::Spare,
    /// Per subscriber slot: our lower bound of that queue's read index. One entry per
    /// bit of the connected set (a slot number from it indexes with no bounds check;
    /// slots past `max_subscribers` are never used).
    read_cache: Box<[Cell<u64>; 64]>,
    /// Connections to the subscribers' readiness sockets, for those that arm them.
    ringer: Ringer,
}

impl std::ops::Deref for PublisherPort {
    type Target = PortSlot;
    #[inline]
    fn deref(&self) -> &PortSlot {
        &self.base
    }
}

impl<P: ?Sized + Payload, H: UserHeader> Publisher<P, H> {
    /// The service handle, slot and generation of this port (for the device ports).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn port_identity(&self) -> (&Shared, usize, u64) {
        (&self.port.service, self.port.slot, self.port.generation)
    }

    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.port.service.pool.info()
    }

    /// Whether the service was removed (e.g. `iox remove --force`) after this
    /// publisher's handle opened it. Then no new subscriber can reach this publisher:
    /// open the service again.
    pub fn is_service_removed(&self) -> bool {
        self.port.service.is_removed()
    }

    /// Whether this publisher pinned the pool.
    pub fn is_pinned(&self) -> bool {
        self.port.pin.as_ref().is_some_and(PoolPin::is_pinned)
    }

    /// Waits until at least `n` subscribers are connected, at most `timeout`, and
    /// returns how many are (fewer than `n` on timeout). Sleeps while it waits: it
    /// wakes when a port of the service is created, dropped or recovered.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let service = iox_service::Service::named("doc/wait-for")?
    /// #   .root(dir.path())
    ///     .publish_subscribe::<u64>()
    ///     .open_or_create()?;
    /// let publisher = service.publisher_builder().create()?;
    /// let _subscriber = service.subscriber_builder().create()?;
    /// assert_eq!(publisher.wait_for_subscribers(1, Duration::from_secs(1))?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_for_subscribers(&self, n: usize, timeout: Duration) -> Result<usize, WaitForPortsError> {
        let max = self.port.service.dynamic().layout().receiving;
        port::wait_for_ports(&self.port.service, n, timeout, |d| {
            port::active_count((0..max).map(|s| d.receiver(s)))
        })
    }

    /// Gives the history to subscribers that connected since this publisher last
    /// looked, without sending: each gets this publisher's kept samples, oldest first.
    /// `send` does the same first, so call this only when a new subscriber should not
    /// wait for the next send (as iceoryx2's `update_connections`). Returns how many
    /// samples it delivered; always 0 for a service without history.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let svc = iox_service::Service::named("doc/update")?.root(dir.path())
    /// #     .publish_subscribe::<u64>().history(2).create()?;
    /// let publisher = svc.publisher_builder().create()?;
    /// publisher.loan_uninit()?.write_payload(7).send()?;
    /// let late = svc.subscriber_builder().create()?;
    /// assert_eq!(publisher.update_connections()?, 1);
    /// assert_eq!(publisher.update_connections()?, 0, "each subscriber gets it once");
    /// assert_eq!(*late.receive()?.unwrap(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update_connections(&self) -> Result<usize, UpdateConnectionsError> {
        if !self.port.is_own_process() {
            return Err(UpdateConnectionsError::ForkedProcess);
        }
        Ok(self.port.update_connections())
    }

    /// Loans a chunk of at least `bytes` bytes: a new owner of the port, and the chunk
    /// located.
    #[inline]
    pub(crate) fn loan_bytes(&self, bytes: usize) -> Result<(Rc<PublisherPort>, Located), LoanError> {
        if !self.port.is_own_process() {
            return Err(LoanError::ForkedProcess);
        }
        // The publisher holds one reference, each loan one more.
        if Rc::strong_count(&self.port) > self.port.max_loans {
            return Err(LoanError::TooManyLoans {
                max: self.port.max_loans,
            });
        }
        let chunk = self.port.loan_bytes(bytes)?;
        Ok((Rc::clone(&self.port), chunk))
    }
}

impl PublisherPort {
    /// The device address of the pool's first byte, if this port pinned the pool with
    /// a pinner that gives one (learned at pinning; no call into the pinner here).
    #[inline]
    pub(crate) fn device_base(&self) -> Option<u64> {
        self.pin.as_ref()?.device_base()
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The user header the service's static config records.
    pub(crate) fn recorded_header(&self) -> Option<&crate::HeaderType> {
        self.service.config.user_header.as_ref()
    }

    fn header(&self) -> &PortHeader {
        self.service.dynamic().header_at(self.header)
    }

    /// Loans a chunk of at least `bytes` bytes.
    #[inline]
    fn loan_bytes(&self, bytes: usize) -> Result<Located, LoanError> {
        match self.spare.take_for(bytes, self.pool.layout()) {
            // The spare loaned ahead after the last send fits: no shared line touched.
            Ok(spare) => Ok(spare),
            Err(other) => self.loan_from_pool(bytes, other),
        }
    }

    /// A loan without a fitting spare (`other`, a spare of another class, returns to
    /// the pool): out of line, so the common loan stays small.
    #[cold]
    #[inline(never)]
    fn loan_from_pool(&self, bytes: usize, other: Option<ChunkHandle>) -> Result<Located, LoanError> {
        if let Some(h) = other {
            self.end_write(h);
            let _ = self.pool.book().release(h, self.owner);
        }
        let handle = self.loan_chunk(bytes)?;
        Ok(self
            .pool
            .locate(handle)
            .expect("a handle just loaned is in range"))
    }

    /// Loans a chunk from the pool under this publisher's owner bit (and, with a
    /// guard, its write lock).
    #[inline]
    fn loan_chunk(&self, bytes: usize) -> Result<ChunkHandle, LoanError> {
        if let Some(guard) = &self.guard {
            return self.loan_guarded(guard, bytes);
        }
        let mut hint = self.hint.get();
        let handle = self.pool.loan(bytes, &mut hint, self.owner)?;
        self.hint.set(hint);
        Ok(handle)
    }

    /// Takes back an unsent loan: it becomes the spare if there is none (it stays
    /// under our owner bit, as the spare loaned after a send does, so recovery returns
    /// it like any chunk we hold), else it returns to the pool.
    #[inline]
    pub(crate) fn drop_loan(&self, chunk: Located) {
        if !self.is_own_process() {
            return; // a forked child's copy: the chunk is the parent's
        }
        if self.spare.is_empty() {
            self.spare.put(chunk);
        } else {
            guarded::give_back(self, &chunk.handle());
        }
    }

    /// In a send, before the push: loans the next chunk of the class of `sent`, from
    /// `sent`'s line of ownership words (one CAS, on the line the hand-off writes
    /// next), so the next `loan` takes it without touching a shared cache line. Best
    /// effort: an exhausted pool just leaves no spare.
    #[inline]
    pub(crate) fn refill_spare(&self, sent: ChunkHandle) {
        if self.spare.is_empty()
            && let Ok(next) = self.pool.loan_near(sent, self.owner)
        {
            self.spare.put(next);
        }
    }

    #[inline]
    fn next_seq(&self) -> u32 {
        let seq = self.seq.get().wrapping_add(2);
        self.seq.set(seq);
        seq
    }

    /// Delivers a written chunk of `len` elements, loaned from this port (so located
    /// by its pool), to every subscriber.
    #[inline]
    pub(crate) fn send_chunk(&self, chunk: Located, len: usize) -> Result<usize, SendError> {
        let handle = chunk.handle();
        // The fork check, and the history and guard test (see `send_generation`).
        if !crate::fork::is_same_process(self.send_generation) {
            return self.send_other(handle, len);
        }
        self.send_now::<true>(chunk, len)
    }

    /// The send to every connected subscriber (`send_chunk` once it knows the port is
    /// its process's and has no history); `SPARE`: loan the next chunk ahead (not for a
    /// guarded port, whose loans each take a write lock).
    #[inline(always)]
    pub(super) fn send_now<const SPARE: bool>(&self, chunk: Located, len: usize) -> Result<usize, SendError> {
        let handle = chunk.handle();
        let d = self.service.dynamic();
        // The queues' lines are asked for first: they travel while the loan below
        // waits for the chunk words' line (and the payload's, which its atomic step
        // waits for), instead of after them.
        let queues = d.queue_row_at(self.queues);
        for s in connected::slots(d.connected().snapshot()) {
            queues.prefetch_push(s);
        }
        // The next chunk is loaned first, while the subscribers are not touching the
        // ownership words (they are waiting for this sample): the hand-off below then
        // finds the line here, and no loan of ours races their take and release.
        if SPARE {
            self.refill_spare(handle);
        }
        // SAFETY: the chunk was loaned from, and located by, `self.pool`, which this
        // port keeps mapped.
        unsafe { chunk.set_user_word(len as u64) };
        let connected = d.connected();
        let header = self.header();
        let journal = &header.journal;
        // Only this publisher writes its counter: no RMW needed.
        header.sent.store(
            header.sent.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        let entry = queue::entry_of_raw(self.next_seq(), chunk.raw());
        journal.store(entry, Ordering::Relaxed);
        let Fanout {
            delivered,
            rejected,
            pushed_to,
        } = self.push_all(d, entry, connected.snapshot(), |_| true);
        // One step: the queues' holds in, our own out (frees the chunk if no one got it).
        // SAFETY: as for the user word above.
        let _ = unsafe { chunk.hand_off(self.owner, delivered as u32) };
        journal.store(0, Ordering::Relaxed);
        if delivered > 0 {
            self.after_push(d, pushed_to);
        } else if self.service.is_removed() {
            return Err(SendError::ServiceRemoved);
        }
        if rejected > 0 {
            return Err(SendError::QueueFull { delivered, rejected });
        }
        Ok(delivered)
    }

    /// After pushing to the subscribers in `pushed_to`: drains what we pushed to one
    /// that closed meanwhile, and wakes those blocked in `receive_timeout` or armed.
    #[inline]
    fn after_push(&self, d: Dynamic<'_>, pushed_to: u64) {
        // The fence pairs with the SeqCst RMW a subscriber does before it sleeps or
        // arms, and with the fence after a subscriber leaves the connected set when
        // it closes (see `shm::connected`).
        let still = d.connected().still_connected(pushed_to);
        // Only subscribers that may wait have a `waiting` word worth reading (see
        // `shm::may_wait`): one load for all the others.
        for s in connected::slots(d.may_wait().among(still)) {
            let header = d.receiver(s);
            let waiting = header.waiting.load(Ordering::Relaxed);
            if doorbell::wants_wake(waiting) {
                port::wake(header, waiting, &self.ringer, s);
            }
        }
        if still != pushed_to {
            self.drain_closed(d, pushed_to & !still);
        }
    }

    /// Drains what we pushed to the subscribers in `closed`, which closed after we
    /// read the connected set and may have drained before our push: so no chunk is
    /// stranded.
    #[cold]
    #[inline(never)]
    fn drain_closed(&self, d: Dynamic<'_>, closed: u64) {
        for s in connected::slots(closed) {
            port::drain_queue(
                &d.queue(self.slot, s),
                queue::BY_PRODUCER,
                self.pool.book(),
                self.owner,
            );
        }
    }

    /// The push step of every send (plain, and with history): `entry` into the queue
    /// to each subscriber slot of the connected set `set` that `admit` lets through,
    /// dropping the oldest entry where the service says so and the queue is full (the
    /// dropped entry's chunk is released); a sample a subscriber misses is counted for
    /// it. `admit` is `|_| true` for a plain send, which compiles away.
    #[inline(always)]
    fn push_all(&self, d: Dynamic<'_>, entry: u64, set: u64, mut admit: impl FnMut(usize) -> bool) -> Fanout {
        let (mut delivered, mut rejected, mut pushed_to) = (0, 0, 0);
        let queues = d.queue_row_at(self.queues);
        let pool = &self.pool;
        let drop_oldest = self.drop_oldest;
        for s in connected::slots(set) {
            if !admit(s) {
                continue;
            }
            let read_cache = &self.read_cache[s % 64];
            let mut cached = read_cache.get();
            let mut taken = None;
            let pushed = queues.to(s).push(entry, drop_oldest, &mut cached, |old| {
                crate::testing::stall_point(crate::testing::Stall::QueueDropOldestClaimed);
                taken = port::take_entry(pool.book(), old, self.owner)
            });
            read_cache.set(cached);
            match pushed {
                Pushed::Stored => {}
                Pushed::DroppedOldest => {
                    missed(d, s);
                    self.release_taken(taken)
                }
                Pushed::Full => {
                    missed(d, s);
                    rejected += 1;
                    continue;
                }
                // Documented above: the subscriber is stuck mid-take; skip it.
                Pushed::Busy => {
                    missed(d, s);
                    continue;
                }
            }
            delivered += 1;
            pushed_to |= connected::bit(s);
        }
        Fanout {
            delivered,
            rejected,
            pushed_to,
        }
    }

    /// Releases the hold `take_entry` moved to this publisher, if it did.
    fn release_taken(&self, taken: Option<ChunkHandle>) {
        if let Some(h) = taken {
            let _ = self.pool.book().release(h, self.owner);
        }
    }
}

/// What [`PublisherPort::push_all`] did: to how many subscribers it delivered, how
/// many rejected it (full, `Overflow::Reject`), and the delivered ones' bits.
struct Fanout {
    delivered: usize,
    rejected: usize,
    pushed_to: u64,
}

/// Counts a sample subscriber `s` missed because its queue from us was full (off the
/// common path: a send that fits never comes here).
#[cold]
#[inline(never)]
fn missed(d: Dynamic<'_>, s: usize) {
    d.receiver(s).missed.fetch_add(1, Ordering::Relaxed);
}

impl<P: ?Sized, H> Publisher<P, H> {
    /// The payload recorded in the service's static config (`pubsub::raw`).
    pub(crate) fn recorded_payload(&self) -> &crate::PayloadType {
        &self.port.service.config.payload
    }

    /// The user header recorded in the service's static config.
    pub(crate) fn recorded_header(&self) -> Option<&crate::HeaderType> {
        self.port.service.config.user_header.as_ref()
    }

    /// Where the payload starts in a chunk (0 without a user header), from the static
    /// config.
    pub(crate) fn payload_offset(&self) -> usize {
        crate::user_header::payload_offset_of(&self.port.service.config)
    }
}

impl<T: ZeroCopySafe, H: UserHeader> Publisher<T, H> {
    /// Loans uninitialised memory for one `T` (never zero-filled), and for the user
    /// header in front of it if the service has one (`write_header` writes it).
    #[inline]
    pub fn loan_uninit(&self) -> Result<SampleMutUninit<T, H>, LoanError> {
        let (port, chunk) = self.loan_bytes(offset_for::<H, T>() + size_of::<T>())?;
        Ok(SampleMutUninit::new(port, chunk, 1))
    }
}

impl<T: ZeroCopySafe, H: UserHeader> Publisher<[T], H> {
    /// Most elements one sample can hold.
    #[inline]
    pub fn max_slice_len(&self) -> usize {
        let chunk = self.port.service.pool.layout().max_chunk_size();
        chunk.saturating_sub(offset_for::<H, T>()) / size_of::<T>().max(1)
    }

    /// Loans uninitialised memory for `len` elements (never zero-filled), and for the
    /// user header in front of them if the service has one, from the smallest size
    /// class that holds them.
    #[inline]
    pub fn loan_slice_uninit(&self, len: usize) -> Result<SampleMutUninit<[T], H>, LoanError> {
        let max = self.max_slice_len();
        if len > max && size_of::<T>() > 0 {
            return Err(LoanError::SliceTooLong { len, max });
        }
        let (port, chunk) = self.loan_bytes(offset_for::<H, T>() + len * size_of::<T>())?;
        Ok(SampleMutUninit::new(port, chunk, len))
    }
}

impl Drop for PublisherPort {
    fn drop(&mut self) {
        if !self.service.is_own_process() {
            return; // a forked child dropping its copy: the port is the parent's
        }
        // The publisher and every loan are gone (each held a reference), so only the
        // spare is left: clearing our bit everywhere returns it (and anything a
        // recovery-interrupted path left). A loan leaked with `mem::forget` leaks its
        // reference too, so this never runs for it: the slot stays taken until the
        // process ends and recovery returns it. Queued samples stay for the subscribers.
        let header = self.service.dynamic().sender(self.slot);
        self.spare.take();
        if self.history.is_some() {
            // The samples kept for late subscribers go (those already queued stay).
            self.drop_history();
        }
        self.release_chunks();
        port::close(header, self.generation);
        self.free_slot(Side::Sending, || {});
    }
}
