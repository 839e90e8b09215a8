//! What the protocol-word files see as `crate::sync` inside a loom model: loom's
//! atomics and spin hint (a yield) in place of std's (`src/sync.rs`). Each model
//! imports it at its root (`use loom_common::sync;`); a model uses some of these.

#![allow(unused_imports)]

pub use loom::hint::spin_loop;
pub use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
