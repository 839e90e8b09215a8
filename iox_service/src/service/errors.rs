//! The errors of creating and opening a service, shared by every messaging pattern.

use std::path::PathBuf;
use std::time::Duration;

use iox_mempool::segment::{CreateSegmentError, OpenSegmentError};
use iox_mempool::{CreatePoolError, LayoutError, MemoryType, OpenPoolError};
use thiserror::Error;

use crate::PayloadType;
use crate::dynamic::Corruption;
use crate::static_config::{ConfigError, InvalidConfig, MessagingPattern};

/// Why creating a service failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CreateError {
    /// The service exists already.
    #[error("service {0:?} already exists")]
    AlreadyExists(String),
    /// A setting is out of bounds.
    #[error("invalid setting for service {name:?}: {source}")]
    InvalidSetting {
        /// The service.
        name: String,
        /// What is wrong.
        source: InvalidConfig,
    },
    /// The pool could not be created.
    #[error("cannot create the pool of service {name:?}: {source}")]
    Pool {
        /// The service.
        name: String,
        /// Why.
        source: CreatePoolError,
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
    #[error("service {name:?}: {}: {problem}", path.display())]
    Corrupt {
        /// The service.
        name: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: Corruption,
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

/// Why opening a service failed.
#[derive(Debug, Error)]
#[non_exhaustive]
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
    /// The service exists with another messaging pattern.
    #[error("service {name:?} is a {found} service, not {requested}")]
    WrongPattern {
        /// The service.
        name: String,
        /// The pattern asked for.
        requested: MessagingPattern,
        /// The service's pattern.
        found: MessagingPattern,
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
    /// The dynamic segment is invalid, or missing beside its static config.
    #[error("service {name:?}: {}: {problem}", path.display())]
    Corrupt {
        /// The service.
        name: String,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: Corruption,
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
    /// The service has its maximum of open handles
    /// ([`crate::static_config::MAX_OPEN_HANDLES`]).
    #[error(
        "service {name:?} already has {max} open handles; at most {max} per service, over all processes (one per process and open: ports share the handle they were built from, so clone a handle rather than open the service again); close some"
    )]
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

/// Why opening or creating a service failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OpenOrCreateError {
    /// Opening the existing service failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Creating the service failed.
    #[error(transparent)]
    Create(#[from] CreateError),
}
