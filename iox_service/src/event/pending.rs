//! The listeners' pending sets in the dynamic segment, the fan-out of a notification
//! to them, and the recovery of dead notifier and listener slots.
//!
//! A pending set is `event_id_max + 1` bits in 64-bit words (id `i` is bit `i % 64` of
//! word `i / 64`). Notifiers only set bits (`fetch_or`, Release: what the notifier
//! wrote before notifying is visible to the listener that takes the bit); the
//! listener only clears them (`swap(0)` for a whole word, `fetch_and` for one id,
//! Acquire). The set is cleared when a listener claims the slot and when it frees it.
//! A notifier that read the slot `ACTIVE` just before its previous owner closed it can
//! still set a bit after the new owner's clear: the new listener then sees one event
//! it was not meant to (spurious, never lost). Bits above `event_id_max` in the last
//! word are never set by iox; a listener ignores them (damage).

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::doorbell::Ringer;
use crate::dynamic::{self, Dynamic};
use crate::port;

/// Sets `id` pending for every active listener of the event service `d`, then wakes
/// those that sleep on their futex or armed their descriptor. Returns how many
/// listeners it reached. `id` must be at most `event_id_max` (callers check).
pub(crate) fn signal(d: Dynamic<'_>, id: u32, ringer: &Ringer) -> usize {
    let l = d.layout();
    debug_assert!(id < l.event_ids);
    let (word, bit) = ((id / 64) as usize, 1u64 << (id % 64));
    // Listener slots are at most 46: one bit each.
    let mut reached = 0u64;
    for s in 0..l.max_subscribers {
        let header = d.subscriber(s);
        if dynamic::split_state(header.state.load(Ordering::Acquire)).1 != dynamic::ACTIVE {
            continue;
        }
        d.pending(s)[word].fetch_or(bit, Ordering::Release);
        reached |= 1 << s;
    }
    // Pairs with the listener's fence after it counted itself in `waiting` or set
    // ARMED (store-buffering pattern): either we see it there, or its second look
    // sees our bit.
    fence(Ordering::SeqCst);
    wake(d, reached, ringer);
    reached.count_ones() as usize
}

/// Wakes the listeners in the bit mask `slots` that sleep or are armed.
fn wake(d: Dynamic<'_>, mut slots: u64, ringer: &Ringer) {
    while slots != 0 {
        let s = slots.trailing_zeros() as usize;
        slots &= slots - 1;
        let header = d.subscriber(s);
        let seen = header.waiting.load(Ordering::Relaxed);
        if crate::doorbell::wants_wake(seen) {
            port::wake(header, seen, ringer, s);
        }
    }
}

/// Clears every bit of a pending set.
pub(crate) fn clear(set: &[AtomicU64]) {
    for w in set {
        w.store(0, Ordering::Relaxed);
    }
}

/// Whether any id of `set` (below `ids`) is pending.
pub(crate) fn any(set: &[AtomicU64], ids: u32) -> bool {
    set.iter()
        .enumerate()
        .any(|(i, w)| w.load(Ordering::Relaxed) & valid_bits(i, ids) != 0)
}

/// The ids of `set` pending now, without taking them (for tools).
pub(crate) fn snapshot(set: &[AtomicU64], ids: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, w) in set.iter().enumerate() {
        for_each_bit(w.load(Ordering::Relaxed) & valid_bits(i, ids), i, |id| {
            out.push(id)
        });
    }
    out
}

/// The bits of word `i` that stand for ids below `ids`.
#[inline]
pub(crate) fn valid_bits(i: usize, ids: u32) -> u64 {
    let first = i as u64 * 64;
    match u64::from(ids).saturating_sub(first) {
        n if n >= 64 => u64::MAX,
        n => (1u64 << n) - 1,
    }
}

/// Calls `f` with the id of every bit of `bits`, word `i` of a set, lowest first.
#[inline]
pub(crate) fn for_each_bit(mut bits: u64, i: usize, mut f: impl FnMut(u32)) {
    while bits != 0 {
        let b = bits.trailing_zeros();
        bits &= bits - 1;
        f(i as u32 * 64 + b);
    }
}

/// Recovers dead notifier slot `p` of the event service `d`: closes and frees it and,
/// if the service has a `notifier_dead_event`, emits it to the listeners. Every
/// listener that sleeps or is armed is woken either way (the dead notifier may have
/// died between setting a bit and waking).
pub(crate) fn recover_notifier(d: Dynamic<'_>, p: usize, ringer: &Ringer) {
    let header = d.publisher(p);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    port::close(header, generation);
    port::free(header, generation);
    port::announce(d);
    let l = d.layout();
    match l.dead_event {
        Some(id) if id < l.event_ids => {
            signal(d, id, ringer);
        }
        _ => wake(d, (1u64 << l.max_subscribers) - 1, ringer),
    }
}

/// Recovers dead listener slot `s` of the event service `d`: closes it, clears its
/// pending set and frees it. Its socket goes with the dead node's other files
/// (`Liveness::finish`).
pub(crate) fn recover_listener(d: Dynamic<'_>, s: usize) {
    let header = d.subscriber(s);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    port::close(header, generation);
    clear(d.pending(s));
    port::free(header, generation);
    port::announce(d);
}
