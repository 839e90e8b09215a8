//! The files of a service and what lives in them: the dynamic segment, the queues,
//! and the lifecycle of a service's files.

pub(crate) mod doorbell;
pub(crate) mod dynamic;
pub(crate) mod files;
pub(crate) mod lifecycle;
pub(crate) mod queue;

/// The atomics of the queue protocol (`queue.rs`): std's here; the loom model
/// (`tests/loom_queue.rs`) compiles that file next to a module of this name with
/// loom's.
mod sync {
    pub(crate) use std::hint::spin_loop;
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
}
