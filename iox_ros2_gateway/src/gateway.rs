//! The gateway: one ROS 2 node, the import thread ([`crate::import`]), one thread per
//! exported service ([`crate::export`]) and a scanner that lists the iox root every
//! scan interval for services to export and checks the ROS subscriptions of each
//! exported topic for QoS they cannot get ([`crate::qos`]).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use iox_ros2::library::Library;

use crate::export::{self, Export, OwnSlot};
use crate::import::{ImportStatus, Importer};
use crate::names::{self, NameError, Pattern};
use crate::qos::Qos;
use crate::rcl::{Ros, RosError};
use crate::services::{Direction, ServiceScanner, ServiceStatus};
use iox_ros2::carried::Route;
use iox_service::opener::{Backoff, Opener};

/// What a gateway does.
#[derive(Debug, Clone)]
pub struct Options {
    /// The iox root.
    pub root: PathBuf,
    /// Service patterns to export to ROS.
    pub export: Vec<String>,
    /// Service patterns to import from ROS.
    pub import: Vec<String>,
    /// Services imported as CDR bytes even when a typed route exists (images).
    pub cdr: Vec<String>,
    /// Request-response service patterns to export as ROS 2 services.
    pub export_services: Vec<String>,
    /// ROS 2 service patterns (by service name) to import as request-response services.
    pub import_services: Vec<String>,
    /// The ROS install's prefixes (empty: `AMENT_PREFIX_PATH`).
    pub ros_prefixes: Vec<PathBuf>,
    /// The ROS node's name (ROS arguments may rename it).
    pub node_name: String,
    /// `PATTERN=QOS` settings: the QoS of imported topics (`crate::sizing`).
    pub qos: Vec<String>,
    /// `PATTERN=SIZExCOUNT,...` settings: the size classes of imported services.
    pub pools: Vec<String>,
    /// ROS arguments for rcl (`--ros-args`, then remappings, parameters, ...; empty:
    /// none), as a ROS node's command line gives them.
    pub ros_args: Vec<String>,
    /// How often the iox root and the ROS graph are looked at.
    pub scan_interval: Duration,
}

impl Options {
    /// Defaults: root `$IOX_ROOT` or `/dev/shm`, node `iox_gateway`, nothing carried.
    pub fn new() -> Self {
        Self {
            root: iox_mempool::root::root_dir(),
            export: Vec::new(),
            import: Vec::new(),
            cdr: Vec::new(),
            export_services: Vec::new(),
            import_services: Vec::new(),
            ros_prefixes: Vec::new(),
            node_name: "iox_gateway".into(),
            ros_args: Vec::new(),
            qos: Vec::new(),
            pools: Vec::new(),
            scan_interval: Duration::from_millis(250),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self::new()
    }
}

/// Why the gateway did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A pattern is not a glob.
    #[error(transparent)]
    Pattern(#[from] NameError),
    /// ROS 2 could not be started.
    #[error(transparent)]
    Ros(#[from] RosError),
    /// A thread could not be started.
    #[error("cannot start the gateway: {0}")]
    Thread(String),
    /// A `--qos` or `--pool` setting is not one.
    #[error(transparent)]
    Sizing(#[from] crate::sizing::SizingError),
}

/// One exported service in a [`Status`].
#[derive(Debug, Clone)]
pub struct Exported {
    /// The service.
    pub name: String,
    /// Its topic.
    pub topic: String,
    /// The ROS type.
    pub type_name: String,
    /// The route.
    pub route: Route,
    /// The QoS offered.
    pub qos: Qos,
    /// Published, echo-skipped, malformed, failed.
    pub counts: [u64; 4],
    /// ROS subscriptions that get nothing, and why.
    pub refused: Vec<String>,
}

/// One imported topic in a [`Status`].
#[derive(Debug, Clone)]
pub struct Imported {
    /// The service.
    pub name: String,
    /// Its topic.
    pub topic: String,
    /// The ROS type.
    pub type_name: String,
    /// The route.
    pub route: Route,
    /// The subscription's QoS.
    pub qos: Qos,
    /// Received, published, malformed, dropped.
    pub counts: [u64; 4],
}

/// A snapshot of what the gateway does.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Exported services.
    pub exported: Vec<Exported>,
    /// Imported topics.
    pub imported: Vec<Imported>,
    /// Services not carried, and why.
    pub skipped: Vec<(String, String)>,
    /// ROS services carried: (iox name, ROS name, type, export?, [calls, answered,
    /// failed, malformed]).
    pub services: Vec<(String, String, String, bool, [u64; 4])>,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exported {}", self.exported.len())?;
        for e in &self.exported {
            let [sent, echo, malformed, failed] = e.counts;
            write!(
                f,
                " [{} -> {} ({}, {}): sent {sent} echo-skipped {echo} malformed {malformed} failed {failed}",
                e.name, e.topic, e.type_name, e.route
            )?;
            for r in &e.refused {
                write!(f, "; QoS incompatible: {r}")?;
            }
            write!(f, "]")?;
        }
        write!(f, "; imported {}", self.imported.len())?;
        for i in &self.imported {
            let [rx, published, malformed, dropped] = i.counts;
            write!(
                f,
                " [{} -> {} ({}, {}): received {rx} published {published} malformed {malformed} dropped {dropped}]",
                i.topic, i.name, i.type_name, i.route
            )?;
        }
        if !self.services.is_empty() {
            write!(f, "; services {}", self.services.len())?;
            for (name, ros, ty, export, [calls, answered, failed, malformed]) in &self.services {
                let arrow = if *export {
                    format!("{name} -> {ros}")
                } else {
                    format!("{ros} -> {name}")
                };
                write!(
                    f,
                    " [{arrow} ({ty}): calls {calls} answered {answered} failed {failed} malformed {malformed}]"
                )?;
            }
        }
        if !self.skipped.is_empty() {
            write!(f, "; skipped {}", self.skipped.len())?;
            for (n, why) in &self.skipped {
                write!(f, " [{n}: {why}]")?;
            }
        }
        Ok(())
    }
}

struct Running {
    export: Export,
    refused: Vec<String>,
}

type Exports = Arc<Mutex<(BTreeMap<String, Running>, BTreeMap<String, String>)>>;

/// A running gateway; [`Gateway::stop`] ends it.
pub struct Gateway {
    ros: Arc<Ros>,
    stop: Arc<AtomicBool>,
    exports: Exports,
    imports: ImportStatus,
    services: ServiceStatus,
    threads: Vec<JoinHandle<()>>,
}

impl Gateway {
    /// Starts ROS 2 (from the libraries in `library_dirs`, see [`crate::install`]) and
    /// the gateway's threads.
    pub fn start(o: Options, library_dirs: &[PathBuf]) -> Result<Self, StartError> {
        let parse = |v: &[String]| v.iter().map(|p| Pattern::new(p)).collect::<Result<Vec<_>, _>>();
        let (export_p, import_p, cdr_p) = (parse(&o.export)?, parse(&o.import)?, parse(&o.cdr)?);
        let (export_s, import_s) = (parse(&o.export_services)?, parse(&o.import_services)?);
        let sizing = crate::sizing::Sizing::new(&o.qos, &o.pools)?;
        let prefixes = crate::install::prefixes(&o.ros_prefixes);
        let preload: Vec<PathBuf> = crate::install::python_runtime(&prefixes).into_iter().collect();
        let ros = Ros::start(library_dirs, &preload, &o.node_name, &o.ros_args)?;
        let library = Library::with_prefixes(prefixes);
        let stop = Arc::new(AtomicBool::new(false));
        let own_slots: Arc<Mutex<HashMap<String, OwnSlot>>> = Arc::default();
        let imports: ImportStatus = Arc::default();
        let exports: Exports = Arc::default();
        let services: ServiceStatus = Arc::default();
        let mut threads = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| StartError::Thread(e.to_string()))
        };
        if !import_p.is_empty() {
            let importer = Importer::new(
                ros.clone(),
                o.root.clone(),
                import_p,
                cdr_p,
                library.clone(),
                own_slots.clone(),
                imports.clone(),
                stop.clone(),
                o.scan_interval,
                Arc::new(sizing),
            );
            threads.push(spawn("import", Box::new(move || importer.run()))?);
        }
        if !export_p.is_empty() {
            let scanner = Scanner {
                ros: ros.clone(),
                root: o.root.clone(),
                patterns: export_p,
                library,
                own_slots,
                exports: exports.clone(),
                stop: stop.clone(),
                opener: Opener::new(Backoff::default()),
            };
            let interval = o.scan_interval;
            threads.push(spawn("export scanner", Box::new(move || scanner.run(interval)))?);
        }
        if !export_s.is_empty() || !import_s.is_empty() {
            let scanner = ServiceScanner {
                ros: ros.clone(),
                root: o.root.clone(),
                export: export_s,
                import: import_s,
                status: services.clone(),
                stop: stop.clone(),
                opener: Opener::new(Backoff::default()),
            };
            let interval = o.scan_interval;
            threads.push(spawn("service scanner", Box::new(move || scanner.run(interval)))?);
        }
        Ok(Self {
            ros,
            stop,
            exports,
            imports,
            services,
            threads,
        })
    }

    /// The ROS node's name.
    pub fn node_name(&self) -> &str {
        self.ros.node_name()
    }

    /// What flows now.
    pub fn status(&self) -> Status {
        let mut s = Status::default();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        {
            let exports = crate::lock(&self.exports);
            for (name, r) in &exports.0 {
                let st = &r.export.stats;
                s.exported.push(Exported {
                    name: name.clone(),
                    topic: r.export.topic.clone(),
                    type_name: r.export.type_name.clone(),
                    route: r.export.route,
                    qos: r.export.qos,
                    counts: [
                        load(&st.sent),
                        load(&st.echo_skipped),
                        load(&st.malformed),
                        load(&st.failed),
                    ],
                    refused: r.refused.clone(),
                });
            }
            s.skipped
                .extend(exports.1.iter().map(|(n, w)| (n.clone(), w.clone())));
        }
        for (name, state) in crate::lock(&self.services).iter() {
            match state {
                Ok(c) => s.services.push((
                    name.clone(),
                    c.ros_name.clone(),
                    c.type_name.clone(),
                    c.direction == Direction::Export,
                    [
                        load(&c.stats.calls),
                        load(&c.stats.answered),
                        load(&c.stats.failed),
                        load(&c.stats.malformed),
                    ],
                )),
                Err(why) => s.skipped.push((name.clone(), why.clone())),
            }
        }
        for (name, state) in crate::lock(&self.imports).iter() {
            match state {
                Ok(i) => s.imported.push(Imported {
                    name: name.clone(),
                    topic: i.topic.clone(),
                    type_name: i.type_name.clone(),
                    route: i.route,
                    qos: i.qos,
                    counts: [
                        load(&i.stats.received),
                        load(&i.stats.published),
                        load(&i.stats.malformed),
                        load(&i.stats.dropped),
                    ],
                }),
                Err(why) => s.skipped.push((name.clone(), why.clone())),
            }
        }
        s
    }

    /// Stops every thread; the ROS node goes when the last publisher does.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let running = std::mem::take(&mut crate::lock(&self.exports).0);
        for (_, r) in running {
            r.export.stop();
        }
    }
}

struct Scanner {
    ros: Arc<Ros>,
    root: PathBuf,
    patterns: Vec<Pattern>,
    library: Library,
    own_slots: Arc<Mutex<HashMap<String, OwnSlot>>>,
    exports: Exports,
    stop: Arc<AtomicBool>,
    /// Opens the services to export, off this thread (`iox_service::opener`).
    opener: Opener<export::Opened>,
}

impl Scanner {
    fn run(mut self, interval: Duration) {
        let mut unreadable = false;
        while !self.stop.load(Ordering::Relaxed) {
            self.start_opened();
            match iox_service::inspect::inspect_all_in(&self.root) {
                Ok(info) => {
                    unreadable = false;
                    self.scan(info);
                }
                Err(e) if !unreadable => {
                    unreadable = true;
                    eprintln!("iox-ros2: cannot list {}: {e}", self.root.display());
                }
                Err(_) => {}
            }
            self.check_subscriptions();
            std::thread::sleep(interval);
        }
    }

    /// Starts the exports whose services opened since the last look; records why the
    /// others did not (each tried again after its back-off).
    fn start_opened(&mut self) {
        for f in self.opener.finished() {
            let name = f.name;
            let own = crate::lock(&self.own_slots)
                .entry(name.clone())
                .or_insert_with(|| Arc::new(usize::MAX.into()))
                .clone();
            let started = match f.result {
                // A failure after the open (the ROS publisher) is backed off too.
                Ok(opened) => Export::start(&self.ros, opened, own)
                    .map_err(|why| self.opener.failed_later(&name, why).why),
                Err(failed) => Err(failed.why),
            };
            let mut guard = crate::lock(&self.exports);
            let (running, skipped) = &mut *guard;
            match started {
                Ok(export) => {
                    eprintln!(
                        "iox-ros2: exporting {name:?} as {} ({}, {}, {})",
                        export.topic, export.type_name, export.route, export.qos
                    );
                    skipped.remove(&name);
                    running.insert(
                        name,
                        Running {
                            export,
                            refused: Vec::new(),
                        },
                    );
                }
                Err(why) => {
                    if skipped.get(&name) != Some(&why) {
                        eprintln!("iox-ros2: not exporting {name:?} (tried again after a back-off): {why}");
                    }
                    skipped.insert(name, why);
                }
            }
        }
    }

    /// Ends the exports whose service went away; asks the opener for the services to
    /// export that are not exported yet. The exports' lock is held only to look and
    /// to change the maps, never across an open.
    fn scan(&mut self, info: iox_service::inspect::RootInfo) {
        let ended: Vec<Running> = {
            let mut guard = crate::lock(&self.exports);
            let running = &mut guard.0;
            let names: Vec<String> = running
                .iter()
                .filter(|(_, r)| r.export.is_finished())
                .map(|(n, _)| n.clone())
                .collect();
            names.iter().filter_map(|n| running.remove(n)).collect()
        };
        for r in ended {
            r.export.stop();
        }
        for service in info.services {
            let Some(config) = service.config else { continue };
            let name = config.name.clone();
            if config.messaging_pattern() != iox_service::MessagingPattern::PublishSubscribe
                || !matches!(
                    service.health,
                    iox_service::inspect::Health::Alive | iox_service::inspect::Health::Stale
                )
                || !self.patterns.iter().any(|p| p.matches(&name))
                || !self.opener.ready(&name)
                || crate::lock(&self.exports).0.contains_key(&name)
            {
                continue;
            }
            let topic = match names::topic_name(&name) {
                Ok(t) => t,
                Err(e) => {
                    crate::lock(&self.exports).1.insert(name, e.to_string());
                    continue;
                }
            };
            let (root, library) = (self.root.clone(), self.library.clone());
            self.opener
                .open(&name, move || export::open(&root, &config, topic, &library));
        }
    }

    /// Records the ROS subscriptions of each exported topic that its QoS leaves
    /// without messages (module docs of [`crate::qos`]).
    fn check_subscriptions(&self) {
        let topics: Vec<(String, String, Qos)> = crate::lock(&self.exports)
            .0
            .iter()
            .map(|(n, r)| (n.clone(), r.export.topic.clone(), r.export.qos))
            .collect();
        for (name, topic, offered) in topics {
            let Ok(subs) = self.ros.endpoints(&topic, false) else {
                continue;
            };
            let refused: Vec<String> = subs
                .iter()
                .filter(|s| s.node != self.ros.node_name())
                .filter_map(|s| {
                    // DDS tells the node's name some time after the endpoint itself.
                    let who = if s.node.starts_with("_NODE_NAME_UNKNOWN") {
                        "a subscription (node not known yet)".to_owned()
                    } else {
                        format!("node {}/{}", s.namespace.trim_end_matches('/'), s.node)
                    };
                    offered
                        .refuses(&s.qos)
                        .map(|why| format!("{who} on {topic}: {why}"))
                })
                .collect();
            if let Some(r) = crate::lock(&self.exports).0.get_mut(&name)
                && r.refused != refused
            {
                for why in refused.iter().filter(|w| !r.refused.contains(w)) {
                    eprintln!("iox-ros2: QoS incompatible: {why}");
                }
                r.refused = refused;
            }
        }
    }
}
