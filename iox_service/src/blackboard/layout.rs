//! The blackboard part of a dynamic segment, and what the core asks of the pattern
//! ([`crate::pattern::PatternParts`]).
//!
//! No pair queues (writers take the sending slots, readers the receiving ones). After
//! the port slots, three regions, each key's part in the order of the config's entries:
//! - key headers, 64 bytes each: the `current` word (`blackboard::value`) at 0, the
//!   key's writer lock (a [`RawRobustMutex`], 16 bytes) at 8;
//! - pin words, `buffers` per key, each key's on its own cache line(s);
//! - values, from a page boundary: per key `buffers` copies of its value, each at a
//!   multiple of the value's alignment and of 64 bytes ([`value_places`]).
//!
//! The header limit it records is the number of keys.

use std::sync::atomic::AtomicU64;

use iox_mempool::Bookkeeping;

use super::config::BlackboardConfig;
use crate::PayloadType;
use crate::dynamic::Dynamic;
use crate::pattern::{Backlog, PatternLayout, PatternParts, Regions, Side};
use crate::recovery::robust_mutex::RawRobustMutex;
use crate::recovery::{CleanupReport, Liveness};
use crate::shm::layout::table_bytes;

/// Bytes of a key's header.
const HEADER: usize = 64;

/// The blackboard regions of a dynamic layout.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlackboardLayout {
    pub(crate) keys: usize,
    pub(crate) buffers: usize,
    headers: usize,
    pins: usize,
    pins_stride: usize,
    pub(crate) values: usize,
    end: usize,
}

/// Where key `i`'s values are: the first buffer's offset in the segment and the
/// stride between buffers, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValuePlace {
    pub(crate) offset: usize,
    pub(crate) stride: usize,
    pub(crate) size: usize,
}

/// The places of every key's values, the first from `start` (a page boundary); and
/// where they end.
pub(crate) fn value_places(c: &BlackboardConfig, start: usize) -> (Vec<ValuePlace>, usize) {
    let mut at = start;
    let places = c
        .entries
        .iter()
        .map(|e| {
            let (size, alignment) = match &e.value {
                PayloadType::Typed { size, alignment, .. } => (*size as usize, *alignment as usize),
                // Refused by the config's check; no room either way.
                PayloadType::Slice { .. } => (0, 1),
            };
            let stride = size.max(1).next_multiple_of(alignment.max(64));
            at = at.next_multiple_of(alignment.max(64));
            let place = ValuePlace {
                offset: at,
                stride,
                size,
            };
            at += stride * c.buffers as usize;
            place
        })
        .collect();
    (places, at)
}

impl BlackboardLayout {
    pub(crate) fn new(c: &BlackboardConfig, place_pairs: impl FnOnce(bool) -> usize) -> Self {
        let headers = place_pairs(false);
        let keys = c.entries.len();
        let buffers = c.buffers as usize;
        let pins = headers + keys * HEADER;
        let pins_stride = table_bytes(buffers);
        let values = (pins + keys * pins_stride).next_multiple_of(4096);
        let (_, end) = value_places(c, values);
        Self {
            keys,
            buffers,
            headers,
            pins,
            pins_stride,
            values,
            end,
        }
    }
}

impl Regions for BlackboardLayout {
    fn of(p: &PatternLayout) -> Option<&Self> {
        if let PatternLayout::Blackboard(r) = p {
            Some(r)
        } else {
            None
        }
    }
}

/// One key's shared words.
pub(crate) struct KeyWords<'a> {
    pub(crate) current: &'a AtomicU64,
    pub(crate) lock: &'a RawRobustMutex,
    pub(crate) pins: &'a [AtomicU64],
}

impl<'a> Dynamic<'a> {
    /// Key `k`'s current word, writer lock and pin words.
    pub(crate) fn key_words(&self, k: usize) -> KeyWords<'a> {
        let b = self.regions::<BlackboardLayout>();
        assert!(k < b.keys, "key {k} out of range");
        let header = b.headers + k * HEADER;
        // SAFETY: key k's header and pins, k checked: inside the blackboard regions.
        let (words, pins) = unsafe {
            (
                self.words(header, 3),
                self.words(b.pins + k * b.pins_stride, b.buffers),
            )
        };
        // SAFETY: words 1 and 2 of the header are the lock's 16 bytes, 8-aligned;
        // RawRobustMutex is repr(C) atomics valid for any bytes (all-zero: unlocked).
        let lock = unsafe { &*words[1..].as_ptr().cast::<RawRobustMutex>() };
        KeyWords {
            current: &words[0],
            lock,
            pins,
        }
    }

    /// Every pin word of every key (recovery).
    fn all_pins(&self) -> &'a [AtomicU64] {
        let b = self.regions::<BlackboardLayout>();
        // SAFETY: the pins region, as laid out above.
        unsafe { self.words(b.pins, b.keys * b.pins_stride / 8) }
    }

    /// The address of buffer `buffer` of the key at `place` (one of this layout's
    /// value places, the buffer below the layout's count: checked).
    pub(crate) fn value_ptr(&self, place: ValuePlace, buffer: usize) -> *mut u8 {
        let b = self.regions::<BlackboardLayout>();
        assert!(buffer < b.buffers && place.offset >= b.values);
        let offset = place.offset + buffer * place.stride;
        assert!(offset + place.size <= b.end);
        // SAFETY: inside the segment (checked against the layout's end).
        unsafe { self.bytes_at(offset) }
    }
}

impl PatternParts for BlackboardLayout {
    fn port_names(&self) -> (&'static str, &'static str) {
        ("writer", "reader")
    }

    fn header_limit(&self) -> (&'static str, u32) {
        ("keys", self.keys as u32)
    }

    fn end(&self) -> usize {
        self.end
    }

    fn recover_ports(
        &self,
        d: Dynamic<'_>,
        _stem: &str,
        _pool: &Bookkeeping,
        live: &mut Liveness,
        report: &mut CleanupReport,
    ) {
        super::recovery::recover_ports(d, d.all_pins(), live, report);
    }

    fn backlog(&self, _d: Dynamic<'_>, _side: Side, _slot: usize) -> Backlog {
        Backlog::default()
    }
}
