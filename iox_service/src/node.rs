//! Nodes: one per process and root directory, proven alive by a held `flock`.
//!
//! A node is the file `iox_node_<id>.lock` under the root, created when the process
//! first opens a service there and held with an exclusive `flock` for as long as any
//! service of the process uses that root. The kernel drops the lock when the process
//! dies, however it dies, so another process that can take the lock
//! (`LOCK_EX | LOCK_NB`) knows the owner is gone. Ports record their node id in the
//! dynamic segment; that is how dead ports are recognised.
//!
//! The id is the process id in the high 32 bits and 32 random bits below, so a reused
//! pid never produces the id of a dead node. The file holds the pid as text, for tools.

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

fn random_u32() -> u32 {
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
            let fd = match rustix::fs::open(
                &path,
                OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            ) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            };
            rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)?;
            let mut file = File::from(fd);
            writeln!(file, "{pid}")?;
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
/// A missing file means the node is gone.
pub fn is_alive(root: &Path, id: u64) -> bool {
    let path = root.join(node_file_name(id));
    let Ok(fd) = rustix::fs::open(
        &path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared) {
        Err(rustix::io::Errno::WOULDBLOCK) => true,
        // We got the lock (the owner is gone), or flock itself failed: not provably alive.
        _ => false,
    }
}
