//! One key's value protocol: which buffer holds the current value, which buffers
//! readers have pinned, and how a writer picks one to write. Atomics only (through
//! `super::sync`), so the loom model (`tests/loom_blackboard.rs`) compiles this file
//! against loom's.
//!
//! A key has `n` value buffers (`n >= 2`, at most 256), a `current` word
//! (`generation << 8 | buffer`) and per buffer a `pins` word: bit `r` set while reader
//! slot `r` reads that buffer.
//! - **Reader** ([`pin`]): load `current`, set its bit in that buffer's `pins`, load
//!   `current` again; if it is unchanged, the buffer is pinned and holds the value
//!   of that generation until unpinned ([`unpin`]: clear the bit). If it changed,
//!   undo the bit (unless the reader had pinned that buffer already) and start over.
//! - **Writer** (one at a time per key: the key's lock): picks a buffer that is not
//!   current and has no pins ([`pick`]), writes the value into it, and publishes it
//!   ([`publish`]: `current` = the next generation and that buffer).
//!
//! Why a reader never sees a torn value: a writer writes only a buffer it found
//! unpinned and not current. It is the store-buffering pattern, closed by two SeqCst
//! fences: the reader sets its pin, fences, and loads `current` again; the writer
//! stores `current` (publishing), and before it picks the next buffer fences and loads
//! the pins. Of the two fences one comes first in their total order, so either the
//! writer's pin load sees the reader's pin (and leaves the buffer alone), or the
//! reader's second load sees the newer `current` (and backs off). The value a pin
//! passes for was written before its `current` store (Release), which the reader's
//! first load (Acquire) saw; a reader's reads of a buffer happen before its unpin
//! (Release), which the writer's pin load (Acquire) sees before it writes the buffer.
//! The generation grows by one per publish (56 bits), so `current` never repeats: no
//! ABA.
//! Why a reader never blocks a writer: `n` is at least twice the readers plus two
//! (a reader pins at most two buffers of a key at once, a guard's and a copy's), so
//! a writer always finds a buffer that is neither current nor pinned. A writer that
//! dies while writing leaves `current` as it was: readers keep the last complete value.
//! A reader that dies with pins leaves its bit set; recovery clears it ([`clear_reader`]).

use super::sync::{AtomicU64, Ordering, fence};

/// The buffer a `current` word names.
#[inline]
pub(crate) fn buffer_of(word: u64) -> usize {
    (word & 0xff) as usize
}

/// The generation a `current` word holds (0: never published).
#[inline]
pub(crate) fn generation_of(word: u64) -> u64 {
    word >> 8
}

/// Pins the current buffer for reader bit `bit` (one bit set); `had` says for each
/// buffer whether this reader pins it already (so a failed try leaves that pin). The
/// `current` word it pinned (its buffer holds that generation's value until unpinned).
pub(crate) fn pin(current: &AtomicU64, pins: &[AtomicU64], bit: u64, had: impl Fn(usize) -> bool) -> u64 {
    loop {
        let word = current.load(Ordering::Acquire);
        let b = buffer_of(word);
        pins[b].fetch_or(bit, Ordering::Relaxed);
        // Pairs with the writer's fence in `pick` (see the module docs).
        fence(Ordering::SeqCst);
        if current.load(Ordering::Relaxed) == word {
            return word;
        }
        if !had(b) {
            pins[b].fetch_and(!bit, Ordering::Release);
        }
    }
}

/// Ends reader bit `bit`'s pin of buffer `b` (when it holds no other pin of it).
#[inline]
pub(crate) fn unpin(pins: &[AtomicU64], b: usize, bit: u64) {
    pins[b].fetch_and(!bit, Ordering::Release);
}

/// A buffer the writer may write: not the one `current` names, pinned by no reader.
/// `None` only if readers pin more buffers than they may (damage).
pub(crate) fn pick(current: &AtomicU64, pins: &[AtomicU64]) -> Option<usize> {
    let now = buffer_of(current.load(Ordering::Relaxed));
    // Pairs with the reader's fence in `pin`: after our last publish, before the pins.
    fence(Ordering::SeqCst);
    (0..pins.len()).find(|&b| b != now && pins[b].load(Ordering::Acquire) == 0)
}

/// Publishes buffer `b` (written by the caller, the key's one writer) as the next
/// generation; the new `current` word.
#[inline]
pub(crate) fn publish(current: &AtomicU64, b: usize) -> u64 {
    let next = ((generation_of(current.load(Ordering::Relaxed)) + 1) << 8) | b as u64;
    current.store(next, Ordering::Release);
    next
}

/// Clears reader bit `bit` from every pin word (recovery of a dead reader; safe to
/// repeat).
pub(crate) fn clear_reader(pins: &[AtomicU64], bit: u64) {
    for p in pins {
        p.fetch_and(!bit, Ordering::Release);
    }
}
