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
//! group-access service can test the lock; it holds nothing but the pid, as text, for
//! tools. It is created under a temporary name, locked, and only then renamed into
//! place, so no one ever sees an unlocked node file of a live process.
//!
//! The id is the process id (22 bits), the low 24 bits of the process's start time
//! (clock ticks since boot, `/proc/<pid>/stat`) and 16 random bits: a reused pid never
//! produces the id of a dead node, a program `exec`ed in the same process gets a new
//! id, and a node whose file went missing can still be judged (alive only if a process
//! with that pid *and that start time* runs). It fits in 62 bits.
//!
//! Invariant users must keep: never delete the node file of a live process (iox only
//! deletes those it proved dead, see [`remove_if_dead`]).
//!
//! Known limit: a child forked without `exec` shares its parent's lock (flock locks
//! belong to the open file description), so exclusive probes fail and a parent killed
//! while such a child lives looks alive until the child exits: recovery waits, it
//! never corrupts. (The lock file is close-on-exec, so `fork` + `exec`, as
//! `std::process::Command` does, is fine.)

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use rustix::fs::{FlockOperation, Mode, OFlags};

/// A live node of this process under one root.
#[derive(Debug)]
pub struct Node {
    id: u64,
    path: PathBuf,
    /// The process that made it: a forked child inherits the value but must neither
    /// use nor delete it.
    pid: u32,
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

/// A fresh name for a temporary file for `base` written by `node`: unique within the
/// process (threads share a node), and ending in the node id so recovery can remove
/// those of dead nodes.
pub fn temp_file_name(base: &str, node: u64) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{base}.{n}.{node:016x}.tmp")
}

/// The node id in a temporary file name made by [`temp_file_name`].
pub fn parse_temp_file_name(name: &str) -> Option<u64> {
    let rest = name.strip_suffix(".tmp")?;
    let (_, hex) = rest.rsplit_once('.')?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

pub(crate) fn random_u32() -> u32 {
    iox_mempool::random::random_u64() as u32
}

impl Node {
    /// The node of this process under `root`, created on first use.
    pub fn for_root(root: &Path) -> std::io::Result<Arc<Node>> {
        let mut nodes = NODES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = nodes.get(root).and_then(Weak::upgrade)
            && node.pid == std::process::id()
        {
            return Ok(node);
        }
        let node = Arc::new(Self::create(root)?);
        nodes.insert(root.to_owned(), Arc::downgrade(&node));
        Ok(node)
    }

    fn create(root: &Path) -> std::io::Result<Node> {
        let pid = std::process::id();
        // 0 = unknown start time (then a missing file is judged by the pid alone).
        let start = start_ticks(pid).map_or(0, |t| (t & START_MASK).max(1));
        loop {
            // Fresh salt every time: an `exec`ed program keeps its pid and start time,
            // and must not inherit the records of the program it replaced.
            let salt = u64::from(random_u32()) & SALT_MASK;
            let id = (u64::from(pid) << PID_SHIFT) | (start << START_SHIFT) | salt;
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
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                // A cleaner testing whether this temp file is abandoned holds it for
                // a moment: let it be, and take another id.
                Err(rustix::io::Errno::WOULDBLOCK) => continue,
                Err(e) => return Err(e.into()),
            }
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
                pid,
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
        // Only the process that made it: a forked child's copy must not delete the
        // parent's proof of life. Unlink while still holding the lock, so no one sees a
        // free lock on a file we are about to delete; the lock goes with the file
        // descriptor right after.
        if std::process::id() == self.pid {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `root` made absolute (against the current directory, now), so that liveness checks
/// made later, after a `chdir`, still find the node files.
pub fn absolute_root(root: &Path) -> PathBuf {
    std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf())
}

/// Node id layout: pid (22 bits, Linux pids are below 2^22) | low 24 bits of the
/// process start time in clock ticks (0 = unknown) | 16 random bits. 62 bits in all,
/// so lifecycle words can hold a node id shifted by 2.
const PID_SHIFT: u32 = 40;
const START_SHIFT: u32 = 16;
const START_MASK: u64 = (1 << 24) - 1;
const SALT_MASK: u64 = (1 << 16) - 1;

/// The process id encoded in a node id.
pub fn pid_of(id: u64) -> u32 {
    (id >> PID_SHIFT) as u32
}

/// The start-time bits of a node id (0 = unknown).
fn start_of(id: u64) -> u64 {
    (id >> START_SHIFT) & START_MASK
}

/// Whether the node `id` under `root` is alive. Only a lock file that exists and
/// whose lock this process can take proves a node dead; anything unexpected counts as
/// alive, since recovering a live node would corrupt its state (a wrong "alive" only
/// delays recovery):
/// - the lock file is missing: dead, unless the process that made the node still runs
///   (same pid and start time: the file was deleted by hand);
/// - it cannot be opened for another reason (another user's file, say): alive;
/// - `flock` fails other than with "would block" (e.g. no locks on this file system):
///   alive.
///
/// `root` should be absolute: a relative root resolved against another working
/// directory would find no files and call everyone dead (iox makes roots absolute).
pub fn is_alive(root: &Path, id: u64) -> bool {
    let path = root.join(node_file_name(id));
    let fd = match rustix::fs::open(
        &path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return same_process_running(id),
        Err(_) => return true,
    };
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared) {
        // We got the lock: its owner is gone. Drop it explicitly: a child this process
        // forks before closing the fd would otherwise share it until it execs, and
        // make the dead node look alive to others meanwhile.
        Ok(()) => {
            let _ = rustix::fs::flock(&fd, FlockOperation::Unlock);
            false
        }
        Err(_) => true,
    }
}

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`); `Err` with the I/O error kind if it cannot be read.
fn read_start_ticks(pid: u32) -> Result<u64, std::io::ErrorKind> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.kind())?;
    // The command name (field 2) is in parentheses and may hold anything: count
    // fields from the last ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or(std::io::ErrorKind::InvalidData)?;
    rest.split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .ok_or(std::io::ErrorKind::InvalidData)
}

fn start_ticks(pid: u32) -> Option<u64> {
    read_start_ticks(pid).ok()
}

/// For a node whose file is missing: whether the very process that made it still
/// runs. Same pid and start time: yes; the pid gone: no. Anything this process cannot
/// tell (unknown start time, `/proc` hiding other users' processes) counts as running.
fn same_process_running(id: u64) -> bool {
    let pid = pid_of(id);
    match read_start_ticks(pid) {
        Ok(t) if start_of(id) != 0 => (t & START_MASK).max(1) == start_of(id),
        Ok(_) => true,
        Err(std::io::ErrorKind::NotFound) => pid_exists(pid),
        Err(_) => true,
    }
}

/// Whether a process with this pid exists (signal 0 probes without sending; a
/// process of another user answers EPERM, which means it exists).
fn pid_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
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
    // take this name (ids are unique and new node files arrive locked). Another
    // process testing liveness holds a shared lock for a moment: try a few times.
    for _ in 0..20 {
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                let removed = std::fs::remove_file(&path).is_ok();
                let _ = rustix::fs::flock(&fd, FlockOperation::Unlock);
                return removed;
            }
            Err(rustix::io::Errno::WOULDBLOCK) => std::thread::sleep(std::time::Duration::from_micros(250)),
            Err(_) => return false,
        }
    }
    false
}
