//! The publisher's spare: one chunk loaned ahead (after each send, off the latency
//! path, see the publisher's module docs), kept with its address in this process, so
//! that the next loan of its class touches no shared line and looks nothing up.
//!
//! Invariants: the spare is held under the publisher's owner bit (recovery returns it
//! like any chunk the publisher holds); its address is the one the pool gave for it
//! in this process, valid while the port's `Arc<Pool>` keeps the mapping.
//!
//! The loan's class test is memoised: `(bytes, class)` of the last loan whose size was
//! found to need exactly the spare's class, so a publisher loaning one size (every
//! typed publisher) finds its class with two comparisons instead of a search.

use std::cell::Cell;
use std::ptr::NonNull;

use iox_mempool::{ChunkHandle, PoolLayout};

/// See the module docs.
#[derive(Debug)]
pub(super) struct Spare {
    chunk: Cell<Option<(ChunkHandle, NonNull<u8>)>>,
    /// A loan size and the class it needs, last found by `class_for`.
    memo: Cell<(usize, usize)>,
}

// SAFETY: the address is into the pool's mapping, which is shared by every thread of
// the process; nothing about it is tied to the thread that stored it. (`Cell` keeps
// the type `!Sync`: one thread uses it at a time.)
unsafe impl Send for Spare {}

impl Spare {
    pub(super) fn new() -> Self {
        Self {
            chunk: Cell::new(None),
            memo: Cell::new((usize::MAX, usize::MAX)),
        }
    }

    /// Whether there is none.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.chunk.get().is_none()
    }

    /// Keeps `handle` (at `ptr` in this process) as the spare, replacing none.
    #[inline]
    pub(super) fn put(&self, handle: ChunkHandle, ptr: *mut u8) {
        debug_assert!(self.is_empty());
        // A chunk's address in a live mapping is never null; were it, the chunk would
        // stay held (under our bit) until the port goes, never handed out wrong.
        debug_assert!(!ptr.is_null());
        self.chunk.set(NonNull::new(ptr).map(|p| (handle, p)));
    }

    /// Takes the spare if a loan of `bytes` needs its class (the smallest that holds
    /// them): `Ok` with its address; else `Err` with the spare taken out, if any, for
    /// the caller to return.
    #[inline]
    pub(super) fn take_for(
        &self,
        bytes: usize,
        layout: &PoolLayout,
    ) -> Result<(ChunkHandle, *mut u8), Option<ChunkHandle>> {
        let Some((handle, ptr)) = self.chunk.take() else {
            return Err(None);
        };
        if self.memo.get() != (bytes, handle.class()) && !self.learn(bytes, handle.class(), layout) {
            return Err(Some(handle));
        }
        Ok((handle, ptr.as_ptr()))
    }

    /// Whether a loan of `bytes` needs `class`; remembered if so.
    #[cold]
    #[inline(never)]
    fn learn(&self, bytes: usize, class: usize, layout: &PoolLayout) -> bool {
        let needs = layout.class_for(bytes, class) == Some(class);
        if needs {
            self.memo.set((bytes, class));
        }
        needs
    }

    /// Takes the spare, whatever its class.
    pub(super) fn take(&self) -> Option<ChunkHandle> {
        self.chunk.take().map(|(h, _)| h)
    }
}
