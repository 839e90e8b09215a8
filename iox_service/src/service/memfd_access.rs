//! Reaching a service's memfd payload through a live participant.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use iox_mempool::segment::{Access, Segment};
use iox_mempool::{MemfdIdentity, Pool};
use rustix::fs::{Mode, OFlags};

use crate::dynamic::Dynamic;
use crate::node;
use crate::recovery::Liveness;
use crate::static_config::{PayloadBacking, StaticConfig};

/// Why no participant let us reach the memfd: what happened with each, and whether
/// it may well work a moment later (a participant registering or leaving).
pub(super) struct Unreachable {
    pub(super) tried: Vec<String>,
    pub(super) transient: bool,
}

/// Opens the memfd payload through a live participant: `/proc/<pid>/fd/<n>` of each
/// registered user whose node is alive, until one passes the checks of
/// [`iox_mempool::memfd::open_memfd`]. The link is read first and must name this
/// service's memfd, so nothing else (a terminal, a device) is ever opened.
pub(super) fn reach_memfd(
    d: Dynamic<'_>,
    stem: &str,
    id: MemfdIdentity,
    live: &mut Liveness,
) -> Result<Segment, Unreachable> {
    let mut tried = Vec::new();
    let mut transient = false;
    let prefix = format!("/memfd:iox:{stem}:");
    for (user, fd) in d.users().iter().zip(d.user_fds()) {
        let node = user.load(Ordering::Acquire);
        let fd = fd.load(Ordering::Acquire);
        if node == 0 || !live.alive(node) {
            continue;
        }
        if fd == 0 || user.load(Ordering::Acquire) != node {
            transient = true; // registering, or the entry changed hands while we read
            continue;
        }
        let path = PathBuf::from(format!("/proc/{}/fd/{}", node::pid_of(node), fd - 1));
        match std::fs::read_link(&path) {
            Ok(link) if link.to_string_lossy().starts_with(&prefix) => {}
            Ok(link) => {
                tried.push(format!(
                    "{} is {link:?}, not this service's memfd",
                    path.display()
                ));
                transient = true; // a stale fd number of a user that left
                continue;
            }
            Err(e) => {
                tried.push(format!("{}: {e}", path.display()));
                transient |= e.kind() == std::io::ErrorKind::NotFound;
                continue;
            }
        }
        // /proc/<pid>/fd entries are magic links: following them is the point.
        let file = match rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => std::fs::File::from(fd),
            Err(e) => {
                tried.push(format!("{}: {e}", path.display()));
                // Closed between our readlink and open: the user is leaving.
                transient |= e == rustix::io::Errno::NOENT;
                continue;
            }
        };
        // Mapped read-only: the port that publishes makes it writable (the fd stays
        // read-write for that).
        match iox_mempool::memfd::open_memfd(file, path, Access::ReadOnly, id) {
            Ok(segment) => return Ok(segment),
            Err(e) => tried.push(e.to_string()),
        }
    }
    if tried.is_empty() {
        // No live user at all: its last user is leaving, or all died (recovery then
        // removes it): look again.
        tried.push("no live process has registered the memfd".into());
        transient = true;
    }
    Err(Unreachable { tried, transient })
}

/// The fd under which this process holds the service's memfd payload, if it has one.
pub(super) fn memfd_fd(pool: &Pool, config: &StaticConfig) -> Option<u32> {
    matches!(config.backing, PayloadBacking::Memfd(_)).then(|| pool.payload_file().as_raw_fd() as u32)
}
