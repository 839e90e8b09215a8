//! Chunk ownership: who holds each chunk, in one atomic word per chunk.
//!
//! A chunk's word is `queued << 48 | owners`:
//! - `owners` (bits 0..48): one bit per [`Owner`] (0..47; bit 47 is a guard), set while
//!   that owner holds the chunk (a publisher's loan, a subscriber's received sample);
//! - `queued` (bits 48..64): how many queue entries name the chunk, a counter modulo
//!   2^16 that may dip "below zero" for a moment (a reader can take its entry before
//!   the writer has counted it; an owner bit is set throughout, so the word is never 0
//!   then).
//!
//! A chunk is free exactly when its word is 0. There is no free list: [`crate::Pool::loan`]
//! finds a zero word (starting from a per-class cursor) and claims it with one CAS
//! `0 -> owner bit`. Every change of ownership is therefore a single atomic operation on
//! a single word, which is what makes crash recovery exact:
//! - releasing is `fetch_and(!bit)`, idempotent: recovering a dead owner is clearing its
//!   bit in every word, however far it got;
//! - handing a chunk to queues is one RMW adding the entries and clearing the owner's
//!   bit at once ([`crate::Bookkeeping::hand_off`]);
//! - taking a queue entry is one RMW moving one count into the taker's bit
//!   ([`crate::Bookkeeping::take_queued`]);
//! - joining a chunk that a queue entry keeps (a publisher re-sending a chunk its own
//!   history queue holds) is one RMW setting the joiner's bit, only on a word that is
//!   not 0 ([`crate::Bookkeeping::hold_queued`]); the joiner then hands it off as any
//!   owner does.
//!
//! These operations live here, on `OwnerWord`, beside this description; the pool
//! only finds the word of a chunk and calls them. The atomics come through
//! `crate::sync`, so the model tests (`tests/loom.rs`) compile this very file against
//! loom's atomics and check the operations as written.
//!
//! There is no ABA: a word is only claimed from 0 and no pointer or index is stored.
//! Ordering: releases are Release and the claiming CAS is Acquire, so everything a
//! previous owner did to the chunk happens-before the next owner's use (every change
//! of the word is an RMW, so all releases are in the release sequence the loaner
//! reads).

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Where the queue count starts in a chunk word.
pub const QUEUE_SHIFT: u32 = 48;
/// Most owners a pool tells apart: bits 0..47. Bit 47 is never assigned: it is a
/// guard, so that the carry of a bad `take_queued` (a duplicate queue entry, i.e.
/// corrupt shared memory), added and undone in two steps, can never make a held
/// chunk's word read 0 (free) in between.
pub const MAX_OWNERS: u32 = 47;
/// One queue entry, as added to a chunk word.
pub const QUEUED_ONE: u64 = 1 << QUEUE_SHIFT;

/// One owner of chunks: a bit in each chunk's word. Owners are assigned by the user
/// of the pool (iox_service gives each port slot its own); two holders must never use
/// the same owner at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner(u8);

impl Owner {
    /// Owner number `n`, if `n < MAX_OWNERS`.
    pub const fn new(n: u32) -> Option<Self> {
        if n < MAX_OWNERS { Some(Self(n as u8)) } else { None }
    }

    /// Its number.
    pub fn number(self) -> u32 {
        u32::from(self.0)
    }

    /// Its bit in a chunk word.
    pub fn bit(self) -> u64 {
        1 << self.0
    }
}

/// Why an operation on an ownership word changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WordError {
    /// The owner's bit is not set: a double release, or a stale handle.
    NotHeld,
    /// The owner's bit is set already where a queue entry was to move into it: the
    /// entry is a duplicate (corrupt shared memory).
    AlreadyHeld,
    /// The chunk is free: there is nothing to join (a stale handle).
    Free,
}

/// One chunk's ownership word (`queued << 48 | owners`, see the module docs) and
/// every operation that reads or changes it. In shared memory it is a plain
/// `AtomicU64`, which this wraps without changing the layout.
#[repr(transparent)]
pub(crate) struct OwnerWord(AtomicU64);

impl OwnerWord {
    /// A word holding `value`. Pools never make one (their words live in the
    /// bookkeeping file, zero when created); the model tests do.
    #[allow(dead_code)]
    pub(crate) fn new(value: u64) -> Self {
        Self(AtomicU64::new(value))
    }

    /// The word now (a snapshot, no ordering).
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Whether the chunk is free (the word is 0) right now.
    #[inline]
    pub(crate) fn is_free(&self) -> bool {
        self.load() == 0
    }

    /// Whether `owner`'s bit is set right now.
    #[inline]
    pub(crate) fn is_held_by(&self, owner: Owner) -> bool {
        self.load() & owner.bit() != 0
    }

    /// Loan: claims a free chunk for `owner` with one CAS `0 -> bit`. Acquire, so the
    /// new owner sees everything previous holders did before they let go (their
    /// Release RMWs are all in the release sequence the CAS reads from). False if the
    /// word was not 0 (held, queued, or claimed by a racing loan first).
    #[inline]
    pub(crate) fn try_loan(&self, owner: Owner) -> bool {
        // The plain load first keeps a scan over busy chunks from taking cache lines
        // exclusively.
        self.load() == 0
            && self
                .0
                .compare_exchange(0, owner.bit(), Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// [`Self::try_loan`] with no plain load first: one CAS, which takes the line
    /// exclusively in one step (a load and then a CAS of a line another core wrote
    /// last are two transfers, a shared copy and then its upgrade). For a word in a
    /// line the caller is about to write anyway (the spare next to the chunk being
    /// sent); a scan over busy chunks uses `try_loan`.
    #[inline]
    pub(crate) fn try_loan_exclusive(&self, owner: Owner) -> bool {
        self.0
            .compare_exchange(0, owner.bit(), Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Release: clears `owner`'s bit (`fetch_and`, Release: the owner's use of the
    /// chunk happens-before the next loan). Idempotent in effect: a second release
    /// changes nothing and is [`WordError::NotHeld`]. `Ok(true)` if the chunk became
    /// free now.
    #[inline]
    pub(crate) fn release(&self, owner: Owner) -> Result<bool, WordError> {
        let prev = self.0.fetch_and(!owner.bit(), Ordering::Release);
        if prev & owner.bit() == 0 {
            return Err(WordError::NotHeld);
        }
        Ok(prev == owner.bit())
    }

    /// Hand-off: adds `queued` queue entries and clears `owner`'s bit in one RMW
    /// (Release: what the owner wrote is visible to whoever takes an entry with
    /// [`Self::take_queued`], Acquire). `Ok(true)` if the chunk became free (no entries
    /// and no other owner).
    #[inline]
    pub(crate) fn hand_off(&self, owner: Owner, queued: u32) -> Result<bool, WordError> {
        let add = u64::from(queued).wrapping_mul(QUEUED_ONE);
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            if cur & owner.bit() == 0 {
                return Err(WordError::NotHeld);
            }
            let next = cur.wrapping_add(add) - owner.bit();
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return Ok(next == 0),
                Err(now) => cur = now,
            }
        }
    }

    /// Take: moves one queue entry's hold into `owner`'s bit in one RMW (Acquire: the
    /// taker sees what the hander-off wrote). The owner's bit must be clear (a port
    /// never holds a chunk still queued for it); if it was set, the add carried into
    /// the next bit up (at worst the never-assigned guard bit 47, so the word never
    /// reads 0 in between): it is undone and reported as [`WordError::AlreadyHeld`].
    #[inline]
    pub(crate) fn take_queued(&self, owner: Owner) -> Result<(), WordError> {
        let delta = owner.bit().wrapping_sub(QUEUED_ONE);
        let prev = self.0.fetch_add(delta, Ordering::Acquire);
        if prev & owner.bit() != 0 {
            self.0.fetch_sub(delta, Ordering::Relaxed);
            return Err(WordError::AlreadyHeld);
        }
        Ok(())
    }

    /// Join: sets `owner`'s bit on a chunk someone else keeps held meanwhile (the
    /// caller's own queue entry, which it does not take: a publisher re-sending a
    /// sample of its history), so that the owner can hand it off to more entries with
    /// [`Self::hand_off`]. The bit must be clear ([`WordError::AlreadyHeld`]) and the
    /// word not 0 ([`WordError::Free`]: joining a free chunk would be a loan that
    /// bypasses the loan's CAS); nothing is written then. Acquire, as a loan: the
    /// joiner's later hand-off (Release) then carries what earlier holders wrote.
    /// Recovery needs nothing new: the bit is cleared with the owner's others.
    #[inline]
    pub(crate) fn hold_queued(&self, owner: Owner) -> Result<(), WordError> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            if cur & owner.bit() != 0 {
                return Err(WordError::AlreadyHeld);
            }
            if cur == 0 {
                return Err(WordError::Free);
            }
            match self
                .0
                .compare_exchange_weak(cur, cur | owner.bit(), Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// Recovery of a dead owner: clears its bit if set, as [`Self::release`] does.
    /// `Some(freed)` if it held the chunk, `None` if not (nothing written then).
    #[inline]
    pub(crate) fn release_if_held(&self, owner: Owner) -> Option<bool> {
        if !self.is_held_by(owner) {
            return None;
        }
        self.release(owner).ok()
    }
}

/// Per-chunk bookkeeping: the ownership word and one word for the user of the pool
/// (e.g. the payload length), next to it so a reader touches one line.
#[repr(C)]
pub(crate) struct ChunkMeta {
    pub(crate) owners: OwnerWord,
    pub(crate) user: AtomicU64,
}

/// A per-class hint where the next free chunk may be, alone on its cache line.
#[repr(C, align(64))]
pub(crate) struct ClassCursor {
    pub(crate) next: AtomicU32,
}
