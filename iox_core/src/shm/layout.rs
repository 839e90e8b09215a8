//! Where everything lives in a dynamic segment sized for one static config
//! ([`DynamicLayout`]): the core's regions (the header, the users table, the port
//! slots and, for patterns that have them, one queue per (sending slot, receiving slot)
//! pair), then the regions of the service's pattern, which the pattern lays out
//! itself ([`crate::shm::regions::PatternLayout`]). Every offset and stride is computed
//! from the static config alone, so every process that reads the same static config
//! finds the same offsets. The segment itself, its header and the views over it are
//! in [`crate::dynamic`].

use crate::queue::{PaddedIndex, index_mask};
use crate::shm::dynamic::{HEADER_LEN, USER_SLOTS};
use crate::shm::regions::PatternLayout;
use crate::static_config::StaticConfig;

/// Bytes of a queue region of `depth` slots: the read index alone on its line, then
/// the write index followed by the slots (so a push moves one line to the consumer,
/// for depths up to 7).
pub fn queue_bytes(depth: usize) -> usize {
    size_of::<PaddedIndex>() + table_bytes(1 + depth)
}

/// Where everything lives in a dynamic segment sized for one static config.
#[derive(Debug, Clone, Copy)]
pub struct DynamicLayout {
    /// Sending port slots (publishers, notifiers, clients).
    pub sending: usize,
    /// Receiving port slots (subscribers, listeners, servers).
    pub receiving: usize,
    /// The depth of each pair queue (`PortLimits::queue_depth`; 0 without pair
    /// queues).
    pub buffer: usize,
    /// `queue::index_mask(buffer)`, computed once.
    pub buffer_mask: u64,
    /// The bits of the connected-subscriber set that name a slot
    /// (`connected::all(receiving)`), computed once.
    pub subscriber_mask: u64,
    /// The bits of a publisher-slot set that name a slot
    /// (`connected::all(sending)`), computed once.
    pub publisher_mask: u64,
    pub max_loans: u32,
    pub max_held: u32,
    pub users: usize,
    pub user_holders: usize,
    pub publishers: usize,
    pub subscribers: usize,
    pub queues: usize,
    /// 0 when the pattern has no pair queues.
    pub queue_stride: usize,
    /// `receiving x queue_stride`: from one sending slot's queues to the next's.
    pub queue_row_stride: usize,
    /// Pair queues: `sending x receiving`, 0 when the pattern has none.
    pub pairs: usize,
    /// The pattern's own regions, after the pair queues.
    pub pattern: PatternLayout,
    pub len: usize,
}

pub fn table_bytes(entries: usize) -> usize {
    (entries * 8).next_multiple_of(64)
}

impl DynamicLayout {
    /// A layout covering the header and users table only (for tools and recovery
    /// steps that touch nothing else).
    pub fn header_only() -> Self {
        let users = HEADER_LEN;
        let user_holders = users + USER_SLOTS * 8;
        let publishers = user_holders + USER_SLOTS * 4;
        Self {
            sending: 0,
            receiving: 0,
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
            pattern: PatternLayout::Unattached,
            len: publishers,
        }
    }

    pub fn new(c: &StaticConfig) -> Self {
        let limits = c.port_limits();
        let (sending, receiving) = (limits.sending as usize, limits.receiving as usize);
        let buffer = limits.queue_depth as usize;
        let users = HEADER_LEN;
        let user_holders = users + USER_SLOTS * 8;
        let publishers = user_holders + USER_SLOTS * 4;
        let subscribers = publishers + 64 * sending;
        let queues = subscribers + 64 * receiving;
        let mut queue_stride = 0;
        // The pattern says whether it has pair queues; the core places them.
        let pattern = PatternLayout::new(c, |has_pairs| {
            if has_pairs {
                queue_stride = queue_bytes(buffer);
            }
            queues + queue_stride * sending * receiving
        });
        Self {
            sending,
            receiving,
            buffer,
            buffer_mask: index_mask(buffer),
            subscriber_mask: crate::shm::connected::all(receiving),
            publisher_mask: crate::shm::connected::all(sending),
            max_loans: limits.max_loans,
            max_held: limits.max_held,
            users,
            user_holders,
            publishers,
            subscribers,
            queues,
            queue_stride,
            queue_row_stride: receiving * queue_stride,
            pairs: if queue_stride == 0 { 0 } else { sending * receiving },
            len: pattern.parts().end(),
            pattern,
        }
    }
}
