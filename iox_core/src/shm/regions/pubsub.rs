//! The publish-subscribe part of a dynamic segment, and what the core asks of the
//! pattern ([`crate::shm::regions::PatternParts`]).
//!
//! Pub-sub uses the core's pair queues (publisher slot to subscriber slot,
//! `subscriber_buffer` deep). After them, for a service with history (`history > 0`
//! in the static config), per publisher slot: one history queue of `history` slots,
//! laid out like the pair queues (what the publisher keeps for subscribers that
//! connect later), then one word per subscriber slot, the generation of the
//! subscriber it last gave its history to (see `pubsub::publisher::history`). Without
//! history there is nothing after the pair queues. The header limit it records is
//! `history`.
//!
//! A device-memory service (`CudaDevice`) then has one event table per port slot,
//! publishers' first, then subscribers': a word on its own line (the generation of
//! the port whose events the table holds; 0 = none published), then per chunk of the
//! pool the 64 bytes of an inter-process event handle as 8 words (see
//! `crate::device::events`).
//!
//! A tensor service (every `CudaDevice` service, and a host service created with
//! `tensors` in its config) then has one tensor record per chunk of the pool
//! (`crate::tensor::WORDS` words each, see [`crate::shm::tensor_record`]; chunks
//! numbered by [`chunk_index`]): the element type, shape and strides of the sample in
//! the chunk, kept in host memory beside it (a device chunk cannot carry them for host
//! readers, and a host one keeps its bytes for the payload).

use std::sync::atomic::AtomicU64;

use crate::dynamic::Dynamic;
use crate::queue::Queue;
use crate::shm::layout::{queue_bytes, table_bytes};
use crate::shm::regions::{PatternLayout, PatternParts, Regions, Side};
use crate::shm::tensor_record::TensorRecord;
use crate::static_config::PubSubConfig;

/// The publish-subscribe regions of a dynamic layout.
#[derive(Debug, Clone, Copy)]
pub struct PubSubLayout {
    /// Samples each publisher keeps for late subscribers (0 = no history queues).
    pub history: usize,
    /// Offset of publisher 0's history queue (the end of the pair queues).
    history_queues: usize,
    history_stride: usize,
    /// Offset of the history-given words within one publisher's stride.
    given: usize,
    max_subscribers: usize,
    /// Chunks of a device pool (0: not a device service, no event tables).
    pub device_chunks: usize,
    /// Offset of publisher slot 0's event table.
    events: usize,
    /// Chunks with a tensor record (0: not a tensor service).
    pub tensor_chunks: usize,
    /// Offset of chunk 0's tensor record.
    tensors: usize,
    end: usize,
}

/// The index of `chunk` among all chunks of `layout` (classes in order): what the
/// per-chunk tables (a device service's events, a tensor service's records) are
/// indexed by.
pub fn chunk_index(layout: &iox_mempool::PoolLayout, chunk: iox_mempool::ChunkHandle) -> usize {
    let before: usize = layout.classes()[..chunk.class()]
        .iter()
        .map(|c| c.count as usize)
        .sum();
    before + chunk.index() as usize
}

/// Bytes of one chunk's tensor record.
const TENSOR_BYTES: usize = crate::tensor::WORDS * 8;

/// Bytes of one port slot's event table for `chunks` chunks.
fn event_stride(chunks: usize) -> usize {
    64 + chunks * 64
}

impl PubSubLayout {
    /// `device_chunks`: the pool's chunk count for a device-memory service, else 0;
    /// `tensor_chunks`: the pool's chunk count for a tensor service, else 0.
    pub fn new(
        c: &PubSubConfig,
        device_chunks: usize,
        tensor_chunks: usize,
        place_pairs: impl FnOnce(bool) -> usize,
    ) -> Self {
        let history_queues = place_pairs(true);
        let history = c.history as usize;
        let max_subscribers = c.max_subscribers as usize;
        let history_stride = if history == 0 {
            0
        } else {
            queue_bytes(history) + table_bytes(max_subscribers)
        };
        let events = history_queues + history_stride * c.max_publishers as usize;
        let slots = c.max_publishers as usize + max_subscribers;
        let tensors = events
            + if device_chunks == 0 {
                0
            } else {
                slots * event_stride(device_chunks)
            };
        Self {
            history,
            history_queues,
            history_stride,
            given: queue_bytes(history),
            max_subscribers,
            device_chunks,
            events,
            tensor_chunks,
            tensors,
            end: tensors + tensor_chunks * TENSOR_BYTES,
        }
    }
}

impl Regions for PubSubLayout {
    fn of(p: &PatternLayout) -> Option<&Self> {
        if let PatternLayout::PublishSubscribe(r) = p {
            Some(r)
        } else {
            None
        }
    }
}

impl<'a> Dynamic<'a> {
    /// Publisher `p`'s history queue (only for a service with history).
    pub fn history_queue(&self, p: usize) -> Queue<'a> {
        let h = self.regions::<PubSubLayout>();
        assert!(p < self.layout().sending && h.history > 0);
        // SAFETY: publisher p's history queue, p checked: inside the pub-sub regions,
        // which end at the layout's length.
        unsafe { self.queue_region(h.history_queues + p * h.history_stride, h.history) }
    }

    /// Publisher `p`'s history-given word for subscriber slot `s` (only for a service
    /// with history): the generation of the subscriber in slot `s` that `p` gave its
    /// history to (0 = none). Written by `p` alone, read by the subscriber at each take
    /// from `p` (see `pubsub::publisher::history`).
    #[inline]
    pub fn history_given(&self, p: usize, s: usize) -> &'a AtomicU64 {
        let h = self.regions::<PubSubLayout>();
        assert!(p < self.layout().sending && s < h.max_subscribers && h.history > 0);
        // SAFETY: publisher p's history-given words, p checked: inside its stride.
        let words = unsafe {
            self.words(
                h.history_queues + p * h.history_stride + h.given,
                h.max_subscribers,
            )
        };
        &words[s]
    }
}

impl<'a> Dynamic<'a> {
    /// The event table of a device-memory service's publisher (`Side::Sending`) or
    /// subscriber slot: its generation word and `chunks x 8` handle words (`None`
    /// for a service without device memory, or a slot out of range).
    pub fn device_events(&self, side: Side, slot: usize) -> Option<(&'a AtomicU64, &'a [AtomicU64])> {
        let h = self.regions::<PubSubLayout>();
        let (sending, receiving) = (self.layout().sending, self.layout().receiving);
        let index = match side {
            Side::Sending if slot < sending => slot,
            Side::Receiving if slot < receiving => sending + slot,
            _ => return None,
        };
        if h.device_chunks == 0 {
            return None;
        }
        let at = h.events + index * event_stride(h.device_chunks);
        // SAFETY: slot `index`'s table, index checked against the slots the region
        // was laid out for: inside the pub-sub regions, which end at the layout's
        // length.
        let generation = unsafe { &self.words(at, 1)[0] };
        // SAFETY: as above, the rest of the same table.
        let handles = unsafe { self.words(at + 64, h.device_chunks * 8) };
        Some((generation, handles))
    }
}

impl<'a> Dynamic<'a> {
    /// The tensor record of chunk `chunk` (its [`chunk_index`]) of a tensor service
    /// (`None` for another service, or a chunk out of range).
    pub fn tensor_record(&self, chunk: usize) -> Option<TensorRecord<'a>> {
        let h = self.regions::<PubSubLayout>();
        if chunk >= h.tensor_chunks {
            return None;
        }
        // SAFETY: chunk `chunk`'s record, checked against the chunks the region was
        // laid out for: inside the pub-sub regions, which end at the layout's length.
        let words = unsafe { self.words(h.tensors + chunk * TENSOR_BYTES, crate::tensor::WORDS) };
        Some(TensorRecord::new(words))
    }
}

impl PatternParts for PubSubLayout {
    fn port_names(&self) -> (&'static str, &'static str) {
        ("publisher", "subscriber")
    }

    fn header_limit(&self) -> (&'static str, u32) {
        ("history", self.history as u32)
    }

    fn end(&self) -> usize {
        self.end
    }
}
