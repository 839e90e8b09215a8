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
//!   ([`crate::Bookkeeping::take_queued`]).
//!
//! There is no ABA: a word is only claimed from 0 and no pointer or index is stored.
//! Ordering: releases are Release and the claiming CAS is Acquire, so everything a
//! previous owner did to the chunk happens-before the next owner's use (every change
//! of the word is an RMW, so all releases are in the release sequence the loaner
//! reads).

use std::sync::atomic::{AtomicU32, AtomicU64};

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

/// Per-chunk bookkeeping: the ownership word and one word for the user of the pool
/// (e.g. the payload length), next to it so a reader touches one line.
#[repr(C)]
pub(crate) struct ChunkMeta {
    pub(crate) owners: AtomicU64,
    pub(crate) user: AtomicU64,
}

/// A per-class hint where the next free chunk may be, alone on its cache line.
#[repr(C, align(64))]
pub(crate) struct ClassCursor {
    pub(crate) next: AtomicU32,
}
