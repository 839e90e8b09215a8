//! Services by name: the entry point, and open / create / open-or-create without a
//! broker, for every messaging pattern.
//!
//! Protocol (see `docs/architecture.md`, and [`crate::lifecycle`] for who may delete
//! which file):
//! 1. Read `iox_<H>.service`. If it exists, check it (name, version, payload type,
//!    memory type if the caller set one, limits and attributes the caller asked for),
//!    open the dynamic
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
//! 4. `open_or_create` only: a service whose check in step 1 fails (another type,
//!    limits, pattern or a required attribute) and that no live process uses is recovered and removed as
//!    `iox clean` would (if this user owns its static config, or is root), then
//!    created with the caller's settings; one in use is refused.
//!
//! A service is removed when its last user (a service handle, held by every port) goes
//! away. A service handle in one process is one user.
//!
//! Payload protection: a service handle maps the payload read-only (the creator too,
//! right after creating it); the first publisher built from the handle makes the whole
//! mapping writable (`mprotect`), and it stays so for the handle's life. So a process
//! whose ports on a service are only subscribers cannot write into samples (a write
//! faults instead of corrupting other readers' data), and a process that publishes
//! has one mapping, hence one pin registration, for all its ports. A registration made
//! while the mapping was read-only (a pinned subscriber created before the first
//! publisher) stays a read-only one: build the publisher first where a device must
//! write into loans. With an access policy ([`crate::access`]) a reader's descriptor
//! itself is read-only, so no `mprotect` can make its mapping writable; an opener also
//! refuses a policy its creator cannot have written (`open.rs`: the static config's
//! owner and mode, the payload's owner).
//!
//! The protocol knows nothing of messaging patterns: a pattern (`crate::pubsub`, ...)
//! implements [`Pattern`] — the static config it creates, and what it requires of one
//! it opens — and wraps the [`ServiceShared`] it gets back in its own service type.
//! Opening a service of another pattern is [`OpenError::WrongPattern`] (unless step 4
//! applies).
//!
//! Attributes ([`crate::attributes`]) are the one setting every pattern has: the
//! builders keep them in their shared [`Target`], and `create`, `open` and
//! `open_or_create` here record and verify them for every pattern
//! (`attribute_spec.rs` says what `.attribute` and `.require_attribute` do on open and
//! on create, and why).
//!
//! Files: `create.rs` (steps 2), `open.rs` (step 1), `memfd_access.rs` (reaching a
//! memfd payload through a live participant), `attribute_spec.rs`, `errors.rs`.

mod attribute_spec;
mod create;
mod errors;
mod memfd_access;
mod open;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use attribute_spec::AttributeSpec;
pub use errors::{CreateError, OpenError, OpenOrCreateError, RootError, UserHeaderMismatch};

use crate::ServiceName;
pub use crate::shared::ServiceShared;
use crate::static_config::{ConfigError, MessagingPattern, StaticConfig};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which service a builder is about: its name, its root, how long to wait for
/// another process creating or removing it, and the attributes it records and
/// requires (`attribute_spec`), which every pattern's builder has.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: ServiceName,
    pub root: PathBuf,
    pub timeout: Duration,
    pub attributes: AttributeSpec,
    /// The access policy to create the service with, and to require of one that
    /// exists (`None`: create without one, open whatever it has).
    pub access: Option<crate::access::AccessPolicy>,
}

impl Target {
    /// The service `name` under `root`, with the default timeout and no attributes.
    pub fn new(name: ServiceName, root: PathBuf) -> Self {
        Self {
            name,
            root,
            timeout: DEFAULT_TIMEOUT,
            attributes: AttributeSpec::default(),
            access: None,
        }
    }
}

/// The checked static config of a service whose pattern carries no payload through the
/// pool (events, blackboards): `pattern`, the payload recorded as `(no payload:
/// {what})`, and the minimal pool (one 64-byte chunk, never loaned), memfd-backed as
/// pub-sub's default so newcomers get it handed over (`crate::handover`). Decision: a
/// minimal pool rather than teaching the core to skip the pool, so that open, create,
/// recovery, cleanup and inspection stay one code path for every pattern.
pub fn payloadless_config(
    target: &Target,
    pattern: crate::PatternConfig,
    what: &str,
    permissions: Option<u32>,
) -> Result<crate::StaticConfig, CreateError> {
    use iox_mempool::{MemfdIdentity, MemoryType, PoolLayout};
    let layout = PoolLayout::new(&[(64, 1)]).expect("constant layout");
    let backing = crate::PayloadBacking::Memfd(MemfdIdentity {
        len: layout.payload_len() as u64,
        dev: 0,
        ino: 0,
        nonce: 0,
    });
    let config = crate::StaticConfig {
        version: crate::static_config::CONFIG_VERSION,
        name: target.name.to_string(),
        pattern,
        payload: crate::PayloadType::Typed {
            type_name: format!("(no payload: {what})"),
            size: 0,
            alignment: 1,
            invalid_bit_patterns: false,
        },
        memory_type: MemoryType::Cpu,
        layout,
        permissions: permissions.unwrap_or(iox_mempool::segment::DEFAULT_MODE),
        backing,
        created_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        schema: None,
        user_header: None,
        // Set by the protocol for every pattern (`service::create`).
        attributes: Default::default(),
        access: None,
    };
    config.check().map_err(|e| CreateError::InvalidSetting {
        name: target.name.to_string(),
        source: e,
    })?;
    Ok(config)
}

/// What a messaging pattern adds to the protocol.
pub trait Pattern {
    /// The pattern recorded in the static configs it creates.
    const PATTERN: MessagingPattern;
    /// The pattern's section of a static config.
    type Section;
    /// `c`'s section, if `c` is of this pattern.
    fn section(c: &StaticConfig) -> Option<&Self::Section>;
    /// The static config to create the service with.
    fn new_config(&self, target: &Target) -> Result<StaticConfig, CreateError>;
    /// Whether an existing service of this pattern (and this name), with `section`,
    /// is what the caller asked for.
    fn check_compatible(
        &self,
        target: &Target,
        found: &StaticConfig,
        section: &Self::Section,
    ) -> Result<(), OpenError>;
    /// Fills the pattern's regions of a dynamic segment being created for `config`,
    /// before any other process can see it (a blackboard's initial values); nothing
    /// by default.
    fn init_dynamic(&self, _config: &StaticConfig, _d: crate::dynamic::Dynamic<'_>) {}
}

/// Outcome of one attempt: done, failed for good, or worth another try.
enum Attempt<T, E> {
    Done(T),
    Failed(E),
    Retry(String),
}

/// Creates the service; fails if it exists.
pub fn create(t: &Target, p: &impl Pattern) -> Result<ServiceShared, CreateError> {
    let attributes = attribute_spec::for_create(t)?;
    let config = with_attributes(t, p.new_config(t)?, attributes)?;
    let start = Instant::now();
    loop {
        match create::try_create(t, &config, &|c, d| p.init_dynamic(c, d))? {
            Attempt::Done(s) => return Ok(s),
            Attempt::Failed(e) => return Err(e),
            Attempt::Retry(_) if start.elapsed() < t.timeout => backoff(start),
            Attempt::Retry(_) => {
                return Err(CreateError::TimedOut {
                    name: t.name.to_string(),
                    waited: start.elapsed(),
                });
            }
        }
    }
}

/// Opens the service; fails if it does not exist.
pub fn open(t: &Target, p: &impl Pattern) -> Result<ServiceShared, OpenError> {
    attribute_spec::check_for_open(t)?;
    let start = Instant::now();
    loop {
        let last = match open::try_open(t, &|c| check(t, p, c), start + t.timeout) {
            Attempt::Done(s) => return Ok(s),
            Attempt::Failed(OpenError::Config(ConfigError::NotFound { .. })) => {
                // Nothing there: say so about the root if it is the root that is missing.
                return Err(match RootError::check_dir(&t.root) {
                    Some(source) => OpenError::Root {
                        name: t.name.to_string(),
                        source,
                    },
                    None => OpenError::DoesNotExist(t.name.to_string()),
                });
            }
            Attempt::Failed(e) => return Err(e),
            Attempt::Retry(last) => last,
        };
        if start.elapsed() >= t.timeout {
            return Err(timed_out(t, start, last));
        }
        backoff(start);
    }
}

/// Opens the service, or creates it if it does not exist. Any number of processes
/// may race this: exactly one creates, the others open. A service that exists with
/// other settings (another type, limits, pattern) but that no live process uses any
/// more is removed and created with these (`open::removed_if_stale`); one in use is
/// refused.
pub fn open_or_create(t: &Target, p: &impl Pattern) -> Result<ServiceShared, OpenOrCreateError> {
    // Whether it would open or create, a builder that may create is checked alike.
    let attributes = attribute_spec::for_create(t)?;
    let start = Instant::now();
    let mut config = None;
    loop {
        let last = match open::try_open(t, &|c| check(t, p, c), start + t.timeout) {
            Attempt::Done(s) => return Ok(s),
            Attempt::Failed(OpenError::Config(ConfigError::NotFound { .. })) => {
                let config = match &config {
                    Some(c) => c,
                    None => config.insert(with_attributes(t, p.new_config(t)?, attributes.clone())?),
                };
                match create::try_create(t, config, &|c, d| p.init_dynamic(c, d))? {
                    Attempt::Done(s) => return Ok(s),
                    // Someone else is creating it: wait for the static config.
                    Attempt::Failed(CreateError::AlreadyExists(_)) => {
                        "being created by another process".into()
                    }
                    Attempt::Failed(e) => return Err(e.into()),
                    Attempt::Retry(last) => last,
                }
            }
            Attempt::Failed(
                e @ (OpenError::IncompatiblePayload { .. }
                | OpenError::IncompatibleUserHeader(_)
                | OpenError::IncompatibleSchema(_)
                | OpenError::IncompatibleMemoryType { .. }
                | OpenError::IncompatibleLimit { .. }
                | OpenError::MissingAttribute { .. }
                | OpenError::IncompatibleAttribute { .. }
                | OpenError::IncompatibleAccess { .. }
                | OpenError::WrongPattern { .. }),
            ) => {
                if open::removed_if_stale(t) {
                    // Gone: create it now, whatever the time spent removing it.
                    continue;
                }
                return Err(e.into());
            }
            Attempt::Failed(e) => return Err(e.into()),
            Attempt::Retry(last) => last,
        };
        if start.elapsed() >= t.timeout {
            return Err(timed_out(t, start, last).into());
        }
        backoff(start);
    }
}

/// The checks every pattern shares (the name, the pattern), then the pattern's own,
/// then the caller's attribute requirements.
fn check<P: Pattern>(t: &Target, p: &P, c: &StaticConfig) -> Result<(), OpenError> {
    let name = || t.name.to_string();
    if c.name != t.name.as_str() {
        return Err(OpenError::NameCollision {
            requested: name(),
            found: c.name.clone(),
        });
    }
    let Some(section) = P::section(c) else {
        return Err(OpenError::WrongPattern {
            name: name(),
            requested: P::PATTERN,
            found: c.messaging_pattern(),
        });
    };
    p.check_compatible(t, c, section)
        .map_err(|e| with_holders(t, e))?;
    attribute_spec::verify(t, &c.attributes)?;
    check_access(t, c)
}

/// The access policy the caller set (if any) against the service's, then this
/// process's place in the service's policy (if it has one).
fn check_access(t: &Target, c: &StaticConfig) -> Result<(), OpenError> {
    let name = || t.name.to_string();
    if let Some(requested) = &t.access {
        let same = c.access.as_ref().is_some_and(|found| {
            found.same_rules(requested) && requested.expected_creator().is_none_or(|u| u == found.creator)
        });
        if !same {
            let creator = requested
                .expected_creator()
                .unwrap_or(rustix::process::geteuid().as_raw());
            let requested = requested.clone().with_creator(creator);
            return Err(OpenError::IncompatibleAccess {
                name: name(),
                requested: format!("({requested})"),
                found: c.access.as_ref().map_or("none".into(), |a| format!("({a})")),
            });
        }
    }
    if let Some(policy) = &c.access {
        crate::root::safe_for_policies(&t.root, policy.creator)
            .map_err(|source| OpenError::Root { name: name(), source })?;
        let me = crate::access::Identity::of_this_process();
        if policy.role(&me).is_none() {
            return Err(OpenError::NotInAccessPolicy {
                name: name(),
                why: policy.refusal(&me),
            });
        }
    }
    Ok(())
}

/// A layout mismatch with the live processes that hold the service (so its message can
/// name them); other errors as they are.
fn with_holders(t: &Target, e: OpenError) -> OpenError {
    let OpenError::IncompatibleSchema(mut m) = e else {
        return e;
    };
    if let Ok(info) = crate::inspect::inspect_in(&t.root, t.name.as_str()) {
        let me = std::process::id();
        m.holders = info
            .users
            .iter()
            .filter(|u| u.alive && u.pid != 0 && u.pid != me && !u.other_namespace)
            .map(|u| u.pid)
            .collect();
        m.holders.sort_unstable();
        m.holders.dedup();
    }
    OpenError::IncompatibleSchema(m)
}

/// `config` (a pattern's, checked) with `attributes` and the caller's access policy
/// (this process's uid its creator), checked again as a whole (the attributes may make
/// the file too large; a policy may not suit the pattern or the memory).
fn with_attributes(
    t: &Target,
    mut config: StaticConfig,
    attributes: crate::Attributes,
) -> Result<StaticConfig, CreateError> {
    if attributes.is_empty() && t.access.is_none() {
        return Ok(config);
    }
    config.attributes = attributes;
    let me = rustix::process::geteuid().as_raw();
    if let Some(policy) = &t.access {
        let invalid = |source| CreateError::InvalidSetting {
            name: t.name.to_string(),
            source,
        };
        if let Some(expected) = policy.expected_creator()
            && expected != me
        {
            return Err(invalid(crate::static_config::InvalidConfig::Access(format!(
                "the access policy names uid {expected} as the creator, but this process is uid {me}: create the service as that user, or open it"
            ))));
        }
        crate::root::safe_for_policies(&t.root, me).map_err(|source| CreateError::Root {
            name: t.name.to_string(),
            source,
        })?;
    }
    config.access = t.access.clone().map(|a| a.with_creator(me));
    config.check().map_err(|source| CreateError::InvalidSetting {
        name: t.name.to_string(),
        source,
    })?;
    Ok(config)
}

fn timed_out(t: &Target, start: Instant, last: String) -> OpenError {
    OpenError::TimedOut {
        name: t.name.to_string(),
        waited: start.elapsed(),
        last,
    }
}

fn backoff(start: Instant) {
    // 0.1 ms growing to 10 ms: creation takes microseconds to milliseconds.
    let waited = start.elapsed().as_micros() as u64;
    std::thread::sleep(Duration::from_micros((100 + waited / 10).min(10_000)));
}
