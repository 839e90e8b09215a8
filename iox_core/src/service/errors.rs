//! The errors of creating and opening a service, shared by every messaging pattern.

use std::path::PathBuf;
use std::time::Duration;

use iox_mempool::segment::{CreateSegmentError, OpenSegmentError};
use iox_mempool::{CreatePoolError, LayoutError, MemoryType, OpenPoolError};
use thiserror::Error;

use crate::PayloadType;
use crate::attributes::shown;
use crate::dynamic::Corruption;
use crate::static_config::{ConfigError, InvalidConfig, MessagingPattern};

pub use crate::root::RootError;

/// Why creating a service failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CreateError {
    /// The service exists already.
    #[error("service {0:?} already exists")]
    AlreadyExists(String),
    /// Its device memory (`CudaDevice`) could not be allocated, exported or mapped, or
    /// this process has no CUDA (the text says which, and what to do).
    #[error("service {name:?}: cannot make its device memory: {reason}")]
    DeviceMemory {
        /// The service.
        name: String,
        /// Why, in the driver's words where it refused.
        reason: String,
    },
    /// A blackboard's change notifications (the event service `NAME/~changes` beside
    /// it) could not be opened or created.
    #[error("cannot open {changes:?}, the change notifications of blackboard {name:?}: {source}")]
    BlackboardChanges {
        /// The blackboard.
        name: String,
        /// Its changes service.
        changes: String,
        /// Why.
        source: Box<OpenOrCreateError>,
    },
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
    /// A slice service needs to know how large its samples get: the service, and the
    /// setting that says it (`.size_classes(...) or .max_slice_len(...)` for
    /// publish-subscribe, `.request_slice_len(n)` or `.response_slice_len(n)` for
    /// request-response).
    #[error("slice service {0:?} needs {1} to be created")]
    MissingSliceSize(String, &'static str),
    /// The service's pool asks for huge pages the machine has not reserved (or not
    /// enough of them, or none of that size): `advice` says how many are needed and
    /// how to reserve them (`nr_hugepages`, `hugepages=` at boot).
    #[error("cannot create service {name:?} on {pages} pages: {advice}")]
    HugePages {
        /// The service.
        name: String,
        /// The page size asked for.
        pages: iox_mempool::PageSize,
        /// How many pages are needed, how many are free, how to reserve more.
        advice: String,
    },
    /// A file could not be created.
    #[error("cannot create service {name:?}: {source}")]
    Segment {
        /// The service.
        name: String,
        /// Why.
        source: CreateSegmentError,
    },
    /// The root cannot be used (missing, not a directory, read-only, full).
    #[error("cannot create service {name:?}: {source}")]
    Root {
        /// The service.
        name: String,
        /// Why.
        source: RootError,
    },
    /// A file could not be written (the static config, say).
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
    /// `carry_payload_type` was given a
    /// payload type that not every byte string is a value of.
    #[error("service {name:?}: {}", not_carriable(.payload))]
    NotCarriable {
        /// The service.
        name: String,
        /// The payload type given.
        payload: PayloadType,
    },
}

/// Why a payload type cannot be carried as bytes, and what to do instead.
fn not_carriable(payload: &PayloadType) -> String {
    format!(
        "cannot carry {payload} as bytes: not every byte string is a value of it (padding, or a bool), so bytes written or read through a [u8] port could be an invalid value for a typed program of the same service; open the service with its type instead"
    )
}

/// What [`OpenError::IncompatibleUserHeader`] found.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("service {name:?} {}", header_mismatch_text(.found.as_ref(), .requested.as_ref()))]
pub struct UserHeaderMismatch {
    /// The service.
    pub name: String,
    /// The header the caller declared (`None`: no header).
    pub requested: Option<PayloadType>,
    /// The service's header (`None`: no header).
    pub found: Option<PayloadType>,
}

/// What differs, in plain words: the service's header against the caller's.
fn header_mismatch_text(found: Option<&PayloadType>, requested: Option<&PayloadType>) -> String {
    const DECLARE: &str = "declare the service's header (`.user_header::<T>()` in Rust, `user_header=` in Python) with the same type, or use another service name";
    match (found, requested) {
        (Some(f), Some(r)) => format!("carries a user header {f}, not a user header {r}: {DECLARE}"),
        (Some(f), None) => {
            format!("carries a user header {f}, and this program declared no user header: {DECLARE}")
        }
        (None, Some(r)) => format!(
            "carries no user header, and this program declared a user header {r}: open it without a header, or use another service name"
        ),
        (None, None) => "carries no user header".into(),
    }
}

/// The advice an [`OpenError::IncompatiblePayload`] adds when the two identities differ
/// only in whether every bit pattern is a value: the usual cause is a hand-written
/// `unsafe impl ZeroCopySafe` (which claims nothing) against a derived type or a
/// Python dtype (which work it out from the fields).
fn bit_pattern_hint(requested: &PayloadType, found: &PayloadType) -> &'static str {
    if requested.any_bit_pattern() == found.any_bit_pattern()
        || requested.without_bit_patterns() != found.without_bit_patterns()
    {
        return "";
    }
    "; they differ only in whether every bit pattern is a valid value: \
     `#[derive(ZeroCopySafe)]` on the Rust type works that out from its fields (a \
     hand-written `unsafe impl` claims nothing), and both sides must agree"
}

/// Why opening a service failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OpenError {
    /// No such service.
    #[error("service {0:?} does not exist")]
    DoesNotExist(String),
    /// A blackboard's change notifications (the event service `NAME/~changes` beside
    /// it) could not be opened or created.
    #[error("cannot open {changes:?}, the change notifications of blackboard {name:?}: {source}")]
    BlackboardChanges {
        /// The blackboard.
        name: String,
        /// Its changes service.
        changes: String,
        /// Why.
        source: Box<OpenOrCreateError>,
    },
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
    #[error(
        "service {name:?} uses the {found} pattern, not {requested}: open it as a {found} service, or give the {requested} service another name"
    )]
    WrongPattern {
        /// The service.
        name: String,
        /// The pattern asked for.
        requested: MessagingPattern,
        /// The service's pattern.
        found: MessagingPattern,
    },
    /// The service carries another payload type.
    #[error(
        "service {name:?} carries {found}, not {requested}{}",
        bit_pattern_hint(.requested, .found)
    )]
    IncompatiblePayload {
        /// The service.
        name: String,
        /// What the caller asked for.
        requested: PayloadType,
        /// What the service carries.
        found: PayloadType,
    },
    /// The service's user header is not the caller's: another type, or one side has
    /// none (see [`crate::user_header`]).
    #[error("{0}")]
    IncompatibleUserHeader(Box<UserHeaderMismatch>),
    /// The service's payload type has the same name as the caller's but other fields
    /// (its recorded schema differs: see [`crate::schema`]).
    #[error("{0}")]
    IncompatibleSchema(Box<crate::schema::SchemaMismatch>),
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
    /// The service lacks an attribute the caller requires
    /// (`require_attribute`, `require_attribute_key`).
    #[error(
        "service {name:?} has no attribute {key:?}{}, which this program requires: it is not the service this program expects (check the name), or its creator did not record it (.attribute({key:?}, ..) when creating); `iox show {name}` lists the service's attributes",
        required.as_deref().map(|v| format!(" (required value {:?})", shown(v))).unwrap_or_default()
    )]
    MissingAttribute {
        /// The service.
        name: String,
        /// The attribute's key.
        key: String,
        /// The value required (`None`: any value).
        required: Option<String>,
    },
    /// The service has an attribute with another value than the caller requires
    /// (`require_attribute`).
    #[error(
        "service {name:?} has attribute {key:?} = {:?}, but this program requires {:?}: it is not the service this program expects (check the name, and what its creator records with .attribute(..)), or relax the requirement",
        shown(found),
        shown(required)
    )]
    IncompatibleAttribute {
        /// The service.
        name: String,
        /// The attribute's key.
        key: String,
        /// The value required.
        required: String,
        /// The service's value.
        found: String,
    },
    /// The service's access policy is not the one the caller set
    /// ([`crate::access`]).
    #[error(
        "service {name:?} has access policy {found}, not {requested}; a service's policy is fixed by its creator: open it without `.access(..)` to take the one it has, or remove it (`iox remove`) and create it with this one"
    )]
    IncompatibleAccess {
        /// The service.
        name: String,
        /// The policy the caller set.
        requested: String,
        /// The service's ("none" for a service without one).
        found: String,
    },
    /// This process is neither a publisher nor a reader in the service's access
    /// policy: no holder hands it the service's memory.
    #[error(
        "service {name:?}: {why}; run as a user or group the policy names, or ask the service's creator to name yours (`.access(..)` when it creates the service)"
    )]
    NotInAccessPolicy {
        /// The service.
        name: String,
        /// The policy and this process's identity.
        why: String,
    },
    /// The service's access policy cannot be trusted: its static config file or its
    /// payload does not belong to the creator the policy names, or others may write
    /// the file.
    #[error(
        "service {name:?}: its access policy cannot be trusted: {why}; the policy may have been tampered with: remove the service (`iox remove`, as its creator or root) and let its creator make it again"
    )]
    AccessTampered {
        /// The service.
        name: String,
        /// What does not match.
        why: String,
    },
    /// A setting given to the builder is invalid (an attribute key or value that
    /// breaks a rule of [`crate::attributes`]).
    #[error("invalid setting for service {name:?}: {source}")]
    InvalidSetting {
        /// The service.
        name: String,
        /// What is wrong.
        source: InvalidConfig,
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
    /// The service's payload descriptor (its memfd, or its GPU memory's export) could
    /// not be had from any live process that holds it (each answered wrongly: see
    /// `tried`).
    #[error("cannot get the memory of service {name:?} (its sealed memfd, or its GPU memory's export) from any live process holding it: {}", tried.join("; "))]
    MemfdUnreachable {
        /// The service.
        name: String,
        /// What happened with each participant.
        tried: Vec<String>,
    },
    /// The service's pool is memory of a GPU this process cannot use: no CUDA here (a
    /// CPU-only process, or a build without the `cuda` feature), or no visible device
    /// with the recorded UUID (another GPU, or `CUDA_VISIBLE_DEVICES` hides it).
    /// Nothing is copied to the host instead.
    #[error(
        "service {name:?} keeps its samples in the memory of the GPU {uuid}, which this process cannot use: {reason}"
    )]
    DeviceUnavailable {
        /// The service.
        name: String,
        /// The GPU's UUID, as `nvidia-smi -L` prints it.
        uuid: String,
        /// What is missing.
        reason: String,
    },
    /// The service's device memory was handed over but could not be imported or
    /// mapped here (each holder's answer or the driver's refusal).
    #[error("cannot import the device memory of service {name:?}: {}", tried.join("; "))]
    DeviceImport {
        /// The service.
        name: String,
        /// What happened with each holder.
        tried: Vec<String>,
    },
    /// A process holding the service's memfd payload refused to hand it over: this
    /// process's user and groups may not read and write the service's files.
    #[error("service {name:?}: not admitted to its memory: {}; open it as a user the service's permissions admit (its owner, or a member of its group for a group-shared service), or create it with wider `.permissions(..)`", why.join("; "))]
    MemfdRefused {
        /// The service.
        name: String,
        /// What the holders said (their words name the permissions).
        why: Vec<String>,
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
    /// The root cannot be used (missing, not a directory, read-only, full).
    #[error("cannot open service {name:?}: {source}")]
    Root {
        /// The service.
        name: String,
        /// Why.
        source: RootError,
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
    /// `carry_payload_type` was given a
    /// payload type that not every byte string is a value of.
    #[error("service {name:?}: {}", not_carriable(.payload))]
    NotCarriable {
        /// The service.
        name: String,
        /// The payload type given.
        payload: PayloadType,
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
