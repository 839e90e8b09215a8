//! Where everything lives in a dynamic segment sized for one static config
//! ([`DynamicLayout`]): the header, the users table, the port slots, the pair queues,
//! the history queues, the listeners' pending sets and the response queues, each
//! region's offset and stride computed from the limits alone, so every process that
//! reads the same static config finds the same offsets. The segment itself, its
//! header and the views over it are in [`crate::dynamic`].

use crate::queue::{PaddedIndex, index_mask};
use crate::shm::dynamic::{HEADER_LEN, USER_SLOTS};
use crate::static_config::StaticConfig;

/// The bits of each listener's pending set: `event_id_max + 1` for event services,
/// 0 for others.
pub(crate) fn event_ids(c: &StaticConfig) -> u32 {
    c.event.map_or(0, |e| e.event_id_max + 1)
}

/// The depth of each response queue of a request-response service (0 for others).
pub(crate) fn response_buffer(c: &StaticConfig) -> usize {
    c.request_response.as_ref().map_or(0, |r| {
        c.subscriber_buffer as usize * r.max_response_buffer as usize
    })
}
/// Where everything lives in a dynamic segment sized for one static config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DynamicLayout {
    pub(crate) max_publishers: usize,
    pub(crate) max_subscribers: usize,
    pub(crate) buffer: usize,
    /// `queue::index_mask(buffer)`, computed once.
    pub(crate) buffer_mask: u64,
    /// The bits of the connected-subscriber set that name a slot
    /// (`connected::all(max_subscribers)`), computed once.
    pub(crate) subscriber_mask: u64,
    /// The bits of a publisher-slot set that name a slot
    /// (`connected::all(max_publishers)`), computed once.
    pub(crate) publisher_mask: u64,
    pub(crate) max_loans: u32,
    pub(crate) max_held: u32,
    pub(crate) users: usize,
    pub(crate) user_holders: usize,
    pub(crate) publishers: usize,
    pub(crate) subscribers: usize,
    pub(crate) queues: usize,
    /// 0 when the service has no queues (event services).
    pub(crate) queue_stride: usize,
    /// `max_subscribers x queue_stride`: from one publisher's queues to the next's.
    pub(crate) queue_row_stride: usize,
    /// Publisher-subscriber queues: `max_publishers x max_subscribers`, 0 for event
    /// services.
    pub(crate) pairs: usize,
    /// Samples each publisher keeps for late subscribers (0 = no history queues).
    pub(crate) history: usize,
    /// Offset of publisher 0's history queue (the end of the pair queues).
    pub(crate) history_queues: usize,
    pub(crate) history_stride: usize,
    /// Event services: where the listeners' pending sets start, and each one's
    /// words and stride in bytes (all 0 for other patterns).
    pub(crate) pending: usize,
    pub(crate) pending_words: usize,
    pub(crate) pending_stride: usize,
    /// Event services: the event id recovery emits for a dead notifier.
    pub(crate) dead_event: Option<u32>,
    /// Event services: `event_id_max + 1` (0 for other patterns).
    pub(crate) event_ids: u32,
    /// Request-response services (all 0 for other patterns): where the clients'
    /// request-slot words start (`buffer` words per client, each client's on its own
    /// line(s), see `crate::reqres::slots`), where the response queues start (one per
    /// (server, client) pair, row-major by server) and their depth and stride.
    pub(crate) request_words: usize,
    pub(crate) request_words_stride: usize,
    pub(crate) responses: usize,
    pub(crate) response_buffer: usize,
    pub(crate) response_stride: usize,
    pub(crate) len: usize,
}

pub(crate) fn table_bytes(entries: usize) -> usize {
    (entries * 8).next_multiple_of(64)
}

impl DynamicLayout {
    /// A layout covering the header and users table only (for tools and recovery
    /// steps that touch nothing else).
    pub(crate) fn header_only() -> Self {
        let users = HEADER_LEN;
        let user_holders = users + USER_SLOTS * 8;
        let publishers = user_holders + USER_SLOTS * 4;
        Self {
            max_publishers: 0,
            max_subscribers: 0,
            buffer: 0,
            buffer_mask: index_mask(0),
            subscriber_mask: 0,
            publisher_mask: 0,
            max_loans: 0,
            max_held: 0,
            users,
            user_holders,
            publishers,
            subscribers: publishers,
            queues: publishers,
            queue_stride: 0,
            queue_row_stride: 0,
            pairs: 0,
            history: 0,
            history_queues: publishers,
            history_stride: 0,
            pending: publishers,
            pending_words: 0,
            pending_stride: 0,
            dead_event: None,
            event_ids: 0,
            request_words: publishers,
            request_words_stride: 0,
            responses: publishers,
            response_buffer: 0,
            response_stride: 0,
            len: publishers,
        }
    }

    /// Whether this is a request-response service's layout.
    pub(crate) fn is_request_response(&self) -> bool {
        self.response_buffer != 0
    }

    /// Whether this is an event service's layout (pending sets, no queues).
    pub(crate) fn is_event(&self) -> bool {
        self.event_ids != 0
    }

    pub(crate) fn new(c: &StaticConfig) -> Self {
        let (max_publishers, max_subscribers) = (c.max_publishers as usize, c.max_subscribers as usize);
        let buffer = c.subscriber_buffer as usize;
        // Read word alone on a line; write index and slots together, so a push moves
        // one line to the consumer (for buffers up to 7).
        let pending_words = (event_ids(c) as usize).div_ceil(64);
        let queue_stride = if pending_words != 0 {
            0 // an event service has no queues
        } else {
            size_of::<PaddedIndex>() + table_bytes(1 + buffer)
        };
        let users = HEADER_LEN;
        let user_holders = users + USER_SLOTS * 8;
        let publishers = user_holders + USER_SLOTS * 4;
        let subscribers = publishers + 64 * max_publishers;
        let queues = subscribers + 64 * max_subscribers;
        let history = c.history as usize;
        let history_queues = queues + queue_stride * max_publishers * max_subscribers;
        // Per publisher: its history queue, then one word per subscriber slot (the
        // generation of the subscriber it gave its history to, see `history_given`).
        let history_stride = if history == 0 {
            0
        } else {
            size_of::<PaddedIndex>() + table_bytes(1 + history) + table_bytes(max_subscribers)
        };
        let pending = history_queues + history_stride * max_publishers;
        let pending_stride = table_bytes(pending_words);
        let request_words = pending + pending_stride * max_subscribers;
        let response_buffer = response_buffer(c);
        let (request_words_stride, response_stride) = if response_buffer == 0 {
            (0, 0)
        } else {
            (
                table_bytes(buffer),
                size_of::<PaddedIndex>() + table_bytes(1 + response_buffer),
            )
        };
        let responses = request_words + request_words_stride * max_publishers;
        let len = responses + response_stride * max_publishers * max_subscribers;
        Self {
            max_publishers,
            max_subscribers,
            buffer,
            buffer_mask: index_mask(buffer),
            subscriber_mask: crate::shm::connected::all(max_subscribers),
            publisher_mask: crate::shm::connected::all(max_publishers),
            max_loans: c.max_loans,
            max_held: c.max_held,
            users,
            user_holders,
            publishers,
            subscribers,
            queues,
            queue_stride,
            queue_row_stride: max_subscribers * queue_stride,
            pairs: if queue_stride == 0 {
                0
            } else {
                max_publishers * max_subscribers
            },
            history,
            history_queues,
            history_stride,
            pending,
            pending_words,
            pending_stride,
            dead_event: c.event.and_then(|e| e.notifier_dead_event),
            event_ids: event_ids(c),
            request_words,
            request_words_stride,
            responses,
            response_buffer,
            response_stride,
            len,
        }
    }
}
