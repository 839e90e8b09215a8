//! One listener's pending set, and every change made to it: what a notifier sets,
//! what the listener takes, and the look each side makes before the other sleeps.
//! Atomics only (through `super::sync`), so the loom model
//! (`tests/loom_pending_set.rs`) compiles this file against loom's.
//!
//! A pending set is `event_id_max + 1` bits in 64-bit words (id `i` is bit `i % 64` of
//! word `i / 64`). Notifiers only set bits ([`mark`]: `fetch_or`, Release: what the
//! notifier wrote before notifying is visible to the listener that takes the bit);
//! the listener only clears them ([`take_all`]: `swap(0)` per word; [`take_one`]:
//! `fetch_and` of the one bit it reports; Acquire), so an id marked once is taken
//! exactly once, and ids marked again before the listener looks coalesce into one.
//! The set is cleared ([`clear`]) when a listener claims the slot and when it frees
//! it. A notifier that read the slot `ACTIVE` just before its previous owner closed
//! it can still set a bit after the new owner's clear: the new listener then sees one
//! event it was not meant to (spurious, never lost). Bits above `event_id_max` in the
//! last word are never set by iox; a listener ignores them (damage).
//!
//! Sleeping (store buffering): a notifier marks every listener, then fences
//! ([`after_marks`], SeqCst) and reads each one's `waiting` word; a listener about to
//! sleep counts itself in `waiting`, fences and looks again ([`counted_look`]). So
//! either the notifier sees the listener counted (and wakes it), or the listener's
//! look sees the bit.

use crate::sync::{AtomicU32, AtomicU64, Ordering, fence};

/// The notifier's side, for one listener: sets `id` (below the set's ids: callers
/// check) pending in `set`.
#[inline]
pub fn mark(set: &[AtomicU64], id: u32) {
    set[(id / 64) as usize].fetch_or(1u64 << (id % 64), Ordering::Release);
}

/// The notifier's fence between its marks and its reads of the listeners' `waiting`
/// words (pairs with the one in [`counted_look`]).
#[inline]
pub fn after_marks() {
    fence(Ordering::SeqCst);
}

/// The listener's side before it sleeps: counts itself in `waiting`, fences, and
/// looks once more; whether an id (below `ids`) is pending. The caller sleeps only on
/// `false`, and uncounts itself (`waiting - 1`) when it wakes.
pub fn counted_look(set: &[AtomicU64], ids: u32, waiting: &AtomicU32) -> bool {
    waiting.fetch_add(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    any(set, ids)
}

/// Takes one pending id (below `ids`), looking at word `start` first; the word it came
/// from and the id.
pub fn take_one(set: &[AtomicU64], ids: u32, start: usize) -> Option<(usize, u32)> {
    let words = set.len();
    for k in 0..words {
        let i = (start + k) % words;
        let bits = set[i].load(Ordering::Relaxed) & valid_bits(i, ids);
        if bits == 0 {
            continue;
        }
        let bit = bits & bits.wrapping_neg();
        // Only the listener clears bits, so the bit is still set: clearing it alone
        // leaves a concurrent mark of another id in place.
        set[i].fetch_and(!bit, Ordering::Acquire);
        return Some((i, i as u32 * 64 + bit.trailing_zeros()));
    }
    None
}

/// Takes every pending id (below `ids`), lowest first, calling `f` with each; how
/// many.
pub fn take_all(set: &[AtomicU64], ids: u32, mut f: impl FnMut(u32)) -> usize {
    let mut n = 0;
    for (i, word) in set.iter().enumerate() {
        if word.load(Ordering::Relaxed) == 0 {
            continue;
        }
        // One swap: a mark after it stays for the next take, none is lost.
        let bits = word.swap(0, Ordering::Acquire) & valid_bits(i, ids);
        for_each_bit(bits, i, |id| {
            n += 1;
            f(id);
        });
    }
    n
}

/// Clears every bit of a pending set.
pub fn clear(set: &[AtomicU64]) {
    for w in set {
        w.store(0, Ordering::Relaxed);
    }
}

/// Whether any id of `set` (below `ids`) is pending.
pub fn any(set: &[AtomicU64], ids: u32) -> bool {
    set.iter()
        .enumerate()
        .any(|(i, w)| w.load(Ordering::Relaxed) & valid_bits(i, ids) != 0)
}

/// The ids of `set` pending now, without taking them (for tools).
pub fn snapshot(set: &[AtomicU64], ids: u32) -> Vec<u32> {
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
pub fn valid_bits(i: usize, ids: u32) -> u64 {
    let first = i as u64 * 64;
    match u64::from(ids).saturating_sub(first) {
        n if n >= 64 => u64::MAX,
        n => (1u64 << n) - 1,
    }
}

/// Calls `f` with the id of every bit of `bits`, word `i` of a set, lowest first.
#[inline]
fn for_each_bit(mut bits: u64, i: usize, mut f: impl FnMut(u32)) {
    while bits != 0 {
        let b = bits.trailing_zeros();
        bits &= bits - 1;
        f(i as u32 * 64 + b);
    }
}
