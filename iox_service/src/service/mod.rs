//! Services by name: the builder, and open / create / open-or-create without a broker.
//!
//! Protocol (see DESIGN.md, "Creating and opening a service", and [`crate::lifecycle`]
//! for who may delete which file):
//! 1. Read `iox_<H>.service`. If it exists, check it (name, version, payload type,
//!    memory type if the caller set one, limits the caller asked for), open the dynamic
//!    segment (size checked before mapping, magic, version, and the hash of the static
//!    config it belongs to), check its lifecycle (a dead creator or remover is taken
//!    over and its files removed), open the pool, recover dead participants
//!    ([`crate::recovery`]); if no live user is left the service is removed and
//!    created afresh; else register as a user. A memfd payload is reached through
//!    `/proc/<pid>/fd/<n>` of a live registered user and verified (sealed memfd, the
//!    size and inode the static config records) before it is mapped.
//! 2. If not, make the payload first when it is a memfd (its identity is part of the
//!    static config, whose hash names the incarnation), build the dynamic segment
//!    under a temporary name and rename it into
//!    place with `RENAME_NOREPLACE` (the exclusive step); the winner creates the pool,
//!    publishes the static config with an atomic rename and marks the service alive.
//!    Losers wait for it.
//! 3. Anything transient (a service being created or removed by a live process) is
//!    retried with a short back-off until the builder's timeout (default 10 s).
//!
//! A service is removed when its last user (a service handle, held by every port) goes
//! away. Decisions where DESIGN.md is silent: a service handle in one process is one
//! user; subscribers see samples sent after they connect (no history); the pool of a
//! typed service has one class holding `T`, sized so a well-behaved user never
//! exhausts it: `publishers x (loans + 1 spare + subscribers x buffer) + subscribers x
//! held`. The payload is mapped read-write in every process (one mapping per service
//! handle, so pinning it is one registration however many ports share it).

use std::marker::PhantomData;
use std::os::fd::AsRawFd;

use rustix::fs::{Mode, OFlags};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use iox_mempool::segment::{self, Access, CreateSegmentError, OpenSegmentError, Segment};
use iox_mempool::{
    Backing, Bookkeeping, LayoutError, MemfdIdentity, MemoryType, OpenPoolError, Pool, PoolInfo, PoolLayout,
};
use thiserror::Error;

use crate::dynamic::{self, Dynamic, DynamicLayout};
use crate::lifecycle::{self, Phase, RegisterError, file_names};
use crate::node::{self, Node};
use crate::recovery::{self, Liveness};
use crate::static_config::{self, ConfigError, MessagingPattern, Overflow, PayloadBacking, StaticConfig};
use crate::{NameError, Payload, PayloadType, ServiceName};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The entry point: a service name, and where its files live.
///
/// ```
/// use iox_service::Service;
/// let dir = tempfile::tempdir().unwrap();
/// let service = Service::named("camera/front").unwrap()
///     .root(dir.path())
///     .publish_subscribe::<u64>()
///     .open_or_create()
///     .unwrap();
/// let publisher = service.publisher_builder().create().unwrap();
/// let subscriber = service.subscriber_builder().create().unwrap();
/// publisher.loan_uninit().unwrap().write_payload(42).send().unwrap();
/// assert_eq!(*subscriber.receive().unwrap().unwrap(), 42);
/// ```
#[derive(Debug, Clone)]
pub struct Service {
    pub(crate) name: ServiceName,
    pub(crate) root: PathBuf,
}

impl Service {
    /// A service called `name` under the default root (`$IOX_ROOT` or `/dev/shm`).
    pub fn named(name: &str) -> Result<Self, NameError> {
        Ok(Self {
            name: ServiceName::new(name)?,
            root: node::absolute_root(&iox_mempool::root::root_dir()),
        })
    }

    /// Uses `dir` as the root instead of `$IOX_ROOT` / `/dev/shm`.
    pub fn root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.root = node::absolute_root(&dir.into());
        self
    }

    /// A publish-subscribe service carrying `P`: a `T: ZeroCopySafe` or a slice `[T]`.
    pub fn publish_subscribe<P: ?Sized + Payload>(self) -> PubSubBuilder<P> {
        PubSubBuilder {
            name: self.name,
            root: self.root,
            memory_type: None,
            max_publishers: None,
            max_subscribers: None,
            subscriber_buffer: None,
            max_loans: None,
            max_held: None,
            overflow: None,
            permissions: None,
            size_classes: None,
            max_slice_len: None,
            timeout: DEFAULT_TIMEOUT,
            backing: None,
            _payload: PhantomData,
        }
    }

    /// Whether a service called `name` exists under the default root.
    pub fn exists(name: &str) -> Result<bool, NameError> {
        Self::exists_in(&iox_mempool::root::root_dir(), name)
    }

    /// [`Service::exists`] under `root`.
    pub fn exists_in(root: &Path, name: &str) -> Result<bool, NameError> {
        let stem = ServiceName::new(name)?.stem();
        Ok(root.join(file_names(&stem).0).exists())
    }

    /// The static configs of every service under the default root. Files that cannot
    /// be read are returned as errors in the list, not skipped silently.
    pub fn list() -> std::io::Result<Vec<Result<StaticConfig, ConfigError>>> {
        Self::list_in(&iox_mempool::root::root_dir())
    }

    /// [`Service::list`] under `root`.
    pub fn list_in(root: &Path) -> std::io::Result<Vec<Result<StaticConfig, ConfigError>>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(root)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("iox_") && name.ends_with(".service") {
                out.push(StaticConfig::read(&root.join(&*name)).map(|(c, _)| c));
            }
        }
        Ok(out)
    }
}

/// Builds, opens or creates a publish-subscribe service. Settings other than the
/// payload type are applied when creating; when opening, those the caller set are
/// checked against the existing service.
#[derive(Debug)]
pub struct PubSubBuilder<P: ?Sized> {
    name: ServiceName,
    root: PathBuf,
    memory_type: Option<MemoryType>,
    max_publishers: Option<u32>,
    max_subscribers: Option<u32>,
    subscriber_buffer: Option<u32>,
    max_loans: Option<u32>,
    max_held: Option<u32>,
    overflow: Option<Overflow>,
    permissions: Option<u32>,
    size_classes: Option<Vec<(usize, usize)>>,
    max_slice_len: Option<usize>,
    timeout: Duration,
    backing: Option<Backing>,
    _payload: PhantomData<fn() -> Box<P>>,
}

/// Why [`PubSubBuilder::create`] failed.
#[derive(Debug, Error)]
pub enum CreateError {
    /// The service exists already.
    #[error("service {0:?} already exists")]
    AlreadyExists(String),
    /// A setting is out of bounds.
    #[error("invalid setting for service {name:?}: {what}")]
    InvalidSetting {
        /// The service.
        name: String,
        /// What is wrong.
        what: String,
    },
    /// The pool layout is invalid.
    #[error("invalid pool layout for service {name:?}: {source}")]
    Layout {
        /// The service.
        name: String,
        /// Why.
        source: LayoutError,
    },
    /// A slice service needs to know how large its samples get.
    #[error("slice service {0:?} needs .size_classes(...) or .max_slice_len(...) to be created")]
    MissingSliceSize(String),
    /// A file could not be created.
    #[error("cannot create service {name:?}: {source}")]
    Segment {
        /// The service.
        name: String,
        /// Why.
        source: CreateSegmentError,
    },
    /// The static config could not be written, or the process node not set up.
    #[error("cannot create service {name:?}: {what}: {source}")]
    Io {
        /// The service.
        name: String,
        /// The step.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A file of the existing service is unreadable or invalid.
    #[error("service {name:?}: {what}")]
    Corrupt {
        /// The service.
        name: String,
        /// What is wrong, naming the file.
        what: String,
    },
    /// The service was being removed and did not finish within the timeout.
    #[error("service {name:?} was still being removed after {waited:?}")]
    TimedOut {
        /// The service.
        name: String,
        /// How long we waited.
        waited: Duration,
    },
}

/// Why [`PubSubBuilder::open`] failed.
#[derive(Debug, Error)]
pub enum OpenError {
    /// No such service.
    #[error("service {0:?} does not exist")]
    DoesNotExist(String),
    /// The static config is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Another name hashes to the same file.
    #[error(
        "the files of service {requested:?} belong to service {found:?} (hash collision); rename one of them"
    )]
    NameCollision {
        /// The name asked for.
        requested: String,
        /// The name in the file.
        found: String,
    },
    /// The service carries another payload type.
    #[error("service {name:?} carries {found}, not {requested}")]
    IncompatiblePayload {
        /// The service.
        name: String,
        /// What the caller asked for.
        requested: PayloadType,
        /// What the service carries.
        found: PayloadType,
    },
    /// The service has another memory type than the caller set.
    #[error("service {name:?} has memory type {found}, not {requested}")]
    IncompatibleMemoryType {
        /// The service.
        name: String,
        /// What the caller asked for.
        requested: MemoryType,
        /// What the service has.
        found: MemoryType,
    },
    /// The service cannot satisfy a limit the caller set.
    #[error("service {name:?} has {what} {found}, but {requested} was requested")]
    IncompatibleLimit {
        /// The service.
        name: String,
        /// Which limit.
        what: &'static str,
        /// What the caller asked for.
        requested: String,
        /// What the service has.
        found: String,
    },
    /// The dynamic segment is unreadable or does not belong to the static config.
    #[error("service {name:?}: {what}")]
    Corrupt {
        /// The service.
        name: String,
        /// What is wrong, naming the file.
        what: String,
    },
    /// A segment could not be opened.
    #[error("service {name:?}: {source}")]
    Segment {
        /// The service.
        name: String,
        /// Why.
        source: OpenSegmentError,
    },
    /// The pool could not be opened.
    #[error("service {name:?}: {source}")]
    Pool {
        /// The service.
        name: String,
        /// Why.
        source: OpenPoolError,
    },
    /// The service's memfd payload could not be reached through any live process
    /// that uses it (same-user only: `/proc/<pid>/fd` is not open to other users).
    #[error("cannot reach the memfd payload of service {name:?} through any live process using it: {}", tried.join("; "))]
    MemfdUnreachable {
        /// The service.
        name: String,
        /// What happened with each participant.
        tried: Vec<String>,
    },
    /// The service has its maximum of open handles.
    #[error("service {name:?} already has {max} open handles (one per process and open); close some")]
    TooManyUsers {
        /// The service.
        name: String,
        /// The limit.
        max: usize,
    },
    /// The process node could not be set up under the root.
    #[error("cannot set up this process's node file under {}: {source}", root.display())]
    Node {
        /// The root.
        root: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The service stayed half-created or half-removed beyond the timeout.
    #[error("service {name:?} did not become ready within {waited:?} (last state: {last})")]
    TimedOut {
        /// The service.
        name: String,
        /// How long we waited.
        waited: Duration,
        /// What was last seen.
        last: String,
    },
}

/// Why [`PubSubBuilder::open_or_create`] failed.
#[derive(Debug, Error)]
pub enum OpenOrCreateError {
    /// Opening the existing service failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Creating the service failed.
    #[error(transparent)]
    Create(#[from] CreateError),
}

/// Outcome of one attempt: done, failed for good, or worth another try.
enum Attempt<T, E> {
    Done(T),
    Failed(E),
    Retry(String),
}

impl<P: ?Sized + Payload> PubSubBuilder<P> {
    /// Memory type of the pool (default `Cpu`). On open: must match if set.
    pub fn memory_type(mut self, t: MemoryType) -> Self {
        self.memory_type = Some(t);
        self
    }
    /// Most publishers at once (default 2). On open: the service must allow this many.
    pub fn max_publishers(mut self, n: u32) -> Self {
        self.max_publishers = Some(n);
        self
    }
    /// Most subscribers at once (default 8). On open: the service must allow this many.
    pub fn max_subscribers(mut self, n: u32) -> Self {
        self.max_subscribers = Some(n);
        self
    }
    /// Samples queued per publisher for each subscriber (default 4). On open: the
    /// service's buffer must be at least this.
    pub fn subscriber_buffer(mut self, n: u32) -> Self {
        self.subscriber_buffer = Some(n);
        self
    }
    /// Samples a publisher may loan at once (default 2). On open: checked as a minimum.
    pub fn max_loans(mut self, n: u32) -> Self {
        self.max_loans = Some(n);
        self
    }
    /// Samples a subscriber may hold at once (default 2). On open: checked as a minimum.
    pub fn max_held(mut self, n: u32) -> Self {
        self.max_held = Some(n);
        self
    }
    /// Full-buffer policy (default drop the oldest). On open: must match if set.
    pub fn overflow(mut self, o: Overflow) -> Self {
        self.overflow = Some(o);
        self
    }
    /// Unix permissions of the files (default 0o600; e.g. 0o660 for group access).
    pub fn permissions(mut self, mode: u32) -> Self {
        self.permissions = Some(mode);
        self
    }
    /// Where the pool's payload lives (default: [`Backing::Memfd`] when the
    /// permissions are owner-only, [`Backing::File`] otherwise, since other users
    /// cannot reach a memfd through `/proc`). On open: must match if set.
    pub fn backing(mut self, backing: Backing) -> Self {
        self.backing = Some(backing);
        self
    }
    /// How long open and open-or-create wait for a service another process is
    /// creating or removing (default 10 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    fn fail<T>(&self, what: impl Into<String>) -> Result<T, CreateError> {
        Err(CreateError::InvalidSetting {
            name: self.name.to_string(),
            what: what.into(),
        })
    }

    fn layout(&self, counts: usize) -> Result<PoolLayout, CreateError> {
        let payload = P::payload_type();
        let alignment = payload.alignment().max(iox_mempool::layout::DEFAULT_ALIGNMENT);
        let classes = if !P::IS_SLICE {
            vec![(payload.element_size().max(1), counts)]
        } else if let Some(classes) = &self.size_classes {
            classes.clone()
        } else if let Some(len) = self.max_slice_len {
            let Some(bytes) = len.checked_mul(payload.element_size()) else {
                return self.fail(format!("max_slice_len {len} overflows"));
            };
            vec![(bytes.max(1), counts)]
        } else {
            return Err(CreateError::MissingSliceSize(self.name.to_string()));
        };
        PoolLayout::with_alignment(alignment, &classes).map_err(|source| CreateError::Layout {
            name: self.name.to_string(),
            source,
        })
    }

    fn config(&self) -> Result<StaticConfig, CreateError> {
        let memory_type = self.memory_type.unwrap_or_default();
        let mut config = StaticConfig {
            version: static_config::CONFIG_VERSION,
            name: self.name.to_string(),
            pattern: MessagingPattern::PublishSubscribe,
            payload: P::payload_type(),
            memory_type,
            layout: PoolLayout::new(&[(64, 1)]).expect("constant layout"),
            max_publishers: self.max_publishers.unwrap_or(2),
            max_subscribers: self.max_subscribers.unwrap_or(8),
            subscriber_buffer: self.subscriber_buffer.unwrap_or(4),
            max_loans: self.max_loans.unwrap_or(2),
            max_held: self.max_held.unwrap_or(2),
            overflow: self.overflow.unwrap_or_default(),
            permissions: self.permissions.unwrap_or(segment::DEFAULT_MODE),
            // The memfd's identity is filled in when it is created (try_create).
            backing: PayloadBacking::File,
            created_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        };
        if let Err(what) = config.check() {
            // Limits first, so a zero count is reported as such, not as a layout error.
            if !what.contains("payload") {
                return self.fail(what);
            }
        }
        let (p, s) = (
            u64::from(config.max_publishers),
            u64::from(config.max_subscribers),
        );
        // + 1 per publisher: the spare chunk it loans ahead after each send.
        let counts = p * (u64::from(config.max_loans) + 1 + s * u64::from(config.subscriber_buffer))
            + s * u64::from(config.max_held);
        config.layout = self.layout(counts as usize)?;
        let owner_only = config.permissions & 0o077 == 0;
        let memfd = match self.backing {
            Some(b) => b == Backing::Memfd,
            None => owner_only,
        };
        if memfd {
            config.backing = PayloadBacking::Memfd(MemfdIdentity {
                len: config.layout.payload_len() as u64,
                dev: 0,
                ino: 0,
                nonce: 0,
            });
        }
        config.check().or_else(|what| self.fail(what))?;
        Ok(config)
    }

    /// Creates the service; fails if it exists.
    pub fn create(self) -> Result<PubSubService<P>, CreateError> {
        let config = self.config()?;
        let start = Instant::now();
        loop {
            match self.try_create(&config)? {
                Attempt::Done(s) => return Ok(s),
                Attempt::Failed(e) => return Err(e),
                Attempt::Retry(_) if start.elapsed() < self.timeout => backoff(start),
                Attempt::Retry(_) => {
                    return Err(CreateError::TimedOut {
                        name: self.name.to_string(),
                        waited: start.elapsed(),
                    });
                }
            }
        }
    }

    /// Opens the service; fails if it does not exist.
    pub fn open(self) -> Result<PubSubService<P>, OpenError> {
        let start = Instant::now();
        loop {
            let last = match self.try_open() {
                Attempt::Done(s) => return Ok(s),
                Attempt::Failed(OpenError::Config(ConfigError::NotFound { .. })) => {
                    return Err(OpenError::DoesNotExist(self.name.to_string()));
                }
                Attempt::Failed(e) => return Err(e),
                Attempt::Retry(last) => last,
            };
            if start.elapsed() >= self.timeout {
                return Err(self.timed_out(start, last));
            }
            backoff(start);
        }
    }

    /// Opens the service, or creates it if it does not exist. Any number of processes
    /// may race this: exactly one creates, the others open.
    pub fn open_or_create(self) -> Result<PubSubService<P>, OpenOrCreateError> {
        let start = Instant::now();
        let mut config = None;
        loop {
            let last = match self.try_open() {
                Attempt::Done(s) => return Ok(s),
                Attempt::Failed(OpenError::Config(ConfigError::NotFound { .. })) => {
                    let config = match &config {
                        Some(c) => c,
                        None => config.insert(self.config()?),
                    };
                    match self.try_create(config)? {
                        Attempt::Done(s) => return Ok(s),
                        // Someone else is creating it: wait for the static config.
                        Attempt::Failed(CreateError::AlreadyExists(_)) => {
                            "being created by another process".into()
                        }
                        Attempt::Failed(e) => return Err(e.into()),
                        Attempt::Retry(last) => last,
                    }
                }
                Attempt::Failed(e) => return Err(e.into()),
                Attempt::Retry(last) => last,
            };
            if start.elapsed() >= self.timeout {
                return Err(self.timed_out(start, last).into());
            }
            backoff(start);
        }
    }

    fn timed_out(&self, start: Instant, last: String) -> OpenError {
        OpenError::TimedOut {
            name: self.name.to_string(),
            waited: start.elapsed(),
            last,
        }
    }

    fn check_compatible(&self, c: &StaticConfig) -> Result<(), OpenError> {
        let name = || self.name.to_string();
        if c.name != self.name.as_str() {
            return Err(OpenError::NameCollision {
                requested: name(),
                found: c.name.clone(),
            });
        }
        if c.payload != P::payload_type() {
            return Err(OpenError::IncompatiblePayload {
                name: name(),
                requested: P::payload_type(),
                found: c.payload.clone(),
            });
        }
        if let Some(t) = self.memory_type
            && t != c.memory_type
        {
            return Err(OpenError::IncompatibleMemoryType {
                name: name(),
                requested: t,
                found: c.memory_type,
            });
        }
        let limits = [
            ("max_publishers", self.max_publishers, c.max_publishers),
            ("max_subscribers", self.max_subscribers, c.max_subscribers),
            ("subscriber_buffer", self.subscriber_buffer, c.subscriber_buffer),
            ("max_loans", self.max_loans, c.max_loans),
            ("max_held", self.max_held, c.max_held),
        ];
        for (what, requested, found) in limits {
            if let Some(r) = requested
                && r > found
            {
                return Err(OpenError::IncompatibleLimit {
                    name: name(),
                    what,
                    requested: r.to_string(),
                    found: found.to_string(),
                });
            }
        }
        if let Some(b) = self.backing
            && b != c.backing.kind()
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "payload backing",
                requested: format!("{b:?}"),
                found: format!("{:?}", c.backing.kind()),
            });
        }
        if let Some(o) = self.overflow
            && o != c.overflow
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "overflow policy",
                requested: format!("{o:?}"),
                found: format!("{:?}", c.overflow),
            });
        }
        let element = c.payload.element_size().max(1);
        let wanted = self.max_slice_len.map(|l| l.saturating_mul(element)).or(self
            .size_classes
            .as_ref()
            .and_then(|cl| cl.iter().map(|c| c.0).max()));
        if let Some(bytes) = wanted
            && bytes > c.layout.max_chunk_size()
        {
            return Err(OpenError::IncompatibleLimit {
                name: name(),
                what: "largest sample (bytes)",
                requested: bytes.to_string(),
                found: c.layout.max_chunk_size().to_string(),
            });
        }
        Ok(())
    }

    fn try_open(&self) -> Attempt<PubSubService<P>, OpenError> {
        let stem = self.name.stem();
        let (config_name, dynamic_name) = file_names(&stem);
        let config_path = self.root.join(&config_name);
        let (config, hash) = match StaticConfig::read(&config_path) {
            Ok(c) => c,
            Err(e) => return Attempt::Failed(e.into()),
        };
        if let Err(e) = self.check_compatible(&config) {
            return Attempt::Failed(e);
        }
        let name = || self.name.to_string();
        let layout = DynamicLayout::new(&config);
        let dynamic = match Segment::open(
            &self.root,
            &dynamic_name,
            Access::ReadWrite,
            DynamicLayout::header_only().len as u64,
        ) {
            Ok(d) => d,
            Err(OpenSegmentError::NotFound { .. }) => {
                // Removal unlinks the static config first and creation places the
                // dynamic segment first, so a static config still there (same text)
                // without one is debris, not a transient state.
                if StaticConfig::read(&config_path).is_ok_and(|(_, h)| h == hash) {
                    return Attempt::Failed(OpenError::Corrupt {
                        name: name(),
                        what: format!(
                            "{} has no dynamic segment {dynamic_name} beside it (left by a crash of an older iox, or deleted by hand); remove the service",
                            config_path.display()
                        ),
                    });
                }
                return Attempt::Retry("removed while opening".into());
            }
            Err(source) => return Attempt::Failed(OpenError::Segment { name: name(), source }),
        };
        let header_only = DynamicLayout::header_only();
        // SAFETY: the segment is at least the header and users table long (checked by
        // open) and page-aligned.
        let header = unsafe { Dynamic::new(dynamic.as_ptr(), &header_only) }.header();
        let corrupt = |what: String| {
            Attempt::Failed(OpenError::Corrupt {
                name: name(),
                what: format!("{}: {what}", dynamic.path().display()),
            })
        };
        if let Err(what) = dynamic::check_header(header) {
            return corrupt(what);
        }
        if header.config_hash.load(Ordering::Relaxed) != hash {
            // A dynamic segment of another incarnation of the service (it is being
            // removed or re-created right now), or tampering; retry until the timeout.
            return Attempt::Retry(format!(
                "{} belongs to another static config than {}",
                dynamic.path().display(),
                config_path.display()
            ));
        }
        if dynamic.len() != layout.len {
            return corrupt(format!(
                "{} bytes long, the static config says exactly {}",
                dynamic.len(),
                layout.len
            ));
        }
        if let Err(what) = dynamic::check_limits(header, &config) {
            return corrupt(what);
        }
        // SAFETY: the full length is checked just above.
        let d = unsafe { Dynamic::new(dynamic.as_ptr(), &layout) };
        let node = match Node::for_root(&self.root) {
            Ok(n) => n,
            Err(source) => {
                return Attempt::Failed(OpenError::Node {
                    root: self.root.clone(),
                    source,
                });
            }
        };
        let mut live = Liveness::new(&self.root, node.id());
        match lifecycle::phase(&self.root, &stem, &dynamic, d, &mut live) {
            Phase::Alive => {}
            Phase::Busy { pid, creating } => {
                let doing = if creating { "created" } else { "removed" };
                return Attempt::Retry(format!("being {doing} by process {pid}"));
            }
            Phase::Removed => return Attempt::Retry("its creator or remover had died; removed it".into()),
            Phase::Corrupt(word) => return corrupt(format!("invalid lifecycle word {word:#x}")),
        }
        let opened = match config.backing {
            PayloadBacking::File => Pool::open_tagged(
                &self.root,
                &stem,
                &config.layout,
                Some(config.memory_type),
                Access::ReadWrite,
                hash,
            ),
            PayloadBacking::Memfd(id) => match reach_memfd(d, &stem, id, &mut live) {
                Ok(payload) => Pool::open_with_payload(
                    &self.root,
                    &stem,
                    &config.layout,
                    Some(config.memory_type),
                    hash,
                    payload,
                ),
                Err(Unreachable { tried, transient }) => {
                    // No live participant let us in: if none is alive, the service is
                    // dead; recovery (on the bookkeeping alone) removes it.
                    if let Ok(book) =
                        Bookkeeping::open(&self.root, &stem, &config.layout, Some(config.memory_type), hash)
                    {
                        let _ = recovery::recover_in(d, &book, &mut live);
                    }
                    if lifecycle::remove_if_unused(&self.root, &stem, &dynamic, d, node.id()) {
                        return Attempt::Retry("all its processes had died; removed it".into());
                    }
                    let leaving = dynamic::split_lifecycle(d.header().lifecycle.load(Ordering::Acquire)).1
                        != dynamic::ALIVE;
                    if transient || leaving {
                        return Attempt::Retry(format!("memfd not reachable yet: {}", tried.join("; ")));
                    }
                    return Attempt::Failed(OpenError::MemfdUnreachable { name: name(), tried });
                }
            },
        };
        let pool = match opened {
            Ok(p) => p,
            // Our dynamic segment was removed and the service created anew between
            // our reads: start over.
            Err(
                OpenPoolError::TagMismatch { .. } | OpenPoolError::Segment(OpenSegmentError::NotFound { .. }),
            ) => return Attempt::Retry("service re-created while opening".into()),
            Err(source) => return Attempt::Failed(OpenError::Pool { name: name(), source }),
        };
        // Best effort: a live recoverer busy with it is fine too.
        let _ = recovery::recover_in(d, &pool, &mut live);
        if lifecycle::remove_if_unused(&self.root, &stem, &dynamic, d, node.id()) {
            return Attempt::Retry("no live process used it any more; removed it".into());
        }
        let fd = memfd_fd(&pool, &config);
        let user = match lifecycle::register_user(d, node.id(), fd) {
            Ok(i) => i,
            Err(RegisterError::NotAlive) => return Attempt::Retry("being removed".into()),
            Err(RegisterError::Full) => {
                return Attempt::Failed(OpenError::TooManyUsers {
                    name: name(),
                    max: dynamic::USER_SLOTS,
                });
            }
        };
        Attempt::Done(PubSubService::new(ServiceShared {
            name: self.name.clone(),
            root: self.root.clone(),
            stem,
            config,
            pool: Arc::new(pool),
            dynamic,
            layout,
            node,
            user,
            created: false,
            pid: std::process::id(),
        }))
    }

    fn try_create(
        &self,
        config: &StaticConfig,
    ) -> Result<Attempt<PubSubService<P>, CreateError>, CreateError> {
        let stem = self.name.stem();
        let (config_name, dynamic_name) = file_names(&stem);
        let name = || self.name.to_string();
        let io = |what, source| CreateError::Io {
            name: name(),
            what,
            source,
        };
        let node = Node::for_root(&self.root).map_err(|e| io("set up the process node file", e))?;
        let me = node.id();
        // A memfd payload is made first: its identity is part of the static config,
        // whose hash identifies this incarnation.
        // Only sized and named here (cheap); its pages are allocated and it is sealed
        // once we have won the race for the name.
        let mut config = config.clone();
        let memfd = match config.backing {
            PayloadBacking::File => None,
            PayloadBacking::Memfd(_) => {
                let unsealed = iox_mempool::memfd::Unsealed::new(&stem, config.layout.payload_len())
                    .map_err(|source| CreateError::Segment { name: name(), source })?;
                config.backing = PayloadBacking::Memfd(unsealed.identity());
                Some(unsealed)
            }
        };
        let config = &config;
        let layout = DynamicLayout::new(config);
        remove_dead_temp_files(&self.root, &[&dynamic_name, &format!(".{config_name}")], me);
        let tmp = node::temp_file_name(&dynamic_name, me);
        let dynamic = Segment::create(&self.root, &tmp, layout.len, config.permissions)
            .map_err(|source| CreateError::Segment { name: name(), source })?;
        let hash = static_config::text_hash(&config.to_ron());
        // SAFETY: the segment was created with exactly layout.len bytes, page-aligned.
        let d = unsafe { Dynamic::new(dynamic.as_ptr(), &layout) };
        let header = d.header();
        header.config_hash.store(hash, Ordering::Relaxed);
        header
            .lifecycle
            .store(dynamic::lifecycle_word(me, dynamic::CREATING), Ordering::Relaxed);
        header.creator_node.store(me, Ordering::Relaxed);
        header.version.store(dynamic::DYNAMIC_VERSION, Ordering::Relaxed);
        header
            .max_publishers
            .store(config.max_publishers, Ordering::Relaxed);
        header
            .max_subscribers
            .store(config.max_subscribers, Ordering::Relaxed);
        header
            .subscriber_buffer
            .store(config.subscriber_buffer, Ordering::Relaxed);
        header.max_loans.store(config.max_loans, Ordering::Relaxed);
        header.max_held.store(config.max_held, Ordering::Relaxed);
        header
            .user_slots
            .store(dynamic::USER_SLOTS as u32, Ordering::Relaxed);
        d.users()[0].store(me, Ordering::Relaxed);
        if let Some(unsealed) = &memfd {
            d.user_fds()[0].store(unsealed.raw_fd() as u32 + 1, Ordering::Relaxed);
        }
        header.magic.store(dynamic::DYNAMIC_MAGIC, Ordering::Release);
        crate::testing::stall_point("create-before-rename");
        // The exclusive step: the complete segment appears under its name, or not.
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            self.root.join(&tmp),
            rustix::fs::CWD,
            self.root.join(&dynamic_name),
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                let _ = segment::remove(&self.root, &tmp);
                return Ok(self.existing(&stem, me));
            }
            Err(e) => {
                let _ = segment::remove(&self.root, &tmp);
                return Err(io("place the dynamic segment", e.into()));
            }
        }
        // We hold the anchor (CREATING by us): files of this name are ours to replace.
        let undo = |e: CreateError| {
            let _ = lifecycle::remove_files(&self.root, &stem, &dynamic);
            e
        };
        let _ = Pool::remove(&self.root, &stem);
        let created = match memfd {
            Some(unsealed) => unsealed.finish().map_err(Into::into).and_then(|payload| {
                Pool::create_with_payload(
                    &self.root,
                    &stem,
                    &config.layout,
                    config.memory_type,
                    config.permissions,
                    hash,
                    payload,
                )
            }),
            None => Pool::create_tagged(
                &self.root,
                &stem,
                &config.layout,
                config.memory_type,
                config.permissions,
                hash,
            ),
        };
        let pool = created.map_err(|e| {
            undo(match e {
                iox_mempool::CreatePoolError::Segment(source) => {
                    CreateError::Segment { name: name(), source }
                }
                e => CreateError::InvalidSetting {
                    name: name(),
                    what: e.to_string(),
                },
            })
        })?;
        crate::testing::stall_point("create-before-config");
        let written = config
            .write_atomic(&self.root, &config_name, me)
            .map_err(|source| undo(io("write the static config", source)))?;
        debug_assert_eq!(written, hash);
        if header
            .lifecycle
            .compare_exchange(
                dynamic::lifecycle_word(me, dynamic::CREATING),
                dynamic::lifecycle_word(0, dynamic::ALIVE),
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Err(undo(io(
                "mark it alive",
                std::io::Error::other("its lifecycle word was changed by another process"),
            )));
        }
        Ok(Attempt::Done(PubSubService::new(ServiceShared {
            name: self.name.clone(),
            root: self.root.clone(),
            stem,
            config: config.clone(),
            pool: Arc::new(pool),
            dynamic,
            layout,
            node,
            user: 0,
            created: true,
            pid: std::process::id(),
        })))
    }

    /// A dynamic segment is in place already: is it a service, one being created or
    /// removed, or debris of a dead creator or remover (taken over and removed)?
    fn existing(&self, stem: &str, me: u64) -> Attempt<PubSubService<P>, CreateError> {
        let (config_name, dynamic_name) = file_names(stem);
        let name = || self.name.to_string();
        let header_only = DynamicLayout::header_only();
        let dynamic = match Segment::open(
            &self.root,
            &dynamic_name,
            Access::ReadWrite,
            header_only.len as u64,
        ) {
            Ok(d) => d,
            Err(OpenSegmentError::NotFound { .. }) => return Attempt::Retry("removed meanwhile".into()),
            Err(e) => {
                return Attempt::Failed(CreateError::Corrupt {
                    name: name(),
                    what: e.to_string(),
                });
            }
        };
        let corrupt = |what: String| {
            Attempt::Failed(CreateError::Corrupt {
                name: name(),
                what: format!("{}: {what}", dynamic.path().display()),
            })
        };
        // SAFETY: at least the header and users table, page-aligned; nothing else used.
        let d = unsafe { Dynamic::new(dynamic.as_ptr(), &header_only) };
        if let Err(what) = dynamic::check_header(d.header()) {
            return corrupt(what);
        }
        let mut live = Liveness::new(&self.root, me);
        match lifecycle::phase(&self.root, stem, &dynamic, d, &mut live) {
            Phase::Alive if self.root.join(&config_name).exists() => {
                Attempt::Failed(CreateError::AlreadyExists(name()))
            }
            Phase::Alive
                if dynamic::split_lifecycle(d.header().lifecycle.load(Ordering::SeqCst)).1
                    != dynamic::ALIVE =>
            {
                // A remover took it between our looks (it unlinks the config first).
                Attempt::Retry("being removed".into())
            }
            Phase::Alive => {
                // Alive without a static config (deleted by hand): debris if none of
                // its users lives.
                recovery::recover_users(d, &mut live);
                if lifecycle::remove_if_unused(&self.root, stem, &dynamic, d, me) {
                    Attempt::Retry("removed a service left without static config and users".into())
                } else {
                    corrupt(format!("in use, but its static config {config_name} is missing"))
                }
            }
            Phase::Busy { creating: true, .. } => Attempt::Failed(CreateError::AlreadyExists(name())),
            Phase::Busy { pid, .. } => Attempt::Retry(format!("being removed by process {pid}")),
            Phase::Removed => Attempt::Retry("its creator or remover had died; removed it".into()),
            Phase::Corrupt(word) => corrupt(format!("invalid lifecycle word {word:#x}")),
        }
    }
}

impl<T: crate::ZeroCopySafe> PubSubBuilder<[T]> {
    /// The pool's size classes as `(bytes per chunk, chunk count)`; a sample uses the
    /// smallest class that holds it. On open: the largest must fit in the service's.
    pub fn size_classes(mut self, classes: &[(usize, usize)]) -> Self {
        self.size_classes = Some(classes.to_vec());
        self
    }

    /// One size class holding `len` elements, with as many chunks as the limits need.
    /// On open: the service's largest chunk must hold this many.
    pub fn max_slice_len(mut self, len: usize) -> Self {
        self.max_slice_len = Some(len);
        self
    }
}

/// Why no participant let us reach the memfd: what happened with each, and whether
/// it may well work a moment later (a participant registering or leaving).
struct Unreachable {
    tried: Vec<String>,
    transient: bool,
}

/// Opens the memfd payload through a live participant: `/proc/<pid>/fd/<n>` of each
/// registered user whose node is alive, until one passes the checks of
/// [`iox_mempool::memfd::open_memfd`]. The link is read first and must name this
/// service's memfd, so nothing else (a terminal, a device) is ever opened.
fn reach_memfd(
    d: Dynamic<'_>,
    stem: &str,
    id: MemfdIdentity,
    live: &mut Liveness,
) -> Result<Segment, Unreachable> {
    let mut tried = Vec::new();
    let mut transient = false;
    let prefix = format!("/memfd:iox:{stem}:");
    for (user, fd) in d.users().iter().zip(d.user_fds()) {
        let node = user.load(Ordering::Acquire);
        let fd = fd.load(Ordering::Acquire);
        if node == 0 || !live.alive(node) {
            continue;
        }
        if fd == 0 || user.load(Ordering::Acquire) != node {
            transient = true; // registering, or the entry changed hands while we read
            continue;
        }
        let path = PathBuf::from(format!("/proc/{}/fd/{}", node::pid_of(node), fd - 1));
        match std::fs::read_link(&path) {
            Ok(link) if link.to_string_lossy().starts_with(&prefix) => {}
            Ok(link) => {
                tried.push(format!(
                    "{} is {link:?}, not this service's memfd",
                    path.display()
                ));
                transient = true; // a stale fd number of a user that left
                continue;
            }
            Err(e) => {
                tried.push(format!("{}: {e}", path.display()));
                transient |= e.kind() == std::io::ErrorKind::NotFound;
                continue;
            }
        }
        // /proc/<pid>/fd entries are magic links: following them is the point.
        let file = match rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => std::fs::File::from(fd),
            Err(e) => {
                tried.push(format!("{}: {e}", path.display()));
                // Closed between our readlink and open: the user is leaving.
                transient |= e == rustix::io::Errno::NOENT;
                continue;
            }
        };
        match iox_mempool::memfd::open_memfd(file, path, Access::ReadWrite, id) {
            Ok(segment) => return Ok(segment),
            Err(e) => tried.push(e.to_string()),
        }
    }
    if tried.is_empty() {
        // No live user at all: its last user is leaving, or all died (recovery then
        // removes it): look again.
        tried.push("no live process has registered the memfd".into());
        transient = true;
    }
    Err(Unreachable { tried, transient })
}

/// The fd under which this process holds the service's memfd payload, if it has one.
fn memfd_fd(pool: &Pool, config: &StaticConfig) -> Option<u32> {
    matches!(config.backing, PayloadBacking::Memfd(_)).then(|| pool.payload_file().as_raw_fd() as u32)
}

/// Removes temporary files of `bases` (see [`node::temp_file_name`]) left by dead
/// nodes, with the dead nodes' lock files: a creator killed before its rename leaves
/// both behind, referenced from nowhere else.
fn remove_dead_temp_files(root: &Path, bases: &[&str], me: u64) {
    let Ok(dir) = std::fs::read_dir(root) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(node) = node::parse_temp_file_name(name) else {
            continue;
        };
        if node == me || !bases.iter().any(|b| name.starts_with(&format!("{b}."))) {
            continue;
        }
        if !node::is_alive(root, node) {
            let _ = std::fs::remove_file(root.join(name));
            node::remove_if_dead(root, node); // its lock file too
        }
    }
}

fn backoff(start: Instant) {
    // 0.1 ms growing to 10 ms: creation takes microseconds to milliseconds.
    let waited = start.elapsed().as_micros() as u64;
    std::thread::sleep(Duration::from_micros((100 + waited / 10).min(10_000)));
}

/// What one process shares between a service handle and its ports.
#[derive(Debug)]
pub(crate) struct ServiceShared {
    pub(crate) name: ServiceName,
    pub(crate) root: PathBuf,
    pub(crate) stem: String,
    pub(crate) config: StaticConfig,
    pub(crate) pool: Arc<Pool>,
    pub(crate) dynamic: Segment,
    pub(crate) layout: DynamicLayout,
    pub(crate) node: Arc<Node>,
    /// Our entry in the users table.
    pub(crate) user: usize,
    pub(crate) created: bool,
    /// The process that opened it (a forked child's drops must not act for it).
    pub(crate) pid: u32,
}

impl ServiceShared {
    pub(crate) fn dynamic(&self) -> Dynamic<'_> {
        // SAFETY: open/create checked the mapping is at least layout.len bytes; it
        // lives as long as self.
        unsafe { Dynamic::new(self.dynamic.as_ptr(), &self.layout) }
    }

    pub(crate) fn node_id(&self) -> u64 {
        self.node.id()
    }

    /// Whether this is the process that opened the service (not a forked child).
    pub(crate) fn is_own_process(&self) -> bool {
        std::process::id() == self.pid
    }
}

impl Drop for ServiceShared {
    fn drop(&mut self) {
        if !self.is_own_process() {
            return; // a forked child dropping its copy: the registration is the parent's
        }
        let d = self.dynamic();
        lifecycle::unregister_user(
            &self.root,
            &self.stem,
            &self.dynamic,
            d,
            self.user,
            self.node.id(),
        );
    }
}

/// An open publish-subscribe service carrying `P`. Clone it freely; ports keep it
/// alive. When the last handle of the last process goes, the service is removed.
#[derive(Debug)]
pub struct PubSubService<P: ?Sized> {
    pub(crate) shared: Arc<ServiceShared>,
    _payload: PhantomData<fn() -> Box<P>>,
}

impl<P: ?Sized> Clone for PubSubService<P> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            _payload: PhantomData,
        }
    }
}

impl<P: ?Sized + Payload> PubSubService<P> {
    fn new(shared: ServiceShared) -> Self {
        Self {
            shared: Arc::new(shared),
            _payload: PhantomData,
        }
    }

    /// The service name.
    pub fn name(&self) -> &str {
        self.shared.name.as_str()
    }

    /// Whether this handle created the service (rather than opening it).
    pub fn is_creator(&self) -> bool {
        self.shared.created
    }

    /// The static config, as stored.
    pub fn static_config(&self) -> &StaticConfig {
        &self.shared.config
    }

    /// The pool: address in this process, length, memory type, classes.
    pub fn pool_info(&self) -> PoolInfo {
        self.shared.pool.info()
    }

    /// A builder for a publisher.
    pub fn publisher_builder(&self) -> crate::PublisherBuilder<P> {
        crate::PublisherBuilder::new(self.shared.clone())
    }

    /// A builder for a subscriber.
    pub fn subscriber_builder(&self) -> crate::SubscriberBuilder<P> {
        crate::SubscriberBuilder::new(self.shared.clone())
    }

    /// Subscribers blocked in `receive_timeout` right now (a snapshot).
    pub fn waiting_subscribers(&self) -> usize {
        let d = self.shared.dynamic();
        (0..d.layout().max_subscribers)
            .map(|s| d.subscriber(s).waiting.load(Ordering::Relaxed) as usize)
            .sum()
    }

    /// Publishers and subscribers connected right now (a snapshot).
    pub fn port_counts(&self) -> (usize, usize) {
        let d = self.shared.dynamic();
        let active = |h: &crate::dynamic::PortHeader| {
            dynamic::split_state(h.state.load(Ordering::Relaxed)).1 == dynamic::ACTIVE
        };
        let l = d.layout();
        (
            (0..l.max_publishers).filter(|&p| active(d.publisher(p))).count(),
            (0..l.max_subscribers)
                .filter(|&s| active(d.subscriber(s)))
                .count(),
        )
    }
}
