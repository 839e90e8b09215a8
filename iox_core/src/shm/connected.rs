//! The connected-subscriber set: one bit per subscriber slot, in one word of the
//! dynamic header, set while that subscriber is `ACTIVE` (publishers deliver to it).
//!
//! Why: a send must know, before its pushes and again after its fence, which
//! subscribers to deliver to and which closed meanwhile. Reading every slot's state
//! word for that would make slots that are not connected cost as much as connected
//! ones; with the set, a send loads this word twice and touches the slots of connected
//! subscribers only.
//!
//! Protocol (the state word stays what recovery, inspection and the history path
//! read; this set follows it):
//! - a subscriber sets its bit after storing `ACTIVE` ([`Connected::connect`]), and
//!   clears it before storing `CLOSING` ([`Connected::disconnect`], a SeqCst RMW and a
//!   SeqCst fence), then drains its queues. So a bit set means `ACTIVE` except for
//!   the moment between those two steps, and a process killed between them leaves a
//!   clear bit on an `ACTIVE` slot, which recovery closes (and clears again: clearing
//!   is idempotent).
//! - a publisher reads the set (Acquire: it then sees the subscriber's creation-time
//!   drain done) and pushes into the queues of the subscribers in it; then
//!   [`Connected::still_connected`]: a SeqCst fence and one more load. A subscriber
//!   it pushed to whose bit is now clear closed meanwhile, and the publisher drains
//!   what it pushed to it. Store buffering, the pattern of the state words too: the
//!   subscriber's clear precedes its fence and its drain; the publisher's push
//!   precedes its fence and its load. Either the publisher's load sees the clear (it
//!   drains), or the subscriber's drain sees the push (it drains); both may, and the
//!   queue's claims make two drainers safe. No entry is stranded.
//! - the same fence orders the publisher's push before its reads of the `waiting`
//!   words of the subscribers still connected (futex sleepers and the readiness
//!   descriptors' `ARMED` bit, see `doorbell`) of exactly the slots it pushed to (a
//!   subscriber it did not push to has nothing new to wake up for).
//!
//! Slot reuse: a bit names a slot, not a port, so a publisher that read the set just
//! before subscriber A of slot `s` closed may push after B took the slot over; B then
//! receives it (B drained the queue before it connected, so it never gets anything
//! older). If B's bit is set when the publisher looks after its fence, the publisher
//! does not drain: the entry is B's, and B's own close drains it (same argument). No
//! ABA harm: a stale view only costs a delivery to the slot's new subscriber.
//!
//! Torn or corrupt words: the set is one 64-bit word, read and written whole; bits
//! above the receiving slots are masked off on every read. A bit set for a slot that is
//! not `ACTIVE` (corrupt memory) only queues entries nobody takes until the slot's next
//! subscriber drains them at creation: nothing is freed that someone still holds.
//!
//! The atomics come through `super::sync`, so the loom model
//! (`tests/loom_connected.rs`) compiles this file, with the queue, against loom's.

use crate::sync::{AtomicU64, Ordering, fence};

/// A view of the connected-subscriber word of a service with `slots` subscriber slots.
#[derive(Clone, Copy)]
pub struct Connected<'a> {
    word: &'a AtomicU64,
    mask: u64,
}

/// The bit of subscriber slot `s`.
#[inline]
pub fn bit(s: usize) -> u64 {
    1 << s
}

/// The mask of `slots` subscriber slots (at most 64).
#[inline]
pub fn all(slots: usize) -> u64 {
    if slots >= 64 { u64::MAX } else { (1 << slots) - 1 }
}

/// The slots whose bits are set in `bits`, lowest first.
#[inline]
pub fn slots(mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let s = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        Some(s)
    })
}

impl<'a> Connected<'a> {
    /// The set in `word`, whose slots are the bits of `mask` (`all(slots)` for a
    /// service with `slots` subscriber slots, computed once per layout).
    #[inline]
    pub fn with_mask(word: &'a AtomicU64, mask: u64) -> Self {
        Self { word, mask }
    }

    /// The subscribers to deliver to now. Acquire: pairs with [`Self::connect`].
    #[inline]
    pub fn snapshot(&self) -> u64 {
        self.word.load(Ordering::Acquire) & self.mask
    }

    /// A subscriber that just stored `ACTIVE` in slot `s` joins the set: what it did
    /// before (draining its queues) happens-before the pushes of a publisher that
    /// sees the bit.
    pub fn connect(&self, s: usize) {
        self.word.fetch_or(bit(s) & self.mask, Ordering::SeqCst);
    }

    /// Subscriber slot `s` leaves the set (its port closes, or recovery closes it for
    /// a dead process); the caller drains its queues afterwards. Idempotent.
    pub fn disconnect(&self, s: usize) {
        self.word.fetch_and(!bit(s), Ordering::SeqCst);
        // Pairs with the fence of `still_connected` (see the module docs).
        fence(Ordering::SeqCst);
    }

    /// A publisher, after pushing into the queues of the subscribers in `pushed`:
    /// which of them are still connected. The others closed meanwhile: the publisher
    /// drains what it pushed to them. The fence also orders the pushes before the
    /// publisher's reads of the `waiting` words (see the module docs).
    #[inline]
    pub fn still_connected(&self, pushed: u64) -> u64 {
        fence(Ordering::SeqCst);
        self.word.load(Ordering::Relaxed) & pushed
    }
}
