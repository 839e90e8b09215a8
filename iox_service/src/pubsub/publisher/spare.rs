//! The publisher's spare: one chunk loaned ahead (after each send, off the latency
//! path, see the publisher's module docs), kept located (its ownership word's and its
//! payload's addresses in this process, see [`iox_mempool::Located`]), so that the
//! next loan of its class touches no shared line and looks nothing up, and neither
//! does the send of that loan.
//!
//! Invariants: the spare is held under the publisher's owner bit (recovery returns it
//! like any chunk the publisher holds); it was located by the port's pool, whose
//! `Arc<Pool>` keeps the mapping its addresses point into.
//!
//! The loan's class test is memoised: `(bytes, class)` of the last loan whose size was
//! found to need exactly the spare's class, so a publisher loaning one size (every
//! typed publisher) finds its class with two comparisons instead of a search.

use std::cell::Cell;

use iox_mempool::{ChunkHandle, Located, PoolLayout};

/// See the module docs.
#[derive(Debug)]
pub(super) struct Spare {
    chunk: Cell<Option<Located>>,
    /// A loan size and the class it needs, last found by `class_for`.
    memo: Cell<(usize, usize)>,
}

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

    /// Keeps `chunk` as the spare, replacing none.
    #[inline]
    pub(super) fn put(&self, chunk: Located) {
        debug_assert!(self.is_empty());
        self.chunk.set(Some(chunk));
    }

    /// Takes the spare if a loan of `bytes` needs its class (the smallest that holds
    /// them): `Ok` with it; else `Err` with the spare's handle, if there was one, for
    /// the caller to return.
    #[inline]
    pub(super) fn take_for(&self, bytes: usize, layout: &PoolLayout) -> Result<Located, Option<ChunkHandle>> {
        let Some(chunk) = self.chunk.take() else {
            return Err(None);
        };
        let class = chunk.handle().class();
        if self.memo.get() != (bytes, class) && !self.learn(bytes, class, layout) {
            return Err(Some(chunk.handle()));
        }
        Ok(chunk)
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
        self.chunk.take().map(|c| c.handle())
    }
}
