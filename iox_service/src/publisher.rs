//! Publishers: loan a chunk, write it in place, send its handle to every subscriber.
//!
//! Hot path (`loan` + `send`), with no lock, no syscall unless a subscriber sleeps, no
//! allocation and no zero-fill:
//! - loan: pop a chunk from the pool's free list; record it in this publisher's loan
//!   table (its own cache lines in the dynamic segment, for crash recovery).
//! - send: count the active subscribers `n`; add `n - 1` references in one atomic add
//!   (the publisher's own reference goes to one of them, so a single subscriber costs
//!   no reference-count traffic); push the handle into each subscriber's queue from
//!   this publisher; one SeqCst fence; then per subscriber: if it closed meanwhile,
//!   drain what we pushed (so nothing leaks), and if it is blocked in
//!   `receive_timeout`, bump its futex word and wake it.
//! - A sample dropped without being sent returns its chunk to the pool.
//! - After `send`, the publisher loans the next chunk of the same class ahead (its
//!   "spare", recorded in the loan table like any loan), so the next `loan` of that
//!   class is local: the free-list CAS happens while the message is in flight. The
//!   pool is sized with one spare per publisher.
//!
//! A `Publisher` is `Send` but not `Sync` (it keeps a class hint and a loan count in
//! `Cell`s); samples borrow it.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{Ordering, fence};

use iox_mempool::{ChunkHandle, PoolInfo, PoolPin};
use thiserror::Error;

use crate::dynamic::{self, PortHeader};
use crate::port::{self, PortCreateError, Shared};
use crate::queue::Pushed;
use crate::sample::SampleMutUninit;
use crate::{Overflow, Payload, ZeroCopySafe};

/// Builds a [`Publisher`].
#[derive(Debug)]
pub struct PublisherBuilder<P: ?Sized> {
    service: Shared,
    pin: bool,
    _payload: PhantomData<fn() -> Box<P>>,
}

/// Why a loan failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoanError {
    /// This publisher holds its maximum of unsent samples.
    #[error("this publisher already holds its maximum of {max} loaned samples; send or drop one first")]
    TooManyLoans {
        /// The service's `max_loans`.
        max: usize,
    },
    /// The slice is longer than the largest chunk holds.
    #[error("a slice of {len} elements does not fit; the largest chunk holds {max}")]
    SliceTooLong {
        /// Elements requested.
        len: usize,
        /// Most elements a chunk holds.
        max: usize,
    },
    /// The pool refused (exhausted, or corrupt).
    #[error(transparent)]
    Pool(#[from] iox_mempool::LoanError),
}

/// Why a send did not reach every subscriber.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// With `Overflow::Reject`: some subscribers' buffers were full.
    #[error("{rejected} subscriber(s) had a full buffer and did not get the sample ({delivered} did)")]
    QueueFull {
        /// Subscribers that got it.
        delivered: usize,
        /// Subscribers that did not.
        rejected: usize,
    },
}

impl<P: ?Sized + Payload> PublisherBuilder<P> {
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
    pub fn create(self) -> Result<Publisher<P>, PortCreateError> {
        let d = self.service.dynamic();
        let (max, max_subscribers) = (d.layout().max_publishers, d.layout().max_subscribers);
        let (slot, generation) = port::claim(
            &self.service,
            (0..max).map(|p| d.publisher(p).0),
            "publisher",
            max,
        )?;
        let pin = match port::pin(&self.service, self.pin) {
            Ok(p) => p,
            Err(e) => {
                port::free(d.publisher(slot).0, generation);
                return Err(e);
            }
        };
        port::activate(d.publisher(slot).0, generation);
        let read_cache = (0..max_subscribers).map(|_| Cell::new(0)).collect();
        Ok(Publisher {
            service: self.service,
            slot,
            generation,
            hint: Cell::new(0),
            loans: Cell::new(0),
            spare: Cell::new(None),
            read_cache,
            pin,
            _payload: PhantomData,
        })
    }
}

/// Sends samples of `P` to every subscriber of the service.
#[derive(Debug)]
pub struct Publisher<P: ?Sized> {
    // Field order: the pin guard drops before the service (and its mapping).
    pin: Option<PoolPin>,
    service: Shared,
    slot: usize,
    generation: u64,
    hint: Cell<usize>,
    loans: Cell<usize>,
    /// A chunk loaned ahead after the last send (recorded in the loan table).
    spare: Cell<Option<ChunkHandle>>,
    /// Per subscriber slot: our lower bound of that queue's read index.
    read_cache: Box<[Cell<u64>]>,
    _payload: PhantomData<fn() -> Box<P>>,
}

impl<P: ?Sized + Payload> Publisher<P> {
    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.service.pool.info()
    }

    /// Whether this publisher pinned the pool.
    pub fn is_pinned(&self) -> bool {
        self.pin.as_ref().is_some_and(PoolPin::is_pinned)
    }

    fn header(&self) -> (&PortHeader, &[std::sync::atomic::AtomicU64]) {
        self.service.dynamic().publisher(self.slot)
    }

    /// Loans a chunk of at least `bytes` bytes and records it in the loan table.
    pub(crate) fn loan_bytes(&self, bytes: usize) -> Result<(ChunkHandle, *mut u8), LoanError> {
        let max = self.service.config.max_loans as usize;
        if self.loans.get() >= max {
            return Err(LoanError::TooManyLoans { max });
        }
        let handle = match self.spare.take() {
            // The spare loaned ahead after the last send fits: no shared line touched.
            Some(h) if self.service.pool.layout().class_for(bytes, h.class()) == Some(h.class()) => h,
            spare => {
                if let Some(h) = spare {
                    self.drop_loan_entry(h);
                }
                self.loan_recorded(bytes)?
            }
        };
        self.loans.set(self.loans.get() + 1);
        let (ptr, _) = self
            .service
            .pool
            .chunk(handle)
            .expect("a handle just loaned is in range");
        Ok((handle, ptr))
    }

    /// Loans a chunk from the pool and records it in the loan table.
    fn loan_recorded(&self, bytes: usize) -> Result<ChunkHandle, LoanError> {
        let mut hint = self.hint.get();
        let handle = self.service.pool.loan(bytes, &mut hint)?;
        self.hint.set(hint);
        let table = self.header().1;
        if let Some(entry) = table.iter().find(|e| e.load(Ordering::Relaxed) == 0) {
            entry.store(handle.to_raw() + 1, Ordering::Relaxed);
        }
        Ok(handle)
    }

    /// Removes a chunk from the loan table (its reference now lives elsewhere).
    fn clear_loan_entry(&self, handle: ChunkHandle) {
        let raw = handle.to_raw() + 1;
        if let Some(entry) = self.header().1.iter().find(|e| e.load(Ordering::Relaxed) == raw) {
            entry.store(0, Ordering::Relaxed);
        }
    }

    /// Removes a chunk from the loan table and returns it to the pool.
    fn drop_loan_entry(&self, handle: ChunkHandle) {
        self.clear_loan_entry(handle);
        let _ = self.service.pool.release(handle);
    }

    fn forget_loan(&self, handle: ChunkHandle) {
        self.clear_loan_entry(handle);
        self.loans.set(self.loans.get() - 1);
    }

    /// Returns an unsent loan to the pool.
    pub(crate) fn drop_loan(&self, handle: ChunkHandle) {
        self.forget_loan(handle);
        let _ = self.service.pool.release(handle);
    }

    /// After a send, off the latency path: loans the next chunk of the class just used,
    /// so the next `loan` takes it without touching a shared cache line. Best effort:
    /// an exhausted pool just leaves no spare.
    pub(crate) fn refill_spare(&self, class_of: ChunkHandle) {
        if self.spare.get().is_none() {
            let bytes = self.service.pool.layout().classes()[class_of.class()].chunk_size;
            self.spare.set(self.loan_recorded(bytes).ok());
        }
    }

    /// Delivers a written chunk of `len` elements to every subscriber.
    pub(crate) fn send_chunk(&self, handle: ChunkHandle, len: usize) -> Result<usize, SendError> {
        let pool = &self.service.pool;
        let d = self.service.dynamic();
        let subs = d.layout().max_subscribers;
        let drop_oldest = self.service.config.overflow == Overflow::DropOldest;
        let _ = pool.set_user_word(handle, len as u64);
        let is_active = |w: u64| dynamic::split_state(w).1 == dynamic::ACTIVE;

        let n = (0..subs)
            .filter(|&s| is_active(d.subscriber(s).0.state.load(Ordering::Acquire)))
            .count();
        // One reference per delivery; ours is the n-th.
        let _ = pool.retain_n(handle, n.saturating_sub(1) as u32);
        let mut refs_left = n.max(1);
        let (mut delivered, mut rejected) = (0, 0);
        let raw = handle.to_raw();
        for s in 0..subs {
            if refs_left == 0 {
                break; // a subscriber that connected after we counted: next sample
            }
            let header = d.subscriber(s).0;
            if !is_active(header.state.load(Ordering::Acquire)) {
                continue;
            }
            let mut cached = self.read_cache[s].get();
            let pushed = d.queue(self.slot, s).push(raw, drop_oldest, &mut cached);
            self.read_cache[s].set(cached);
            match pushed {
                Pushed::Stored => {}
                Pushed::DroppedOldest(old) => self.release_raw(old),
                Pushed::Full => {
                    rejected += 1;
                    continue;
                }
            }
            refs_left -= 1;
            delivered += 1;
        }
        // Subscribers that closed or rejected: their references are ours to drop.
        for _ in 0..refs_left {
            let _ = pool.release(handle);
        }
        self.forget_loan(handle);
        if delivered > 0 {
            // Pairs with the SeqCst RMW a subscriber does before it sleeps, and with the
            // SeqCst store a subscriber does when it closes.
            fence(Ordering::SeqCst);
            for s in 0..subs {
                let header = d.subscriber(s).0;
                if !is_active(header.state.load(Ordering::Relaxed)) {
                    // It may have closed after our push and drained before it: drain
                    // what is left so no chunk is stranded.
                    let q = d.queue(self.slot, s);
                    while let Some(old) = q.pop() {
                        self.release_raw(old);
                    }
                } else if header.waiting.load(Ordering::Relaxed) > 0 {
                    header.wake.fetch_add(1, Ordering::Release);
                    let _ = rustix::thread::futex::wake(
                        &header.wake,
                        rustix::thread::futex::Flags::empty(),
                        i32::MAX as u32,
                    );
                }
            }
        }
        if rejected > 0 {
            return Err(SendError::QueueFull { delivered, rejected });
        }
        Ok(delivered)
    }

    fn release_raw(&self, raw: u64) {
        if let Some(h) = self.service.pool.handle_from_raw(raw) {
            let _ = self.service.pool.release(h);
        }
    }
}

impl<T: ZeroCopySafe> Publisher<T> {
    /// Loans uninitialised memory for one `T` (never zero-filled).
    pub fn loan_uninit(&self) -> Result<SampleMutUninit<'_, T>, LoanError> {
        let (handle, ptr) = self.loan_bytes(size_of::<T>())?;
        Ok(SampleMutUninit::new(self, handle, ptr, 1))
    }
}

impl<T: ZeroCopySafe> Publisher<[T]> {
    /// Most elements one sample can hold.
    pub fn max_slice_len(&self) -> usize {
        self.service.pool.layout().max_chunk_size() / size_of::<T>().max(1)
    }

    /// Loans uninitialised memory for `len` elements (never zero-filled), from the
    /// smallest size class that holds them.
    pub fn loan_slice_uninit(&self, len: usize) -> Result<SampleMutUninit<'_, [T]>, LoanError> {
        let max = self.max_slice_len();
        if len > max && size_of::<T>() > 0 {
            return Err(LoanError::SliceTooLong { len, max });
        }
        let (handle, ptr) = self.loan_bytes(len * size_of::<T>())?;
        Ok(SampleMutUninit::new(self, handle, ptr, len))
    }
}

impl<P: ?Sized> Drop for Publisher<P> {
    fn drop(&mut self) {
        // Loans borrow the publisher, so none is outstanding here. Queued samples stay
        // for the subscribers to read.
        let (header, table) = self.service.dynamic().publisher(self.slot);
        if let Some(h) = self.spare.take() {
            // The only loan left: clear the table, then return the chunk.
            table.iter().for_each(|e| e.store(0, Ordering::Relaxed));
            let _ = self.service.pool.release(h);
        }
        port::close(header, self.generation);
        port::free(header, self.generation);
    }
}
