//! Clients: loan a request, write it in place, send it to one server; the
//! [`PendingResponse`] it returns receives the stream of responses.
//!
//! A `Client`, its loans and its pending responses share the port's state through an
//! `Rc` (as a publisher and its loans do): they stay on the thread that made them
//! (the client slot is the single producer of its request queues and the single
//! consumer of its response queues). Responses taken from a response queue for
//! another pending response of the same client wait in the client's stash, in order.

use super::Types;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use iox_mempool::{ChunkHandle, Located, Owner, PoolInfo, PoolPin};
use thiserror::Error;

use super::request_word;
use super::slots::{self, LivenessClock};
use super::{PendingResponse, service::MAX_LOANS};
use crate::doorbell::{Doorbell, Ringer};
use crate::dynamic::{self, PortHeader, QueueRowOffset};
use crate::port::LoanError;
use crate::port::{self, PortCreateError, PortSlot, Shared, Side};
use crate::queue;
use crate::slot_claim::SlotClaim;
use crate::{Payload, ZeroCopySafe};

/// Builds a [`Client`].
#[derive(Debug)]
pub struct ClientBuilder<Req: ?Sized, Resp: ?Sized> {
    service: Shared,
    pin: bool,
    _payload: PhantomData<Types<Req, Resp>>,
}

/// Why sending a request failed (the request is dropped, its chunk returned).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RequestSendError {
    /// The client has its maximum of active requests.
    #[error(
        "this client already has its maximum of {max} active requests; receive a stream to its end or drop a pending response first"
    )]
    TooManyActiveRequests {
        /// The service's `max_active_requests_per_client`.
        max: usize,
    },
    /// No server is connected. A client that starts beside its server waits for one
    /// (the service's `port_counts().1 > 0`) before its first request.
    #[error("no server is connected to the service; start one (or wait for one) and send again")]
    NoServer,
    /// The chosen server's queue from this client is full of requests it has not
    /// received yet (requests abandoned before the server took them still count).
    #[error("server slot {server} has not received this client's earlier requests yet; retry later")]
    ServerBusy {
        /// The server slot.
        server: usize,
    },
    /// This process is a fork of the one that made the client.
    #[error(
        "this client belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> ClientBuilder<Req, Resp> {
    pub(crate) fn new(service: Shared) -> Self {
        Self {
            service,
            pin: false,
            _payload: PhantomData,
        }
    }

    /// Pins the service's pool (once per process) when the client is created.
    pub fn pin_memory(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Claims a client slot (and pins, if asked).
    pub fn create(self) -> Result<Client<Req, Resp>, PortCreateError> {
        let claim = SlotClaim::new(&self.service, Side::Sending, "client")?;
        let d = self.service.dynamic();
        let l = *d.layout();
        claim.make_writable()?;
        // Client doorbells come after the servers' (see `crate::reqres`).
        let doorbell = claim.doorbell(l.receiving + claim.slot())?;
        let pin = claim.pin(self.pin)?;
        let owner = claim.owner();
        // What a previous owner of the slot left: its request slots and responses.
        for w in d.request_words(claim.slot()) {
            w.store(0, Ordering::Relaxed);
        }
        drain_responses(d, self.service.pool.book(), claim.slot(), owner);
        let (slot, generation) = claim.activate(pin.as_ref());
        let s = &self.service;
        let port = ClientPort {
            ringer: Ringer::new(&s.root, &s.stem, l.receiving),
            read_cache: (0..l.receiving).map(|_| Cell::new(0)).collect(),
            max_active: d.regions::<super::layout::ReqResLayout>().max_active,
            queues: d.queue_row_offset(slot),
            doorbell,
            armed: Cell::new(false),
            rid: Cell::new(crate::node::random_u32()),
            cursor: Cell::new(0),
            loans: port::Loans::new(MAX_LOANS as usize),
            in_use: Cell::new(0),
            stash: RefCell::new(Stashes::new(
                d.regions::<super::layout::ReqResLayout>().max_active,
            )),
            liveness: LivenessClock::default(),
            base: PortSlot::new(Arc::clone(&self.service), pin, slot, generation, owner),
        };
        Ok(Client {
            port: Rc::new(port),
            _payload: PhantomData,
        })
    }
}

/// Releases every response queued for client slot `slot` (as its `owner`), from every
/// server.
fn drain_responses(
    d: crate::dynamic::Dynamic<'_>,
    pool: &iox_mempool::Bookkeeping,
    slot: usize,
    owner: Owner,
) {
    for s in 0..d.layout().receiving {
        port::drain_queue(&d.response_queue(s, slot), queue::BY_CONSUMER, pool, owner);
    }
}

/// Sends requests of `Req` to the service's servers and receives responses of `Resp`.
/// Not `Send`: see the module docs.
///
/// ```
/// use iox_service::{RequestSendError, Service};
/// # let dir = tempfile::tempdir().unwrap();
/// let svc = Service::named("doc/client")?
/// #   .root(dir.path())
///     .request_response::<[u8], u64>()
///     .request_slice_len(1024)
///     .open_or_create()?;
/// let client = svc.client_builder().create()?;
/// let request = client.loan_slice_uninit(3)?.write_from_slice(b"abc");
/// // No server yet: a specific error (the request's chunk goes back to the pool).
/// assert_eq!(request.send().unwrap_err(), RequestSendError::NoServer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Client<Req: ?Sized, Resp: ?Sized> {
    port: Rc<ClientPort>,
    _payload: PhantomData<Types<Req, Resp>>,
}

/// The state of a client port, shared by the client, its loans and its pending
/// responses; the slot is released when the last of them goes.
#[derive(Debug)]
pub(crate) struct ClientPort {
    base: PortSlot,
    /// Where this slot's request queues to the servers are (checked once, here).
    queues: QueueRowOffset,
    max_active: usize,
    /// The readiness socket (doorbell slot `max_servers + slot`).
    pub(crate) doorbell: Doorbell,
    /// The readiness descriptor was handed out: an empty receive re-arms it.
    pub(crate) armed: Cell<bool>,
    /// Connections to the servers' doorbells.
    ringer: Ringer,
    /// Per server slot: our lower bound of that request queue's read index.
    read_cache: Box<[Cell<u64>]>,
    /// The last request number used.
    rid: Cell<u32>,
    /// The server slot to try first next time (round robin).
    cursor: Cell<usize>,
    /// Unsent loans.
    loans: port::Loans,
    /// Request slots of live pending responses (bit k).
    pub(crate) in_use: Cell<u64>,
    /// Responses taken for other pending responses of this client.
    pub(crate) stash: RefCell<Stashes>,
    /// When a pending response last looked at its server's liveness.
    pub(crate) liveness: LivenessClock,
}

impl std::ops::Deref for ClientPort {
    type Target = PortSlot;
    #[inline]
    fn deref(&self) -> &PortSlot {
        &self.base
    }
}

/// Responses taken from a response queue for another pending response of the same
/// client, kept in order until it asks: one stash per request slot, named by the
/// `seq` of the request that slot serves now (a slot serves one pending response at
/// a time, so a lookup is an index, not a hash).
#[derive(Debug)]
pub(crate) struct Stashes(Vec<(Option<u32>, VecDeque<ChunkHandle>)>);

impl Stashes {
    fn new(slots: usize) -> Self {
        Self((0..slots).map(|_| (None, VecDeque::new())).collect())
    }

    /// The stash of request `seq`, empty, in its slot.
    fn open(&mut self, seq: u32) {
        if let Some(s) = self.0.get_mut(slots::slot_of(seq)) {
            *s = (Some(seq), VecDeque::new());
        }
    }

    /// The next response kept for request `seq`.
    pub(crate) fn pop(&mut self, seq: u32) -> Option<ChunkHandle> {
        match self.0.get_mut(slots::slot_of(seq)) {
            Some((Some(open), chunks)) if *open == seq => chunks.pop_front(),
            _ => None,
        }
    }

    /// Keeps `h` for request `seq`; gives it back if no pending response is waiting
    /// for that request any more.
    pub(crate) fn push(&mut self, seq: u32, h: ChunkHandle) -> Result<(), ChunkHandle> {
        match self.0.get_mut(slots::slot_of(seq)) {
            Some((Some(open), chunks)) if *open == seq => {
                chunks.push_back(h);
                Ok(())
            }
            _ => Err(h),
        }
    }

    /// Closes request `seq`'s stash: what it still kept.
    pub(crate) fn close(&mut self, seq: u32) -> VecDeque<ChunkHandle> {
        match self.0.get_mut(slots::slot_of(seq)) {
            Some((open @ Some(_), chunks)) if *open == Some(seq) => {
                *open = None;
                std::mem::take(chunks)
            }
            _ => VecDeque::new(),
        }
    }
}

impl ClientPort {
    pub(crate) fn header(&self) -> &PortHeader {
        self.service.dynamic().sender(self.slot)
    }

    /// Releases everything queued for this client by any server.
    fn drain_responses(&self) {
        drain_responses(self.service.dynamic(), self.pool.book(), self.slot, self.owner);
    }

    fn loan(&self, bytes: usize) -> Result<Located, LoanError> {
        if !self.is_own_process() {
            return Err(LoanError::ForkedProcess);
        }
        self.loans.loan(&self.pool, self.owner, bytes)
    }

    fn drop_loan(&self, chunk: Located) {
        self.loans.end();
        if self.is_own_process() {
            // SAFETY: located in `self.pool`, which this port keeps mapped.
            let _ = unsafe { chunk.release(self.owner) };
        }
    }

    /// Sends a written request chunk of `len` elements; returns (server slot, its
    /// generation, request slot, seq).
    fn send(&self, chunk: Located, len: usize) -> Result<(usize, u64, u32), RequestSendError> {
        self.loans.end();
        let fail = |e| {
            // SAFETY: located in `self.pool`, which this port keeps mapped.
            let _ = unsafe { chunk.release(self.owner) };
            Err(e)
        };
        if !self.is_own_process() {
            return Err(RequestSendError::ForkedProcess); // the chunk is the parent's
        }
        let d = self.service.dynamic();
        let words = d.request_words(self.slot);
        let in_use = self.in_use.get();
        let Some(k) =
            (0..self.max_active).find(|&k| in_use & (1 << k) == 0 && words[k].load(Ordering::Acquire) == 0)
        else {
            return fail(RequestSendError::TooManyActiveRequests { max: self.max_active });
        };
        let servers = d.layout().receiving;
        let start = self.cursor.get();
        let Some((s, generation)) = (0..servers).map(|i| (start + i) % servers).find_map(|s| {
            let (generation, phase) = slots::slot_state(d.receiver(s));
            (phase == dynamic::ACTIVE).then_some((s, generation))
        }) else {
            return fail(RequestSendError::NoServer);
        };
        self.cursor.set((s + 1) % servers);
        let rid = match self.rid.get().wrapping_add(1) & 0x7f_ffff {
            0 => 1,
            r => r,
        };
        self.rid.set(rid);
        let seq = slots::seq(rid, k);
        // SAFETY: as in `fail`.
        unsafe { chunk.set_user_word(len as u64) };
        let header = self.header();
        header.sent.store(
            header.sent.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        // The slot word first: the server reads it after taking the entry (whose push
        // is a Release store of the write index).
        request_word::open(&words[k], request_word::word(s, generation, seq));
        let entry = queue::entry_of_raw(seq, chunk.raw());
        let q = d.queue_row_at(self.queues).to(s);
        // SAFETY: as in `fail`.
        if !unsafe { port::send_one(&header.journal, &q, &self.read_cache[s], chunk, self.owner, entry) } {
            words[k].store(0, Ordering::Release);
            return fail(RequestSendError::ServerBusy { server: s });
        }
        self.in_use.set(in_use | (1 << k));
        self.stash.borrow_mut().open(seq);
        // Pairs with the SeqCst fence of a server going to sleep, and with its close.
        fence(Ordering::SeqCst);
        let sh = d.receiver(s);
        if slots::slot_state(sh).1 != dynamic::ACTIVE {
            // It closed after we chose it: nobody will take what we pushed. The
            // pending response reports the server gone.
            port::drain_queue(&q, queue::BY_PRODUCER, self.pool.book(), self.owner);
        } else {
            let waiting = sh.waiting.load(Ordering::Relaxed);
            if crate::doorbell::wants_wake(waiting) {
                port::wake(sh, waiting, &self.ringer, s);
            }
        }
        Ok((s, generation, seq))
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Client<Req, Resp> {
    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.port.pool.info()
    }

    /// Whether this client pinned the pool.
    pub fn is_pinned(&self) -> bool {
        self.port.pin.as_ref().is_some_and(PoolPin::is_pinned)
    }

    /// The request and response payloads recorded in the static config (`reqres::raw`).
    pub(crate) fn recorded_payloads(&self) -> (&crate::PayloadType, &crate::PayloadType) {
        super::raw::recorded(&self.port.service.config)
    }

    /// Requests of this client that are active (sent, pending response alive).
    pub fn active_requests(&self) -> usize {
        self.port.in_use.get().count_ones() as usize
    }

    pub(crate) fn loan_bytes(
        &self,
        bytes: usize,
        len: usize,
    ) -> Result<RequestMutUninit<Req, Resp>, LoanError> {
        let chunk = self.port.loan(bytes)?;
        Ok(RequestMutUninit {
            port: Rc::clone(&self.port),
            chunk: Some(chunk),
            len,
            _payload: PhantomData,
        })
    }
}

impl<T: ZeroCopySafe, Resp: ?Sized + Payload> Client<T, Resp> {
    /// Loans uninitialised memory for one request (never zero-filled).
    pub fn loan_uninit(&self) -> Result<RequestMutUninit<T, Resp>, LoanError> {
        self.loan_bytes(size_of::<T>(), 1)
    }
}

impl<T: ZeroCopySafe, Resp: ?Sized + Payload> Client<[T], Resp> {
    /// Loans uninitialised memory for a request of `len` elements.
    pub fn loan_slice_uninit(&self, len: usize) -> Result<RequestMutUninit<[T], Resp>, LoanError> {
        let max = self.port.pool.layout().max_chunk_size() / size_of::<T>().max(1);
        if len > max && size_of::<T>() > 0 {
            return Err(LoanError::SliceTooLong { len, max });
        }
        self.loan_bytes(len * size_of::<T>(), len)
    }
}

impl Drop for ClientPort {
    fn drop(&mut self) {
        if !self.service.is_own_process() {
            return;
        }
        // Every pending response is gone (each held a reference) and left its request
        // slot free or ABANDONED for its server to free.
        let header = self.header();
        port::close(header, self.generation);
        self.drain_responses();
        self.release_chunks();
        self.free_slot(Side::Sending, || {});
    }
}

/// The readiness descriptor of the client (shared by its pending responses):
/// readable when a response or the end of a stream may have arrived. On readability,
/// receive from the pending responses until each returns `None`.
impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> AsFd for Client<Req, Resp> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.port.arm()
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> AsRawFd for Client<Req, Resp> {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl ClientPort {
    /// Hands out the descriptor, arming it the first time (and ringing it at once, so
    /// the first wait looks).
    pub(crate) fn arm(&self) -> BorrowedFd<'_> {
        if !self.armed.replace(true) {
            self.doorbell.rearm(&self.header().waiting);
            self.doorbell.ring_self();
        }
        self.doorbell.as_fd()
    }
}

/// A loaned, not yet initialised request.
#[derive(Debug)]
pub struct RequestMutUninit<Req: ?Sized + Payload, Resp: ?Sized + Payload> {
    port: Rc<ClientPort>,
    /// `None` once sent.
    chunk: Option<Located>,
    len: usize,
    _payload: PhantomData<Types<Req, Resp>>,
}

/// A loaned, initialised request, ready to send.
#[derive(Debug)]
pub struct RequestMut<Req: ?Sized + Payload, Resp: ?Sized + Payload> {
    inner: RequestMutUninit<Req, Resp>,
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> RequestMutUninit<Req, Resp> {
    /// The chunk's address (a loan not sent yet always has its chunk).
    pub(crate) fn addr(&self) -> *mut u8 {
        self.chunk
            .as_ref()
            .expect("a loan has its chunk until it is sent")
            .addr()
    }

    /// Declares the payload initialised.
    ///
    /// # Safety
    /// Every byte of the payload must have been written (through `payload_mut`).
    pub unsafe fn assume_init(self) -> RequestMut<Req, Resp> {
        RequestMut { inner: self }
    }
}

impl<T: ZeroCopySafe, Resp: ?Sized + Payload> RequestMutUninit<T, Resp> {
    /// The uninitialised payload.
    pub fn payload_mut(&mut self) -> &mut MaybeUninit<T> {
        // SAFETY: the chunk is loaned to this client alone, holds at least
        // size_of::<T>() bytes and is aligned for T (the layout's alignment is at
        // least the payloads').
        unsafe { &mut *self.addr().cast::<MaybeUninit<T>>() }
    }

    /// Writes `value` and returns the request, ready to send.
    pub fn write_payload(mut self, value: T) -> RequestMut<T, Resp> {
        self.payload_mut().write(value);
        // SAFETY: just written in full.
        unsafe { self.assume_init() }
    }
}

impl<T: ZeroCopySafe, Resp: ?Sized + Payload> RequestMutUninit<[T], Resp> {
    /// The uninitialised payload, `len` elements.
    pub fn payload_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: loaned to us alone, len * size_of::<T>() bytes (checked at loan),
        // aligned for T.
        unsafe { std::slice::from_raw_parts_mut(self.addr().cast::<MaybeUninit<T>>(), self.len) }
    }

    /// Writes element `i` as `f(i)` for every `i` and returns the request.
    pub fn write_from_fn(mut self, mut f: impl FnMut(usize) -> T) -> RequestMut<[T], Resp> {
        for (i, e) in self.payload_mut().iter_mut().enumerate() {
            e.write(f(i));
        }
        // SAFETY: every element was just written.
        unsafe { self.assume_init() }
    }

    /// Copies `src` in (its length must be the loaned length) and returns the request.
    pub fn write_from_slice(self, src: &[T]) -> RequestMut<[T], Resp> {
        assert_eq!(
            self.len,
            src.len(),
            "write_from_slice: the loan holds {} elements",
            self.len
        );
        self.write_from_fn(|i| src[i])
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Drop for RequestMutUninit<Req, Resp> {
    fn drop(&mut self) {
        if let Some(chunk) = self.chunk.take() {
            self.port.drop_loan(chunk);
        }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> RequestMut<Req, Resp> {
    /// Sends the request to one server (round robin over the connected ones) and
    /// returns the pending response that receives its stream.
    #[inline]
    pub fn send(mut self) -> Result<PendingResponse<Req, Resp>, RequestSendError> {
        let chunk = self.inner.chunk.take().expect("a loan is sent at most once");
        let port = Rc::clone(&self.inner.port);
        let (server, server_generation, seq) = port.send(chunk, self.inner.len)?;
        Ok(PendingResponse::new(port, server, server_generation, seq))
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Deref for RequestMut<Req, Resp> {
    type Target = Req;
    fn deref(&self) -> &Req {
        // SAFETY: initialised (assume_init's contract), loaned to us alone, in range.
        unsafe { &*Req::payload_ptr(self.inner.addr(), self.inner.len) }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> DerefMut for RequestMut<Req, Resp> {
    fn deref_mut(&mut self) -> &mut Req {
        // SAFETY: as for deref; the chunk is loaned to this client alone.
        unsafe { &mut *Req::payload_ptr(self.inner.addr(), self.inner.len) }
    }
}
