//! [`ChunkRef`]: a chunk looked up once, so that a port doing several things with one
//! chunk (a send: store its length, hand it off; a receive: take the entry, read the
//! length, find the address) bounds-checks its handle once instead of at each step.

use super::handle::RAW_CLASS_SHIFT;
use super::{Bookkeeping, ChunkError, ChunkHandle, Pool};
use crate::owners::{ChunkMeta, Owner};
use std::sync::atomic::Ordering;

/// A chunk of one pool, its handle checked against that pool: its ownership word and
/// user word, and where it lies in the payload. Borrowed from the pool it was looked
/// up in; every operation is the same single atomic step as the pool's method of the
/// same name.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRef<'a> {
    handle: ChunkHandle,
    meta: &'a ChunkMeta,
    /// Offset of the chunk in the payload, and its size.
    offset: usize,
    size: usize,
}

impl std::fmt::Debug for ChunkMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkMeta")
            .field("owners", &self.owners.load())
            .finish_non_exhaustive()
    }
}

impl Bookkeeping {
    /// Looks `handle` up once (see [`ChunkRef`]).
    #[inline]
    pub fn chunk_ref(&self, handle: ChunkHandle) -> Result<ChunkRef<'_>, ChunkError> {
        let invalid = ChunkError::InvalidHandle {
            class: handle.class(),
            index: handle.index,
        };
        let (Some(meta), Some(t)) = (
            self.meta_at(handle.class(), handle.index),
            self.tables.get(handle.class()),
        ) else {
            return Err(invalid);
        };
        Ok(ChunkRef {
            handle,
            meta,
            offset: t.payload + handle.index as usize * t.chunk_size,
            size: t.chunk_size,
        })
    }

    /// Looks the chunk `raw` ([`ChunkHandle::to_raw`], e.g. from a queue entry) up
    /// once, if it names a chunk of this pool.
    #[inline]
    pub fn chunk_ref_from_raw(&self, raw: u32) -> Option<ChunkRef<'_>> {
        let handle = ChunkHandle {
            class: (raw >> RAW_CLASS_SHIFT) as u8,
            index: raw & ((1 << RAW_CLASS_SHIFT) - 1),
        };
        self.chunk_ref(handle).ok()
    }
}

impl ChunkRef<'_> {
    /// Its handle.
    #[inline]
    pub fn handle(&self) -> ChunkHandle {
        self.handle
    }

    /// Its size in bytes.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// As [`Bookkeeping::take_queued`].
    #[inline]
    pub fn take_queued(&self, owner: Owner) -> Result<(), ChunkError> {
        self.meta
            .owners
            .take_queued(owner)
            .map_err(|e| Bookkeeping::word_error(self.handle, owner, e))
    }

    /// As [`Bookkeeping::hand_off`].
    #[inline]
    pub fn hand_off(&self, owner: Owner, queued: u32) -> Result<bool, ChunkError> {
        self.meta
            .owners
            .hand_off(owner, queued)
            .map_err(|e| Bookkeeping::word_error(self.handle, owner, e))
    }

    /// As [`Bookkeeping::release`].
    #[inline]
    pub fn release(&self, owner: Owner) -> Result<bool, ChunkError> {
        self.meta
            .owners
            .release(owner)
            .map_err(|e| Bookkeeping::word_error(self.handle, owner, e))
    }

    /// As [`Bookkeeping::user_word`].
    #[inline]
    pub fn user_word(&self) -> u64 {
        self.meta.user.load(Ordering::Relaxed)
    }

    /// As [`Bookkeeping::set_user_word`].
    #[inline]
    pub fn set_user_word(&self, value: u64) {
        self.meta.user.store(value, Ordering::Relaxed);
    }
}

impl Pool {
    /// The address of a chunk looked up in this pool, in this process (`None` for
    /// one of another pool that does not fit this payload).
    #[inline]
    pub fn address(&self, chunk: &ChunkRef<'_>) -> Option<*mut u8> {
        if chunk.offset + chunk.size > self.payload.len() {
            return None;
        }
        // SAFETY: offset + size lies inside the payload mapping (checked just above).
        Some(unsafe { self.payload.as_ptr().add(chunk.offset) })
    }
}
