//! Attachments: what a WaitSet watches, the guards that keep them attached, and the
//! ids its callback gets.
//!
//! **Keys.** Attachments live in a slab (a vector of slots reused through a free
//! list). An attachment's key is its slot index (low 32 bits) and the slot's
//! generation (high 32 bits, bumped when the slot is freed); it is the epoll event's
//! data and the timer entry's tag. So an event or timer entry that outlives its
//! attachment (detached in the same round, or earlier) resolves to nothing instead of
//! to the slot's next occupant. Lookups are O(1): a wake costs O(ready), whatever the
//! number attached.
//!
//! **Guards.** A [`WaitSetGuard`] borrows the WaitSet and the attached object: the
//! object cannot be dropped or moved while attached, so the descriptor in the epoll
//! set stays the object's. Dropping the guard detaches (removes the descriptor from
//! epoll, frees the slot); a timer entry left in the heap is dropped when it comes up.

use std::marker::PhantomData;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use super::WaitSet;

/// What an attachment is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// Readability of a descriptor.
    Notification,
    /// A tick every `period`.
    Interval { period: Duration },
    /// Readability of a descriptor, and a missed deadline when it stays unreadable for
    /// `timeout`.
    Deadline { timeout: Duration },
}

/// One attachment's record.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) kind: Kind,
    /// When its timer falls due (intervals and deadlines).
    pub(crate) due: Option<Instant>,
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// The attachments, by key.
#[derive(Debug, Default)]
pub(crate) struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
}

/// Keys above this are the WaitSet's own descriptors (waker, signals).
pub(crate) const MAX_INDEX: u32 = u32::MAX - 16;

fn split(key: u64) -> (usize, u32) {
    ((key & 0xffff_ffff) as usize, (key >> 32) as u32)
}

impl Slab {
    /// Stores `entry`; its key. `None` when the slab is full (2^32 - 16 attachments).
    pub(crate) fn insert(&mut self, entry: Entry) -> Option<u64> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).ok().filter(|&i| i < MAX_INDEX)?;
                self.slots.push(Slot::default());
                i
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.entry = Some(entry);
        self.len += 1;
        Some(u64::from(slot.generation) << 32 | u64::from(index))
    }

    /// The entry of `key`, if it is still attached.
    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut Entry> {
        let (index, generation) = split(key);
        let slot = self.slots.get_mut(index)?;
        (slot.generation == generation).then_some(slot.entry.as_mut()?)
    }

    /// Detaches `key`; its entry.
    pub(crate) fn remove(&mut self, key: u64) -> Option<Entry> {
        let (index, generation) = split(key);
        let slot = self.slots.get_mut(index).filter(|s| s.generation == generation)?;
        let entry = slot.entry.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index as u32);
        self.len -= 1;
        Some(entry)
    }

    /// Attachments held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// What happened to an attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Event {
    /// The descriptor is readable (notification or deadline attachment).
    Readable,
    /// An interval's period passed.
    Tick,
    /// A deadline attachment's descriptor stayed unreadable for its timeout.
    DeadlineMissed,
}

/// Keeps an object attached to a [`WaitSet`]; detaches it when dropped. Compare it
/// with the [`AttachmentId`]s the callback gets.
#[derive(Debug)]
#[must_use = "dropping the guard detaches at once"]
pub struct WaitSetGuard<'ws, 'a> {
    pub(crate) waitset: &'ws WaitSet,
    pub(crate) key: u64,
    /// The attached descriptor (none for an interval).
    pub(crate) fd: Option<BorrowedFd<'a>>,
    pub(crate) _attached: PhantomData<&'a ()>,
}

impl Drop for WaitSetGuard<'_, '_> {
    fn drop(&mut self) {
        self.waitset.detach(self.key, self.fd);
    }
}

/// What woke the WaitSet: given to the callback of `wait_and_process*`, once per
/// attachment that fired. Ask it about a guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttachmentId {
    pub(crate) waitset: u64,
    pub(crate) key: u64,
    pub(crate) event: Event,
}

impl AttachmentId {
    fn is_from(&self, guard: &WaitSetGuard<'_, '_>) -> bool {
        self.waitset == guard.waitset.id && self.key == guard.key
    }

    /// Whether this is `guard`'s attachment signalling: its descriptor is readable
    /// (a notification or a deadline attachment) or its interval ticked.
    pub fn has_event_from(&self, guard: &WaitSetGuard<'_, '_>) -> bool {
        self.is_from(guard) && self.event != Event::DeadlineMissed
    }

    /// Whether this is `guard`'s deadline passing with nothing readable.
    pub fn has_missed_deadline(&self, guard: &WaitSetGuard<'_, '_>) -> bool {
        self.is_from(guard) && self.event == Event::DeadlineMissed
    }
}
