//! Servers: take requests from every client's queue, respond through the
//! [`ActiveRequest`], end the stream by dropping it.
//!
//! A `Server`, its active requests and their response loans share the port's state
//! through an `Rc` (the server slot is the single consumer of its request queues and
//! the single producer of its response queues), so they stay on one thread. The
//! server slot stays claimed while an active request lives, so its clients do not
//! see it gone; dropping the `Server` drains the requests it did not receive (their
//! clients see [`super::ResponseReceiveError::ServerGone`]).

use super::Types;
use std::cell::Cell;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use iox_mempool::{ChunkHandle, Located, PoolInfo, PoolPin};
use thiserror::Error;

use super::ActiveRequest;
use super::active::RequestRef;
use super::request_word;
use super::service::MAX_LOANS;
use super::slots::{self, LivenessClock, Step};
use crate::Payload;
use crate::doorbell::{Doorbell, Ringer};
use crate::dynamic::{self, PortHeader, QueueColumnOffset};
use crate::port::LoanError;
use crate::port::{self, PortCreateError, PortSlot, Shared, Side};
use crate::queue::{self, Popped};
use crate::slot_claim::SlotClaim;
use crate::valid::check_values;

/// Builds a [`Server`].
#[derive(Debug)]
pub struct ServerBuilder<Req: ?Sized, Resp: ?Sized> {
    pub(crate) service: Shared,
    pin: bool,
    _payload: PhantomData<Types<Req, Resp>>,
}

/// Why receiving a request failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServerReceiveError {
    /// A queue held something that is not a valid request of this service.
    #[error("corrupt request entry {raw:#x} from client slot {client}: {what}")]
    Corrupt {
        /// The entry.
        raw: u64,
        /// The client slot it came from.
        client: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// A request held bytes that are no value of the request type (a `bool` other
    /// than 0 or 1): it was dropped unread (its client sees its stream end with no
    /// response); receive again for the next.
    #[error("refused a request from client slot {client}: {source}")]
    InvalidValue {
        /// The client slot it came from.
        client: usize,
        /// What was invalid.
        source: crate::valid::InvalidValue,
    },
    /// This process is a fork of the one that made the server.
    #[error(
        "this server belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
    /// Waiting on the futex failed.
    #[error("waiting for a request failed: {0}")]
    Wait(std::io::Error),
}

/// Why sending a response failed (the response is dropped, its chunk returned).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ResponseSendError {
    /// The client that sent the request is gone (its process died or it closed):
    /// stop working on the request and drop it.
    #[error("the client that sent this request is gone; drop the request")]
    ClientGone,
    /// The client dropped its pending response: nobody reads the stream any more.
    #[error("the client dropped its pending response to this request; drop the request")]
    Abandoned,
    /// This process is a fork of the one that made the server.
    #[error("this request belongs to the process this one was forked from; nothing was sent")]
    ForkedProcess,
    /// [`ResponseMut::send_timeout`](super::ResponseMut::send_timeout): the client's
    /// queue for this request stayed full for the whole timeout; nothing was sent (the
    /// response's chunk returned to the pool). Send again, or drop the request.
    #[error("the client did not make room for this response within {0:?}; nothing was sent")]
    Timeout(Duration),
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> ServerBuilder<Req, Resp> {
    pub(crate) fn new(service: Shared) -> Self {
        Self {
            service,
            pin: false,
            _payload: PhantomData,
        }
    }

    /// Pins the service's pool (once per process) when the server is created.
    pub fn pin_memory(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Claims a server slot (and pins, if asked).
    pub fn create(self) -> Result<Server<Req, Resp>, PortCreateError> {
        let claim = SlotClaim::new(&self.service, Side::Receiving, "server")?;
        let d = self.service.dynamic();
        let l = *d.layout();
        claim.make_writable()?;
        let doorbell = claim.doorbell(claim.slot())?;
        let pin = claim.pin(self.pin)?;
        let owner = claim.owner();
        // What a previous owner of the slot left: its requests.
        port::drain_receiver_queues(d, self.service.pool.book(), claim.slot(), owner);
        let (slot, generation) = claim.activate(pin.as_ref());
        let s = &self.service;
        let port = ServerPort {
            ringer: Ringer::new(&s.root, &s.stem, l.receiving + l.sending),
            read_cache: (0..l.sending).map(|_| Cell::new(0)).collect(),
            queues: d.queue_column_offset(slot),
            doorbell,
            armed: Cell::new(false),
            cursor: Cell::new(0),
            loans: port::Loans::new(MAX_LOANS as usize),
            liveness: LivenessClock::default(),
            base: PortSlot::new(Arc::clone(&self.service), pin, slot, generation, owner),
        };
        Ok(Server {
            port: Rc::new(port),
            _payload: PhantomData,
        })
    }
}

/// Receives requests of `Req` and answers them with responses of `Resp`.
///
/// ```
/// use std::time::Duration;
/// use iox_service::Service;
/// # let dir = tempfile::tempdir().unwrap();
/// let svc = Service::named("doc/server")?
/// #   .root(dir.path())
///     .request_response::<u32, u32>()
///     .open_or_create()?;
/// let server = svc.server_builder().create()?;
/// assert!(server.receive_timeout(Duration::from_millis(1))?.is_none()); // nothing yet
/// let client = svc.client_builder().create()?;
/// let pending = client.loan_uninit()?.write_payload(21).send()?;
/// let active = server.receive()?.expect("the request");
/// active.loan_uninit()?.write_payload(*active * 2).send()?;
/// drop(active); // the end of the stream
/// assert_eq!(*pending.receive()?.unwrap(), 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Server<Req: ?Sized, Resp: ?Sized> {
    port: Rc<ServerPort>,
    _payload: PhantomData<Types<Req, Resp>>,
}

#[derive(Debug)]
pub(crate) struct ServerPort {
    base: PortSlot,
    /// Where the request queues from the clients to this slot are (checked once, here).
    queues: QueueColumnOffset,
    doorbell: Doorbell,
    armed: Cell<bool>,
    /// Connections to the clients' doorbells (slot `max_servers + c`).
    ringer: Ringer,
    /// Per client slot: our lower bound of that response queue's read index.
    read_cache: Box<[Cell<u64>]>,
    cursor: Cell<usize>,
    /// Unsent response loans.
    loans: port::Loans,
    liveness: LivenessClock,
}

impl std::ops::Deref for ServerPort {
    type Target = PortSlot;
    #[inline]
    fn deref(&self) -> &PortSlot {
        &self.base
    }
}

impl ServerPort {
    fn header(&self) -> &PortHeader {
        self.service.dynamic().receiver(self.slot)
    }

    /// Releases every request queued for this slot (requests not received).
    fn drain_requests(&self) {
        port::drain_receiver_queues(self.service.dynamic(), self.pool.book(), self.slot, self.owner);
    }

    /// Takes the next live request: (handle, raw entry, client, client generation).
    fn take(&self) -> Result<Option<(ChunkHandle, u64, usize, u64)>, ServerReceiveError> {
        let d = self.service.dynamic();
        let clients = d.layout().sending;
        let start = self.cursor.get();
        for i in 0..clients {
            let c = (start + i) % clients;
            let q = d.queue_to(self.queues, c);
            loop {
                let mut taken = None;
                let Popped::Took(raw) = q.pop(queue::BY_CONSUMER, |e| {
                    taken = port::take_entry(self.pool.book(), e, self.owner)
                }) else {
                    break;
                };
                let Some(h) = taken else {
                    return Err(ServerReceiveError::Corrupt {
                        raw,
                        client: c,
                        what: "no such chunk, or a duplicate entry",
                    });
                };
                let seq = slots::seq_of(raw);
                let words = d.request_words(c);
                let expected = request_word::word(self.slot, self.generation, seq);
                let (client_generation, _) = slots::slot_state(d.sender(c));
                match words.get(slots::slot_of(seq)) {
                    Some(w) if w.load(Ordering::Acquire) == expected => {
                        self.cursor.set((c + 1) % clients);
                        return Ok(Some((h, raw, c, client_generation)));
                    }
                    // Abandoned before we took it: free the slot, skip it.
                    Some(w) => request_word::free_abandoned(w, self.slot, self.generation),
                    None => {}
                }
                let _ = self.pool.book().release(h, self.owner);
            }
        }
        Ok(None)
    }

    pub(crate) fn loan(&self, bytes: usize) -> Result<Located, LoanError> {
        if !self.is_own_process() {
            return Err(LoanError::ForkedProcess);
        }
        self.loans.loan(&self.pool, self.owner, bytes)
    }

    pub(crate) fn drop_loan(&self, chunk: Located) {
        self.loans.end();
        if self.is_own_process() {
            // SAFETY: located in `self.pool`, which this port keeps mapped.
            let _ = unsafe { chunk.release(self.owner) };
        }
    }

    /// Whether request `r` is still wanted: `Err` says why not. Looks at the client's
    /// node lock at most every 10 ms (recovering a dead client).
    pub(crate) fn check(&self, r: &RequestRef) -> Result<(), ResponseSendError> {
        let d = self.service.dynamic();
        let w = &d.request_words(r.client)[slots::slot_of(r.seq)];
        let ch = d.sender(r.client);
        if w.load(Ordering::Acquire) == r.token && self.liveness.due() {
            let node = ch.node.load(Ordering::Acquire);
            if node != 0 && !crate::node::is_alive(&self.service.root, node) {
                let _ = crate::recovery::recover(&self.service);
            }
        }
        let seen = w.load(Ordering::Acquire);
        if seen == r.token {
            Ok(())
        } else if seen == r.token | request_word::ABANDONED && slots::same_port(ch, r.client_generation) {
            Err(ResponseSendError::Abandoned)
        } else {
            Err(ResponseSendError::ClientGone)
        }
    }

    /// Sends a written response chunk of `len` elements for request `r`, waiting while
    /// the client's queue is full.
    pub(crate) fn send(&self, r: &RequestRef, chunk: Located, len: usize) -> Result<(), ResponseSendError> {
        self.send_until(r, chunk, len, None)
    }

    /// [`send`](Self::send), waiting at most `timeout` while the queue is full
    /// ([`ResponseSendError::Timeout`], the chunk released as for any refusal).
    pub(crate) fn send_timeout(
        &self,
        r: &RequestRef,
        chunk: Located,
        len: usize,
        timeout: Duration,
    ) -> Result<(), ResponseSendError> {
        let deadline = std::time::Instant::now() + timeout;
        self.send_until(r, chunk, len, Some((timeout, deadline)))
    }

    /// [`send`](Self::send) with its deadline (and the timeout it came from) worked
    /// out; inlined, so the send without one costs what it did before there were
    /// deadlines (the hot path's gate counts it).
    #[inline(always)]
    fn send_until(
        &self,
        r: &RequestRef,
        chunk: Located,
        len: usize,
        deadline: Option<(Duration, std::time::Instant)>,
    ) -> Result<(), ResponseSendError> {
        self.loans.end();
        if !self.is_own_process() {
            return Err(ResponseSendError::ForkedProcess);
        }
        let fail = |e| {
            // SAFETY: located in `self.pool`, which this port keeps mapped.
            let _ = unsafe { chunk.release(self.owner) };
            Err(e)
        };
        if let Err(e) = self.check(r) {
            return fail(e);
        }
        let d = self.service.dynamic();
        // SAFETY: as in `fail`.
        unsafe { chunk.set_user_word(len as u64) };
        let header = self.header();
        let entry = queue::entry_of_raw(r.seq, chunk.raw());
        let q = d.response_queue(self.slot, r.client);
        let mut pause = 0u32;
        let cache = &self.read_cache[r.client];
        // SAFETY: as in `fail`.
        while !unsafe { port::send_one(&header.journal, &q, cache, chunk, self.owner, entry) } {
            // Full: wait for the client to take one (documented in the module docs).
            if let Err(e) = self.check(r) {
                return fail(e);
            }
            if let Some((t, end)) = deadline
                && std::time::Instant::now() >= end
            {
                return fail(ResponseSendError::Timeout(t));
            }
            pause = (pause + 1).min(200);
            if pause < 100 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(u64::from(pause - 99)));
            }
        }
        header.sent.store(
            header.sent.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        self.after_push(r);
        Ok(())
    }

    /// After a push or the end of a stream: drains what we pushed to a client that
    /// closed, or wakes it.
    pub(crate) fn after_push(&self, r: &RequestRef) {
        let d = self.service.dynamic();
        // Pairs with the SeqCst fence of a client going to sleep, and with its close.
        fence(Ordering::SeqCst);
        let ch = d.sender(r.client);
        if slots::slot_state(ch).1 != dynamic::ACTIVE {
            port::drain_queue(
                &d.response_queue(self.slot, r.client),
                queue::BY_PRODUCER,
                self.pool.book(),
                self.owner,
            );
        } else {
            let waiting = ch.waiting.load(Ordering::Relaxed);
            if crate::doorbell::wants_wake(waiting) {
                port::wake(ch, waiting, &self.ringer, d.layout().receiving + r.client);
            }
        }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Server<Req, Resp> {
    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.port.pool.info()
    }

    /// Whether this server pinned the pool.
    pub fn is_pinned(&self) -> bool {
        self.port.pin.as_ref().is_some_and(PoolPin::is_pinned)
    }

    /// Requests waiting in this server's queues (a snapshot).
    pub fn pending_requests(&self) -> usize {
        let d = self.port.service.dynamic();
        (0..d.layout().sending)
            .map(|c| d.queue(c, self.port.slot).len() as usize)
            .sum()
    }

    /// Takes the next request, if one is waiting (round robin over the clients).
    /// Never blocks. Once the readiness descriptor was handed out, a receive that
    /// finds nothing re-arms it.
    pub fn receive(&self) -> Result<Option<ActiveRequest<Req, Resp>>, ServerReceiveError> {
        match self.look()? {
            Step::Got(r) => Ok(Some(r)),
            _ => Ok(None),
        }
    }

    /// Takes the next request, waiting up to `timeout` (futex, no busy-waiting);
    /// `None` on timeout.
    pub fn receive_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Option<ActiveRequest<Req, Resp>>, ServerReceiveError> {
        if !self.port.is_own_process() {
            return Err(ServerReceiveError::ForkedProcess);
        }
        slots::wait(
            self.port.header(),
            timeout,
            false,
            || self.look(),
            ServerReceiveError::Wait,
        )
    }

    fn look(&self) -> Result<Step<ActiveRequest<Req, Resp>>, ServerReceiveError> {
        let port = &self.port;
        if !port.is_own_process() {
            return Err(ServerReceiveError::ForkedProcess);
        }
        let mut got = port.take()?;
        if got.is_none() && port.armed.get() {
            port.doorbell.rearm(&port.header().waiting);
            got = port.take()?;
        }
        let Some((h, raw, client, client_generation)) = got else {
            return Ok(Step::Nothing);
        };
        let pool = &port.pool;
        let corrupt = |what| {
            let _ = pool.book().release(h, port.owner);
            Err(ServerReceiveError::Corrupt { raw, client, what })
        };
        // One lookup for its length, size and address.
        let Ok(chunk) = pool.chunk_ref(h) else {
            return corrupt("no such chunk");
        };
        let (len, chunk_size, ptr) = (chunk.user_word(), chunk.size(), chunk.addr());
        let elem = size_of::<Req::Element>() as u64;
        let fits = if Req::IS_SLICE {
            len.checked_mul(elem).is_some_and(|b| b <= chunk_size as u64)
        } else {
            len == 1 && size_of::<Req::Element>() <= chunk_size
        };
        if !fits {
            return corrupt("payload length does not fit the chunk");
        }
        let seq = slots::seq_of(raw);
        let r = RequestRef {
            client,
            client_generation,
            seq,
            token: request_word::word(port.slot, port.generation, seq),
        };
        let request = ActiveRequest::new(Rc::clone(port), h, ptr, len as usize, r);
        // A request type with bytes that are no value is checked before it is handed
        // out (`zero_copy`: readers never trust writers); nothing for other types.
        // SAFETY: `len` elements fit the chunk (just checked), which our owner bit
        // holds; the client wrote them before its Release push, which our pop saw.
        if let Err(source) = unsafe { check_values::<Req, ()>(ptr, len as usize) } {
            // Dropped unread: its stream ends, so the client sees no response, not a
            // request left waiting.
            drop(request);
            return Err(ServerReceiveError::InvalidValue { client, source });
        }
        Ok(Step::Got(request))
    }
}

impl<Req: ?Sized, Resp: ?Sized> Drop for Server<Req, Resp> {
    fn drop(&mut self) {
        let port = &self.port;
        if !port.service.is_own_process() {
            return;
        }
        // No new requests; those not received go back (their clients see the server
        // gone). Active requests keep the slot until they are dropped.
        port::close(port.header(), port.generation);
        port::announce(port.service.dynamic());
        port.drain_requests();
    }
}

impl Drop for ServerPort {
    fn drop(&mut self) {
        if !self.service.is_own_process() {
            return;
        }
        self.drain_requests();
        self.release_chunks();
        self.free_slot(Side::Receiving, || {
            // Clients look at the slot's state before they leave a request to us: after
            // it says FREE (see `request_word`).
            crate::testing::stall_point(crate::testing::Stall::ServerLeftBeforeScan);
            let d = self.service.dynamic();
            let clients = d.layout().sending;
            request_word::server_left(
                (0..clients).flat_map(|c| d.request_words(c)),
                self.slot,
                self.generation,
            );
        });
    }
}

/// The readiness descriptor: readable when a request may be waiting. On
/// readability, receive until `None`.
impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> AsFd for Server<Req, Resp> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        let port = &self.port;
        if !port.armed.replace(true) {
            port.doorbell.rearm(&port.header().waiting);
            if self.pending_requests() > 0 {
                port.doorbell.ring_self();
            }
        }
        port.doorbell.as_fd()
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> AsRawFd for Server<Req, Resp> {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}
