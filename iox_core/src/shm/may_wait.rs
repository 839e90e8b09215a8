//! The may-wait set: one bit per subscriber slot, in one word of the dynamic header,
//! set by a subscriber before it first sleeps in `receive_timeout` or arms its
//! readiness descriptor, so that a publisher, after its push and fence, reads one
//! word instead of the `waiting` word of every subscriber it pushed to.
//!
//! Why: those `waiting` words are on each subscriber's own port line; a send to `n`
//! subscribers that busy-poll (they never wait) would load all `n` to find that
//! nobody needs waking. With the set it loads this word once, and the `waiting` words
//! only of subscribers whose bit is set.
//!
//! Protocol (on top of the arming protocol of [`super::arming`] and the futex
//! sleepers' count, both on the `waiting` word, unchanged):
//! - a subscriber, before it arms or counts itself as a sleeper, makes sure its bit is
//!   set ([`MayWait::announce`]: a load, and a SeqCst `fetch_or` only if the bit is
//!   clear). The bit is sticky: it stays set for as long as the subscriber lives, so
//!   a subscriber that waits on every message writes this word once, not per message.
//! - a publisher, after its push and the SeqCst fence it already has
//!   (`Connected::still_connected`), loads this word ([`MayWait::among`]) and looks at
//!   the `waiting` words of the subscribers it pushed to whose bit is set.
//!
//! Why nothing is missed: the subscriber's set of its bit is sequenced before its
//! arming RMW and the fence after it, and both of those before its last look at the
//! queues. If the publisher's fence comes after the subscriber's fence in the single
//! order of SeqCst fences, the publisher's load sees the bit (a fence-to-fence
//! guarantee: the set was before the subscriber's fence, the load after the
//! publisher's), and then it reads the `waiting` word. If it comes
//! before, the subscriber's last look sees the push. A bit set earlier (sticky) is
//! sequenced before the fence all the more. `tests/loom_may_wait.rs` checks this with
//! the production file.
//!
//! Slot reuse and faults: a subscriber clears its slot's bit when it connects, before
//! it can wait ([`MayWait::reset`]); so a bit left by the slot's previous owner (closed
//! or dead) costs the next sends to that slot one look at a `waiting` word at most,
//! never a missed wake-up. A set bit for a slot nobody waits on is harmless (the
//! `waiting` word says no); the word is read whole and masked by the caller's
//! connected set, so corrupt bits cost only such looks.

use crate::sync::{AtomicU64, Ordering};

/// A view of the may-wait word of a dynamic segment.
#[derive(Clone, Copy)]
pub struct MayWait<'a> {
    word: &'a AtomicU64,
}

impl<'a> MayWait<'a> {
    /// The set in `word`.
    #[inline]
    pub fn new(word: &'a AtomicU64) -> Self {
        Self { word }
    }

    /// Subscriber slot `s`, about to arm or sleep: its bit is set (SeqCst, so the
    /// arming that follows is ordered after it; only when it is not set already).
    #[inline]
    pub fn announce(&self, s: usize) {
        let bit = 1u64 << (s % 64);
        if self.word.load(Ordering::Relaxed) & bit == 0 {
            self.word.fetch_or(bit, Ordering::SeqCst);
        }
    }

    /// A subscriber taking slot `s` over, before it connects: a bit its predecessor
    /// left is cleared.
    pub fn reset(&self, s: usize) {
        self.word.fetch_and(!(1u64 << (s % 64)), Ordering::Relaxed);
    }

    /// A publisher, after its push and SeqCst fence: those of `pushed` that may be
    /// waiting (look at their `waiting` words).
    #[inline]
    pub fn among(&self, pushed: u64) -> u64 {
        self.word.load(Ordering::Relaxed) & pushed
    }
}
