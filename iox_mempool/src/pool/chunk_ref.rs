//! [`ChunkRef`]: a chunk looked up once, so that a port doing several things with one
//! chunk (a receive: take the entry, read the length, find the address) bounds-checks
//! its handle once instead of at each step. The lookup goes through the class spans
//! the pool worked out when it was mapped (see [`super::located`]): one check of the
//! index against the class's count. Its operations, like [`Located`]'s and the
//! pool's by-handle ones, are each written once, on the chunk's bookkeeping. (A
//! `ChunkRef` made of a `Located` and its size measured 4 instructions more per
//! receive, so it keeps its own fields.)

use std::ptr::NonNull;

use super::located::Located;
use super::{ChunkError, ChunkHandle, Pool};
use crate::owners::{ChunkMeta, Owner};

/// A chunk of one pool, its handle checked against that pool: its ownership word and
/// user word, its address in this process and its size. Borrowed from the pool it was
/// looked up in; every operation is the same single atomic step as the pool's method
/// of the same name.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRef<'a> {
    handle: ChunkHandle,
    meta: &'a ChunkMeta,
    addr: NonNull<u8>,
    size: usize,
}

impl std::fmt::Debug for ChunkMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkMeta")
            .field("owners", &self.owners.load())
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// Looks `handle` up once (see [`ChunkRef`]).
    #[inline]
    pub fn chunk_ref(&self, handle: ChunkHandle) -> Result<ChunkRef<'_>, ChunkError> {
        let invalid = ChunkError::InvalidHandle {
            class: handle.class(),
            index: handle.index,
        };
        let span = self.spans.get(handle.class()).ok_or(invalid)?;
        let located = span.locate(handle.class, handle.index).ok_or(invalid)?;
        Ok(ChunkRef {
            handle,
            // SAFETY: located by this pool, which the returned borrow keeps mapped.
            meta: unsafe { located.meta_ref() },
            addr: located.addr_non_null(),
            size: span.chunk_size,
        })
    }

    /// Looks the chunk `raw` ([`ChunkHandle::to_raw`], e.g. from a queue entry) up
    /// once, if it names a chunk of this pool.
    #[inline]
    pub fn chunk_ref_from_raw(&self, raw: u32) -> Option<ChunkRef<'_>> {
        self.chunk_ref(ChunkHandle::from_raw_unchecked(raw)).ok()
    }

    /// `handle` located (see [`Located`]), if it names a chunk of this pool.
    ///
    /// ```
    /// use iox_mempool::{MemoryType, Owner, Pool, PoolLayout};
    /// let dir = tempfile::tempdir().unwrap();
    /// let layout = PoolLayout::new(&[(64, 4)]).unwrap();
    /// let pool = Pool::create(dir.path(), "loc", &layout, MemoryType::Cpu, 0o600).unwrap();
    /// let me = Owner::new(0).unwrap();
    /// let handle = pool.loan(8, &mut 0, me).unwrap();
    /// let chunk = pool.locate(handle).unwrap();
    /// assert_eq!(chunk.handle(), handle);
    /// assert_eq!(Some(chunk.addr()), pool.chunk(handle).map(|(ptr, _)| ptr));
    /// // SAFETY: `pool`, which located the chunk, is still mapped.
    /// assert!(unsafe { chunk.release(me) }.unwrap());
    /// // A handle of another layout, out of this pool's range, locates nothing.
    /// let other = PoolLayout::new(&[(64, 8)]).unwrap();
    /// let big = Pool::create(dir.path(), "big", &other, MemoryType::Cpu, 0o600).unwrap();
    /// let far = (0..8).map(|_| big.loan(8, &mut 0, me).unwrap()).last().unwrap();
    /// assert!(pool.locate(far).is_none());
    /// ```
    #[inline]
    pub fn locate(&self, handle: ChunkHandle) -> Option<Located> {
        self.spans.get(handle.class())?.locate(handle.class, handle.index)
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

    /// Its payload's address in this process.
    #[inline]
    pub fn addr(&self) -> *mut u8 {
        self.addr.as_ptr()
    }

    /// Asks for the line at `offset` bytes into the chunk ([`crate::hint`]): a receive
    /// asks for its payload's line before its atomic step on the chunk's ownership
    /// word, so the two lines, both last written by the sender's core, travel at once.
    /// An offset past the chunk asks for nothing.
    #[inline(always)]
    pub fn prefetch(&self, offset: usize) {
        if offset < self.size {
            crate::hint::prefetch_read(self.addr.as_ptr().wrapping_add(offset));
        }
    }

    /// The chunk located, for a holder that keeps it past this borrow (see
    /// [`Located`]).
    #[inline]
    pub fn located(&self) -> Located {
        Located::new(self.handle, NonNull::from(self.meta), self.addr)
    }

    /// As [`crate::Bookkeeping::take_queued`].
    #[inline]
    pub fn take_queued(&self, owner: Owner) -> Result<(), ChunkError> {
        self.meta.take_queued(self.handle, owner)
    }

    /// As [`crate::Bookkeeping::hold_queued`].
    #[inline]
    pub fn hold_queued(&self, owner: Owner) -> Result<(), ChunkError> {
        self.meta.hold_queued(self.handle, owner)
    }

    /// As [`crate::Bookkeeping::hand_off`].
    #[inline]
    pub fn hand_off(&self, owner: Owner, queued: u32) -> Result<bool, ChunkError> {
        self.meta.hand_off(self.handle, owner, queued)
    }

    /// As [`crate::Bookkeeping::release`].
    #[inline]
    pub fn release(&self, owner: Owner) -> Result<bool, ChunkError> {
        self.meta.release(self.handle, owner)
    }

    /// As [`crate::Bookkeeping::user_word`].
    #[inline]
    pub fn user_word(&self) -> u64 {
        self.meta.user_word()
    }

    /// As [`crate::Bookkeeping::set_user_word`].
    #[inline]
    pub fn set_user_word(&self, value: u64) {
        self.meta.set_user_word(value);
    }
}
