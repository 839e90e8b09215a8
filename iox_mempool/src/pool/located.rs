//! Chunks located once in this process.
//!
//! A pool works out, when it is mapped, where each class's ownership words and chunks
//! lie in this process (a [`ClassSpan`] per class), so that looking a handle up is one
//! bounds check against its class's count and two multiplications, with no second
//! check of the payload's length. A [`Located`] chunk carries the result: its handle,
//! its ownership word's address and its payload's address. A port that holds a chunk
//! for a while (a publisher's loan and spare, a subscriber's sample) keeps it located
//! and never looks it up again: sending a loan stores its length and hands it off, and
//! dropping a sample releases it, straight through the word's address.
//!
//! Invariants: a span's two addresses point into the pool's two mappings, and its
//! `count` ownership words and `count x chunk_size` payload bytes lie inside them
//! (the table offsets come from the layout the files were checked against when the
//! pool was created or opened); a mapping never moves (a change of protection is an
//! `mprotect` in place). A `Located` is only made by a pool, from an index below its
//! class's count, so its addresses lie in that pool's mappings for as long as the pool
//! lives. It does not borrow the pool (a sample outlives any borrow); so using its
//! ownership word is `unsafe`, with the one contract that the pool it was located in
//! is still mapped (its holder keeps an `Arc<Pool>` beside it).

use std::ptr::NonNull;

use super::{ChunkError, ChunkHandle};
use crate::owners::{ChunkMeta, Owner};

/// Where one class's ownership words and chunks are in this process (see the module
/// docs).
#[derive(Debug, Clone, Copy)]
pub(super) struct ClassSpan {
    pub(super) metas: NonNull<ChunkMeta>,
    pub(super) payload: NonNull<u8>,
    pub(super) count: u32,
    pub(super) chunk_size: usize,
}

impl ClassSpan {
    /// Chunk `index` of this class, located, if it is in range.
    #[inline]
    pub(super) fn locate(&self, class: u8, index: u32) -> Option<Located> {
        if index >= self.count {
            return None;
        }
        // SAFETY: index < count, so both addresses lie inside the class's table and
        // its part of the payload (the span's invariant, see the module docs).
        let (meta, addr) = unsafe {
            (
                self.metas.add(index as usize),
                self.payload.add(index as usize * self.chunk_size),
            )
        };
        Some(Located::new(ChunkHandle { class, index }, meta, addr))
    }
}

/// A chunk whose handle its pool checked, with the addresses of its ownership word and
/// its payload in this process (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    meta: NonNull<ChunkMeta>,
    addr: NonNull<u8>,
    /// The handle as [`ChunkHandle::to_raw`], widened: a whole word, so that moving a
    /// `Located` copies three words and no padding, and a queue entry is made from it
    /// with one `or`.
    raw: u64,
}

// SAFETY: the addresses are into mappings shared by every thread of the process, and
// all that is done through them is atomic operations on the ownership and user words
// (the payload address is only handed out); nothing is tied to the thread that
// located the chunk.
unsafe impl Send for Located {}
// SAFETY: as above; `&Located` gives only values and atomic operations.
unsafe impl Sync for Located {}

impl Located {
    /// From the parts of a chunk looked up in its pool.
    #[inline]
    pub(super) fn new(handle: ChunkHandle, meta: NonNull<ChunkMeta>, addr: NonNull<u8>) -> Self {
        Self {
            meta,
            addr,
            raw: u64::from(handle.to_raw()),
        }
    }

    /// Its payload's address, not null.
    #[inline]
    pub(super) fn addr_non_null(&self) -> NonNull<u8> {
        self.addr
    }

    /// Its handle.
    #[inline]
    pub fn handle(&self) -> ChunkHandle {
        ChunkHandle::from_raw_unchecked(self.raw as u32)
    }

    /// Its handle as [`ChunkHandle::to_raw`] (what a queue entry holds).
    #[inline]
    pub fn raw(&self) -> u32 {
        self.raw as u32
    }

    /// Its payload's address in this process.
    #[inline]
    pub fn addr(&self) -> *mut u8 {
        self.addr.as_ptr()
    }

    /// Its bookkeeping, borrowed for as long as the caller says.
    ///
    /// # Safety
    /// The pool this chunk was located in stays mapped for `'a` (see the module docs).
    #[inline]
    pub(super) unsafe fn meta_ref<'a>(&self) -> &'a ChunkMeta {
        // SAFETY: the address lies in the pool's bookkeeping mapping (the module's
        // invariant), which the caller says stays mapped for 'a; ChunkMeta is atomics
        // only, so shared references to it are fine.
        unsafe { self.meta.as_ref() }
    }

    /// # Safety
    /// The pool this chunk was located in is still mapped (see the module docs).
    #[inline]
    unsafe fn meta(&self) -> &ChunkMeta {
        // SAFETY: the caller's contract, for the borrow of `self`.
        unsafe { self.meta_ref() }
    }

    /// Stores the user word, as [`crate::Bookkeeping::set_user_word`].
    ///
    /// # Safety
    /// The pool this chunk was located in is still mapped.
    #[inline]
    pub unsafe fn set_user_word(&self, value: u64) {
        // SAFETY: the caller's contract.
        unsafe { self.meta() }.set_user_word(value);
    }

    /// The user word, as [`crate::Bookkeeping::user_word`].
    ///
    /// # Safety
    /// The pool this chunk was located in is still mapped.
    #[inline]
    pub unsafe fn user_word(&self) -> u64 {
        // SAFETY: the caller's contract.
        unsafe { self.meta() }.user_word()
    }

    /// Moves one queue entry's hold to `owner`, as [`crate::Bookkeeping::take_queued`].
    ///
    /// # Safety
    /// The pool this chunk was located in is still mapped.
    #[inline]
    pub unsafe fn take_queued(&self, owner: Owner) -> Result<(), ChunkError> {
        // SAFETY: the caller's contract.
        unsafe { self.meta() }.take_queued(self.handle(), owner)
    }

    /// Hands the chunk from `owner` to `queued` queues, as [`crate::Bookkeeping::hand_off`].
    ///
    /// # Safety
    /// The pool this chunk was located in is still mapped.
    #[inline]
    pub unsafe fn hand_off(&self, owner: Owner, queued: u32) -> Result<bool, ChunkError> {
        // SAFETY: the caller's contract.
        unsafe { self.meta() }.hand_off(self.handle(), owner, queued)
    }

    /// Clears `owner`'s bit, as [`crate::Bookkeeping::release`].
    ///
    /// # Safety
    /// The pool this chunk was located in is still mapped.
    #[inline]
    pub unsafe fn release(&self, owner: Owner) -> Result<bool, ChunkError> {
        // SAFETY: the caller's contract.
        unsafe { self.meta() }.release(self.handle(), owner)
    }
}
