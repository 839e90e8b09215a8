//! Test hooks for iox's own tests, compiled in only with the `testing` cargo feature:
//! the stall points ([`crate::stall`], re-exported here), node helpers, and the
//! descriptor responder's faults.
//!
//! A holder's responder answers wrongly when [`HANDOVER_ENV`] says how (`garbage`,
//! `no-fd`, `wrong-fd`, `oversized`, `silent`, or a memfd named like the service's
//! that is `unsealed`, `short`, another inode (`same-name`) or has an `other-nonce`),
//! from the first request on or from the one [`HANDOVER_FROM_ENV`] counts to.

pub use crate::stall::*;

/// The environment variable that makes this process's descriptor responder answer
/// wrongly (see the module docs).
#[cfg(feature = "testing")]
pub const HANDOVER_ENV: &str = "IOX_TEST_HANDOVER";

/// With [`HANDOVER_ENV`]: answer the first n requests correctly, then wrongly.
#[cfg(feature = "testing")]
pub const HANDOVER_FROM_ENV: &str = "IOX_TEST_HANDOVER_FROM";

/// Node liveness, for tests that check how dead processes are told from live ones.
#[cfg(feature = "testing")]
pub use crate::node::{is_alive, process_node_id};

/// This process's node under `root`, made on first use and kept while the guard
/// lives: the node registry's work alone, without a service (for tests of the
/// registry itself, e.g. across a fork).
#[cfg(feature = "testing")]
pub fn node_for_root(root: &std::path::Path) -> std::io::Result<NodeGuard> {
    crate::node::Node::for_root(root).map(NodeGuard)
}

/// Keeps a node made by [`node_for_root`].
#[cfg(feature = "testing")]
pub struct NodeGuard(#[allow(dead_code)] std::sync::Arc<crate::node::Node>);

/// The files under `root`, sorted, but for this process's own node file: a test
/// process uses many roots at once (one per test thread), and a node file stays,
/// locked, while its process still has a node under another root (see the node
/// module's `RETIRED`).
#[cfg(feature = "testing")]
pub fn files_but_own_node(root: &std::path::Path) -> Vec<String> {
    let own = crate::files::node_file_name(process_node_id());
    let mut v: Vec<String> = std::fs::read_dir(root)
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.retain(|f| *f != own);
    v.sort();
    v
}
#[cfg(feature = "testing")]
pub use crate::files::parse_node_file_name;
