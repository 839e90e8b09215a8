//! The atomics of the protocol words (`shm::{queue, connected, arming, may_wait,
//! publishers_seen, pending_set, request_word, blackboard_value}`),
//! the one place they come from: std's here. The loom models (`tests/loom_*.rs`)
//! compile those files as modules of the test next to their own `sync` module
//! (`tests/loom_common/sync.rs`, loom's atomics), so the words are model-checked as
//! they are built.

pub use std::hint::spin_loop;
pub use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
