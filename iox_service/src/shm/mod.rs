//! The files of a service and what lives in them: the dynamic segment, the queues,
//! and the lifecycle of a service's files.

pub(crate) mod arming;
pub(crate) mod connected;
pub(crate) mod doorbell;
pub(crate) mod dynamic;
pub(crate) use iox_process::files;
pub(crate) mod layout;
pub(crate) mod lifecycle;
pub(crate) mod may_wait;
pub(crate) mod publishers_seen;
pub(crate) mod queue;

/// The atomics of the queue, connected-set, arming and may-wait protocols
/// (`queue.rs`, `connected.rs`, `arming.rs`, `may_wait.rs`): std's here; the loom
/// models (`tests/loom_queue.rs`, `tests/loom_connected.rs`, `tests/loom_arming.rs`,
/// `tests/loom_may_wait.rs`) compile those files next to a module of this name with
/// loom's.
mod sync {
    pub(crate) use std::hint::spin_loop;
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
}
