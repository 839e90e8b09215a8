//! Reaching a service's payload that only a descriptor reaches (a sealed memfd, or a
//! GPU's exported memory): handed over by a live holder (see `crate::handover`),
//! checked, mapped.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use iox_mempool::MemfdIdentity;
use iox_mempool::segment::{Access, Segment};

use crate::dynamic::Dynamic;
use crate::handover::{self, Denied};
use crate::liveness::Liveness;

/// Why no holder let us reach the memfd: what happened with each, whether it may
/// well work a moment later (a holder registering, leaving, or silent), and whether
/// a holder refused our credentials.
pub(super) struct Unreachable {
    pub(super) tried: Vec<String>,
    pub(super) transient: bool,
    pub(super) refused: bool,
    /// A holder handed a descriptor over that the check refused (as opposed to
    /// holders that could not be asked, or broke off).
    pub(super) rejected: bool,
}

/// [`reach`] for a memfd payload: a descriptor that passes the checks of
/// [`iox_mempool::memfd::open_memfd`] (name, seals, size, inode, page size: this
/// service's memfd and nothing else), mapped read-only (the port that publishes makes it
/// writable if the descriptor is read-write).
///
/// With an access policy (`access`), a holder gives a reader a read-only descriptor
/// and a publisher what it holds itself: read-write from a publisher, read-only from a
/// reader. A publisher handed a read-only one reopens it for writing if it may (the
/// creator's uid, root), else asks the next holder, and settles for the read-only one
/// only if no holder that may write answers (its publishers are then refused).
pub(super) fn reach_memfd(
    root: &Path,
    d: Dynamic<'_>,
    (stem, incarnation): (&str, u64),
    (id, pages, access): (
        MemfdIdentity,
        iox_mempool::PageSize,
        Option<&crate::access::AccessPolicy>,
    ),
    live: &mut Liveness,
    deadline: Instant,
) -> Result<Segment, Unreachable> {
    use crate::access::Role;
    let publisher = access.is_some_and(|p| p.role_of_this_process() == Some(Role::Publisher));
    let mut read_only = None;
    let open = |fd: std::os::fd::OwnedFd, path| {
        iox_mempool::memfd::open_memfd(std::fs::File::from(fd), path, Access::ReadOnly, (id, pages))
            .map_err(|e| e.to_string())
    };
    let reached = reach(root, d, stem, incarnation, live, deadline, &mut |fd, path| {
        let payload = open(fd, path.clone())?;
        if !publisher || payload.can_write() {
            return Ok(payload);
        }
        let reopened = handover::responder::reopen(payload.file().as_fd(), rustix::fs::OFlags::RDWR);
        if let Ok(rw) = reopened.and_then(|rw| open(rw, path).map_err(std::io::Error::other)) {
            return Ok(rw);
        }
        read_only.get_or_insert(payload);
        Err("handed over read-only (the holder is a reader); asking for a writable one".into())
    });
    match reached {
        Ok(payload) => Ok(payload),
        Err(unreachable) => read_only.ok_or(unreachable),
    }
}

/// Asks each registered holder whose node is alive for the payload's descriptor,
/// until one hands over one that `accept` takes (it checks that it is this service's
/// payload and nothing else, and maps it); gives up at `deadline`. `incarnation` is
/// the static config's hash (holders offer per incarnation).
pub(super) fn reach<T>(
    root: &Path,
    d: Dynamic<'_>,
    stem: &str,
    incarnation: u64,
    live: &mut Liveness,
    deadline: Instant,
    accept: &mut dyn FnMut(std::os::fd::OwnedFd, std::path::PathBuf) -> Result<T, String>,
) -> Result<T, Unreachable> {
    let mut tried = Vec::new();
    let (mut transient, mut refused, mut rejected) = (false, false, false);
    for (user, holder) in d.users().iter().zip(d.user_holders()) {
        let node = user.load(Ordering::Acquire);
        if node == 0 || !live.alive(node) {
            continue;
        }
        let nonce = holder.load(Ordering::Acquire);
        if nonce == 0 || user.load(Ordering::Acquire) != node {
            transient = true; // registering, or the entry changed hands while we read
            continue;
        }
        if Instant::now() >= deadline {
            tried.push(format!(
                "the time was up before node {node:016x}, a live holder, was asked"
            ));
            transient = true;
            break;
        }
        let fds = match handover::fetch(root, stem, incarnation, (node, nonce), deadline) {
            Ok(fds) => fds,
            Err(Denied::Refused(why)) => {
                tried.push(why);
                refused = true;
                continue;
            }
            Err(Denied::Transient(why)) => {
                tried.push(why);
                transient = true;
                continue;
            }
            Err(Denied::Broken(why)) => {
                tried.push(why);
                continue;
            }
        };
        let path = root.join(crate::handover::responder::socket_name(
            stem,
            incarnation,
            nonce,
            node,
        ));
        let Some(fd) = fds.into_iter().next() else {
            continue; // `fetch` returns at least one
        };
        match accept(fd, path) {
            Ok(payload) => return Ok(payload),
            Err(e) => {
                tried.push(format!("handed over by node {node:016x}: {e}"));
                rejected = true;
            }
        }
    }
    if tried.is_empty() {
        // No live holder at all: its last user is leaving, or all died (recovery then
        // removes it): look again.
        tried.push("no live process holds its descriptor".into());
        transient = true;
    }
    Err(Unreachable {
        tried,
        transient,
        refused,
        rejected,
    })
}
