//! The static config of a service: `iox_<H>.service`, RON, written once by the
//! creator, atomically (a hidden temp file, then `rename`), never modified.
//!
//! Reading treats the file as untrusted: no symlinks, a regular file of at most
//! [`MAX_CONFIG_LEN`] bytes, UTF-8, valid RON of the expected shape, a known version,
//! and limits inside iox's bounds. Each failure is a [`ConfigError`] naming the file
//! and what is wrong. Text from elsewhere ([`StaticConfig::parse`]: a recording's
//! channel, a bridge's remote) has the same limits: at most [`MAX_CONFIG_LEN`] bytes,
//! and RON's parser nests at most 128 levels (its default recursion limit), so a
//! schema nests no deeper and every walk over one ends. The xxh3 hash of the exact text is the config's identity: the
//! dynamic segment records it, so an opener can tell that the two belong together.
//!
//! Optional fields are left out of the text when they are empty or absent (the schema,
//! the attributes), so a config without them has no such field and the same hash.
//! Compatibility: the [`crate::attributes`] field came without a new
//! [`CONFIG_VERSION`], so an iox that predates it (its `StaticConfig` denies unknown
//! fields) refuses a config that has attributes as malformed, naming the field; the
//! services of such a creator are not opened by that older iox, every other service
//! still is.

use std::path::{Path, PathBuf};

use iox_mempool::{MemoryType, PoolLayout};
use rustix::fs::{Mode, OFlags};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::PayloadType;
use crate::attributes::{AttributeError, Attributes};
pub use backing::{DeviceIdentity, PayloadBacking};
pub use blackboard::{BlackboardConfig, BlackboardEntry};
pub use event::EventConfig;
pub use header::HeaderType;
pub use invalid::InvalidConfig;
pub use pubsub::{Overflow, PubSubConfig};
pub use reqres::RequestResponseConfig;

mod backing;
pub mod blackboard;
pub mod event;
pub mod file;
pub mod header;
mod invalid;
pub mod pubsub;
pub mod reqres;

/// Why a pool on hugetlb pages is only for services whose other users read (the reason
/// of [`InvalidConfig::PageSize`]): a process holding a hugetlb memfd writable can punch
/// a hole into it (`fallocate`, `MADV_REMOVE`), and every other process's next touch of
/// that page then needs a free huge page, or faults with SIGBUS; on base pages a hole
/// reads back as zeroes. No seal stops the punch and still lets later publishers map
/// the pool writable, so such pools are held writable by the creator's uid (and root)
/// only.
pub const HUGETLB_WRITERS: &str = "on hugetlb pages a process holding the pool writable can punch a hole into it, after which other processes' next touch of it faults (SIGBUS) once no free huge page is left, so only the creator's uid (and root) may hold it writable: keep the files the creator's (permissions 0o600) or give other users read-only access with an access policy (AccessPolicy::new().read_uid(..) / .read_gid(..), no other publishers); or use PageSize::Transparent, where a hole reads back as zeroes";

/// Why a device pool takes no page size (the reason of [`InvalidConfig::PageSize`]).
pub const NO_DEVICE_PAGES: &str = "a device pool is GPU memory, mapped by the driver in its own granularity (2 MiB already); host page sizes do not apply";

/// Version of the static config format this iox writes and reads.
pub const CONFIG_VERSION: u32 = 3;
/// Largest static config file accepted.
pub const MAX_CONFIG_LEN: u64 = 64 * 1024;
/// Most sending ports (publishers, notifiers, clients) a service may allow. The real
/// rule is [`MAX_PORTS`]: sending + receiving <= 47, so one kind alone is at most 46
/// (the other needs one port).
pub const MAX_SENDING_PORTS: u32 = 46;
/// Most receiving ports (subscribers, listeners, servers) a service may allow
/// (sending + receiving <= [`MAX_PORTS`]).
pub const MAX_RECEIVING_PORTS: u32 = 46;
/// Most ports (sending + receiving) a service may allow: each port slot is one owner
/// bit in every chunk's 64-bit ownership word (47 bits, see `iox_mempool::owners`).
pub const MAX_PORTS: u32 = iox_mempool::owners::MAX_OWNERS;
/// Largest subscriber buffer (queue entries per publisher-subscriber pair).
pub const MAX_BUFFER: u32 = 1 << 16;
/// Most samples one publisher may loan, or one subscriber hold, at once (each counts
/// into the pool's size).
pub const MAX_OUTSTANDING: u32 = 256;
/// Most queue slots a service may have in all (publishers x subscribers x buffer;
/// 8 bytes each in the dynamic segment, so at most 32 MiB). Publishers' history queues
/// add publishers x history, less than that since history <= buffer.
pub const MAX_QUEUE_SLOTS: u64 = 1 << 22;
/// Most open service handles at once, over all processes (one users-table entry per
/// process and open; ports share the handle they were built from). Same as
/// `shm::dynamic::USER_SLOTS`.
pub const MAX_OPEN_HANDLES: usize = 128;

/// The messaging pattern of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum MessagingPattern {
    /// Publishers send samples to every subscriber.
    PublishSubscribe,
    /// Notifiers signal event ids to every listener (no payload; see
    /// [`EventConfig`]).
    Event,
    /// Clients send requests to one server each, servers stream responses back to
    /// the client that asked (see [`RequestResponseConfig`]).
    RequestResponse,
    /// Writers keep the latest value of each of a fixed set of keys, readers read it
    /// (see [`BlackboardConfig`]).
    Blackboard,
}

impl std::fmt::Display for MessagingPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::PublishSubscribe => "publish-subscribe",
            Self::Event => "event",
            Self::RequestResponse => "request-response",
            Self::Blackboard => "blackboard",
        })
    }
}

/// Everything fixed about a service, as stored in its static config file: what
/// every service has (name, payload, pool, permissions), and its pattern's section
/// ([`PatternConfig`]), which holds the pattern's port limits under the pattern's own
/// names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticConfig {
    /// Format version ([`CONFIG_VERSION`]).
    pub version: u32,
    /// The service name.
    pub name: String,
    /// The messaging pattern and what it fixes.
    pub pattern: PatternConfig,
    /// The payload carried (a request-response service's request; an event service
    /// carries none).
    pub payload: PayloadType,
    /// The pool's memory type.
    pub memory_type: MemoryType,
    /// The pool's size classes.
    pub layout: PoolLayout,
    /// Unix permissions of the service's files.
    pub permissions: u32,
    /// Where the pool's payload lives.
    pub backing: PayloadBacking,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_unix_ns: u64,
    /// The field layout of the payload (its element, for a slice), when the creator
    /// knew one ([`crate::schema`]). Absent in configs of older versions and of creators
    /// that know no layout; those open without a layout check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<crate::Schema>,
    /// The user header every chunk carries in front of the payload (publish-subscribe
    /// only; see [`crate::user_header`]). Absent for a service without one, whose
    /// config text then has no such field. An older iox refuses a
    /// config with a header as malformed (an unknown field), so it never reads a header
    /// as payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_header: Option<crate::HeaderType>,
    /// Key-value strings the creator recorded to say what the service is for
    /// ([`crate::attributes`]); absent from the text when there are none.
    #[serde(default, skip_serializing_if = "Attributes::is_empty")]
    pub attributes: Attributes,
    /// Who may publish and who may only read ([`crate::access`]); absent from the text
    /// for a service without one (whose files' permissions alone decide, and whose
    /// every admitted process may publish). An older iox refuses a config with one as
    /// malformed (an unknown field), so it never opens such a service unrestricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<crate::access::AccessPolicy>,
}

/// A service's pattern and its section of the static config: its port limits, named
/// as the pattern names its ports, and what else the pattern fixes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum PatternConfig {
    /// Publishers and subscribers.
    PublishSubscribe(PubSubConfig),
    /// Notifiers and listeners.
    Event(EventConfig),
    /// Clients and servers.
    RequestResponse(RequestResponseConfig),
    /// Writers and readers of keys.
    Blackboard(BlackboardConfig),
}

impl PatternConfig {
    /// Which pattern this is.
    pub fn kind(&self) -> MessagingPattern {
        match self {
            Self::PublishSubscribe(_) => MessagingPattern::PublishSubscribe,
            Self::Event(_) => MessagingPattern::Event,
            Self::RequestResponse(_) => MessagingPattern::RequestResponse,
            Self::Blackboard(_) => MessagingPattern::Blackboard,
        }
    }

    /// What the core sizes the service's dynamic segment for.
    pub fn port_limits(&self) -> PortLimits {
        match self {
            Self::PublishSubscribe(p) => p.port_limits(),
            Self::Event(e) => e.port_limits(),
            Self::RequestResponse(r) => r.port_limits(),
            Self::Blackboard(b) => b.port_limits(),
        }
    }
}

/// What the core (port slots, pair queues, owner bits, the dynamic header) sizes a
/// service for, whatever its pattern: each pattern's section says it
/// ([`PatternConfig::port_limits`]) from its own limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortLimits {
    /// Sending port slots (publishers, notifiers, clients).
    pub sending: u32,
    /// Receiving port slots (subscribers, listeners, servers).
    pub receiving: u32,
    /// Entries of each (sending, receiving) pair queue; 0 for a pattern without pair
    /// queues.
    pub queue_depth: u32,
    /// Chunks one sending port may loan at once (0 for a pattern without payload).
    pub max_loans: u32,
    /// Chunks one receiving port may hold at once (0 for a pattern that does not
    /// bound it per port).
    pub max_held: u32,
}

impl StaticConfig {
    /// Which pattern the service has.
    pub fn messaging_pattern(&self) -> MessagingPattern {
        self.pattern.kind()
    }

    /// What the core sizes the service's dynamic segment for.
    pub fn port_limits(&self) -> PortLimits {
        self.pattern.port_limits()
    }

    /// The publish-subscribe section, if the service is one.
    pub fn publish_subscribe(&self) -> Option<&PubSubConfig> {
        match &self.pattern {
            PatternConfig::PublishSubscribe(p) => Some(p),
            _ => None,
        }
    }

    /// The event section, if the service is one.
    pub fn event(&self) -> Option<&EventConfig> {
        match &self.pattern {
            PatternConfig::Event(e) => Some(e),
            _ => None,
        }
    }

    /// The request-response section, if the service is one.
    pub fn request_response(&self) -> Option<&RequestResponseConfig> {
        match &self.pattern {
            PatternConfig::RequestResponse(r) => Some(r),
            _ => None,
        }
    }

    /// The blackboard section, if the service is one.
    pub fn blackboard(&self) -> Option<&BlackboardConfig> {
        match &self.pattern {
            PatternConfig::Blackboard(b) => Some(b),
            _ => None,
        }
    }

    /// The element type of the tensors the service carries: its payload's, when the
    /// payload is a slice of numbers (`None` otherwise: a struct, a single value, no
    /// schema; such a service moves bytes only).
    pub fn tensor_element(&self) -> Option<crate::tensor::DType> {
        match (&self.payload, &self.schema) {
            (PayloadType::Slice { .. }, Some(schema)) => crate::tensor::DType::of_schema(schema),
            _ => None,
        }
    }
}

/// Most responses queued per request (`max_response_buffer`).
pub const MAX_RESPONSE_BUFFER: u32 = 4096;

/// Largest `event_id_max` a service may have: each listener has one pending bit per
/// id in the dynamic segment (8 KiB per listener at this maximum).
pub const MAX_EVENT_ID: u32 = 65_535;

/// Why a static config could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file does not exist.
    #[error("{} does not exist", path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// Not a regular file (symlinks are never followed).
    #[error("{} is not a regular file (symlinks are never followed)", path.display())]
    NotRegularFile {
        /// The file.
        path: PathBuf,
    },
    /// Larger than [`MAX_CONFIG_LEN`].
    #[error("{} is {len} bytes, larger than any static config ({MAX_CONFIG_LEN} at most)", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
    },
    /// Not RON of the expected shape (includes invalid UTF-8 and invalid layouts).
    #[error("{} is malformed: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What the parser said, with the position.
        message: String,
    },
    /// Written by an incompatible iox.
    #[error(
        "{} has format version {found}; this iox reads version {CONFIG_VERSION} (the service was created by another iox version: once the programs using it have stopped, `iox clean` removes it)",
        path.display()
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
    /// Parsed, but a value is out of bounds.
    #[error("{} is invalid: {what}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: InvalidConfig,
    },
    /// Permission denied.
    #[error(
        "permission denied reading {} ({access}): open it as its owner or as a member of its group with group access (a service shared with a group is created with `.permissions(0o660)`)",
        path.display()
    )]
    PermissionDenied {
        /// The file.
        path: PathBuf,
        /// Its owner, group and mode, and this process's user, as far as known.
        access: String,
    },
    /// Another I/O failure.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// `Ok` when `value` is in `1..=max`; the [`InvalidConfig::Limit`] naming it otherwise.
pub fn bound(what: &'static str, value: u32, max: u32, rule: &'static str) -> Result<(), InvalidConfig> {
    if value == 0 || value > max {
        Err(InvalidConfig::Limit {
            what,
            value,
            max,
            rule,
        })
    } else {
        Ok(())
    }
}

/// The port limits every pattern has, under the pattern's names (`sending`,
/// `receiving`): each in `1..=46`, and together at most [`MAX_PORTS`]. `rule` says
/// that in the pattern's words (starts with "; ").
pub fn check_ports(
    (sending, receiving): (&'static str, &'static str),
    s: u32,
    r: u32,
    rule: &'static str,
) -> Result<(), InvalidConfig> {
    bound(sending, s, MAX_SENDING_PORTS, rule)?;
    bound(receiving, r, MAX_RECEIVING_PORTS, rule)?;
    if s + r > MAX_PORTS {
        return Err(InvalidConfig::TooManyPorts {
            sending,
            receiving,
            ports: s + r,
            max: MAX_PORTS,
        });
    }
    Ok(())
}

/// `Ok` when a payload of `payload`'s element size and alignment fits `layout`.
pub fn check_payload(payload: &PayloadType, layout: &PoolLayout) -> Result<(), InvalidConfig> {
    let (size, align) = (payload.element_size(), payload.alignment());
    if !align.is_power_of_two() || align > layout.alignment() {
        return Err(InvalidConfig::PayloadAlignment {
            align,
            pool: layout.alignment(),
        });
    }
    if size > layout.max_chunk_size() {
        return Err(InvalidConfig::PayloadSize {
            size,
            chunk: layout.max_chunk_size(),
        });
    }
    Ok(())
}

impl StaticConfig {
    /// Whether users other than the creator (and root) can be handed the pool
    /// writable: without an access policy, anyone the files' permissions admit (every
    /// admitted peer gets what its holder holds); with one, its publishers besides the
    /// creator.
    pub fn others_may_write(&self) -> bool {
        use crate::access::Principal;
        match &self.access {
            None => self.permissions & 0o077 != 0,
            Some(a) => a
                .publish
                .iter()
                .any(|p| !matches!(p, Principal::Uid(u) if *u == a.creator || *u == 0)),
        }
    }

    /// Checks every bound a reader relies on: the pattern's section checks its own
    /// limits (under its own names), then what every service has.
    pub fn check(&self) -> Result<(), InvalidConfig> {
        crate::ServiceName::new(&self.name)?;
        match &self.pattern {
            PatternConfig::PublishSubscribe(p) => p.check()?,
            PatternConfig::Event(e) => e.check()?,
            PatternConfig::RequestResponse(r) => r.check(&self.layout)?,
            PatternConfig::Blackboard(b) => b.check()?,
        }
        if self.permissions & !0o777 != 0 || self.permissions & 0o600 != 0o600 {
            return Err(InvalidConfig::Permissions(self.permissions));
        }
        if let Some(access) = &self.access {
            access.check().map_err(InvalidConfig::Access)?;
            if access.has_readers() && !matches!(self.pattern, PatternConfig::PublishSubscribe(_)) {
                return Err(InvalidConfig::Access(format!(
                    "only publish-subscribe services have read-only participants; every {} participant writes the service's shared words, so its access policy may name publishers only",
                    self.messaging_pattern()
                )));
            }
            if access.has_readers() && matches!(self.backing, PayloadBacking::CudaDevice(_)) {
                return Err(InvalidConfig::Access(crate::access::NO_DEVICE_READERS.into()));
            }
            if !matches!(
                self.backing,
                PayloadBacking::Memfd(_) | PayloadBacking::CudaDevice(_)
            ) {
                return Err(InvalidConfig::Access(
                    "an access policy needs the payload handed over by descriptor (the default memfd backing, or a device pool); a file-backed pool is opened by path, so its file's mode alone decides".into(),
                ));
            }
        }
        if let PayloadBacking::Memfd(id) = self.backing
            && id.len != self.layout.payload_len() as u64
        {
            return Err(InvalidConfig::MemfdLength {
                memfd: id.len,
                payload: self.layout.payload_len(),
            });
        }
        let pages = self.layout.page_size();
        if !pages.is_base() {
            let why = match self.backing {
                PayloadBacking::Memfd(_) => None,
                PayloadBacking::File => Some(
                    "a file-backed pool lives on the root's file system (tmpfs), whose pages iox does not choose",
                ),
                PayloadBacking::CudaDevice(_) => Some(NO_DEVICE_PAGES),
            };
            if let Some(why) = why {
                return Err(InvalidConfig::PageSize { pages, why });
            }
            if pages.is_hugetlb() && self.others_may_write() {
                return Err(InvalidConfig::PageSize {
                    pages,
                    why: HUGETLB_WRITERS,
                });
            }
        }
        let device = matches!(self.backing, PayloadBacking::CudaDevice(_));
        if device != (self.memory_type == iox_mempool::MemoryType::CudaDevice)
            || device && !matches!(self.pattern, PatternConfig::PublishSubscribe(_))
        {
            return Err(InvalidConfig::DeviceMemory);
        }
        if let PayloadBacking::CudaDevice(id) = self.backing
            && id.len < self.layout.payload_len() as u64 + 16
        {
            return Err(InvalidConfig::DeviceLength {
                len: id.len,
                payload: self.layout.payload_len(),
            });
        }
        check_payload(&self.payload, &self.layout)?;
        if let Some(schema) = &self.schema {
            schema.check(self.payload.element_size() as u64)?;
        }
        // Host tensor services carry numbers (a device service may carry bytes: its
        // tensors are then one dimension of bytes).
        if let PatternConfig::PublishSubscribe(p) = &self.pattern
            && p.tensors
            && self.memory_type != iox_mempool::MemoryType::CudaDevice
            && self.tensor_element().is_none()
        {
            return Err(InvalidConfig::TensorElement {
                payload: self.payload.to_string(),
            });
        }
        if let Some(header) = &self.user_header {
            header::check(self, header)?;
        }
        self.attributes.check()?;
        if !self.attributes.is_empty() {
            // Only attributes can make a config this large (values of up to 8 KiB).
            let len = self.to_ron().len();
            if len as u64 > MAX_CONFIG_LEN {
                return Err(AttributeError::ConfigTooLarge {
                    len,
                    max: MAX_CONFIG_LEN,
                }
                .into());
            }
        }
        Ok(())
    }

    /// The config as RON text, as written to the file.
    pub fn to_ron(&self) -> String {
        ron::ser::to_string_pretty(self, ron::ser::PrettyConfig::default())
            .expect("a StaticConfig always serialises")
    }

    /// Parses and checks RON text read from `path` (only used in messages): at most
    /// [`MAX_CONFIG_LEN`] bytes (module docs).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        if text.len() as u64 > MAX_CONFIG_LEN {
            return Err(ConfigError::TooLarge {
                path: path.to_owned(),
                len: text.len() as u64,
            });
        }
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        let malformed = |e: ron::error::SpannedError| ConfigError::Malformed {
            path: path.to_owned(),
            message: e.to_string(),
        };
        // Look at the version first, so a newer format is reported as such rather
        // than as malformed.
        if let Ok(v) = ron::from_str::<VersionOnly>(text)
            && v.version != CONFIG_VERSION
        {
            return Err(ConfigError::UnsupportedVersion {
                path: path.to_owned(),
                found: v.version,
            });
        }
        let config: StaticConfig = ron::from_str(text).map_err(malformed)?;
        config.check().map_err(|what| ConfigError::Invalid {
            path: path.to_owned(),
            what,
        })?;
        Ok(config)
    }

    /// Reads, parses and checks the config at `path`. Returns it with the hash of its
    /// text.
    pub fn read(path: &Path) -> Result<(Self, u64), ConfigError> {
        let text = crate::static_config::file::read_bounded(path)?;
        let config = Self::parse(&text, path)?;
        Ok((config, text_hash(&text)))
    }

    /// The mode of the static config file: the service's permissions; without any
    /// group or other write bit for a service with an access policy, so that no one
    /// but its creator (and root) can change the policy in place.
    pub fn file_mode(&self) -> u32 {
        if self.access.is_some() {
            self.permissions & !0o022
        } else {
            self.permissions
        }
    }

    /// Writes the config to `dir/file_name` atomically with [`Self::file_mode`]: a hidden
    /// temp file named after the writer's `node` id first (so recovery can remove it
    /// if the writer dies), renamed into place. Returns the hash of the text written.
    pub fn write_atomic(&self, dir: &Path, file_name: &str, node: u64) -> std::io::Result<u64> {
        use std::io::Write;
        let text = self.to_ron();
        let tmp = dir.join(crate::node::temp_file_name(&format!(".{file_name}"), node));
        let fd = rustix::fs::open(
            &tmp,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(self.file_mode()),
        )?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(self.file_mode()))?;
        let mut file = std::fs::File::from(fd);
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, dir.join(file_name)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map(|()| text_hash(&text))
    }
}

/// Hash identifying one static config text.
pub fn text_hash(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// What is wrong with an alignment `align` in a pool aligned to `pool`, in words an
/// error message ends with (`None`: nothing).
pub(crate) fn alignment_problem(align: usize, pool: usize) -> Option<String> {
    if !align.is_power_of_two() {
        Some("is not a power of two".into())
    } else if align > pool {
        Some(format!(
            "is above the pool's alignment {pool} (chunks are aligned only to that)"
        ))
    } else {
        None
    }
}
