//! What the kernel gave each process that maps a service's pool on huge pages: read
//! from that process's `/proc/<pid>/smaps` (its mappings of the pool's memfd, by
//! device, inode and name, added up),
//! so `iox show` reports pages the kernel actually uses, not the ones asked for
//! (transparent huge pages are best effort). Processes in another PID namespace, or of
//! another user where this one is not root, cannot be looked at: they are listed with
//! the reason.

use serde::Serialize;

use super::UserInfo;
use crate::static_config::{PayloadBacking, StaticConfig};

/// One process's mapping of a pool on huge pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessPages {
    /// The process id.
    pub pid: u32,
    /// What the kernel gave its mapping, if it could be read and it maps the pool.
    pub mapped: Option<iox_mempool::MappedPages>,
    /// Why it could not be read, if it could not.
    pub unreadable: Option<String>,
}

/// The mappings of the live users of a memfd pool on other than base pages (empty for
/// every other service: nothing to report).
pub(super) fn of_users(config: &StaticConfig, users: &[UserInfo]) -> Vec<ProcessPages> {
    let PayloadBacking::Memfd(id) = config.backing else {
        return Vec::new();
    };
    if config.layout.page_size().is_base() {
        return Vec::new();
    }
    let suffix = id.link_suffix();
    let which = iox_mempool::pages::Mapping::Memfd {
        dev: id.dev,
        ino: id.ino,
        suffix: &suffix,
    };
    let mut out: Vec<ProcessPages> = Vec::new();
    for u in users.iter().filter(|u| u.alive && u.pid != 0) {
        // One process may hold several handles: it is looked at once.
        if out.iter().any(|p| p.pid == u.pid) {
            continue;
        }
        if u.other_namespace {
            out.push(ProcessPages {
                pid: u.pid,
                mapped: None,
                unreadable: Some("in another PID namespace".into()),
            });
            continue;
        }
        let (mapped, unreadable) = match iox_mempool::pages::mapped_by(u.pid, which) {
            Ok(m) => (m, None),
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(ProcessPages {
            pid: u.pid,
            mapped,
            unreadable,
        });
    }
    out
}
