//! The blackboard part of a dynamic segment, and what the core asks of the pattern
//! ([`crate::shm::regions::PatternParts`]).
//!
//! No pair queues (writers take the sending slots, readers the receiving ones). After
//! the port slots, three regions, each key's part in the order of the config's entries:
//! - key headers, 64 bytes each: the `current` word (`shm::blackboard_value`) at 0, the
//!   key's writer lock (a [`RawRobustMutex`], 16 bytes) at 8;
//! - pin words: per key, per reader slot a cache line whose first two words are its
//!   pins (`shm::blackboard_value`);
//! - values, from a page boundary: per key `buffers` copies of its value, each at a
//!   multiple of the value's alignment and of 64 bytes ([`value_places`]).
//!
//! The header limit it records is the number of keys.

use std::sync::atomic::AtomicU64;

use crate::PayloadType;
use crate::dynamic::Dynamic;
use crate::robust_mutex::RawRobustMutex;
use crate::shm::blackboard_value as value;
use crate::shm::regions::{PatternLayout, PatternParts, Regions};
use crate::static_config::blackboard::BlackboardConfig;

/// Bytes of a key's header.
const HEADER: usize = 64;

/// The blackboard regions of a dynamic layout.
#[derive(Debug, Clone, Copy)]
pub struct BlackboardLayout {
    pub keys: usize,
    pub buffers: usize,
    readers: usize,
    headers: usize,
    pins: usize,
    pins_stride: usize,
    pub values: usize,
    end: usize,
}

/// Where key `i`'s values are: the first buffer's offset in the segment and the
/// stride between buffers, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValuePlace {
    pub offset: usize,
    pub stride: usize,
    pub size: usize,
}

/// The places of every key's values, the first from `start` (a page boundary); and
/// where they end.
pub fn value_places(c: &BlackboardConfig, start: usize) -> (Vec<ValuePlace>, usize) {
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
    pub fn new(c: &BlackboardConfig, place_pairs: impl FnOnce(bool) -> usize) -> Self {
        let headers = place_pairs(false);
        let keys = c.entries.len();
        let buffers = c.buffers as usize;
        let readers = c.max_readers as usize;
        let pins = headers + keys * HEADER;
        let pins_stride = readers * value::READER_WORDS * 8;
        let values = (pins + keys * pins_stride).next_multiple_of(4096);
        let (_, end) = value_places(c, values);
        Self {
            keys,
            buffers,
            readers,
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
pub struct KeyWords<'a> {
    pub current: &'a AtomicU64,
    pub lock: &'a RawRobustMutex,
    /// Every reader slot's pin words, [`value::READER_WORDS`] each.
    pub pins: &'a [AtomicU64],
}

impl<'a> KeyWords<'a> {
    /// The generation of the key's value now (1: the initial one).
    pub fn generation(&self) -> u64 {
        value::generation_of(self.current.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Reader slot `s`'s pin words of this key.
    pub fn reader(&self, s: usize) -> &'a [AtomicU64] {
        &self.pins[s * value::READER_WORDS..(s + 1) * value::READER_WORDS]
    }
}

impl<'a> Dynamic<'a> {
    /// Key `k`'s current word, writer lock and pin words.
    pub fn key_words(&self, k: usize) -> KeyWords<'a> {
        let b = self.regions::<BlackboardLayout>();
        assert!(k < b.keys, "key {k} out of range");
        let header = b.headers + k * HEADER;
        // SAFETY: key k's header and pins, k checked: inside the blackboard regions.
        let (words, pins) = unsafe {
            (
                self.words(header, 3),
                self.words(b.pins + k * b.pins_stride, b.readers * value::READER_WORDS),
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

    /// The address of buffer `buffer` of the key at `place` (one of this layout's
    /// value places, the buffer below the layout's count: checked).
    pub fn value_ptr(&self, place: ValuePlace, buffer: usize) -> *mut u8 {
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
}
