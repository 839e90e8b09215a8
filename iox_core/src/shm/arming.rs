//! The arming protocol of readiness descriptors, on the receiver slot's `waiting` word
//! (see [`crate::doorbell`] for the protocol and why): the word's layout, the
//! receiver's arming and the sender's ring-then-clear. Atomics only, no sockets, so
//! the loom model (`tests/loom_arming.rs`) compiles this file against loom's atomics.
//!
//! Word: bit [`ARMED`], a 15-bit arming epoch, the count of futex sleepers
//! ([`SLEEPERS`], 16 bits). Invariant: a sender that read the word with [`ARMED`] set
//! clears that bit only after it rang, and only from the exact word it read (CAS), so
//! an arming is never cleared without a ring by the sender that clears it, and a newer
//! arming (new epoch) is never cleared by a sender that read an older one. The epoch
//! belongs to the slot, not to the port: a slot passing to a new port keeps counting
//! ([`reset`]), so a sender that read the previous port's arming can never clear the
//! new port's first one.

use crate::sync::{AtomicU32, Ordering, fence};

/// Bit of a receiver slot's `waiting` word: the receiver waits on its descriptor and
/// the next sender rings.
pub const ARMED: u32 = 1 << 31;
/// The arming epoch's bits in the `waiting` word (15 bits below [`ARMED`]).
const EPOCH: u32 = 0x7fff << 16;
/// The count of threads asleep on the futex (the low 16 bits).
pub const SLEEPERS: u32 = 0xffff;

/// Whether a sender that read `seen` must wake the receiver (futex sleepers, or an
/// armed descriptor).
#[inline]
pub fn wants_wake(seen: u32) -> bool {
    seen & (ARMED | SLEEPERS) != 0
}

/// The receiver's side, called when it found nothing (after consuming a token): sets
/// [`ARMED`] with a new epoch (SeqCst), then fences. The caller must look for work
/// once more afterwards.
pub fn arm(waiting: &AtomicU32) {
    let mut seen = waiting.load(Ordering::Relaxed);
    loop {
        let epoch = (seen & EPOCH).wrapping_add(1 << 16) & EPOCH;
        let armed = ARMED | epoch | (seen & SLEEPERS);
        match waiting.compare_exchange_weak(seen, armed, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => seen = now,
        }
    }
    // Pairs with the sender's fence after its push (store-buffering pattern).
    fence(Ordering::SeqCst);
}

/// A slot changing hands (claimed by a new port, or freed): no arming, no sleepers,
/// and the epoch moved on, so no word a sender read before is this one or the new
/// port's next arming.
pub fn reset(waiting: &AtomicU32) {
    let mut seen = waiting.load(Ordering::Relaxed);
    loop {
        let fresh = (seen & EPOCH).wrapping_add(1 << 16) & EPOCH;
        match waiting.compare_exchange_weak(seen, fresh, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => seen = now,
        }
    }
}

/// The sender's side, after its push and SeqCst fence, given the `waiting` word it
/// read: if the receiver is armed, rings it (`ring` returns whether the arming is
/// served: a token went out, the receiver is readable already, or it is gone) and
/// then clears that arming, unless the receiver re-armed meanwhile.
pub fn ring_armed(waiting: &AtomicU32, seen: u32, ring: impl FnOnce() -> bool) {
    if seen & ARMED != 0 && ring() {
        let _ = waiting.compare_exchange(seen, seen & !ARMED, Ordering::Relaxed, Ordering::Relaxed);
    }
}
