//! The blackboard pattern: the latest value of each of a fixed set of keys, written by
//! writers and read by any number of readers, who join late, read only the keys they
//! need and never queue. (Publish-subscribe says what happened; a blackboard says
//! what is true now.)
//!
//! - **Keys and values.** A blackboard's keys are values of one key type `K` (an
//!   integer or an array of them: no padding), each with its own value type, all
//!   fixed when it is created and recorded in its static config with their types; a
//!   key's initial value is written before any other process can open the service.
//!   A reader or writer asks for `entry::<V>(&key)`: a key the blackboard does not
//!   have, or a `V` that is not the key's recorded type, is an [`EntryError`].
//! - **The value protocol** (`value.rs`, loom-checked in `tests/loom_blackboard.rs`):
//!   each key has `2 * max_readers + 2` value buffers and a `current` word naming the
//!   buffer and generation of the latest value. A writer writes a buffer that no reader
//!   pins and that is not current, then publishes it; a reader pins the current buffer
//!   in a pin word of its own and checks that it is still current. So a reader never
//!   sees a torn value, never blocks a writer, and never waits for another reader; a
//!   writer killed in the middle of an update leaves the last complete value current.
//! - **Writers** (`max_writers`, default 1) update a key, under its lock when there may
//!   be more than one writer: a robust process-shared mutex ([`crate::robust_mutex`])
//!   that the next writer takes over from a dead holder; with a copy
//!   ([`WriterEntry::update_with_copy`]) or a loan written in place
//!   ([`WriterEntry::loan_uninit`]).
//! - **Readers** read a copy ([`ReaderEntry::get`]) or a zero-copy guard
//!   ([`ReaderEntry::read`], one at a time per key and reader), and ask whether a key
//!   changed since they last read it ([`ReaderEntry::has_changed`], by generation).
//! - **Change notification.** Beside the blackboard `NAME` lives the event service
//!   `NAME/~changes`; a writer notifies event id `i` when it updates key `i` (the
//!   order of the keys at creation, [`BlackboardService::event_id`]), so a change
//!   listener ([`BlackboardService::listener_builder`]) works with the WaitSet and
//!   `wait_async` like any listener. Decision: a companion event service rather than a
//!   second wake-up mechanism, so the waking protocol stays the one model-checked.
//! - **Memory.** The values live in the blackboard's dynamic segment, which every
//!   participant maps for reading and writing; its pool is the minimal one of an event
//!   service (decision: the value buffers need no chunk ownership, and the segment is
//!   written before the service appears). So a blackboard is CPU memory only.
//! - **Faults.** A dead writer's slot is freed and its lock taken over; a dead reader's
//!   slot is freed and its pins cleared (`recovery.rs`), both by the usual recovery. A
//!   forked child's copies of a reader, a guard, a writer or a loan neither unpin nor
//!   publish (they are the parent's); a current word naming no buffer (damaged shared
//!   memory) is [`ReadError::Damaged`], never a panic.
//!
//! Files: `config.rs` (the static config section), `layout.rs` (its regions),
//! `value.rs` (the protocol), `service.rs` (builder, [`BlackboardService`]),
//! `writer.rs`, `reader.rs`, `raw.rs` (values as bytes, for bindings), `int_key.rs`
//! (the integer key types chosen at run time, for bindings), `recovery.rs`,
//! `inspect.rs` (what `iox show` lists).

pub(crate) use iox_core::inspect::blackboard as inspect;
pub(crate) use iox_core::shm::regions::blackboard as layout;
pub(crate) use iox_core::static_config::blackboard as config;
pub(crate) mod int_key;
pub(crate) mod raw;
pub(crate) mod reader;
pub(crate) mod service;
pub(crate) use iox_core::shm::blackboard_value as value;
pub(crate) mod writer;

use thiserror::Error;

pub use config::{MAX_BLACKBOARD_KEYS, MAX_BLACKBOARD_VALUE};
pub use inspect::KeyInfo;
pub use int_key::{IntKeyBlackboard, IntKeyBuilder, IntKeyError, IntKeyReader, IntKeyWriter, KeyType};
pub use raw::{RawReaderEntry, RawWriterEntry};
pub use reader::{ReadError, Reader, ReaderBuilder, ReaderEntry, ValueGuard};
pub use service::{BlackboardBuilder, BlackboardService};
pub use writer::{EntryLoan, WriteError, Writer, WriterBuilder, WriterEntry};

use crate::ZeroCopySafe;

/// Why `entry::<V>(&key)` was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EntryError {
    /// The blackboard has no such key.
    #[error("blackboard {name:?} has no key {key}; its keys are {keys}")]
    NoSuchKey {
        /// The blackboard.
        name: String,
        /// The key asked for.
        key: String,
        /// The keys it has.
        keys: String,
    },
    /// The key's values are of another type.
    #[error("key {key} of blackboard {name:?} holds {found}, not {requested}")]
    WrongType {
        /// The blackboard.
        name: String,
        /// The key.
        key: String,
        /// The type asked for.
        requested: String,
        /// The key's recorded type.
        found: String,
    },
}

/// The bytes of `key` (its type has no padding: checked when the builder is made).
pub(crate) fn key_bytes<K: ZeroCopySafe>(key: &K) -> &[u8] {
    const {
        assert!(
            K::ANY_BIT_PATTERN,
            "a blackboard key type has no padding and no invalid bit patterns"
        )
    };
    // SAFETY: K is valid for every bit pattern and has no padding (the builder's
    // const assertion on `K::ANY_BIT_PATTERN`), so all its bytes are initialised.
    unsafe { std::slice::from_raw_parts((key as *const K).cast::<u8>(), size_of::<K>()) }
}

/// The index of `key` in `service`, whatever its value type, or why not.
pub(crate) fn key_index<K: ZeroCopySafe + std::fmt::Debug>(
    service: &BlackboardService<K>,
    key: &K,
) -> Result<usize, EntryError> {
    service
        .blackboard_config()
        .index_of(key_bytes(key))
        .ok_or_else(|| EntryError::NoSuchKey {
            name: service.name().to_string(),
            key: format!("{key:?}"),
            keys: format!("{:?}", service.keys()),
        })
}

/// The index of `key` in `service` with values of type `V`, or why not.
pub(crate) fn entry_index<K: ZeroCopySafe + std::fmt::Debug, V: ZeroCopySafe>(
    service: &BlackboardService<K>,
    key: &K,
) -> Result<usize, EntryError> {
    let i = key_index(service, key)?;
    let found = &service.blackboard_config().entries[i].value;
    let requested = <V as crate::Payload>::payload_type();
    if *found != requested {
        return Err(EntryError::WrongType {
            name: service.name().to_string(),
            key: format!("{key:?}"),
            requested: requested.to_string(),
            found: found.to_string(),
        });
    }
    Ok(i)
}
