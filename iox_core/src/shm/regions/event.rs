//! The event part of a dynamic segment, and what the core asks of the pattern
//! ([`crate::shm::regions::PatternParts`]).
//!
//! No pair queues (notifiers take the sending slots, listeners the receiving ones);
//! after the port slots, per listener slot its pending set (see [`crate::shm::pending_set`]):
//! `event_id_max + 1` bits in 64-bit words, each set on its own cache line(s). The
//! header limit it records is that number of ids.

use std::sync::atomic::AtomicU64;

use crate::dynamic::Dynamic;
use crate::shm::layout::table_bytes;
use crate::shm::regions::{PatternLayout, PatternParts, Regions};
use crate::static_config::EventConfig;

/// The event regions of a dynamic layout.
#[derive(Debug, Clone, Copy)]
pub struct EventLayout {
    /// `event_id_max + 1`: the bits of each pending set.
    pub event_ids: u32,
    /// The event id recovery emits for a dead notifier.
    pub dead_event: Option<u32>,
    /// Where the pending sets start, each one's words and its stride in bytes.
    pending: usize,
    pending_words: usize,
    pending_stride: usize,
    max_listeners: usize,
    end: usize,
}

impl EventLayout {
    pub fn new(c: &EventConfig, place_pairs: impl FnOnce(bool) -> usize) -> Self {
        let pending = place_pairs(false);
        let event_ids = c.event_id_max + 1;
        let pending_words = (event_ids as usize).div_ceil(64);
        let pending_stride = table_bytes(pending_words);
        let max_listeners = c.max_listeners as usize;
        Self {
            event_ids,
            dead_event: c.notifier_dead_event,
            pending,
            pending_words,
            pending_stride,
            max_listeners,
            end: pending + pending_stride * max_listeners,
        }
    }
}

impl Regions for EventLayout {
    fn of(p: &PatternLayout) -> Option<&Self> {
        if let PatternLayout::Event(r) = p {
            Some(r)
        } else {
            None
        }
    }
}

impl<'a> Dynamic<'a> {
    /// The pending-event bit set of listener slot `s`.
    pub fn pending(&self, s: usize) -> &'a [AtomicU64] {
        let e = self.regions::<EventLayout>();
        assert!(s < e.max_listeners);
        // SAFETY: listener s's pending set, s checked: inside the event regions.
        unsafe { self.words(e.pending + s * e.pending_stride, e.pending_words) }
    }
}

impl PatternParts for EventLayout {
    fn port_names(&self) -> (&'static str, &'static str) {
        ("notifier", "listener")
    }

    fn header_limit(&self) -> (&'static str, u32) {
        ("event ids", self.event_ids)
    }

    fn end(&self) -> usize {
        self.end
    }
}
