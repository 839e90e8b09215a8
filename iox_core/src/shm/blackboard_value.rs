//! One key's value protocol: which buffer holds the current value, which buffers
//! readers read, and how a writer picks one to write. Atomics only (through
//! `super::sync`), so the loom model (`tests/loom_blackboard.rs`) compiles this file
//! against loom's.
//!
//! A key has `n` value buffers (`n >= 2`, at most 256), a `current` word
//! (`generation << 8 | buffer`), and per reader slot two pin words of its own (on a
//! cache line of their own: readers never write a line another reader writes): the
//! buffer it copies from and the buffer its guard shows, each as `buffer + 1`, 0 for
//! none.
//! - **Reader** ([`pin`]): load `current`, store that buffer into its pin word, fence,
//!   load `current` again; unchanged, the buffer is pinned and holds the value of that
//!   generation until unpinned ([`unpin`]: store 0); changed, it tries again (its pin
//!   word is simply overwritten).
//! - **Writer** (one at a time per key): fences, loads every reader's pin words and
//!   picks a buffer that is neither current nor pinned ([`pick`]), writes the value
//!   into it, and publishes it ([`publish`]: `current` = the next generation and that
//!   buffer).
//!
//! Why a reader never sees a torn value: a writer writes only a buffer it found
//! unpinned and not current. It is the store-buffering pattern, closed by two SeqCst
//! fences: the reader stores its pin, fences, and loads `current` again; the writer
//! stores `current` (publishing), and before it picks the next buffer fences and loads
//! the pins. Of the two fences one comes first in their total order, so either the
//! writer's pin load sees the reader's pin (and leaves the buffer alone), or the
//! reader's second load sees the newer `current` (and tries again). The value a pin
//! passes for was written before its `current` store (Release), which the reader's
//! first load (Acquire) saw; a reader's reads of a buffer happen before its next store
//! to that pin word, the unpin or its next pin (both Release), one of which the
//! writer's pin load (Acquire) sees before it writes the buffer.
//! The generation grows by one per publish (56 bits), so `current` never repeats: no
//! ABA.
//!
//! Why a reader never blocks a writer: `n` is at least twice the readers plus two
//! (a reader pins at most two buffers of a key, its copy's and its guard's), so a
//! writer always finds a buffer that is neither current nor pinned. A writer that dies
//! while writing leaves `current` as it was: readers keep the last complete value. A
//! reader that dies with pins leaves its pin words set; recovery clears them
//! ([`clear_reader`]).

use crate::sync::{AtomicU64, Ordering, fence};

/// The buffer a `current` word names.
#[inline]
pub fn buffer_of(word: u64) -> usize {
    (word & 0xff) as usize
}

/// The generation a `current` word holds (0: never published).
#[inline]
pub fn generation_of(word: u64) -> u64 {
    word >> 8
}

/// Words per reader slot in a key's pin region: its copy pin, its guard pin, and
/// padding to a cache line.
pub const READER_WORDS: usize = 8;
/// A reader's pin word for copies.
pub const COPY: usize = 0;
/// A reader's pin word for its guard.
pub const GUARD: usize = 1;

/// Pins the current buffer through the reader's pin word `mine` (its copy's or its
/// guard's, 0 now); the `current` word it pinned (its buffer holds that generation's
/// value until [`unpin`]).
pub fn pin(current: &AtomicU64, mine: &AtomicU64) -> u64 {
    loop {
        let word = current.load(Ordering::Acquire);
        // Release: a writer that reads this pin also sees the reads this reader made
        // under its previous pin of the word (a store does not continue the release
        // sequence of the unpin before it).
        mine.store(buffer_of(word) as u64 + 1, Ordering::Release);
        // Pairs with the writer's fence in `pick` (see the module docs).
        fence(Ordering::SeqCst);
        if current.load(Ordering::Relaxed) == word {
            return word;
        }
    }
}

/// Ends the pin held by pin word `mine`.
#[inline]
pub fn unpin(mine: &AtomicU64) {
    mine.store(0, Ordering::Release);
}

/// A buffer of `n` the writer may write: not the one `current` names, pinned by no
/// reader (`pins`: every reader slot's [`READER_WORDS`] words). `None` only if readers
/// pin more buffers than they may (damage).
pub fn pick(current: &AtomicU64, pins: &[AtomicU64], n: usize) -> Option<usize> {
    let now = buffer_of(current.load(Ordering::Relaxed));
    // Pairs with the reader's fence in `pin`: after our last publish, before the pins.
    fence(Ordering::SeqCst);
    // Buffers taken, a bit each (at most 256 buffers: four words).
    let mut taken = [0u64; 4];
    let mut take = |b: usize| taken[(b / 64) & 3] |= 1 << (b % 64);
    take(now);
    for reader in pins.chunks_exact(READER_WORDS) {
        for word in &reader[..2] {
            let pinned = word.load(Ordering::Acquire);
            if pinned != 0 {
                take(pinned as usize - 1);
            }
        }
    }
    let free = taken
        .iter()
        .enumerate()
        .find_map(|(i, &t)| (t != u64::MAX).then(|| i * 64 + t.trailing_ones() as usize))?;
    (free < n).then_some(free)
}

/// Publishes buffer `b` (written by the caller, the key's one writer) as the next
/// generation; the new `current` word.
#[inline]
pub fn publish(current: &AtomicU64, b: usize) -> u64 {
    let next = ((generation_of(current.load(Ordering::Relaxed)) + 1) << 8) | b as u64;
    current.store(next, Ordering::Release);
    next
}

/// Clears a reader slot's pin words (`mine`: its [`READER_WORDS`]; recovery of a dead
/// reader; safe to repeat).
pub fn clear_reader(mine: &[AtomicU64]) {
    for w in &mine[..2] {
        w.store(0, Ordering::Release);
    }
}
