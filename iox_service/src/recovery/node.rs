//! Nodes: one id per process, and one node file per root the process uses, proven
//! alive by a held `flock`.
//!
//! A process has one node id for its whole life ([`process_node_id`]), whatever roots
//! it uses. Under each root it uses, its node is the file `iox_node_<id>.lock`, held
//! with an exclusive `flock` for as long as any service (or anything else that joined
//! the root, see [`Node::for_root`]) of the process uses that root. The kernel drops
//! the lock when the process dies, however it dies, so another process that can take
//! the lock (`LOCK_SH | LOCK_NB`) knows the owner is gone. Ports, users, lifecycle
//! words and robust mutexes record node ids in shared memory; that is how dead
//! participants are recognised. Because the id is per process, code that cannot be
//! told a root (the robust mutex, [`crate::recovery::robust_mutex`]) can still ask
//! "who am I" ([`process_node_id`]) and "is node X alive" ([`is_alive_anywhere`]: the
//! node file of X is looked for in every root where this process has a node).
//!
//! The file is readable by everyone (0644), so processes of other users that share a
//! group-access service can test the lock; it holds nothing but the pid, as text, for
//! tools. It is created under a temporary name, locked, and only then renamed into
//! place, so no one ever sees an unlocked node file of a live process.
//!
//! The id is the process id (22 bits), the low 24 bits of the process's start time
//! (clock ticks since boot, `/proc/<pid>/stat`) and 16 random bits chosen once per
//! process: a reused pid never produces the id of a dead node, a program `exec`ed in
//! the same process gets a new id (process statics start afresh), a child forked
//! without `exec` gets a new id (its pid differs from the one in the cached id), and a
//! node whose file went missing can still be judged (alive only if a process with that
//! pid *and that start time* runs). It fits in 62 bits.
//!
//! Should a node file with this process's id already exist under a root (a program
//! this process ran before an `exec` drew the same 16 random bits and left it
//! behind), the process draws another id if it has no node anywhere yet; otherwise
//! the stale file is removed if its lock is free (the records of that earlier program
//! then look like this process's until it exits: they wait, they are never
//! corrupted), and creating the node fails if it is held.
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
use std::sync::atomic::{AtomicU64, Ordering};
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

pub(crate) use crate::shm::files::{
    node_file_name, parse_node_file_name, parse_temp_file_name, temp_file_name,
};

pub(crate) fn random_u32() -> u32 {
    iox_mempool::random::random_u64() as u32
}

/// This process's node id (cached; 0 = not chosen yet). A cached id whose pid is not
/// ours was inherited through `fork` and is replaced.
static PROCESS_ID: AtomicU64 = AtomicU64::new(0);

/// This process's node id: chosen on first use, the same for every root and thread,
/// a new one in a forked child or an `exec`ed program (see the module docs).
pub fn process_node_id() -> u64 {
    // Relaxed: the id is a plain value, nothing else is published with it.
    let id = PROCESS_ID.load(Ordering::Relaxed);
    if id != 0 && pid_of(id) == std::process::id() {
        return id;
    }
    replace_process_id(id)
}

/// Replaces `stale` (0, an id inherited through `fork`, or one that collided) with a
/// fresh id, unless another thread did so first; returns the id now in force.
fn replace_process_id(stale: u64) -> u64 {
    let pid = std::process::id();
    let fresh = new_id(pid);
    match PROCESS_ID.compare_exchange(stale, fresh, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => fresh,
        Err(other) if other != 0 && pid_of(other) == pid => other,
        // Still a stale value (cannot really happen: a forked child has one thread).
        Err(other) => replace_process_id(other),
    }
}

/// A new id for process `pid`: pid | start time | fresh salt.
fn new_id(pid: u32) -> u64 {
    // 0 = unknown start time (then a missing file is judged by the pid alone).
    let start = start_ticks(pid).map_or(0, |t| (t & START_MASK).max(1));
    // Fresh salt: an `exec`ed program keeps its pid and start time, and must not
    // inherit the records of the program it replaced.
    let salt = u64::from(random_u32()) & SALT_MASK;
    (u64::from(pid) << PID_SHIFT) | (start << START_SHIFT) | salt
}

impl Node {
    /// The node of this process under `root`, created on first use.
    pub fn for_root(root: &Path) -> std::io::Result<Arc<Node>> {
        let mut nodes = NODES.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if let Some(node) = nodes.get(root).and_then(Weak::upgrade)
            && node.pid == pid
        {
            return Ok(node);
        }
        // No node anywhere yet: the id was not handed out in a node file, so on a
        // collision another one may be drawn.
        let first = !nodes.values().any(|n| n.upgrade().is_some_and(|n| n.pid == pid));
        let node = Arc::new(Self::create(root, first)?);
        nodes.insert(root.to_owned(), Arc::downgrade(&node));
        Ok(node)
    }

    fn create(root: &Path, may_redraw: bool) -> std::io::Result<Node> {
        let pid = std::process::id();
        loop {
            let id = process_node_id();
            let path = root.join(node_file_name(id));
            let tmp_name = temp_file_name(&format!(".{}", node_file_name(id)), id);
            let tmp = root.join(&tmp_name);
            let fd = match rustix::fs::open(
                &tmp,
                OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            ) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            };
            // From here on, a failure removes the temp file before it returns: nothing
            // of a failed attempt stays behind (on a full root, writing the pid is
            // what fails).
            let fail = |e: std::io::Error| {
                let _ = std::fs::remove_file(&tmp);
                e
            };
            // Readable by all (whatever the umask), so processes of other users sharing
            // a group-access service can test the lock.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o644)).map_err(|e| fail(e.into()))?;
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                // A cleaner testing whether this temp file is abandoned holds it for
                // a moment: let it be (it removes it, the lock being free), and take
                // another temporary name.
                Err(rustix::io::Errno::WOULDBLOCK) => continue,
                Err(e) => return Err(fail(e.into())),
            }
            let mut file = File::from(fd);
            writeln!(file, "{pid}").map_err(fail)?;
            // Locked before it gets its real name. NOREPLACE: a name collision must
            // never steal another node's file.
            match crate::shm::files::rename_noreplace(root, &tmp_name, &node_file_name(id)) {
                Ok(()) => {}
                Err(rustix::io::Errno::NOENT) => {
                    // A cleaner took our unlocked-looking temp file away before we
                    // locked it: try again.
                    let _ = std::fs::remove_file(&tmp);
                    continue;
                }
                Err(rustix::io::Errno::EXIST) => {
                    // A node file with our id: left by a program this process ran
                    // before an `exec` that drew the same salt (see the module docs).
                    let _ = std::fs::remove_file(&tmp);
                    if may_redraw {
                        replace_process_id(id);
                    } else if !remove_if_dead(root, id) && path.exists() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            format!("{} exists and is locked", path.display()),
                        ));
                    }
                    continue;
                }
                Err(e) => return Err(fail(e.into())),
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
    match probe(root, id) {
        Probe::Missing => same_process_running(id),
        Probe::Free => false,
        Probe::Held => true,
    }
}

/// Whether node `id` is alive, judged by its node file in any root where this process
/// has a node (this process itself always is). For callers that know no root, such as
/// the robust mutex: a node that records itself in shared memory under a root has a
/// node file there, and so does this process if it looks at that memory (the contract
/// of [`crate::recovery::robust_mutex`]). The first root whose file exists decides, as
/// in [`is_alive`]; with no file in any of them, the missing-file rule of
/// [`is_alive`] applies.
pub fn is_alive_anywhere(id: u64) -> bool {
    if id == process_node_id() {
        return true;
    }
    for root in roots() {
        match probe(&root, id) {
            Probe::Missing => continue,
            Probe::Free => return false,
            Probe::Held => return true,
        }
    }
    same_process_running(id)
}

/// The roots where this process has a node now.
fn roots() -> Vec<PathBuf> {
    let pid = std::process::id();
    let nodes = NODES.lock().unwrap_or_else(|e| e.into_inner());
    nodes
        .iter()
        .filter(|(_, n)| n.upgrade().is_some_and(|n| n.pid == pid))
        .map(|(root, _)| root.clone())
        .collect()
}

/// What the node file of a node says.
enum Probe {
    /// There is no such file.
    Missing,
    /// The file exists and its lock is free: the node is dead.
    Free,
    /// Held, or anything unexpected (counts as alive).
    Held,
}

fn probe(root: &Path, id: u64) -> Probe {
    match lock_is_free(&root.join(node_file_name(id))) {
        None => Probe::Missing,
        Some(true) => Probe::Free,
        Some(false) => Probe::Held,
    }
}

/// Whether the `flock` of the file at `path` is free (its holder, if any, is gone):
/// `None` if there is no such file; `Some(false)` if it is held, or on anything
/// unexpected (counts as alive). The only place iox probes a lock.
///
/// The lock is tested on the file the path names *after* the test: a node that drops
/// its last use of the root unlinks its file (still locked) and may make a new one
/// under the same name at once (the id is per process). A probe that opened the old
/// file would find its lock free although the node lives; so a free lock counts only
/// if the path still names the file that was locked ([`same_inode`]). A file that is
/// linked there with its lock free has been free since its owner went: node files
/// arrive locked (renamed into place) and are unlinked before they are unlocked.
/// Otherwise the probe starts again on the new file (or finds none).
pub(crate) fn lock_is_free(path: &Path) -> Option<bool> {
    for _ in 0..PROBE_ATTEMPTS {
        let fd = match rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return None,
            Err(_) => return Some(false),
        };
        crate::testing::stall_point("probe-after-open");
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared) {
            // We got the lock. Drop it explicitly: a child this process forks before
            // closing the fd would otherwise share it until it execs, and make the
            // dead node look alive to others meanwhile.
            Ok(()) => {
                let still = same_inode(&fd, path);
                let _ = rustix::fs::flock(&fd, FlockOperation::Unlock);
                match still {
                    Some(true) => return Some(true),
                    // Replaced or removed since we opened it: look again.
                    Some(false) => continue,
                    None => return Some(false),
                }
            }
            Err(_) => return Some(false),
        }
    }
    // Replaced again and again: a live node coming and going.
    Some(false)
}

/// How often a probe looks again at a node file that was replaced under it.
const PROBE_ATTEMPTS: usize = 8;

/// Whether `path` (not following a link) names the file open as `fd`: `Some(false)`
/// if it names another file or none, `None` if either cannot be looked at.
fn same_inode(fd: &impl std::os::fd::AsFd, path: &Path) -> Option<bool> {
    let open = rustix::fs::fstat(fd).ok()?;
    match rustix::fs::lstat(path) {
        Ok(now) => Some(now.st_dev == open.st_dev && now.st_ino == open.st_ino),
        Err(rustix::io::Errno::NOENT) => Some(false),
        Err(_) => None,
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
                // Only the file we hold: the name may have passed to a new node file
                // of the same (live) node since we opened it (see `lock_is_free`).
                // Once this says so, nothing can replace it: its owner is dead.
                let removed = same_inode(&fd, &path) == Some(true) && std::fs::remove_file(&path).is_ok();
                let _ = rustix::fs::flock(&fd, FlockOperation::Unlock);
                return removed;
            }
            Err(rustix::io::Errno::WOULDBLOCK) => std::thread::sleep(std::time::Duration::from_micros(250)),
            Err(_) => return false,
        }
    }
    false
}
