//! Read-only inspection of the services under a root, for tools such as the `iox`
//! command-line program.
//!
//! Inspection maps the static config, the dynamic segment and the pool's bookkeeping
//! read-only and only loads from them: it never registers as a user, claims a port,
//! recovers anything or deletes a file, so it is safe to run against any root at any
//! time. Everything it reads is a snapshot. Node liveness is tested as recovery tests
//! it (the node lock), without removing anything. Damaged files are reported in
//! [`ServiceInfo::problems`] (each naming the file), never trusted. The static config
//! is read before the dynamic segment; a segment found alive whose config was missing
//! at that read was created in between (a creator writes the config before it marks
//! the segment alive), so the config is read again: an alive service is never reported
//! without its config.

mod backlog;
pub mod blackboard;
pub mod pages;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use iox_mempool::Pool;
use iox_mempool::segment::Access;
use serde::Serialize;

use crate::dynamic::{self, Dynamic, DynamicError, DynamicSegment};
use crate::shm::files;
use crate::shm::regions::Side;
use crate::{NameError, RootError, ServiceName, StaticConfig, node};

/// How a service is doing, as far as its files tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Usable, and every process recorded in it is alive.
    Alive,
    /// Usable, but dead processes are recorded in it (ports or users), or no live
    /// process uses it: recovery (`iox clean`) will tidy or remove it.
    Stale,
    /// A live process is creating it.
    Creating,
    /// A live process is removing it.
    Removing,
    /// Its files are damaged; see the problems.
    Corrupt,
}

/// A port slot in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortInfo {
    /// "publisher" or "subscriber"; in event services "notifier" or "listener"; in
    /// request-response services "client" or "server".
    pub kind: &'static str,
    /// The slot index.
    pub slot: usize,
    /// The owner's process id, as the owner sees it.
    pub pid: u32,
    /// Whether the owner is in another PID namespace than this process (another
    /// container): `pid` then names another process here, or none.
    pub other_namespace: bool,
    /// The owner's node id.
    pub node: u64,
    /// Whether the owner process is alive.
    pub alive: bool,
    /// "claiming", "active", "closing" (or "free" while being released).
    pub phase: &'static str,
    /// Whether the port pinned the pool in its process.
    pub pinned: bool,
    /// Publishers: samples sent since the port was created; notifiers: notifications.
    pub sent: u64,
    /// Subscribers: samples missed because their queue was full (see
    /// `Subscriber::missed`); 0 for other ports.
    pub missed: u64,
    /// Subscribers: samples waiting in its queues; listeners: event ids pending;
    /// servers: requests waiting; clients: requests in flight.
    pub pending: u64,
    /// Listeners: the event ids pending (empty for other ports).
    pub pending_ids: Vec<u32>,
}

/// An open service handle (one process's use of the service).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    /// The process id, as that process sees it (0 if its node file says none).
    pub pid: u32,
    /// Whether the process is in another PID namespace than this one.
    pub other_namespace: bool,
    /// The node id.
    pub node: u64,
    /// Whether the process is alive.
    pub alive: bool,
}

/// Whether one process using a service pinned its pool, and how much: what a process
/// pins of a service is its whole payload mapping, once, however many of its ports
/// asked (see `iox_mempool::pin`), so it is told by the ports' pinned flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessPinning {
    /// The process id, as that process sees it.
    pub pid: u32,
    /// Whether the process is in another PID namespace than this one.
    pub other_namespace: bool,
    /// Its node id (processes are told apart by it: pids repeat across namespaces).
    pub node: u64,
    /// Whether the process is alive.
    pub alive: bool,
    /// Whether one of its ports pinned the pool.
    pub pinned: bool,
    /// Bytes it pinned of this service (the payload, or 0).
    pub pinned_bytes: usize,
}

/// Occupancy of one size class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassUsage {
    /// Bytes per chunk.
    pub chunk_size: usize,
    /// Chunks in the class.
    pub count: u32,
    /// Chunks in use.
    pub in_use: u32,
    /// Chunks free.
    pub free: u32,
}

/// How many ports of one kind a service has, live and dead apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PortCount {
    /// Ports whose processes are alive.
    pub live: usize,
    /// Ports of dead processes, not yet recovered (`iox clean` recovers them).
    pub dead: usize,
}

/// What the files of one service say.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceInfo {
    /// The file stem (`iox_<hash>`).
    pub stem: String,
    /// The service name (from the static config), if readable.
    pub name: Option<String>,
    /// The static config, if readable.
    pub config: Option<StaticConfig>,
    /// How it is doing.
    pub health: Health,
    /// Why it is stale, if it is.
    pub stale_reasons: Vec<String>,
    /// Damaged files, each naming the file and the problem.
    pub problems: Vec<String>,
    /// Port slots in use.
    pub ports: Vec<PortInfo>,
    /// The publishers (event services: notifiers; request-response: clients) among
    /// `ports`, live and dead apart.
    pub publishers: PortCount,
    /// The subscribers (event services: listeners; request-response: servers) among
    /// `ports`, live and dead apart.
    pub subscribers: PortCount,
    /// Open service handles.
    pub users: Vec<UserInfo>,
    /// Per process with a port or a handle: whether it pinned the pool, how many bytes.
    pub processes: Vec<ProcessPinning>,
    /// Pool occupancy per size class (empty if unreadable).
    pub classes: Vec<ClassUsage>,
    /// Pool payload size in bytes (0 if unknown).
    pub pool_bytes: usize,
    /// Its files under the root (static config, dynamic segment, chunks, pool file),
    /// those that exist.
    pub files: Vec<String>,
    /// What the pattern's own regions hold: a blackboard's keys (empty for other
    /// patterns).
    pub keys: Vec<crate::inspect::blackboard::KeyInfo>,
    /// For a pool on huge pages: what the kernel gave each live process that maps it
    /// (empty for pools on base pages).
    pub pages: Vec<pages::ProcessPages>,
}

impl ServiceInfo {
    /// Samples sent so far by the publishers connected now.
    pub fn sent(&self) -> u64 {
        self.ports.iter().map(|p| p.sent).sum()
    }

    /// (publishers, subscribers) whose processes are alive.
    pub fn live_ports(&self) -> (usize, usize) {
        (self.publishers.live, self.subscribers.live)
    }

    /// The ports of `kinds` (e.g. "publisher" and "notifier") in `ports`, live and
    /// dead apart.
    fn count(&self, kinds: [&str; 3]) -> PortCount {
        let mut n = PortCount::default();
        for p in self.ports.iter().filter(|p| kinds.contains(&p.kind)) {
            if p.alive {
                n.live += 1;
            } else {
                n.dead += 1;
            }
        }
        n
    }
}

/// Everything under a root.
#[derive(Debug, Clone, Serialize)]
pub struct RootInfo {
    /// The services (any whose dynamic segment or static config exists).
    pub services: Vec<ServiceInfo>,
    /// Lock files of nodes that are dead (recovery removes them).
    pub dead_node_files: Vec<String>,
    /// Temporary files and readiness sockets left by dead processes (recovery removes
    /// them): node files before their rename whose lock is free, and the others of
    /// dead nodes.
    pub dead_temp_files: Vec<String>,
}

impl RootInfo {
    /// The services that a cleanup would remove: stale, with no live process using
    /// them (what `iox clean --dry-run` announces).
    pub fn services_to_remove(&self) -> impl Iterator<Item = &ServiceInfo> {
        self.services.iter().filter(|s| s.would_be_removed())
    }

    /// Every file a cleanup would remove now, as far as this snapshot tells: dead node
    /// files, dead temporary files, and the files of [`RootInfo::services_to_remove`].
    pub fn files_to_remove(&self) -> Vec<String> {
        let mut files: Vec<String> = self
            .dead_node_files
            .iter()
            .chain(&self.dead_temp_files)
            .cloned()
            .chain(self.services_to_remove().flat_map(|s| s.files.iter().cloned()))
            .collect();
        files.sort();
        files
    }
}

impl ServiceInfo {
    /// Whether a cleanup would remove this service: stale and no live process uses it.
    pub fn would_be_removed(&self) -> bool {
        self.health == Health::Stale && !self.users.iter().any(|u| u.alive)
    }
}

/// Why inspecting a named service failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// The name is invalid.
    #[error(transparent)]
    Name(#[from] NameError),
    /// No file of that service exists.
    #[error("service {0:?} does not exist")]
    NotFound(String),
    /// The root is missing or not a directory.
    #[error(transparent)]
    Root(#[from] RootError),
}

/// Node liveness, each node looked up once, nothing removed.
struct Alive<'a> {
    root: &'a Path,
    seen: HashMap<u64, bool>,
}

impl Alive<'_> {
    /// The pid of `node` as its process sees it, and whether that process is in
    /// another PID namespace, from its node file (`fallback` when it says nothing).
    fn pid(&self, node: u64, fallback: u32) -> (u32, bool) {
        node::pid_hint(self.root, node).map_or((fallback, false), |h| (h.pid, h.other_namespace))
    }

    fn check(&mut self, node: u64) -> bool {
        *self
            .seen
            .entry(node)
            .or_insert_with(|| node::is_alive(self.root, node))
    }
}

/// Inspects service `name` under `root`.
pub fn inspect_in(root: &Path, name: &str) -> Result<ServiceInfo, InspectError> {
    let root = &node::absolute_root(root);
    let stem = ServiceName::new(name)?.stem();
    if !root.join(files::config_name(&stem)).exists() && !root.join(files::dynamic_name(&stem)).exists() {
        if let Some(e) = RootError::check_dir(root) {
            return Err(e.into());
        }
        return Err(InspectError::NotFound(name.to_string()));
    }
    let mut alive = Alive {
        root,
        seen: HashMap::new(),
    };
    Ok(inspect_stem(root, &stem, &mut alive))
}

/// Inspects every service under `root`, and lists the files of dead processes: the
/// same judgement as `Service::cleanup_all_dead_in` makes, so a dry run lists
/// what a cleanup would remove.
pub fn inspect_all_in(root: &Path) -> Result<RootInfo, RootError> {
    let root = &node::absolute_root(root);
    let mut alive = Alive {
        root,
        seen: HashMap::new(),
    };
    let mut names: Vec<String> = std::fs::read_dir(root)
        .map_err(|e| RootError::classify(root, "list the root", e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let mut stems: Vec<&str> = names.iter().filter_map(|n| files::stem_of(n)).collect();
    stems.dedup();
    let services = stems
        .iter()
        .map(|stem| inspect_stem(root, stem, &mut alive))
        .collect();
    let mut dead_node_files = Vec::new();
    let mut dead_temp_files = Vec::new();
    for name in &names {
        if let Some(id) = node::parse_node_file_name(name) {
            if !alive.check(id) {
                dead_node_files.push(name.clone());
            }
        } else if let Some(id) = files::parse_socket_name(name) {
            // A readiness socket of a dead node (recovery removes those too).
            if !alive.check(id) {
                dead_temp_files.push(name.clone());
            }
        } else if let Some(id) = node::parse_temp_file_name(name) {
            let dead = if name.starts_with(".iox_node_") {
                // A node file before its rename: abandoned if no one holds its lock
                // (as the cleanup judges it; the id in its name may be alive).
                node::lock_is_free(&root.join(name)) == Some(true)
            } else {
                !alive.check(id)
            };
            if dead {
                dead_temp_files.push(name.clone());
            }
        }
    }
    Ok(RootInfo {
        services,
        dead_node_files,
        dead_temp_files,
    })
}

fn inspect_stem(root: &Path, stem: &str, alive: &mut Alive) -> ServiceInfo {
    let mut info = ServiceInfo {
        stem: stem.to_string(),
        name: None,
        config: None,
        health: Health::Alive,
        stale_reasons: Vec::new(),
        problems: Vec::new(),
        ports: Vec::new(),
        publishers: PortCount::default(),
        subscribers: PortCount::default(),
        users: Vec::new(),
        processes: Vec::new(),
        classes: Vec::new(),
        pool_bytes: 0,
        keys: Vec::new(),
        pages: Vec::new(),
        files: [files::config_name(stem), files::dynamic_name(stem)]
            .into_iter()
            .chain(Pool::file_names(stem))
            .filter(|f| root.join(f).exists())
            .collect(),
    };
    let read_config = |info: &mut ServiceInfo| match StaticConfig::read(&root.join(files::config_name(stem)))
    {
        Ok((c, hash)) => {
            info.name = Some(c.name.clone());
            info.pool_bytes = c.layout.payload_len();
            info.config = Some(c.clone());
            Some((c, hash))
        }
        Err(crate::ConfigError::NotFound { .. }) => None,
        Err(e) => {
            info.problems.push(e.to_string());
            None
        }
    };
    let mut config = read_config(&mut info);
    crate::testing::stall_point(crate::testing::Stall::InspectAfterConfigRead);
    let mut segment = match DynamicSegment::open(root, stem, Access::ReadOnly) {
        Ok(s) => s,
        Err(DynamicError::NotFound) => {
            if config.is_some() {
                info.problems.push(format!(
                    "{}: missing, but its static config exists (debris: remove the service)",
                    root.join(files::dynamic_name(stem)).display()
                ));
            }
            return finish(info);
        }
        Err(DynamicError::Segment(e)) => {
            info.problems.push(e.to_string());
            return finish(info);
        }
        Err(e) => {
            info.problems.push(describe(e));
            return finish(info);
        }
    };
    let path = segment.path().display().to_string();
    // The mapping is read-only: only loads follow.
    let d = segment.view();
    let h = d.header();
    let (node, phase) = dynamic::split_lifecycle(h.lifecycle.load(Ordering::Acquire));
    if config.is_none() && phase == dynamic::ALIVE && info.problems.is_empty() {
        // A creator writes the static config before it marks the segment alive: one
        // found alive whose config was missing a moment ago was created in between.
        config = read_config(&mut info);
        let name = files::config_name(stem);
        if config.is_some() && !info.files.contains(&name) {
            info.files.insert(0, name);
        }
    }
    match phase {
        dynamic::ALIVE => {}
        dynamic::CREATING | dynamic::DESTROYING if alive.check(node) => {
            info.health = if phase == dynamic::CREATING {
                Health::Creating
            } else {
                Health::Removing
            };
        }
        dynamic::CREATING | dynamic::DESTROYING => info.stale_reasons.push(format!(
            "its {} (node {node:016x}) died",
            if phase == dynamic::CREATING {
                "creator"
            } else {
                "remover"
            },
        )),
        _ => info.problems.push(format!("{path}: invalid lifecycle word")),
    }
    for user in d.users() {
        let node = user.load(Ordering::Relaxed);
        if node != 0 {
            let (pid, other_namespace) = alive.pid(node, 0);
            info.users.push(UserInfo {
                pid,
                other_namespace,
                node,
                alive: alive.check(node),
            });
        }
    }
    if let Some((config, _)) = &config {
        info.pages = pages::of_users(config, &info.users);
    }
    if let Some((config, hash)) = &config {
        match segment.attach(config, *hash) {
            Err(DynamicError::OtherIncarnation) => info
                .problems
                .push(format!("{path}: belongs to another static config")),
            Err(e) => info.problems.push(describe(e)),
            Ok(()) => {
                let d = segment.view();
                read_ports(d, alive, &mut info);
                info.keys = config
                    .blackboard()
                    .map_or_else(Vec::new, |b| blackboard::keys(d, b));
                match Pool::usage(root, stem, &config.layout, *hash) {
                    Ok(classes) => {
                        info.classes = classes
                            .iter()
                            .map(|c| ClassUsage {
                                chunk_size: c.chunk_size,
                                count: c.count,
                                in_use: c.count - c.free,
                                free: c.free,
                            })
                            .collect()
                    }
                    Err(e) => info.problems.push(e.to_string()),
                }
            }
        }
    }
    finish(info)
}

/// What is wrong with a dynamic segment, for a report.
fn describe(e: DynamicError) -> String {
    match e {
        DynamicError::Segment(e) => e.to_string(),
        DynamicError::Corrupt { path, problem } => format!("{}: {problem}", path.display()),
        DynamicError::NotFound => "dynamic segment missing".into(),
        DynamicError::OtherIncarnation => "dynamic segment belongs to another static config".into(),
    }
}

fn read_ports(d: Dynamic<'_>, alive: &mut Alive, info: &mut ServiceInfo) {
    let l = *d.layout();
    let parts = l.pattern.parts();
    let (sender, receiver) = parts.port_names();
    let ports = (0..l.sending)
        .map(|p| (Side::Sending, p, d.sender(p)))
        .chain((0..l.receiving).map(|s| (Side::Receiving, s, d.receiver(s))));
    for (side, slot, h) in ports {
        let node = h.node.load(Ordering::Acquire);
        if node == 0 {
            continue;
        }
        let phase = match dynamic::split_state(h.state.load(Ordering::Relaxed)).1 {
            dynamic::CLAIMING => "claiming",
            dynamic::ACTIVE => "active",
            dynamic::CLOSING => "closing",
            _ => "free",
        };
        let backlog = backlog::backlog(d, side, slot);
        let (pid, other_namespace) = alive.pid(node, h.pid.load(Ordering::Relaxed));
        info.ports.push(PortInfo {
            kind: if side == Side::Sending { sender } else { receiver },
            slot,
            pid,
            other_namespace,
            node,
            alive: alive.check(node),
            phase,
            pinned: h.flags.load(Ordering::Relaxed) & dynamic::PINNED != 0,
            sent: if side == Side::Sending {
                h.sent.load(Ordering::Relaxed)
            } else {
                0
            },
            missed: backlog.missed,
            pending: backlog.pending,
            pending_ids: backlog.pending_ids,
        });
    }
}

/// One entry per process (node) of `info`'s ports and handles, ordered by pid.
fn processes(info: &ServiceInfo) -> Vec<ProcessPinning> {
    let mut out: Vec<ProcessPinning> = Vec::new();
    let seen = info
        .ports
        .iter()
        .map(|p| (p.node, p.pid, p.other_namespace, p.alive, p.pinned))
        .chain(
            info.users
                .iter()
                .map(|u| (u.node, u.pid, u.other_namespace, u.alive, false)),
        );
    for (node, pid, other_namespace, alive, pinned) in seen {
        match out.iter_mut().find(|p| p.node == node) {
            Some(p) => {
                p.alive |= alive;
                p.pinned |= pinned;
                if p.pid == 0 {
                    p.pid = pid;
                }
            }
            None => out.push(ProcessPinning {
                pid,
                other_namespace,
                node,
                alive,
                pinned,
                pinned_bytes: 0,
            }),
        }
    }
    for p in &mut out {
        p.pinned_bytes = if p.pinned { info.pool_bytes } else { 0 };
    }
    out.sort_by_key(|p| p.pid);
    out
}

fn finish(mut info: ServiceInfo) -> ServiceInfo {
    info.processes = processes(&info);
    info.publishers = info.count(["publisher", "notifier", "client"]);
    info.subscribers = info.count(["subscriber", "listener", "server"]);
    let dead_ports = info.ports.iter().filter(|p| !p.alive).count();
    let dead_users = info.users.iter().filter(|u| !u.alive).count();
    if dead_ports > 0 {
        info.stale_reasons
            .push(format!("{dead_ports} port(s) of dead processes"));
    }
    if dead_users > 0 {
        info.stale_reasons
            .push(format!("{dead_users} handle(s) of dead processes"));
    }
    if info.problems.is_empty()
        && info.health == Health::Alive
        && !info.users.iter().any(|u| u.alive)
        && info.config.is_some()
    {
        info.stale_reasons.push("no live process uses it".into());
    }
    info.health = if !info.problems.is_empty() {
        Health::Corrupt
    } else if info.health != Health::Alive {
        info.health
    } else if !info.stale_reasons.is_empty() {
        Health::Stale
    } else {
        Health::Alive
    };
    info
}
