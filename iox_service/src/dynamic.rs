//! The dynamic segment `iox_<H>.dynamic`: everything participants write at run time.
//!
//! Layout (all offsets computed from the static config by [`DynamicLayout`], every
//! structure `repr(C)`, atomics only, no pointers):
//! - header (128 bytes): magic (stored last, Release), version, the hash of the static
//!   config text this segment belongs to, the user count, the creator's node id, and
//!   the limits it was sized for;
//! - one publisher slot per allowed publisher: a 64-byte port header (state word,
//!   owner node id, pid) followed by its loan table (one raw handle + 1 per entry,
//!   0 = empty), padded to 64 bytes;
//! - one subscriber slot per allowed subscriber: the same port header (plus the
//!   `waiting` counter and the `wake` futex word) and its held-samples table;
//! - one [`crate::queue`] per (publisher, subscriber) pair, row-major by publisher:
//!   the read index on its own line, then the write index followed by the slots.
//!
//! Port state word: `generation << 8 | state`, state one of [`FREE`], [`CLAIMING`],
//! [`ACTIVE`], [`CLOSING`]. A port is claimed with a CAS from `FREE` (bumping the
//! generation) and released by storing `FREE` after its tables and queues are empty.
//! The user count is a CAS-guarded counter; [`DESTROYING`] marks a segment whose last
//! user is removing the service, after which no one may register.

use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::queue::{PaddedIndex, Queue};
use crate::static_config::StaticConfig;

/// Magic of a dynamic segment.
pub const DYNAMIC_MAGIC: u64 = u64::from_le_bytes(*b"IOXDYN\x00\x01");
/// Version of the dynamic segment format.
pub const DYNAMIC_VERSION: u32 = 1;
/// User count marking a service that is being removed.
pub const DESTROYING: u64 = u64::MAX;
pub(crate) const HEADER_LEN: usize = 128;

/// Port slot is free.
pub const FREE: u64 = 0;
/// Port slot is being set up.
pub const CLAIMING: u64 = 1;
/// Port slot is in use.
pub const ACTIVE: u64 = 2;
/// Port slot is being torn down.
pub const CLOSING: u64 = 3;

#[repr(C)]
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) config_hash: AtomicU64,
    pub(crate) users: AtomicU64,
    pub(crate) creator_node: AtomicU64,
    pub(crate) version: AtomicU32,
    pub(crate) max_publishers: AtomicU32,
    pub(crate) max_subscribers: AtomicU32,
    pub(crate) subscriber_buffer: AtomicU32,
    pub(crate) max_loans: AtomicU32,
    pub(crate) max_held: AtomicU32,
}
const _: () = assert!(size_of::<Header>() <= HEADER_LEN);

/// The fixed part of a port slot, on its own cache line.
#[repr(C, align(64))]
pub(crate) struct PortHeader {
    pub(crate) state: AtomicU64,
    pub(crate) node: AtomicU64,
    pub(crate) pid: AtomicU32,
    /// Subscribers: how many threads are blocked in `receive_timeout`.
    pub(crate) waiting: AtomicU32,
    /// Subscribers: the futex word publishers bump to wake them.
    pub(crate) wake: AtomicU32,
}
const _: () = assert!(size_of::<PortHeader>() == 64);

/// Where everything lives in a dynamic segment sized for one static config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DynamicLayout {
    pub(crate) max_publishers: usize,
    pub(crate) max_subscribers: usize,
    pub(crate) buffer: usize,
    pub(crate) max_loans: usize,
    pub(crate) max_held: usize,
    pub(crate) publishers: usize,
    pub(crate) publisher_stride: usize,
    pub(crate) subscribers: usize,
    pub(crate) subscriber_stride: usize,
    pub(crate) queues: usize,
    pub(crate) queue_stride: usize,
    pub(crate) len: usize,
}

fn table_bytes(entries: usize) -> usize {
    (entries * 8).next_multiple_of(64)
}

impl DynamicLayout {
    /// A layout covering only the header (for tools that touch nothing else).
    pub(crate) fn header_only() -> Self {
        Self {
            max_publishers: 0,
            max_subscribers: 0,
            buffer: 0,
            max_loans: 0,
            max_held: 0,
            publishers: HEADER_LEN,
            publisher_stride: 0,
            subscribers: HEADER_LEN,
            subscriber_stride: 0,
            queues: HEADER_LEN,
            queue_stride: 0,
            len: HEADER_LEN,
        }
    }

    pub(crate) fn new(c: &StaticConfig) -> Self {
        let (max_publishers, max_subscribers) = (c.max_publishers as usize, c.max_subscribers as usize);
        let (buffer, max_loans, max_held) = (
            c.subscriber_buffer as usize,
            c.max_loans as usize,
            c.max_held as usize,
        );
        // One more loan entry than max_loans: the publisher's spare chunk.
        let publisher_stride = 64 + table_bytes(max_loans + 1);
        let subscriber_stride = 64 + table_bytes(max_held);
        // Read index alone on a line; write index and slots together, so a push moves
        // one line to the consumer (for buffers up to 7).
        let queue_stride = size_of::<PaddedIndex>() + table_bytes(1 + buffer);
        let publishers = HEADER_LEN;
        let subscribers = publishers + publisher_stride * max_publishers;
        let queues = subscribers + subscriber_stride * max_subscribers;
        let len = queues + queue_stride * max_publishers * max_subscribers;
        Self {
            max_publishers,
            max_subscribers,
            buffer,
            max_loans,
            max_held,
            publishers,
            publisher_stride,
            subscribers,
            subscriber_stride,
            queues,
            queue_stride,
            len,
        }
    }
}

/// A view of a mapped dynamic segment. The caller guarantees `base` maps at least
/// `layout.len` bytes, 64-byte aligned, for as long as the view lives.
#[derive(Clone, Copy)]
pub(crate) struct Dynamic<'a> {
    base: *mut u8,
    layout: &'a DynamicLayout,
}

impl<'a> Dynamic<'a> {
    /// # Safety
    /// `base` must map at least `layout.len` bytes, 64-byte aligned, for `'a`.
    pub(crate) unsafe fn new(base: *mut u8, layout: &'a DynamicLayout) -> Self {
        Self { base, layout }
    }

    fn at<T>(&self, offset: usize) -> &'a T {
        debug_assert!(offset + size_of::<T>() <= self.layout.len);
        // SAFETY: every caller passes an offset computed by DynamicLayout for an index
        // it bounds-checked, so the T lies inside the mapping (new's contract); offsets
        // are multiples of T's alignment on a page-aligned mapping; T is made of
        // atomics only, valid for any bytes and shareable between processes.
        unsafe { &*self.base.add(offset).cast::<T>() }
    }

    fn table(&self, offset: usize, len: usize) -> &'a [AtomicU64] {
        debug_assert!(offset + len * 8 <= self.layout.len);
        // SAFETY: as in `at`; the table lies inside its slot's stride.
        unsafe { std::slice::from_raw_parts(self.base.add(offset).cast::<AtomicU64>(), len) }
    }

    pub(crate) fn header(&self) -> &'a Header {
        self.at(0)
    }

    pub(crate) fn publisher(&self, p: usize) -> (&'a PortHeader, &'a [AtomicU64]) {
        assert!(p < self.layout.max_publishers);
        let off = self.layout.publishers + p * self.layout.publisher_stride;
        (self.at(off), self.table(off + 64, self.layout.max_loans + 1))
    }

    pub(crate) fn subscriber(&self, s: usize) -> (&'a PortHeader, &'a [AtomicU64]) {
        assert!(s < self.layout.max_subscribers);
        let off = self.layout.subscribers + s * self.layout.subscriber_stride;
        (self.at(off), self.table(off + 64, self.layout.max_held))
    }

    pub(crate) fn queue(&self, p: usize, s: usize) -> Queue<'a> {
        assert!(p < self.layout.max_publishers && s < self.layout.max_subscribers);
        let off = self.layout.queues + (p * self.layout.max_subscribers + s) * self.layout.queue_stride;
        let read: &PaddedIndex = self.at(off);
        let rest = self.table(off + 64, 1 + self.layout.buffer);
        Queue {
            write: &rest[0],
            read: &read.value,
            slots: &rest[1..],
        }
    }

    pub(crate) fn layout(&self) -> &'a DynamicLayout {
        self.layout
    }
}

/// Splits a state word into (generation, state).
pub(crate) fn split_state(word: u64) -> (u64, u64) {
    (word >> 8, word & 0xff)
}

/// Builds a state word.
pub(crate) fn state_word(generation: u64, state: u64) -> u64 {
    (generation << 8) | state
}
