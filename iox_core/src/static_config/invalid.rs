//! [`InvalidConfig`]: what [`super::StaticConfig::check`] finds out of bounds in a
//! static config, one variant per rule, each message saying what to change.

use thiserror::Error;

use super::alignment_problem;
use crate::attributes::AttributeError;

/// A static config value out of bounds (what [`super::StaticConfig::check`] finds).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum InvalidConfig {
    /// The service name is invalid.
    #[error(transparent)]
    Name(#[from] crate::NameError),
    /// The recorded payload schema is damaged (the message says how).
    #[error("payload schema: {0}")]
    Schema(#[from] crate::schema::SchemaError),
    /// The recorded user header is not one iox can use (the message says why).
    #[error("user header: {0}")]
    UserHeader(String),
    /// The recorded user header's schema is damaged (the message says how).
    #[error("user header schema: {0}")]
    UserHeaderSchema(crate::schema::SchemaError),
    /// An attribute breaks a rule of [`crate::attributes`] (the message names the key
    /// and the rule).
    #[error(transparent)]
    Attribute(#[from] AttributeError),
    /// A blackboard's keys or limits are not valid (the message says which).
    #[error("blackboard: {0}")]
    Blackboard(String),
    /// A limit is 0 or above its maximum.
    #[error("{what} is {value}; it must be 1..={max}{rule}")]
    Limit {
        /// Which limit.
        what: &'static str,
        /// Its value.
        value: u32,
        /// Its maximum.
        max: u32,
        /// The rule behind the maximum (starts with "; ").
        rule: &'static str,
    },
    /// More ports than chunk owner bits.
    #[error(
        "{sending} + {receiving} is {ports}; at most {max} ports per service (each port is one owner bit in a chunk's ownership word)"
    )]
    TooManyPorts {
        /// The pattern's name of its sending-port limit.
        sending: &'static str,
        /// The pattern's name of its receiving-port limit.
        receiving: &'static str,
        /// The sum asked for.
        ports: u32,
        /// The limit.
        max: u32,
    },
    /// Too many queue slots in the dynamic segment.
    #[error(
        "{product} is {slots}; at most {max} queue slots per service (8 bytes each in the dynamic segment)"
    )]
    TooManyQueueSlots {
        /// The limits multiplied, by name.
        product: &'static str,
        /// The product asked for.
        slots: u64,
        /// The limit.
        max: u64,
    },
    /// A size class given with fewer chunks than the limits can occupy at once
    /// (refused unless the builder allows pool exhaustion).
    #[error(
        "the size class of {chunk_size}-byte chunks has {count} chunks; publishers' loans and spares, full subscriber buffers, publishers' histories and held samples can occupy {needed} at once (max_publishers x (max_loans + 1 + max_subscribers x subscriber_buffer + history) + max_subscribers x max_held), so a subscriber that stops reading could make a publisher's loan fail with PoolExhausted; give it {needed} chunks, lower the limits, let iox derive the counts (.chunk_sizes(..)), or accept exhaustion (.allow_pool_exhaustion(true))"
    )]
    PoolTooSmall {
        /// Bytes per chunk of the class.
        chunk_size: usize,
        /// The count given.
        count: usize,
        /// The worst case the limits allow.
        needed: usize,
    },
    /// A history longer than the subscriber buffer.
    #[error(
        "history is {history}; it must be at most subscriber_buffer ({buffer}), so that a subscriber that connects can be given the whole history in its fresh queue"
    )]
    History {
        /// The history asked for.
        history: u32,
        /// The subscriber buffer.
        buffer: u32,
    },
    /// Permissions outside 0o777 or without owner read-write.
    #[error("permissions {0:#o} must be bits of 0o777 including 0o600")]
    Permissions(u32),
    /// A host tensor service whose payload is not a slice of numbers: its samples'
    /// tensor records could name no element type, so no tensor port could use it.
    #[error(
        "a tensor service carries a slice of numbers (u8 .. f64, bool, recorded with their schema); \
         this one carries {payload}: create it without tensors, or with a number element type"
    )]
    TensorElement {
        /// The payload the config records.
        payload: String,
    },
    /// The payload's alignment is invalid or above the pool's.
    #[error(
        "payload alignment {align} {}",
        alignment_problem(*align, *pool).unwrap_or_default()
    )]
    PayloadAlignment {
        /// The payload's alignment.
        align: usize,
        /// The pool's alignment.
        pool: usize,
    },
    /// The payload does not fit the largest chunk.
    #[error("payload of {size} bytes does not fit the largest chunk ({chunk})")]
    PayloadSize {
        /// Bytes per payload (element).
        size: usize,
        /// The largest chunk.
        chunk: usize,
    },
    /// The memfd's recorded length is not the layout's payload length.
    #[error("memfd backing of {memfd} bytes, but the layout's payload is {payload}")]
    MemfdLength {
        /// The memfd's length.
        memfd: u64,
        /// The payload's length.
        payload: usize,
    },
    /// A pool on other pages than base pages without a memfd payload: huge pages are
    /// for the default memfd backing only (a named file under the root lives on the
    /// root's file system, whose pages iox does not choose; a device pool lives in GPU
    /// memory, which the driver maps in its own granularity).
    #[error("page size {pages} needs the default memfd backing on the host: {why}")]
    PageSize {
        /// The page size asked for.
        pages: iox_mempool::PageSize,
        /// Why this service cannot have it.
        why: &'static str,
    },
    /// Device memory (`CudaDevice`) without its device backing, a device backing of
    /// another memory type, or device memory for another pattern than
    /// publish-subscribe.
    #[error("the CudaDevice memory type goes with a CudaDevice backing and publish-subscribe services only")]
    DeviceMemory,
    /// The device allocation is shorter than the payload and its identity mark.
    #[error("device allocation of {len} bytes, but the layout's payload is {payload} (and 16 more)")]
    DeviceLength {
        /// The allocation's length.
        len: u64,
        /// The payload's length.
        payload: usize,
    },
    /// An event id setting above `event_id_max`, or `event_id_max` above
    /// [`MAX_EVENT_ID`].
    #[error("{what} is {value}; it must be at most {max}")]
    EventId {
        /// Which setting.
        what: &'static str,
        /// Its value.
        value: u32,
        /// Its maximum.
        max: u32,
    },
    /// An access policy that cannot be kept (see [`crate::access`]).
    #[error("{0}")]
    Access(String),
    /// A size setting overflows.
    #[error("{what} {value} overflows")]
    Overflow {
        /// Which setting.
        what: &'static str,
        /// Its value.
        value: usize,
    },
}

impl InvalidConfig {
    /// Whether the problem is in the payload, pool or backing (not in the limits): what
    /// a builder fills in after its first check.
    pub fn is_payload(&self) -> bool {
        matches!(
            self,
            Self::PayloadAlignment { .. }
                | Self::PayloadSize { .. }
                | Self::UserHeader(_)
                | Self::MemfdLength { .. }
                | Self::DeviceMemory
                | Self::DeviceLength { .. }
                | Self::PageSize { .. }
        )
    }
}
