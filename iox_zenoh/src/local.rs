//! Opening the local end of a bridged service as bytes, whatever its payload type,
//! with the short timeout of a program that must not wait on one service
//! (`iox_service::opener`; the callers open on an opener's threads).
//!
//! The bridge never knows payload types at compile time: it opens every service as
//! `[u8]` with [`PubSubBuilder::carry_payload_type`](iox_service::PubSubBuilder::carry_payload_type) (and its schema), so the service keeps the identity
//! its programs use (a typed subscriber on host B opens what the bridge created from
//! host A's config), and samples move as bytes.
//!
//! Importing (Zenoh -> local): with the exporter's static config, the bridge creates
//! the service with the same payload identity, memory type, size classes (counts as
//! given), limits, overflow, history, permissions and backing kind. If the service
//! already exists locally it must be compatible: same payload identity and memory type,
//! and a largest chunk at least the exporter's; other limits are the local service's
//! business (the bridge needs one publisher port). Without an exporter config (a plain
//! Zenoh publisher), the service is `[u8]` with [`DEFAULT_CLASSES`].
//!
//! Only payload types valid for every bit pattern are bridged
//! ([`iox_service::PayloadType::any_bit_pattern`]): bytes that arrive from the network
//! are then always a value of the type, whoever sent them. A service whose type has
//! padding or invalid bit patterns (a `bool`) is refused on both ends
//! ([`LocalError::NotBridgeable`]); `#[derive(ZeroCopySafe)]` with a stable name, and
//! integers, floats and arrays of them, are always bridgeable.
//!
//! A service with a user header (`iox_service::user_header`) is bridged with it: the
//! header is declared from the config as bytes too (and must be valid for every bit
//! pattern, as the payload), and a sample travels on Zenoh as the header's bytes
//! followed by the payload's (see `export` and `import`).

use std::path::Path;

use iox_service::opener::DAEMON_OPEN_TIMEOUT;
use iox_service::{OpenError, PubSubConfig, PubSubService, Service, StaticConfig};

/// Size classes (bytes per chunk, count) of a `[u8]` service the bridge creates for a
/// key with no exporter config (a plain Zenoh publisher): 4 KiB x 64, 64 KiB x 32,
/// 1 MiB x 16, 16 MiB x 4 (about 97 MiB of address space, committed as used). The
/// counts are a fixed budget (pool exhaustion allowed): a loan that finds a class
/// exhausted drops that sample, logged and counted.
pub const DEFAULT_CLASSES: [(usize, usize); 4] = [(4096, 64), (65536, 32), (1 << 20, 16), (16 << 20, 4)];

/// Why the local end of a service could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The name is not a valid service name.
    #[error(transparent)]
    Name(#[from] iox_service::NameError),
    /// An existing local service does not match (payload, memory type, chunk size).
    #[error("local service {name:?} is incompatible with the remote one: {source}")]
    Incompatible {
        /// The service.
        name: String,
        /// What differs.
        source: Box<OpenError>,
    },
    /// The payload type is not valid for every bit pattern (see the module docs).
    #[error(
        "service {name:?} carries {payload}, which has padding or invalid bit patterns: bytes from the network could be an invalid value of it, so it is not bridged (use a type valid for every bit pattern: integers, floats, #[derive(ZeroCopySafe)] structs without bool and padding)"
    )]
    NotBridgeable {
        /// The service.
        name: String,
        /// Its payload type.
        payload: String,
    },
    /// The service is not publish-subscribe (the bridge carries samples only).
    #[error("service {name:?} is a {pattern} service; the bridge carries publish-subscribe services only")]
    NotPublishSubscribe {
        /// The service.
        name: String,
        /// Its pattern.
        pattern: iox_service::MessagingPattern,
    },
    /// Opening or creating failed otherwise.
    #[error("cannot open or create local service {name:?}: {message}")]
    Other {
        /// The service.
        name: String,
        /// The error.
        message: String,
    },
}

/// Opens an existing local service for export: as bytes, with its recorded payload.
pub fn open_for_export(root: &Path, config: &StaticConfig) -> Result<PubSubService<[u8]>, LocalError> {
    bridgeable(config)?;
    Service::named(&config.name)?
        .root(root)
        .publish_subscribe::<[u8]>()
        .timeout(DAEMON_OPEN_TIMEOUT)
        .carry_payload_type(config.payload.clone())
        .payload_schema_if(config)
        .header_if(config)
        .open()
        .map_err(|e| LocalError::Other {
            name: config.name.clone(),
            message: e.to_string(),
        })
}

/// The exporter's schema, if it recorded one, on a builder carrying its payload type
/// (opening: the local service's limits are its own business, see the module docs).
trait SchemaIf {
    fn payload_schema_if(self, config: &StaticConfig) -> Self;
    /// The exporter's user header, if it records one.
    fn header_if(self, config: &StaticConfig) -> Self;
}

impl SchemaIf for iox_service::PubSubBuilder<[u8]> {
    fn payload_schema_if(self, config: &StaticConfig) -> Self {
        match &config.schema {
            Some(schema) => self.payload_schema(schema.clone()),
            None => self,
        }
    }

    fn header_if(self, config: &StaticConfig) -> Self {
        match &config.user_header {
            // SAFETY: the bridge's ports move samples only as bytes placed by the
            // recorded header: `Sample::header_bytes` / `payload_bytes` (export) and
            // `Publisher::send_sample_bytes` (import), never a typed `[u8]` loan or a
            // sample's `Deref`.
            Some(h) => unsafe { self.raw_user_header(h.clone()) },
            None => self,
        }
    }
}

/// Opens the local service like the remote `config` for import, creating it with that
/// config if it does not exist (see the module docs for what must match).
pub fn open_like(root: &Path, config: &StaticConfig) -> Result<PubSubService<[u8]>, LocalError> {
    bridgeable(config)?;
    let name = config.name.as_str();
    // The payload's bytes: the builder adds the header's room back.
    let largest = config.layout.max_chunk_size() - iox_service::user_header::payload_offset_of(config);
    let lenient = || -> Result<_, LocalError> {
        Ok(Service::named(name)?
            .root(root)
            .publish_subscribe::<[u8]>()
            .timeout(DAEMON_OPEN_TIMEOUT)
            .carry_payload_type(config.payload.clone())
            .payload_schema_if(config)
            .header_if(config)
            .memory_type(config.memory_type)
            .chunk_sizes(&[largest]))
    };
    let create = || -> Result<_, LocalError> {
        Ok(Service::named(name)?
            .root(root)
            .publish_subscribe::<[u8]>()
            .timeout(DAEMON_OPEN_TIMEOUT)
            .carry_payload_type(config.payload.clone())
            .header_if(config)
            .like_config(config)
            .permissions(config.permissions))
    };
    open_or_create(name, || Ok(lenient()?.open()), || Ok(create()?.create()))
}

/// Opens with `open`, or creates with `create` if the service does not exist; retries
/// when another process creates or removes it meanwhile.
fn open_or_create(
    name: &str,
    open: impl Fn() -> Result<Result<PubSubService<[u8]>, OpenError>, LocalError>,
    create: impl Fn() -> Result<Result<PubSubService<[u8]>, iox_service::CreateError>, LocalError>,
) -> Result<PubSubService<[u8]>, LocalError> {
    for _ in 0..3 {
        match open()? {
            Ok(s) => return Ok(s),
            Err(OpenError::DoesNotExist(_)) => {}
            Err(
                e @ (OpenError::IncompatiblePayload { .. }
                | OpenError::IncompatibleSchema(_)
                | OpenError::IncompatibleMemoryType { .. }
                | OpenError::IncompatibleLimit { .. }),
            ) => {
                return Err(LocalError::Incompatible {
                    name: name.to_owned(),
                    source: Box::new(e),
                });
            }
            Err(e) => return Err(other(name, e)),
        }
        match create()? {
            Ok(s) => return Ok(s),
            // Someone else created it meanwhile: open it (next round).
            Err(iox_service::CreateError::AlreadyExists(_)) => {}
            Err(e) => return Err(other(name, e)),
        }
    }
    Err(LocalError::Other {
        name: name.to_owned(),
        message: "it kept being created and removed by other processes".into(),
    })
}

/// Opens the local `[u8]` service `name` for a key with no exporter config, creating it
/// with [`DEFAULT_CLASSES`] if needed. An existing service must carry `[u8]`.
pub fn open_default(root: &Path, name: &str) -> Result<PubSubService<[u8]>, LocalError> {
    let builder = || -> Result<_, LocalError> {
        Ok(Service::named(name)?
            .root(root)
            .publish_subscribe::<[u8]>()
            .timeout(DAEMON_OPEN_TIMEOUT))
    };
    open_or_create(
        name,
        || Ok(builder()?.open()),
        || {
            Ok(builder()?
                .size_classes(&DEFAULT_CLASSES)
                .allow_pool_exhaustion(true)
                .create())
        },
    )
}

fn other(name: &str, e: impl std::fmt::Display) -> LocalError {
    LocalError::Other {
        name: name.to_owned(),
        message: e.to_string(),
    }
}

/// Refuses a payload type that bytes from the network could break (see the module
/// docs).
fn bridgeable(config: &StaticConfig) -> Result<&PubSubConfig, LocalError> {
    let Some(section) = config.publish_subscribe() else {
        return Err(LocalError::NotPublishSubscribe {
            name: config.name.clone(),
            pattern: config.messaging_pattern(),
        });
    };
    let header = config.user_header.as_ref().map(|h| &h.identity);
    match header.filter(|h| !h.any_bit_pattern()) {
        _ if !config.payload.any_bit_pattern() => Err(LocalError::NotBridgeable {
            name: config.name.clone(),
            payload: config.payload.to_string(),
        }),
        Some(h) => Err(LocalError::NotBridgeable {
            name: config.name.clone(),
            payload: format!("a user header {h}"),
        }),
        None => Ok(section),
    }
}
