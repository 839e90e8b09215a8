//! The bridge: one Zenoh session, the imports (per import pattern a Zenoh subscriber
//! that publishes from its callback and a thread that opens local services, see
//! [`crate::import`]), the exports (one thread per exported service, see
//! [`crate::export`]) and a scanner that finds the services to export.
//!
//! The scanner lists the root every [`Options::scan_interval`] (250 ms by default, so a
//! service created after the bridge started is exported within 1 s) with
//! `iox_service::inspect`, which only reads files. Every publish-subscribe service whose
//! name matches an export pattern and can travel as a key gets an [`Export`]; names
//! that cannot are logged once, naming them. The scanner never opens a service itself:
//! an opener (`iox_service::opener`) opens each on a thread of its own with a short
//! timeout, backed off when it fails, and the scanner holds no lock across an open, so
//! a service whose holders another user stopped delays no other export. An export whose service was removed ends,
//! and the next scan exports the service again if it is re-created.
//!
//! One queryable on `<prefix>-config/**` answers importing bridges with the static
//! config (RON, as on disk) of each exported service.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use iox_service::PubSubService;
use iox_service::opener::{Backoff, Opener};
use zenoh::Wait;
use zenoh::key_expr::OwnedKeyExpr;

use crate::export::{Export, ExportStats};
use crate::import::{self, ImportShared, ImportState};
use crate::keys::{KeyError, Keys, Pattern};
use crate::local;

/// What a bridge does.
#[derive(Debug, Clone)]
pub struct Options {
    /// The local iox root.
    pub root: PathBuf,
    /// The key prefix (`iox`).
    pub prefix: String,
    /// Service patterns to export.
    pub export: Vec<String>,
    /// Service patterns to import.
    pub import: Vec<String>,
    /// Endpoints to connect to (`tcp/10.0.0.2:7447`).
    pub connect: Vec<String>,
    /// Endpoints to listen on (`tcp/0.0.0.0:7447`).
    pub listen: Vec<String>,
    /// A Zenoh config file (JSON5) for everything else; `connect`/`listen` override its
    /// endpoints when given.
    pub zenoh_config: Option<PathBuf>,
    /// How often the root is listed for services to export.
    pub scan_interval: Duration,
}

impl Options {
    /// Defaults: root `$IOX_ROOT` or `/dev/shm`, prefix `iox`, nothing bridged.
    pub fn new() -> Self {
        Self {
            root: iox_mempool::root::root_dir(),
            prefix: "iox".into(),
            export: Vec::new(),
            import: Vec::new(),
            connect: Vec::new(),
            listen: Vec::new(),
            zenoh_config: None,
            scan_interval: Duration::from_millis(250),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self::new()
    }
}

/// Why the bridge did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A pattern or the prefix is not a key expression.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The Zenoh config file could not be read.
    #[error("cannot read the Zenoh config {}: {message}", path.display())]
    ZenohConfigFile {
        /// The file.
        path: PathBuf,
        /// What Zenoh said.
        message: String,
    },
    /// An endpoint was refused.
    #[error("invalid Zenoh {what} endpoints {endpoints:?}: {message}")]
    Endpoint {
        /// "connect" or "listen".
        what: &'static str,
        /// The endpoints.
        endpoints: Vec<String>,
        /// What Zenoh said.
        message: String,
    },
    /// The session did not open (e.g. a listen port in use).
    #[error("cannot open the Zenoh session: {0}")]
    Session(String),
    /// A thread or declaration failed.
    #[error("cannot start the bridge: {0}")]
    Setup(String),
}

/// A snapshot of what the bridge does.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Exported services: (name, sent, dropped, echo skipped, failed).
    pub exported: Vec<(String, u64, u64, u64, u64)>,
    /// Imported services: (name, received, published, failed).
    pub imported: Vec<(String, u64, u64, u64)>,
    /// Services skipped, with the reason (import side and names that cannot travel).
    pub skipped: Vec<(String, String)>,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exported {}", self.exported.len())?;
        for (n, sent, dropped, echo, failed) in &self.exported {
            write!(
                f,
                " [{n}: sent {sent} dropped {dropped} echo-skipped {echo} failed {failed}]"
            )?;
        }
        write!(f, "; imported {}", self.imported.len())?;
        for (n, rx, published, failed) in &self.imported {
            write!(f, " [{n}: received {rx} published {published} failed {failed}]")?;
        }
        if !self.skipped.is_empty() {
            write!(f, "; skipped {}", self.skipped.len())?;
            for (n, _) in &self.skipped {
                write!(f, " [{n}]")?;
            }
        }
        Ok(())
    }
}

struct Exports {
    running: HashMap<String, Export>,
    /// Names refused (cannot travel as keys), with the reason.
    refused: HashMap<String, String>,
    /// Names whose export failed to start (logged once; retried after the opener's
    /// back-off).
    failing: HashSet<String>,
}

/// A running bridge. [`Bridge::stop`] ends it (dropping it leaves threads running
/// until the process ends).
pub struct Bridge {
    session: zenoh::Session,
    shared: Arc<ImportShared>,
    exports: Arc<Mutex<Exports>>,
    threads: Vec<JoinHandle<()>>,
    _queryable: zenoh::query::Queryable<()>,
}

fn zenoh_config(o: &Options) -> Result<zenoh::Config, StartError> {
    let mut config = match &o.zenoh_config {
        Some(path) => zenoh::Config::from_file(path).map_err(|e| StartError::ZenohConfigFile {
            path: path.clone(),
            message: e.to_string(),
        })?,
        None => {
            let mut c = zenoh::Config::default();
            // Explicit endpoints only: no multicast scouting unless a config file asks.
            c.insert_json5("scouting/multicast/enabled", "false")
                .map_err(|e| StartError::Setup(e.to_string()))?;
            c
        }
    };
    for (what, endpoints) in [("connect", &o.connect), ("listen", &o.listen)] {
        if endpoints.is_empty() {
            continue;
        }
        let json = serde_json::to_string(endpoints).expect("strings");
        config
            .insert_json5(&format!("{what}/endpoints"), &json)
            .map_err(|e| StartError::Endpoint {
                what,
                endpoints: endpoints.clone(),
                message: e.to_string(),
            })?;
    }
    Ok(config)
}

impl Bridge {
    /// Opens the session and starts importing and exporting.
    pub fn start(o: Options) -> Result<Self, StartError> {
        let keys = Keys::new(&o.prefix)?;
        let exports_p = o
            .export
            .iter()
            .map(|p| Pattern::new(p))
            .collect::<Result<Vec<_>, _>>()?;
        let imports_p = o
            .import
            .iter()
            .map(|p| Pattern::new(p))
            .collect::<Result<Vec<_>, _>>()?;
        let session = zenoh::open(zenoh_config(&o)?)
            .wait()
            .map_err(|e| StartError::Session(e.to_string()))?;
        let shared = Arc::new(ImportShared {
            root: o.root.clone(),
            keys: keys.clone(),
            own_slots: Arc::new(Mutex::new(HashMap::new())),
            status: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
        });
        let exports = Arc::new(Mutex::new(Exports {
            running: HashMap::new(),
            refused: HashMap::new(),
            failing: HashSet::new(),
        }));
        let configs: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let queryable = {
            let (configs, keys) = (configs.clone(), keys.clone());
            let prefix = format!("{}-config/", o.prefix);
            session
                .declare_queryable(keys.all_configs())
                .callback(move |query| {
                    let Some(name) = query.key_expr().as_str().strip_prefix(&prefix) else {
                        return;
                    };
                    let text = crate::lock(&configs).get(name).cloned();
                    if let Some(text) = text {
                        let _ = query.reply(query.key_expr().clone(), text).wait();
                    }
                })
                .wait()
                .map_err(|e| StartError::Setup(format!("cannot declare the config queryable: {e}")))?
        };
        let mut threads = Vec::new();
        for pattern in imports_p {
            let (session, shared) = (session.clone(), shared.clone());
            let t = std::thread::Builder::new()
                .name(format!("import {}", pattern.as_str()))
                .spawn(move || {
                    let p = pattern.as_str().to_owned();
                    if let Err(e) = import::run(session, pattern, shared) {
                        eprintln!("iox-zenoh: import of {p:?} ended: {e}");
                    }
                })
                .map_err(|e| StartError::Setup(e.to_string()))?;
            threads.push(t);
        }
        if !exports_p.is_empty() {
            let scanner = Scanner {
                root: o.root.clone(),
                keys,
                patterns: exports_p,
                session: session.clone(),
                shared: shared.clone(),
                exports: exports.clone(),
                configs,
                opener: Opener::new(Backoff::default()),
            };
            let interval = o.scan_interval;
            let t = std::thread::Builder::new()
                .name("export scanner".into())
                .spawn(move || scanner.run(interval))
                .map_err(|e| StartError::Setup(e.to_string()))?;
            threads.push(t);
        }
        Ok(Self {
            session,
            shared,
            exports,
            threads,
            _queryable: queryable,
        })
    }

    /// The Zenoh session (e.g. to read its id).
    pub fn session(&self) -> &zenoh::Session {
        &self.session
    }

    /// What flows now.
    pub fn status(&self) -> Status {
        let mut s = Status::default();
        let exports = crate::lock(&self.exports);
        let get = |st: &ExportStats| {
            (
                st.sent.load(Ordering::Relaxed),
                st.dropped.load(Ordering::Relaxed),
                st.echo_skipped.load(Ordering::Relaxed),
                st.failed.load(Ordering::Relaxed),
            )
        };
        for (name, e) in &exports.running {
            let (a, b, c, d) = get(&e.stats);
            s.exported.push((name.clone(), a, b, c, d));
        }
        for (name, why) in &exports.refused {
            s.skipped.push((name.clone(), why.clone()));
        }
        for (name, state) in crate::lock(&self.shared.status).iter() {
            match state {
                ImportState::Flowing(st) => s.imported.push((
                    name.clone(),
                    st.received.load(Ordering::Relaxed),
                    st.published.load(Ordering::Relaxed),
                    st.failed.load(Ordering::Relaxed),
                )),
                ImportState::Skipped(why) => s.skipped.push((name.clone(), why.clone())),
            }
        }
        s.exported.sort();
        s.imported.sort();
        s.skipped.sort();
        s
    }

    /// Stops every thread and closes the session.
    pub fn stop(self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let running = std::mem::take(&mut crate::lock(&self.exports).running);
        for (_, e) in running {
            e.stop();
        }
        let _ = self.session.close().wait();
    }
}

struct Scanner {
    root: PathBuf,
    keys: Keys,
    patterns: Vec<Pattern>,
    session: zenoh::Session,
    shared: Arc<ImportShared>,
    exports: Arc<Mutex<Exports>>,
    configs: Arc<Mutex<HashMap<String, String>>>,
    /// Opens the services to export, off this thread (`iox_service::opener`): each
    /// open on a thread of its own with a short timeout, backed off when it fails.
    opener: Opener<(PubSubService<[u8]>, OwnedKeyExpr, String)>,
}

impl Scanner {
    fn run(mut self, interval: Duration) {
        let mut unreadable_root = false;
        while !self.shared.stop.load(Ordering::Relaxed) {
            self.start_opened();
            match iox_service::inspect::inspect_all_in(&self.root) {
                Ok(info) => {
                    unreadable_root = false;
                    self.scan(info);
                }
                Err(e) if !unreadable_root => {
                    unreadable_root = true;
                    eprintln!("iox-zenoh: cannot list {}: {e}", self.root.display());
                }
                Err(_) => {}
            }
            std::thread::sleep(interval);
        }
    }

    /// Starts the exports whose services opened since the last look.
    fn start_opened(&mut self) {
        for f in self.opener.finished() {
            let name = f.name;
            let started = match f.result {
                Ok((service, key, text)) => {
                    let own = import::own_slot(&self.shared.own_slots, &name);
                    // A failure after the open is backed off too.
                    Export::start(service, &self.session, key, own)
                        .map(|e| (e, text))
                        .map_err(|why| self.opener.failed_later(&name, why).to_string())
                }
                Err(failed) => Err(failed.to_string()),
            };
            let mut exports = crate::lock(&self.exports);
            match started {
                Ok((e, text)) => {
                    eprintln!("iox-zenoh: exporting {name:?}");
                    exports.failing.remove(&name);
                    crate::lock(&self.configs).insert(name.clone(), text);
                    exports.running.insert(name, e);
                }
                // It may be mid-creation, or its holders may not answer: the opener
                // tries again after its back-off (logged once per name).
                Err(e) => {
                    if exports.failing.insert(name.clone()) {
                        eprintln!("iox-zenoh: {name:?} not exported yet: {e}");
                    }
                }
            }
        }
    }

    /// Ends the exports whose service went away; asks the opener for services to
    /// export. The exports' lock is held only to look and change its maps, never
    /// across an open.
    fn scan(&mut self, info: iox_service::inspect::RootInfo) {
        let ended: Vec<Export> = {
            let mut exports = crate::lock(&self.exports);
            // Exports whose service went away end on their own: forget them.
            let names: Vec<String> = exports
                .running
                .iter()
                .filter(|(_, e)| e.is_finished())
                .map(|(n, _)| n.clone())
                .collect();
            for name in &names {
                crate::lock(&self.configs).remove(name);
            }
            names.iter().filter_map(|n| exports.running.remove(n)).collect()
        };
        for e in ended {
            e.stop();
        }
        let mut seen = HashSet::new();
        for service in info.services {
            let Some(config) = service.config else { continue };
            if config.messaging_pattern() != iox_service::MessagingPattern::PublishSubscribe
                || !matches!(
                    service.health,
                    iox_service::inspect::Health::Alive | iox_service::inspect::Health::Stale
                )
            {
                continue;
            }
            let name = config.name.clone();
            {
                let exports = crate::lock(&self.exports);
                if exports.running.contains_key(&name) || exports.refused.contains_key(&name) {
                    seen.insert(name);
                    continue;
                }
            }
            // A name that cannot be a key never matches a pattern: tell the user when it
            // would have been exported (its first chunk matches a pattern's first chunk).
            let key = match self.keys.data_key(&name) {
                Ok(k) => k,
                Err(e) => {
                    if self.patterns.iter().any(|p| looks_exported(p, &name)) {
                        eprintln!("iox-zenoh: not exported: {e}");
                        crate::lock(&self.exports).refused.insert(name, e.to_string());
                    }
                    continue;
                }
            };
            if !self.patterns.iter().any(|p| p.matches(&name)) {
                continue;
            }
            seen.insert(name.clone());
            if !self.opener.ready(&name) {
                continue;
            }
            let text = match ron::to_string(&config) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("iox-zenoh: not exported: cannot encode the config of {name:?}: {e}");
                    continue;
                }
            };
            let root = self.root.clone();
            self.opener.open(&name, move || {
                local::open_for_export(&root, &config)
                    .map(|service| (service, key, text))
                    .map_err(|e| e.to_string())
            });
        }
        // Names refused earlier whose service is gone may come back valid-less: forget.
        crate::lock(&self.exports)
            .refused
            .retain(|n, _| seen.contains(n) || self.keys.data_key(n).is_err());
    }
}

/// Whether an export pattern would have selected `name` had it been a valid key: its
/// first `/`-separated chunk matches the pattern's first chunk.
fn looks_exported(pattern: &Pattern, name: &str) -> bool {
    let first = pattern.as_str().split('/').next().unwrap_or("");
    let name_first = name.split('/').next().unwrap_or("");
    first == "**" || first == "*" || first == name_first
}
