//! The bounded queue of chunk handles between one publisher and one subscriber.
//!
//! Single producer (the publisher owning the pair), single consumer (the subscriber),
//! plus one twist: when the queue is full under [`crate::Overflow::DropOldest`], the
//! producer removes the oldest entry itself. So the read index is advanced with a CAS
//! by whoever pops (consumer, producer on overflow, or a port draining the queue at
//! teardown); only the producer writes the write index and the slots.
//!
//! Why it is safe: the producer writes slot `w % cap` only after seeing `read > w -
//! cap`, i.e. after the entry that lived there was popped. A popper that loaded that
//! slot earlier for index `r = w - cap` then fails its CAS (`read` moved past `r`,
//! and it never moves back), so a torn or newer value is never returned. Indices are
//! 64-bit and never wrap in practice.
//!
//! Memory: the read index sits alone on a cache line; the write index shares the
//! slots' first line, so a push moves one line to the consumer. The producer caches
//! the read index and reloads it only when the queue looks full. Entries are raw
//! chunk handles (`ChunkHandle::to_raw`), validated by whoever pops them.

use std::sync::atomic::{AtomicU64, Ordering};

/// An index alone on its cache line.
#[repr(C, align(64))]
pub(crate) struct PaddedIndex {
    pub(crate) value: AtomicU64,
}

/// A view of one queue in the dynamic segment.
pub(crate) struct Queue<'a> {
    pub(crate) write: &'a AtomicU64,
    pub(crate) read: &'a AtomicU64,
    pub(crate) slots: &'a [AtomicU64],
}

/// Result of a push.
pub(crate) enum Pushed {
    /// Stored; nothing dropped.
    Stored,
    /// Stored after dropping the oldest entry, returned here for release.
    DroppedOldest(u64),
    /// Not stored: the queue is full and the policy is to reject.
    Full,
}

impl Queue<'_> {
    fn cap(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Producer only: appends `value`, dropping the oldest entry if full and
    /// `drop_oldest`, else refusing. `read_cache` is the producer's own copy of the
    /// read index (a lower bound, since the index only grows): the shared index is
    /// loaded only when the cache says the queue is full, so the consumer's line is
    /// not pulled over on every push.
    #[inline]
    pub(crate) fn push(&self, value: u64, drop_oldest: bool, read_cache: &mut u64) -> Pushed {
        let w = self.write.load(Ordering::Relaxed);
        let mut dropped = None;
        let mut r = *read_cache;
        loop {
            if w.wrapping_sub(r) < self.cap() {
                break;
            }
            let fresh = self.read.load(Ordering::Acquire);
            if fresh != r {
                r = fresh;
                *read_cache = r;
                continue;
            }
            if w.wrapping_sub(r) > self.cap() {
                // No producer lets more than `cap` entries pile up: corrupt indices.
                return Pushed::Full;
            }
            if !drop_oldest {
                return Pushed::Full;
            }
            let old = self.slots[(r % self.cap()) as usize].load(Ordering::Relaxed);
            if self
                .read
                .compare_exchange(r, r.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                dropped = Some(old);
                *read_cache = r.wrapping_add(1);
                break;
            }
        }
        self.slots[(w % self.cap()) as usize].store(value, Ordering::Relaxed);
        self.write.store(w.wrapping_add(1), Ordering::Release);
        match dropped {
            Some(old) => Pushed::DroppedOldest(old),
            None => Pushed::Stored,
        }
    }

    /// Takes the oldest entry, if any. Safe to call from any process.
    #[inline]
    pub(crate) fn pop(&self) -> Option<u64> {
        loop {
            let r = self.read.load(Ordering::Acquire);
            let w = self.write.load(Ordering::Acquire);
            if r == w {
                return None;
            }
            if w.wrapping_sub(r) > self.cap() {
                // The producer dropped the oldest between our two loads (read moved on):
                // look again. Otherwise the indices are corrupt: report empty.
                if self.read.load(Ordering::Acquire) != r {
                    continue;
                }
                return None;
            }
            let value = self.slots[(r % self.cap()) as usize].load(Ordering::Relaxed);
            if self
                .read
                .compare_exchange(r, r.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some(value);
            }
        }
    }

    /// Number of entries queued (a snapshot; 0 for corrupt indices, as `pop` sees them).
    pub(crate) fn len(&self) -> u64 {
        let r = self.read.load(Ordering::Acquire);
        let w = self.write.load(Ordering::Acquire);
        match w.wrapping_sub(r) {
            n if n > self.cap() => 0,
            n => n,
        }
    }
}
