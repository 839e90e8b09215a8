//! The lock-free free list of one size class, living in shared memory.
//!
//! A Treiber stack of chunk indices. The head is one 64-bit word holding
//! `(tag << 32) | index`; every successful push or pop increments the tag, so a head
//! that was popped and pushed back in between (ABA) no longer compares equal and the
//! stale CAS fails. The tag wraps after 2^32 operations: a thread would have to stall
//! between its load and its CAS while exactly 2^32 others complete for ABA to strike.
//! Links are indices into the class's chunk table, never pointers, so every process
//! can map the table at its own address.
//!
//! Ordering: push publishes the new link with a Release CAS; pop reads the head with
//! Acquire, so the link it then reads is the one written before the push that made
//! this head. Links are atomics themselves, so a stale read is never a data race; it
//! only leads to a failing CAS.
//!
//! Every index read from shared memory is bounds-checked: a corrupt list yields
//! [`Corrupted`], never an out-of-bounds access.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The "no chunk" link.
pub(crate) const NIL: u32 = u32::MAX;

/// Per-chunk bookkeeping: its free-list link, its reference count (0 = free) and one
/// word for the user of the pool (e.g. the payload length), next to the count a
/// reader touches anyway.
#[repr(C)]
pub(crate) struct ChunkMeta {
    pub(crate) next: AtomicU32,
    pub(crate) refs: AtomicU32,
    pub(crate) user: AtomicU64,
}

/// A free-list head alone on its cache line, so classes do not falsely share.
#[repr(C, align(64))]
pub(crate) struct FreeListHead {
    pub(crate) word: AtomicU64,
}

/// The free list read an index outside the class: the bookkeeping is corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Corrupted;

fn pack(tag: u64, index: u32) -> u64 {
    (tag << 32) | u64::from(index)
}

/// A view of one class's free list.
pub(crate) struct FreeList<'a> {
    pub(crate) head: &'a AtomicU64,
    pub(crate) chunks: &'a [ChunkMeta],
}

impl FreeList<'_> {
    /// Chains every chunk into the list, all reference counts 0. Creator only, before
    /// the pool is published.
    pub(crate) fn init(&self) {
        let n = self.chunks.len() as u32;
        for (i, c) in self.chunks.iter().enumerate() {
            let next = if i as u32 + 1 == n { NIL } else { i as u32 + 1 };
            c.next.store(next, Ordering::Relaxed);
            c.refs.store(0, Ordering::Relaxed);
            c.user.store(0, Ordering::Relaxed);
        }
        self.head.store(pack(0, 0), Ordering::Relaxed);
    }

    /// Takes a chunk index off the list, or `None` if the class is exhausted.
    #[inline]
    pub(crate) fn pop(&self) -> Result<Option<u32>, Corrupted> {
        let mut cur = self.head.load(Ordering::Acquire);
        loop {
            let index = cur as u32;
            if index == NIL {
                return Ok(None);
            }
            let next = self
                .chunks
                .get(index as usize)
                .ok_or(Corrupted)?
                .next
                .load(Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                cur,
                pack((cur >> 32) + 1, next),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(Some(index)),
                Err(now) => cur = now,
            }
        }
    }

    /// Puts chunk `index` (which must be in range and owned by the caller) back.
    #[inline]
    pub(crate) fn push(&self, index: u32) {
        let link = &self.chunks[index as usize].next;
        let mut cur = self.head.load(Ordering::Relaxed);
        loop {
            link.store(cur as u32, Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                cur,
                pack((cur >> 32) + 1, index),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }
}
