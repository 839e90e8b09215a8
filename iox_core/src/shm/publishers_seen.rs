//! The publishers-seen set: one bit per publisher slot, in one word of the dynamic
//! header, set by the first publisher that ever takes the slot and never cleared
//! while the service exists. A subscriber's `receive` polls only the queues from
//! slots in the set: a queue from a slot no publisher ever had is empty, and a
//! service usually has room for more publishers than it has.
//!
//! Invariants and why nothing is missed:
//! - a publisher sets its slot's bit ([`PublishersSeen::mark`], SeqCst `fetch_or`,
//!   skipped when the bit is set already) when it claims the slot, before its first
//!   push; the bit is never cleared, so there is no ABA and no race between a
//!   publisher leaving and a subscriber reading: samples a departed publisher left
//!   queued are still polled.
//! - a subscriber that reads the word a moment before a new publisher's bit lands may
//!   skip that publisher's queue in that one receive; a receive that finds nothing
//!   looks at every queue before it returns `None` (and before arming or sleeping),
//!   so no sample is ever reported absent because of the set. Once the subscriber
//!   has seen anything the new publisher did after marking (its push, read with
//!   Acquire), the bit is visible to it too.
//! - the word is read whole; corrupt bits only add or skip looks at queues that the
//!   full look of an empty receive covers anyway.

use crate::sync::{AtomicU64, Ordering};

/// A view of the publishers-seen word of a dynamic segment.
#[derive(Clone, Copy)]
pub struct PublishersSeen<'a> {
    word: &'a AtomicU64,
}

impl<'a> PublishersSeen<'a> {
    /// The set in `word`.
    #[inline]
    pub fn new(word: &'a AtomicU64) -> Self {
        Self { word }
    }

    /// A publisher claimed slot `p`: its bit is set from now on.
    pub fn mark(&self, p: usize) {
        let bit = 1u64 << (p % 64);
        if self.word.load(Ordering::Relaxed) & bit == 0 {
            self.word.fetch_or(bit, Ordering::SeqCst);
        }
    }

    /// The slots some publisher ever had (Acquire: pairs with [`Self::mark`]).
    #[inline]
    pub fn load(&self) -> u64 {
        self.word.load(Ordering::Acquire)
    }
}
