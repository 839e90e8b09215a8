//! Nodes: one per process and root directory, proven alive by a held `flock`.
//!
//! A node is the file `iox_node_<id>.lock` under the root, held with an exclusive
//! `flock` for as long as any service of the process uses that root. The kernel drops
//! the lock when the process dies, however it dies, so another process that can take
//! the lock (`LOCK_SH | LOCK_NB`) knows the owner is gone. Ports, users and lifecycle
//! words record node ids in the dynamic segment; that is how dead participants are
//! recognised.
//!
//! The file is readable by everyone (0644), so processes of other users that share a
//! group-access service can test the lock; it holds nothing but the pid. It is created
//! under a temporary name, locked, and only then renamed into place, so no one ever sees an unlocked node file of a live process. The id is the
//! process id in the high 32 bits and 32 random bits below, so a reused pid never
//! produces the id of a dead node; it fits in 54 bits (pids are below 2^22). The file
//! holds the pid as text, for tools.
//!
//! Invariant users must keep: never delete the node file of a live process (iox only
//! deletes those it proved dead, see [`remove_if_dead`]).

use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use rustix::fs::{FlockOperation, Mode, OFlags};

/// A live node of this process under one root.
#[derive(Debug)]
pub struct Node {
    id: u64,
    path: PathBuf,
    _file: File,
}

static NODES: LazyLock<Mutex<HashMap<PathBuf, Weak<Node>>>> = LazyLock::new(Default::default);

/// The file name of the node with `id`.
pub fn node_file_name(id: u64) -> String {
    format!("iox_node_{id:016x}.lock")
}

/// The node id a node file name stands for.
pub fn parse_node_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("iox_node_")?.strip_suffix(".lock")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// The name of a temporary file for `base` written by `node` (recovery removes those
/// of dead nodes).
pub fn temp_file_name(base: &str, node: u64) -> String {
    format!("{base}.{node:016x}.tmp")
}

/// The node id in a temporary file name made by [`temp_file_name`].
pub fn parse_temp_file_name(name: &str) -> Option<u64> {
    let rest = name.strip_suffix(".tmp")?;
    let (_, hex) = rest.rsplit_once('.')?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

pub(crate) fn random_u32() -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish() as u32
}

impl Node {
    /// The node of this process under `root`, created on first use.
    pub fn for_root(root: &Path) -> std::io::Result<Arc<Node>> {
        let mut nodes = NODES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = nodes.get(root).and_then(Weak::upgrade) {
            return Ok(node);
        }
        let node = Arc::new(Self::create(root)?);
        nodes.insert(root.to_owned(), Arc::downgrade(&node));
        Ok(node)
    }

    fn create(root: &Path) -> std::io::Result<Node> {
        let pid = std::process::id();
        loop {
            let id = (u64::from(pid) << 32) | u64::from(random_u32());
            let path = root.join(node_file_name(id));
            let tmp = root.join(temp_file_name(&format!(".{}", node_file_name(id)), id));
            let fd = match rustix::fs::open(
                &tmp,
                OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            ) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            };
            // Readable by all (whatever the umask), so processes of other users sharing
            // a group-access service can test the lock.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o644))?;
            rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)?;
            let mut file = File::from(fd);
            writeln!(file, "{pid}")?;
            // Locked before it gets its real name. NOREPLACE: ids are unique, but a
            // name collision must never steal another node's file.
            match rustix::fs::renameat_with(
                rustix::fs::CWD,
                &tmp,
                rustix::fs::CWD,
                &path,
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST | rustix::io::Errno::NOENT) => {
                    // A colliding id, or a cleaner took our unlocked-looking temp file
                    // away before we locked it: try another id.
                    let _ = std::fs::remove_file(&tmp);
                    continue;
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e.into());
                }
            }
            return Ok(Node {
                id,
                path,
                _file: file,
            });
        }
    }

    /// The node id.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Unlink while still holding the lock, so no one sees a free lock on a file we
        // are about to delete; the lock goes with the file descriptor right after.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The process id encoded in a node id.
pub fn pid_of(id: u64) -> u32 {
    (id >> 32) as u32
}

/// Whether the node `id` under `root` is alive: its lock file exists and is locked.
/// A missing file means the node is gone; a file this process may not open (another
/// user's, from before node files were world-readable) counts as alive, since it
/// cannot be proven dead.
pub fn is_alive(root: &Path, id: u64) -> bool {
    let path = root.join(node_file_name(id));
    let fd = match rustix::fs::open(
        &path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return false,
        Err(_) => return true,
    };
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared) {
        Err(rustix::io::Errno::WOULDBLOCK) => true,
        // We got the lock (the owner is gone), or flock itself failed: not provably alive.
        _ => false,
    }
}

/// Removes the node file of `id` if its node is dead (its lock is free). Returns
/// whether a file was removed.
pub fn remove_if_dead(root: &Path, id: u64) -> bool {
    let path = root.join(node_file_name(id));
    let Ok(fd) = rustix::fs::open(
        &path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    // Holding the lock while unlinking: the owner is dead, and no live process can
    // take this name (ids are unique and new node files arrive locked).
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok() {
        return std::fs::remove_file(&path).is_ok();
    }
    false
}
