//! The errors of creating, opening and using a pool.

use thiserror::Error;

use super::CHUNKS_VERSION;
use crate::MemoryType;
use crate::segment::{CreateSegmentError, OpenSegmentError};

/// Why [`Pool::create`](crate::Pool::create) failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CreatePoolError {
    /// A segment could not be created.
    #[error(transparent)]
    Segment(#[from] CreateSegmentError),
    /// The payload handed in is not as long as the layout needs.
    #[error("the payload is {len} bytes long, the layout needs exactly {expected}")]
    PayloadLength {
        /// Its length.
        len: usize,
        /// The layout's payload length.
        expected: usize,
    },
}

/// Why [`Pool::open`](crate::Pool::open) failed. Each names the file and what is wrong with it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OpenPoolError {
    /// A segment could not be opened, or is too short.
    #[error(transparent)]
    Segment(#[from] OpenSegmentError),
    /// The device memory handed in is shorter than the layout's payload.
    #[error("the device memory is {len} bytes long, the layout's payload needs {expected}")]
    DevicePayloadLength {
        /// Its length.
        len: usize,
        /// The layout's payload length.
        expected: usize,
    },
    /// The bookkeeping has no magic yet: its creator is still building it (or died).
    #[error("{path} is not initialised yet (its creator is still building it, or died while doing so)")]
    NotReady {
        /// The file.
        path: String,
    },
    /// The file is another kind of iox file.
    #[error("{path} has magic {found:#018x}, which belongs to another kind of iox file, not a chunk pool")]
    WrongMagic {
        /// The file.
        path: String,
        /// The magic found.
        found: u64,
    },
    /// The file is not an iox file at all.
    #[error("{path} is not an iox file (magic {found:#018x})")]
    Foreign {
        /// The file.
        path: String,
        /// The first eight bytes found.
        found: u64,
    },
    /// The pool belongs to another incarnation than the caller expects (it was removed
    /// and created again meanwhile).
    #[error("{path} has tag {found:#018x}, expected {expected:#018x}: it belongs to another incarnation")]
    TagMismatch {
        /// The file.
        path: String,
        /// The tag expected.
        expected: u64,
        /// The tag found.
        found: u64,
    },
    /// Written by an incompatible version of iox.
    #[error("{path} has bookkeeping version {found}; this iox reads version {CHUNKS_VERSION}")]
    UnsupportedVersion {
        /// The file.
        path: String,
        /// The version found.
        found: u32,
    },
    /// The pool was laid out differently from what the caller expects.
    #[error(
        "{path} has layout hash {found:#018x}, expected {expected:#018x}: the pool's size classes differ"
    )]
    LayoutMismatch {
        /// The file.
        path: String,
        /// Hash of the caller's layout.
        expected: u64,
        /// Hash in the file.
        found: u64,
    },
    /// The header's payload length or class count disagrees with the layout.
    #[error("{path} claims {what} {found}, but the layout gives {expected}")]
    HeaderMismatch {
        /// The file.
        path: String,
        /// Which field.
        what: &'static str,
        /// What the layout says.
        expected: u64,
        /// What the file says.
        found: u64,
    },
    /// The pool was created with another memory type.
    #[error("{path} holds a {found} pool, expected {expected}")]
    MemoryTypeMismatch {
        /// The file.
        path: String,
        /// The type expected.
        expected: MemoryType,
        /// The code found.
        found: String,
    },
}

/// Why [`Pool::loan`](crate::Pool::loan) failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LoanError {
    /// No class holds this many bytes.
    #[error("{size} bytes requested; the largest chunk of this pool holds {max}")]
    TooLarge {
        /// Bytes requested.
        size: usize,
        /// Largest chunk size.
        max: usize,
    },
    /// Every chunk of the fitting class is in use.
    #[error(
        "all {count} chunks of {chunk_size} bytes are in use (pool exhausted): release samples or enlarge the pool"
    )]
    Exhausted {
        /// The class's chunk size.
        chunk_size: usize,
        /// The class's chunk count.
        count: u32,
    },
    /// The payload is mapped read-only in this process.
    #[error("the pool's payload is mapped read-only in this process; it cannot loan chunks")]
    ReadOnly,
}

/// Why an ownership operation on a chunk failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// The handle does not name a chunk of this pool.
    #[error("chunk handle class {class} index {index} is outside the pool")]
    InvalidHandle {
        /// The class.
        class: usize,
        /// The index.
        index: u32,
    },
    /// The owner does not hold the chunk: a double release, or a stale handle.
    #[error("chunk class {class} index {index} is not held by owner {owner} (double release?)")]
    NotOwned {
        /// The class.
        class: usize,
        /// The index.
        index: u32,
        /// The owner number.
        owner: u32,
    },
    /// The owner already holds the chunk it tried to take from a queue: the queue
    /// entry is a duplicate (corrupt shared memory). Nothing was changed.
    #[error("chunk class {class} index {index} is already held by owner {owner} (duplicate queue entry)")]
    AlreadyOwned {
        /// The class.
        class: usize,
        /// The index.
        index: u32,
        /// The owner number.
        owner: u32,
    },
    /// The chunk is free, so no one's hold keeps it for the owner to join
    /// ([`crate::Bookkeeping::hold_queued`]): a stale handle. Nothing was changed.
    #[error("chunk class {class} index {index} is free: there is no hold to join (stale handle?)")]
    Free {
        /// The class.
        class: usize,
        /// The index.
        index: u32,
    },
}
