//! Removing services and cleaning up after dead processes, on demand.
//!
//! `Service::remove` deletes a service whoever uses it (mapped users keep working on
//! their mappings; new openers create it afresh). `Service::cleanup_dead` runs dead
//! participant recovery ([`crate::recovery`]) on one service right now, and removes the
//! service if no live process uses it any more; `Service::cleanup_all_dead_in` does
//! that for every service under a root and also removes node lock files and temporary
//! files of dead processes. Open and port creation run the same recovery themselves;
//! these calls are for tools and for processes that want it done at a moment they
//! choose.
//!
//! # Cleaning a full root
//!
//! A cleanup joins the root as a node (its node file, [`crate::node`]): others judge
//! it alive by that file's lock while it holds a service's recovery lock or a
//! lifecycle word, and a missing file would make it look dead. A node file needs an
//! inode and no data block (its pid line is written best-effort), so a root whose
//! space is full still gives one, and a cleanup frees that space. A root out of inodes,
//! and other root errors (missing, read-only, not a directory), are returned as a
//! [`RootError`]: nothing could be removed there.

use std::path::Path;
use std::time::{Duration, Instant};

use iox_mempool::segment::Access;
use iox_mempool::{OpenPoolError, Pool};
use thiserror::Error;

use crate::dynamic::{Corruption, DynamicError, DynamicSegment};
use crate::lifecycle::{self, Destroying, Phase, remove_by_path};
use crate::liveness::Liveness;
use crate::node::{self, Node};
use crate::recovery::{self, CleanupReport};
use crate::shm::files;
use crate::{ConfigError, NameError, RootError, ServiceName, StaticConfig};

/// Why `Service::remove` failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// The name is invalid.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The root cannot be used (missing, not a directory, read-only, full).
    #[error("cannot remove service {name:?}: {source}")]
    Root {
        /// The service.
        name: String,
        /// Why.
        source: RootError,
    },
    /// A file could not be removed.
    #[error("cannot remove the files of service {name:?}: {source}")]
    Io {
        /// The service.
        name: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Why a cleanup of one service failed. Each names the service and what is wrong.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CleanupError {
    /// The name is invalid.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The root cannot be used (missing, not a directory, not readable).
    #[error(transparent)]
    Root(#[from] RootError),
    /// The static config is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The dynamic segment is invalid.
    #[error("{}: {problem}", path.display())]
    Corrupt {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        problem: Corruption,
    },
    /// A segment could not be opened.
    #[error(transparent)]
    Segment(#[from] iox_mempool::segment::OpenSegmentError),
    /// The pool could not be opened.
    #[error(transparent)]
    Pool(#[from] OpenPoolError),
}

impl From<DynamicError> for CleanupError {
    fn from(e: DynamicError) -> Self {
        match e {
            DynamicError::Segment(e) => Self::Segment(e),
            DynamicError::Corrupt { path, problem } => Self::Corrupt { path, problem },
            DynamicError::NotFound => Self::Corrupt {
                path: Default::default(),
                problem: Corruption::Unreadable("no dynamic segment".into()),
            },
            DynamicError::OtherIncarnation => Self::Corrupt {
                path: Default::default(),
                problem: Corruption::OtherIncarnation,
            },
        }
    }
}

/// Removes the files of service `name` under `root`, whoever uses it (`Service::remove_in`).
pub fn remove_in(root: &Path, name: &str) -> Result<bool, RemoveError> {
    let root = &node::absolute_root(root);
    let name = ServiceName::new(name)?;
    let stem = name.stem();
    let io = |source| RemoveError::Io {
        name: name.to_string(),
        source,
    };
    let node = Node::for_root(root).map_err(|e| RemoveError::Root {
        name: name.to_string(),
        source: RootError::classify(root, "set up the process node file", e),
    })?;
    let start = Instant::now();
    loop {
        if start.elapsed() > REMOVE_TIMEOUT {
            return Err(io(std::io::Error::other(format!(
                "another process kept creating or removing it for {REMOVE_TIMEOUT:?}"
            ))));
        }
        match DynamicSegment::open_unverified(root, &stem, Access::ReadWrite) {
            Ok(mut seg) => {
                if seg.verify().is_err() {
                    // Not an anchor this iox wrote (no creator can be behind it):
                    // remove by path, as asked, if it is still the same file.
                    if files::same_file(seg.segment().file(), seg.path()) {
                        return remove_by_path(root, &stem).map_err(io);
                    }
                    continue;
                }
                let mut live = Liveness::new(root, node.id());
                match lifecycle::force_destroying(seg.view(), &mut live) {
                    Destroying::Busy => std::thread::sleep(Duration::from_millis(1)),
                    Destroying::Ours => {
                        wake_subscribers(root, &stem, &mut seg);
                        if lifecycle::remove_files(root, &stem, &seg).map_err(io)? {
                            return Ok(true);
                        }
                        // The anchor was replaced meanwhile: look again.
                    }
                }
            }
            Err(DynamicError::NotFound) => {
                // No anchor: take the name with one of ours, so no creator starts
                // while we remove what is left of it.
                if let Some(anchor) = lifecycle::place_removal_anchor(root, &stem, node.id()).map_err(io)? {
                    let existed = root.join(files::config_name(&stem)).exists()
                        || Pool::file_names(&stem).iter().any(|f| root.join(f).exists());
                    lifecycle::remove_files(root, &stem, &anchor).map_err(io)?;
                    return Ok(existed);
                }
            }
            // A symlink, a truncated file...: not an anchor; remove by path, as asked.
            Err(_) => return remove_by_path(root, &stem).map_err(io),
        }
    }
}

/// Recovers the dead participants of service `name` under `root` now, and removes it
/// if no live process uses it any more (`Service::cleanup_dead_in`).
pub fn cleanup_dead_in(root: &Path, name: &str) -> Result<CleanupReport, CleanupError> {
    let root = &node::absolute_root(root);
    let stem = ServiceName::new(name)?.stem();
    let node = node_for(root)?;
    let mut live = Liveness::new(root, node.id());
    let mut report = cleanup_stem(root, &stem, &mut live)?;
    report.files_removed += live.finish();
    Ok(report)
}

/// Cleans up every service under `root` (as [`cleanup_dead_in`]) and
/// removes the node lock files and temporary files of dead processes. Services that
/// cannot be cleaned up are returned with their error, not skipped silently.
pub fn cleanup_all_dead_in(
    root: &Path,
) -> Result<(CleanupReport, Vec<(String, CleanupError)>), CleanupError> {
    let root = &node::absolute_root(root);
    let node = node_for(root)?;
    let mut live = Liveness::new(root, node.id());
    let (mut report, mut failed) = (CleanupReport::default(), Vec::new());
    let mut names: Vec<String> = std::fs::read_dir(root)
        .map_err(|e| RootError::classify(root, "list the root", e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in &names {
        if let Some(stem) = files::stem_of(name).filter(|_| name.ends_with(".dynamic")) {
            match cleanup_stem(root, stem, &mut live) {
                Ok(r) => report.add(&r),
                Err(e) => failed.push((stem.to_string(), e)),
            }
        }
    }
    for name in &names {
        if let Some(id) = node::parse_node_file_name(name) {
            live.alive(id); // its file goes in finish() if dead
        } else if let Some(id) = files::parse_socket_name(name) {
            live.alive(id); // its sockets go in finish() if dead
        } else if let Some(id) = node::parse_temp_file_name(name) {
            let dead = if name.starts_with(".iox_node_") {
                // A node file before its rename: dead if no one holds its lock.
                node::lock_is_free(&root.join(name)) == Some(true)
            } else {
                !live.alive(id)
            };
            if dead && std::fs::remove_file(root.join(name)).is_ok() {
                report.files_removed += 1;
            }
        }
    }
    report.files_removed += live.finish();
    Ok((report, failed))
}

/// How long an explicit remove waits for a live creator or remover to finish.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(10);

/// This process as a cleaner under `root`: its node there.
struct Cleaner(std::sync::Arc<Node>);

impl Cleaner {
    fn id(&self) -> u64 {
        self.0.id()
    }
}

fn node_for(root: &Path) -> Result<Cleaner, CleanupError> {
    // A node file needs an inode and no data block (its text is best effort), so a
    // full root still gives one; without it this cleaner would look dead to others
    // (a missing node file is a dead node) and could be overtaken mid-recovery.
    Node::for_root(root)
        .map(Cleaner)
        .map_err(|e| RootError::classify(root, "set up the process node file", e).into())
}

/// Wakes every subscriber of the service blocked in `receive_timeout` or on an armed
/// readiness descriptor, so that it
/// finds the service removed now rather than at its timeout (best effort: without a
/// readable static config of this incarnation there are no ports to find).
fn wake_subscribers(root: &Path, stem: &str, seg: &mut DynamicSegment) {
    let Ok((config, hash)) = StaticConfig::read(&root.join(files::config_name(stem))) else {
        return;
    };
    if seg.attach(&config, hash).is_err() {
        return;
    }
    let d = seg.view();
    let subscribers = d.layout().receiving;
    let ringer = crate::doorbell::Ringer::new(root, stem, subscribers);
    for s in 0..subscribers {
        let header = d.receiver(s);
        // Futex sleepers are woken whether or not any are counted (`| 1`).
        let seen = header.waiting.load(std::sync::atomic::Ordering::Relaxed) | 1;
        crate::port::wake(header, seen, &ringer, s);
    }
}

/// Recovers one service by its file stem.
pub fn cleanup_stem(root: &Path, stem: &str, live: &mut Liveness) -> Result<CleanupReport, CleanupError> {
    let mut report = CleanupReport::default();
    let mut dynamic = match DynamicSegment::open(root, stem, Access::ReadWrite) {
        Ok(d) => d,
        Err(DynamicError::NotFound) => return Ok(report),
        Err(e) => return Err(e.into()),
    };
    report.services = 1;
    match lifecycle::phase(root, stem, &dynamic, live) {
        Phase::Alive => {}
        Phase::Busy { .. } => return Ok(report),
        Phase::Removed => {
            report.services_removed = 1;
            return Ok(report);
        }
        Phase::Corrupt(word) => return Err(dynamic.corrupt(Corruption::Lifecycle(word)).into()),
    }
    let (config, hash) = match StaticConfig::read(&root.join(files::config_name(stem))) {
        Ok(c) => c,
        Err(e) => {
            // Without a readable static config only the users table can be looked at:
            // debris without live users goes, anything else is reported.
            report.users += recovery::recover_users(dynamic.view(), live);
            if lifecycle::remove_if_unused(root, stem, &dynamic, live.me()) {
                report.services_removed = 1;
                return Ok(report);
            }
            return Err(e.into());
        }
    };
    match dynamic.attach(&config, hash) {
        Ok(()) => {}
        Err(DynamicError::OtherIncarnation) => return Ok(report), // being re-created right now
        Err(e) => return Err(e.into()),
    }
    // Recovery only touches the bookkeeping: no need to reach (or map) the payload,
    // which for a memfd backing may be unreachable once its processes died.
    let pool = iox_mempool::Bookkeeping::open(root, stem, &config.layout, Some(config.memory_type), hash)?;
    // Waits (bounded) for a live process recovering it right now, then looks itself.
    if let Ok(r) = recovery::recover_in_waiting(dynamic.view(), stem, &pool, live) {
        report.add(&r);
    }
    if lifecycle::remove_if_unused(root, stem, &dynamic, live.me()) {
        report.services_removed = 1;
    }
    Ok(report)
}
