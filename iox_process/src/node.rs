//! Nodes: one id per process, and one node file per root the process uses, proven
//! alive by a held `flock`.
//!
//! A process has one node id at a time ([`process_node_id`]), whatever roots it uses
//! (a new one after its last node went, see [`RETIRED`]). Under each root it uses,
//! its node is the file `iox_node_<id>.lock`, held with an exclusive `flock` for as long as any service (or anything else that joined
//! the root, see [`Node::for_root`]) of the process uses that root, and longer while
//! the process uses another root. The kernel drops
//! the lock when the process dies, however it dies, so another process that can take
//! the lock (`LOCK_SH | LOCK_NB`) knows the owner is gone. Ports, users, lifecycle
//! words and robust mutexes record node ids in shared memory; that is how dead
//! participants are recognised. Because the id is per process, code that cannot be
//! told a root (the robust mutex, [`crate::robust_mutex`]) can still ask
//! "who am I" ([`process_node_id`]) and "is node X alive" ([`is_alive_anywhere`]: the
//! node file of X is looked for in every root where this process has a node).
//!
//! The file is readable by everyone (0644), so processes of other users that share a
//! group-access service can test the lock; it holds nothing but, for tools, the pid
//! as this process sees it and its PID namespace (`pid 12 pidns 4026531836`): a pid
//! means nothing in another namespace, and iox never uses it. It is created under a
//! temporary name, locked, and only then renamed into place, so no one ever sees an
//! unlocked node file of a live process.
//!
//! The id is 62 random bits, drawn once per process: unique across PID namespaces on
//! one kernel (two containers sharing a root), where pids repeat. It is never derived
//! from a pid, and liveness is proven only by the node file's lock (`flock` works
//! across namespaces on one file): a node whose file is missing is dead (node files
//! exist before their ids are recorded anywhere, and are removed only by their owner
//! when its last node anywhere goes, or by a cleaner that proved them dead). A root
//! the process stops using keeps its file, locked, while the process has a node
//! elsewhere (see [`RETIRED`]): an id's files never come and go while it is in use,
//! and once they are gone the process draws a new id. A program
//! `exec`ed in the same process gets a new id (process statics start afresh), and so
//! does a child forked without `exec` (the fork handler of `crate::fork` forgets
//! the id in the child).
//!
//! Should a node file with this process's id already exist under a root (another
//! process drew the same 62 bits, or a program this process ran before an `exec`
//! left it behind), the process draws another id if it has no node anywhere yet; otherwise
//! the stale file is removed if its lock is free (the records of that earlier program
//! then look like this process's until it exits: they wait, they are never
//! corrupted), and creating the node fails if it is held.
//!
//! Roots are told apart by the directory they are (device and inode), not by the path
//! given: one directory reached by two paths (a symlink, a volume bind-mounted twice)
//! is one root with one node file, found under the first path it was used by.
//!
//! Invariant users must keep: never delete the node file of a live process (iox only
//! deletes those it proved dead, see [`remove_if_dead`]).
//!
//! Known limit: a child forked without `exec` shares its parent's lock (flock locks
//! belong to the open file description), so probes find it held and a parent killed
//! while such a child lives looks alive until the child exits: recovery waits, it
//! never corrupts. (The lock file is close-on-exec, so `fork` + `exec`, as
//! `std::process::Command` does, is fine.)

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use iox_mempool::fork::{ForkLock, Rank};
use rustix::fs::{FlockOperation, Mode, OFlags};

/// A live node of this process under one root.
#[derive(Debug)]
pub struct Node {
    id: u64,
    path: PathBuf,
    root: PathBuf,
    /// The root directory's identity (see the module docs).
    key: RootKey,
    /// The fork generation that made it (`crate::fork`): a forked child inherits
    /// the value but must neither use nor delete it.
    fork_generation: u64,
    /// The locked file (taken when the node is retired, see [`RETIRED`]).
    file: Option<File>,
}

/// This process's nodes by root, with the fork generation that made each. An Arc
/// upgraded from here under the lock is only ever returned, never dropped there (a
/// `Node` dropped under this lock would take it again). A [`ForkLock`]: held across
/// every `fork`, so a child never copies it held.
static NODES: ForkLock<NodesByRoot> = ForkLock::new(Rank::Nodes, BTreeMap::new());

/// Per root: its path, the node (weak) and the fork generation that made it.
type NodesByRoot = BTreeMap<RootKey, (PathBuf, Weak<Node>, u64)>;

/// A root directory's identity: its device and inode.
type RootKey = (u64, u64);

/// The identity of the directory `root` (following links).
fn root_key(root: &Path) -> std::io::Result<RootKey> {
    let st = rustix::fs::stat(root)?;
    Ok((st.st_dev, st.st_ino))
}

/// Node files of roots this process stopped using while it still has a node under
/// another root: kept, locked, until the last node of the process goes. The id is the
/// process's, so a file removed and made again under the same name would leave a gap
/// in which the id looks dead (a missing file is a dead node) while a process that
/// read one of our records earlier acts on it: the file stays instead, and is taken
/// up again if the process comes back to the root. When the last node goes, every
/// file of the id is removed and the id forgotten: the next node draws a new one, so
/// an id that looked dead once stays dead. Locked after `NODES`.
static RETIRED: ForkLock<Vec<Retired>> = ForkLock::new(Rank::RetiredNodes, Vec::new());

struct Retired {
    id: u64,
    root: PathBuf,
    key: RootKey,
    path: PathBuf,
    fork_generation: u64,
    _file: File,
}

fn is_ours(fork_generation: u64) -> bool {
    crate::fork::is_same_process(fork_generation)
}

pub use crate::files::{node_file_name, parse_node_file_name, parse_temp_file_name, temp_file_name};

pub fn random_u32() -> u32 {
    iox_mempool::random::random_u64() as u32
}

/// This process's node id (cached; 0 = not chosen yet, or forgotten in a forked
/// child by [`forget_after_fork`]).
static PROCESS_ID: AtomicU64 = AtomicU64::new(0);

/// The fork generation ([`crate::fork`]), registering on first use the fork child step
/// that makes a child draw its own node id ([`forget_after_fork`]).
fn fork_generation() -> u64 {
    static STEP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !STEP.load(Ordering::Acquire) {
        // Idempotent: several threads may register it at once.
        iox_mempool::fork::on_fork_child(forget_after_fork);
        STEP.store(true, Ordering::Release);
    }
    iox_mempool::fork::generation()
}

/// This process's node id: chosen on first use, the same for every root and thread,
/// a new one in a forked child or an `exec`ed program (see the module docs).
pub fn process_node_id() -> u64 {
    // Registers the fork handler that forgets the id in a child, before the first
    // id is drawn.
    let _ = fork_generation();
    // Relaxed: the id is a plain value, nothing else is published with it.
    let id = PROCESS_ID.load(Ordering::Relaxed);
    if id != 0 {
        return id;
    }
    replace_process_id(0)
}

/// Called in a forked child right after `fork` (atomic stores, allowed there; see
/// `crate::fork`): the child draws its own id.
pub fn forget_after_fork() {
    PROCESS_ID.store(0, Ordering::Relaxed);
    LIVE_NODES.store(0, Ordering::Relaxed);
}

/// This process's nodes whose drop has not run yet (changed only under `NODES`): a
/// node counts until its own drop, so two nodes dropped at once never both take
/// themselves for the last.
static LIVE_NODES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Replaces `stale` (0, or an id that collided) with a fresh id, unless another
/// thread did so first; returns the id now in force.
fn replace_process_id(stale: u64) -> u64 {
    let fresh = new_id();
    match PROCESS_ID.compare_exchange(stale, fresh, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => fresh,
        Err(other) if other != 0 => other,
        Err(_) => replace_process_id(0),
    }
}

/// A new id: 62 random bits, never 0.
fn new_id() -> u64 {
    (iox_mempool::random::random_u64() & ID_MASK).max(1)
}

/// Node ids fit in 62 bits, so lifecycle words can hold one shifted by 2.
const ID_MASK: u64 = (1 << 62) - 1;

impl Node {
    /// The node of this process under `root`, created on first use.
    pub fn for_root(root: &Path) -> std::io::Result<Arc<Node>> {
        let fork_generation = fork_generation();
        let key = root_key(root)?;
        let mut nodes = loop {
            let nodes = NODES.lock();
            match nodes.get(&key) {
                Some((_, weak, generation)) if is_ours(*generation) => match weak.upgrade() {
                    Some(node) => return Ok(node),
                    // Being dropped by another thread, which needs this lock to retire
                    // or remove its file: let it, then look again.
                    None => {
                        drop(nodes);
                        std::thread::yield_now();
                    }
                },
                _ => break nodes,
            }
        };
        crate::stall::stall_point(crate::stall::Stall::NodeRegistryHeld);
        let retired = {
            let mut retired = RETIRED.lock();
            retired.retain(|r| is_ours(r.fork_generation)); // a forked child's copies
            let at = retired.iter().position(|r| r.key == key);
            // Only a file of the id in force (any other is debris: removed).
            match at.map(|i| retired.swap_remove(i)) {
                Some(r) if r.id == process_node_id() => Some(r),
                Some(r) => {
                    let _ = std::fs::remove_file(&r.path);
                    None
                }
                None => None,
            }
        };
        let node = match retired {
            // Back to a root whose file we kept: the same file, still locked.
            Some(r) => Node {
                id: r.id,
                path: r.path,
                root: r.root,
                key,
                fork_generation,
                file: Some(r._file),
            },
            None => {
                // No node anywhere yet: the id was not handed out in a node file, so
                // on a collision another one may be drawn.
                let first = LIVE_NODES.load(Ordering::Relaxed) == 0
                    && RETIRED.lock().iter().all(|r| !is_ours(r.fork_generation));
                Self::create(root, key, first)?
            }
        };
        LIVE_NODES.fetch_add(1, Ordering::Relaxed);
        let node = Arc::new(node);
        nodes.insert(key, (root.to_owned(), Arc::downgrade(&node), fork_generation));
        Ok(node)
    }

    fn create(root: &Path, key: RootKey, may_redraw: bool) -> std::io::Result<Node> {
        let fork_generation = fork_generation();
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
            // of a failed attempt stays behind.
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
            // Best effort: the pid line is for people; the lock is the proof of life,
            // and an empty file holds it as well (on a full root, writing fails).
            let _ = writeln!(file, "{}", pid_line());
            // Locked before it gets its real name. NOREPLACE: a name collision must
            // never steal another node's file.
            match crate::files::rename_noreplace(root, &tmp_name, &node_file_name(id)) {
                Ok(()) => {}
                Err(rustix::io::Errno::NOENT) => {
                    // A cleaner took our unlocked-looking temp file away before we
                    // locked it: try again.
                    let _ = std::fs::remove_file(&tmp);
                    continue;
                }
                Err(rustix::io::Errno::EXIST) => {
                    // A node file with our id: another process drew the same 62 bits,
                    // or a program this process ran before an `exec` left it.
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
                root: root.to_path_buf(),
                key,
                fork_generation,
                file: Some(file),
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
        // parent's proof of life.
        if !is_ours(self.fork_generation) {
            return;
        }
        let mut nodes = NODES.lock();
        if nodes
            .get(&self.key)
            .is_some_and(|(_, w, _)| std::ptr::eq(w.as_ptr(), self))
        {
            nodes.remove(&self.key);
        }
        let mut retired = RETIRED.lock();
        retired.retain(|r| is_ours(r.fork_generation));
        let others = LIVE_NODES.fetch_sub(1, Ordering::Relaxed).saturating_sub(1) > 0;
        if others && self.id == PROCESS_ID.load(Ordering::Relaxed) {
            // Kept, locked (see `RETIRED`).
            if let Some(file) = self.file.take() {
                retired.push(Retired {
                    id: self.id,
                    root: self.root.clone(),
                    key: self.key,
                    path: self.path.clone(),
                    fork_generation: self.fork_generation,
                    _file: file,
                });
            }
            return;
        }
        // The last node of the process: every file of the id goes, each unlinked while
        // still locked (no one sees a free lock on a file about to go; the locks go
        // with the descriptors right after), and the id is forgotten.
        let _ = std::fs::remove_file(&self.path);
        if others {
            return; // a node of an id no longer in force: its file went, nothing more
        }
        for r in retired.drain(..) {
            let _ = std::fs::remove_file(&r.path);
        }
        PROCESS_ID.store(0, Ordering::Relaxed);
    }
}

/// `root` made absolute (against the current directory, now), so that liveness checks
/// made later, after a `chdir`, still find the node files.
pub fn absolute_root(root: &Path) -> PathBuf {
    std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf())
}

/// What a node file says for tools: this process's pid as it sees it, and its PID
/// namespace (the inode of `/proc/self/ns/pid`; 0 if unknown).
fn pid_line() -> String {
    let ns = std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| std::os::unix::fs::MetadataExt::ino(&m));
    format!("pid {} pidns {ns}", std::process::id())
}

/// Where a person finds a node's process: its pid as that process saw it, and
/// whether it is known to be in another PID namespace than this process (then the
/// pid names another process here, or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidHint {
    /// The pid in the node's own PID namespace.
    pub pid: u32,
    /// Known to be another namespace (false when either side's is unknown).
    pub other_namespace: bool,
}

/// The pid hint in node `id`'s file under `root`, if the file says one.
pub fn pid_hint(root: &Path, id: u64) -> Option<PidHint> {
    let text = std::fs::read_to_string(root.join(node_file_name(id))).ok()?;
    let mut words = text.split_whitespace();
    let (pid, ns) = match (words.next()?, words.next(), words.next(), words.next()) {
        ("pid", Some(pid), Some("pidns"), Some(ns)) => (pid.parse().ok()?, ns.parse::<u64>().ok()?),
        // A file of an older iox: the bare pid, in an unknown namespace.
        (pid, None, None, None) => (pid.parse().ok()?, 0),
        _ => return None,
    };
    let ours = std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| std::os::unix::fs::MetadataExt::ino(&m));
    Some(PidHint {
        pid,
        other_namespace: ns != 0 && ours != 0 && ns != ours,
    })
}

/// Whether the node `id` under `root` is alive. A lock file whose lock this process
/// can take, or no lock file at all, proves a node dead; anything unexpected counts
/// as alive, since recovering a live node would corrupt its state (a wrong "alive"
/// only delays recovery):
/// - the lock file is missing: dead (see the module docs: a live node's file exists
///   wherever its id is recorded; never delete one by hand);
/// - it cannot be opened for another reason (another user's file, say): alive;
/// - `flock` fails other than with "would block" (e.g. no locks on this file system):
///   alive.
///
/// `root` should be absolute: a relative root resolved against another working
/// directory would find no files and call everyone dead (iox makes roots absolute).
pub fn is_alive(root: &Path, id: u64) -> bool {
    match probe(root, id) {
        Probe::Missing | Probe::Free => false,
        Probe::Held => true,
    }
}

/// Whether node `id` is alive, judged by its node file in any root where this process
/// has a node (this process itself always is). For callers that know no root, such as
/// the robust mutex: a node that records itself in shared memory under a root has a
/// node file there, and so does this process if it looks at that memory (the contract
/// of [`crate::robust_mutex`]). The first root whose file exists decides, as
/// in [`is_alive`]; with no file in any of them, the node is dead.
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
    false
}

/// The roots where this process has a node now.
fn roots() -> Vec<PathBuf> {
    let nodes = NODES.lock();
    let retired = RETIRED.lock();
    nodes
        .values()
        .filter(|(_, w, generation)| is_ours(*generation) && w.strong_count() > 0)
        .map(|(root, _, _)| root.clone())
        .chain(
            retired
                .iter()
                .filter(|r| is_ours(r.fork_generation))
                .map(|r| r.root.clone()),
        )
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
/// The lock is tested on the file the path names *after* the test: a name can pass to
/// another file while the probe looks (a colliding id that removed a dead file and
/// made its own, a cleaner's removal; a live node keeps its file, see [`RETIRED`]). A
/// probe that opened the old
/// file would find its lock free although the node lives; so a free lock counts only
/// if the path still names the file that was locked ([`same_inode`]). A file that is
/// linked there with its lock free has been free since its owner went: node files
/// arrive locked (renamed into place) and are unlinked before they are unlocked.
/// Otherwise the probe starts again on the new file (or finds none).
pub fn lock_is_free(path: &Path) -> Option<bool> {
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
        crate::stall::stall_point(crate::stall::Stall::ProbeAfterOpen);
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
                // Only the file we hold: the name may have passed to another node
                // file since we opened it (see `lock_is_free`).
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
