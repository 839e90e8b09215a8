//! The bounded queue of chunk handles between one publisher and one subscriber.
//!
//! Single producer (the publisher owning the pair), single consumer (the subscriber),
//! plus one twist: when the queue is full under [`crate::Overflow::DropOldest`], the
//! producer removes the oldest entry itself, and a port tearing down drains queues it
//! does not consume. So entries leave through a *claim* on the read word, which is
//! `read_index << 2 | claim`:
//! 1. the taker CASes the read word from `r << 2 | IDLE` to `r << 2 | BY_CONSUMER`
//!    (or `BY_PRODUCER`), which gives it entry `r` exclusively;
//! 2. it moves the entry's hold on the chunk into its own owner bit (one atomic step
//!    in the pool, [`iox_mempool::Bookkeeping::take_queued`]);
//! 3. it stores `(r + 1) << 2 | IDLE`.
//!
//! A taker that dies between 1 and 3 leaves the claim in place, and recovery can tell
//! exactly how far it got: the chunk word carries the taker's bit after step 2 and not
//! before (a port never holds a chunk that is still queued for it). That is why this
//! is a claim and not a single CAS of the index: a CAS alone would not say who took the
//! entry when both the producer and the consumer could have.
//!
//! Why the producer may write slot `w % cap`: only after seeing the read index above
//! `w - cap`, i.e. after entry `w - cap` was taken (claims finish with the index
//! moving on). Indices are 62-bit and never wrap in practice.
//!
//! Entries are `seq << 32 | chunk`: the publisher's send sequence number (so recovery
//! can recognise the entry of an interrupted send) and the chunk as iox_mempool
//! encodes it ([`ChunkHandle::to_raw`], `class << 24 | index`).
//!
//! Memory: the read word sits alone on a cache line; the write index shares the
//! slots' first line, so a push moves one line to the consumer. The producer caches
//! the read index and reloads it only when the queue looks full.

use iox_mempool::ChunkHandle;

// Through the shim (`shm/mod.rs`), so the loom model (`tests/loom_queue.rs`) can
// compile this file against loom's atomics.
use crate::sync::{AtomicU64, Ordering, spin_loop};

/// An index alone on its cache line.
#[repr(C, align(64))]
pub struct PaddedIndex {
    pub value: AtomicU64,
}

/// No one is taking an entry.
pub const IDLE: u64 = 0;
/// The consumer (or someone acting for it: a drain, recovery) is taking entry `r`.
pub const BY_CONSUMER: u64 = 1;
/// The producer (dropping the oldest, or draining) is taking entry `r`.
pub const BY_PRODUCER: u64 = 2;

/// How often a taker looks again at a claim someone else holds before giving up for
/// now (a live claimer finishes within a few instructions; a dead one never does).
const CLAIM_SPINS: u32 = 64;

/// The queue entry for `handle` sent with sequence number `seq`:
/// `seq << 32 | handle.to_raw()`.
pub fn entry(seq: u32, handle: ChunkHandle) -> u64 {
    entry_of_raw(seq, handle.to_raw())
}

/// [`entry`] of a chunk given as [`ChunkHandle::to_raw`].
#[inline]
pub fn entry_of_raw(seq: u32, raw: u32) -> u64 {
    (u64::from(seq) << 32) | u64::from(raw)
}

/// The chunk of an entry, as [`ChunkHandle::to_raw`] encodes it (turned back into a
/// handle, bounds-checked, by `Bookkeeping::handle_from_raw`).
pub fn entry_chunk(entry: u64) -> u32 {
    entry as u32
}

fn split(word: u64) -> (u64, u64) {
    (word >> 2, word & 3)
}

/// A view of one queue in the dynamic segment.
pub struct Queue<'a> {
    pub write: &'a AtomicU64,
    pub read: &'a AtomicU64,
    pub slots: &'a [AtomicU64],
    /// [`index_mask`] of `slots.len()`: kept with the view so a push or pop does not
    /// test the capacity each time.
    mask: u64,
}

/// What [`index_mask`] gives for a capacity that is not a power of two.
const NOT_A_POWER_OF_TWO: u64 = u64::MAX;

/// The mask that turns an index into a slot for a queue of `cap` slots (`cap - 1`),
/// or `NOT_A_POWER_OF_TWO` (`u64::MAX`) (then the slot is the remainder).
pub const fn index_mask(cap: usize) -> u64 {
    if cap.is_power_of_two() {
        cap as u64 - 1
    } else {
        NOT_A_POWER_OF_TWO
    }
}

/// Result of a push.
pub enum Pushed {
    /// Stored; nothing dropped.
    Stored,
    /// Stored after dropping the oldest entry (`take` moved its hold to the producer).
    DroppedOldest,
    /// Not stored: the queue is full and the policy is to reject (or the indices are
    /// corrupt).
    Full,
    /// Not stored: the queue is full and the consumer is taking the oldest entry right
    /// now (or died doing so).
    Busy,
}

/// Result of a pop.
pub enum Popped {
    /// Nothing queued.
    Empty,
    /// Someone else holds a claim on the oldest entry; try again later.
    Busy,
    /// Took this entry; its hold now belongs to the taker.
    Took(u64),
}

impl<'a> Queue<'a> {
    /// The queue of these words.
    pub fn new(write: &'a AtomicU64, read: &'a AtomicU64, slots: &'a [AtomicU64]) -> Self {
        Self::with_mask(write, read, slots, index_mask(slots.len()))
    }

    /// [`Queue::new`] with the mask computed ahead (`index_mask(slots.len())`, e.g. once
    /// per layout).
    #[inline]
    pub fn with_mask(write: &'a AtomicU64, read: &'a AtomicU64, slots: &'a [AtomicU64], mask: u64) -> Self {
        debug_assert_eq!(mask, index_mask(slots.len()));
        Self {
            write,
            read,
            slots,
            mask,
        }
    }

    fn cap(&self) -> u64 {
        self.slots.len() as u64
    }

    #[inline]
    fn slot(&self, index: u64) -> &AtomicU64 {
        // A mask for the usual power-of-two buffers: no division on the hot path.
        let i = if self.mask != NOT_A_POWER_OF_TWO {
            index & self.mask
        } else {
            index % self.cap()
        };
        &self.slots[i as usize]
    }

    /// Producer only: appends `value`, dropping the oldest entry if full and
    /// `drop_oldest` (`take` moves the dropped entry's hold to the producer), else
    /// refusing. `read_cache` is the producer's own lower bound of the read index.
    #[inline]
    pub fn push(
        &self,
        value: u64,
        drop_oldest: bool,
        read_cache: &mut u64,
        take: impl FnOnce(u64),
    ) -> Pushed {
        let w = self.write.load(Ordering::Relaxed);
        let mut dropped = false;
        let mut r = *read_cache;
        let mut take = Some(take);
        let mut spins = 0;
        loop {
            if w.wrapping_sub(r) < self.cap() {
                break;
            }
            let word = self.read.load(Ordering::Acquire);
            let (fresh, claim) = split(word);
            if fresh != r {
                r = fresh;
                *read_cache = r;
                continue;
            }
            if w.wrapping_sub(r) > self.cap() || !drop_oldest {
                // More than `cap` entries means corrupt indices; else the policy rejects.
                return Pushed::Full;
            }
            if claim != IDLE {
                spins += 1;
                if spins > CLAIM_SPINS {
                    return Pushed::Busy;
                }
                spin_loop();
                continue;
            }
            if self
                .read
                .compare_exchange(word, (r << 2) | BY_PRODUCER, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let old = self.slot(r).load(Ordering::Relaxed);
                if let Some(take) = take.take() {
                    take(old);
                }
                r = r.wrapping_add(1);
                self.read.store(r << 2, Ordering::Release);
                *read_cache = r;
                dropped = true;
                break;
            }
        }
        self.slot(w).store(value, Ordering::Relaxed);
        self.write.store(w.wrapping_add(1), Ordering::Release);
        if dropped {
            Pushed::DroppedOldest
        } else {
            Pushed::Stored
        }
    }

    /// Takes the oldest entry, claiming it as `claim_as` ([`BY_CONSUMER`] or
    /// [`BY_PRODUCER`]); `take` moves the entry's hold to the taker before the index
    /// moves on. Safe to call from any process.
    #[inline(always)]
    pub fn pop(&self, claim_as: u64, take: impl FnOnce(u64)) -> Popped {
        let mut spins = 0;
        loop {
            let word = self.read.load(Ordering::Acquire);
            let (r, claim) = split(word);
            if claim != IDLE {
                spins += 1;
                if spins > CLAIM_SPINS {
                    return Popped::Busy;
                }
                spin_loop();
                continue;
            }
            let w = self.write.load(Ordering::Acquire);
            if r == w {
                return Popped::Empty;
            }
            if w.wrapping_sub(r) > self.cap() {
                // The producer dropped the oldest between our two loads (read moved on):
                // look again. Otherwise the indices are corrupt: report empty.
                if self.read.load(Ordering::Acquire) != word {
                    continue;
                }
                return Popped::Empty;
            }
            if self
                .read
                .compare_exchange(word, (r << 2) | claim_as, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let value = self.slot(r).load(Ordering::Relaxed);
                take(value);
                self.read.store(r.wrapping_add(1) << 2, Ordering::Release);
                return Popped::Took(value);
            }
        }
    }

    /// The entries queued, oldest first, left in place: for a queue whose producer is
    /// also its only consumer (a publisher's history queue), so nothing moves while it
    /// reads them. None while a claim is held (only that producer claims, and not while
    /// it reads) or for corrupt indices.
    pub fn entries(&self) -> impl Iterator<Item = u64> + '_ {
        let (r, claim) = split(self.read.load(Ordering::Acquire));
        let w = self.write.load(Ordering::Relaxed);
        let n = match w.wrapping_sub(r) {
            n if n > self.cap() || claim != IDLE => 0,
            n => n,
        };
        (0..n).map(move |i| self.slot(r.wrapping_add(i)).load(Ordering::Relaxed))
    }

    /// Number of entries queued and not being taken right now (a snapshot; 0 for
    /// corrupt indices, as `pop` sees them).
    pub fn len(&self) -> u64 {
        let (r, claim) = split(self.read.load(Ordering::Acquire));
        let w = self.write.load(Ordering::Acquire);
        match w.wrapping_sub(r) {
            n if n > self.cap() => 0,
            n if claim != IDLE => n.saturating_sub(1),
            n => n,
        }
    }

    /// Whether [`Queue::len`] is 0 (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of entries queued, the one being taken right now included (a snapshot;
    /// 0 for corrupt indices): what a consumer that finds the queue claimed waits for.
    pub fn queued(&self) -> u64 {
        let (r, _) = split(self.read.load(Ordering::Acquire));
        let w = self.write.load(Ordering::Acquire);
        match w.wrapping_sub(r) {
            n if n > self.cap() => 0,
            n => n,
        }
    }

    /// Whether someone is taking an entry right now (a snapshot).
    pub fn is_claimed(&self) -> bool {
        split(self.read.load(Ordering::Acquire)).1 != IDLE
    }

    /// Recovery of a dead taker that claimed as `claimer`: if the claim is still
    /// there, finishes it (the index moves on) when `taken(entry)` says the entry's
    /// hold already moved to the taker, and undoes it otherwise. Returns the entry if
    /// a claim was resolved and whether it had been taken.
    pub fn resolve_claim(&self, claimer: u64, taken: impl FnOnce(u64) -> bool) -> Option<(u64, bool)> {
        let word = self.read.load(Ordering::Acquire);
        let (r, claim) = split(word);
        if claim != claimer {
            return None;
        }
        let value = self.slot(r).load(Ordering::Relaxed);
        let was_taken = taken(value);
        let next = if was_taken { r.wrapping_add(1) << 2 } else { r << 2 };
        self.read
            .compare_exchange(word, next, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| (value, was_taken))
    }

    /// The entry pushed last, if any (recovery of a dead producer: nobody else writes
    /// the slots, so it is still there).
    pub fn last_pushed(&self) -> Option<u64> {
        let w = self.write.load(Ordering::Acquire);
        (w != 0).then(|| self.slot(w.wrapping_sub(1)).load(Ordering::Relaxed))
    }
}
