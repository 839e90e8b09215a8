//! A service open in this process: what a service handle and all its ports share
//! ([`ServiceShared`]: the static config, the pool, the dynamic segment, this process's
//! node and user entry), made by open / create (`crate::service`) and unregistered when
//! the last holder drops it.

use std::path::PathBuf;
use std::sync::Arc;

use iox_mempool::Pool;

use crate::ServiceName;
use crate::dynamic::{Dynamic, DynamicSegment};
use crate::lifecycle;
use crate::node::Node;
use crate::static_config::StaticConfig;

/// What one process shares between a service handle and its ports.
#[derive(Debug)]
pub struct ServiceShared {
    pub name: ServiceName,
    pub root: PathBuf,
    pub stem: String,
    pub config: StaticConfig,
    pub pool: Arc<Pool>,
    pub dynamic: DynamicSegment,
    pub node: Arc<Node>,
    /// Our entry in the users table.
    pub user: usize,
    /// The descriptors this process offers to newcomers (a memfd payload), taken
    /// back after our user entry is gone (field order: dropped after `drop` ran).
    pub _offer: Option<crate::handover::Offer>,
    pub created: bool,
    /// The fork generation it was opened in (see `iox_process::fork`): a forked child's
    /// copies must not act for the parent.
    pub fork_generation: u64,
}

impl ServiceShared {
    /// (sending, receiving) ports connected right now (a snapshot).
    pub fn port_counts(&self) -> (usize, usize) {
        let d = self.dynamic();
        let l = d.layout();
        (
            crate::dynamic::active_count((0..l.sending).map(|p| d.sender(p))),
            crate::dynamic::active_count((0..l.receiving).map(|s| d.receiver(s))),
        )
    }

    pub fn dynamic(&self) -> Dynamic<'_> {
        self.dynamic.view()
    }

    /// Whether this handle's service was removed (see `crate::lifecycle`). Slow paths
    /// only: one load of the dynamic header's line.
    #[cold]
    pub fn is_removed(&self) -> bool {
        crate::lifecycle::is_removed(self.dynamic())
    }

    pub fn node_id(&self) -> u64 {
        self.node.id()
    }

    /// Whether this is the process that opened the service (not a forked child).
    #[inline]
    pub fn is_own_process(&self) -> bool {
        crate::fork::is_same_process(self.fork_generation)
    }
}

impl Drop for ServiceShared {
    fn drop(&mut self) {
        if !self.is_own_process() {
            return; // a forked child dropping its copy: the registration is the parent's
        }
        lifecycle::unregister_user(&self.root, &self.stem, &self.dynamic, self.user, self.node.id());
    }
}
