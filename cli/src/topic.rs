//! A publish-subscribe service opened by the tools (`echo`, `hz`, `pub`, `record`,
//! `replay`) without knowing its type: its static config is read first, then the
//! service is opened (or, for `replay`, created) with the recorded payload type and
//! schema, and its ports move the payload as bytes.
//!
//! Invariant: payload bytes leave shared memory only through [`Topic::copy_payload`],
//! which copies every byte when the payload has no padding and no invalid bit
//! patterns, else the field bytes a complete schema names (padding stays zero); a
//! payload with padding whose schema is missing or has bytes of unknown layout is not
//! copied at all (those bytes may be uninitialised padding). The same rule
//! ([`by_schema_or_bytes`]) decides what `pub` and `replay` may write.
//!
//! A service with a user header is opened with it (as bytes, the recorded header
//! declared), and its header leaves shared memory only through
//! [`Topic::copy_header_into`], under the same rule with the header's own type and
//! schema ([`header_by_schema_or_bytes`]).

use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::{
    OpenError, PayloadType, PubSubService, Publisher, RawSample, Schema, Service, StaticConfig, Subscriber,
};

use iox_service::inspect::{self, InspectError};

pub use iox_cli::readable::{by_schema_or_bytes, header_by_schema_or_bytes};

use crate::{CORRUPT, Failure, NOT_FOUND, REFUSED, WRONG_PATTERN, fail, root_failure};

/// How often `--wait` looks for the service.
const WAIT_POLL: Duration = Duration::from_millis(20);

/// An open publish-subscribe service and its static config.
pub struct Topic {
    /// The service name.
    pub name: String,
    /// Its static config as read when opening.
    pub config: StaticConfig,
    /// The service, carrying the recorded type as bytes.
    pub service: PubSubService<[u8]>,
    /// Field byte ranges of one element (`Schema::data_ranges`), when a schema is known.
    ranges: Option<Vec<(usize, usize)>>,
    /// Field byte ranges of the user header, when it has a schema.
    header_ranges: Option<Vec<(usize, usize)>>,
}

/// The static config of service `name` under `root`, if it exists.
pub fn find_config(root: &Path, name: &str) -> Result<Option<StaticConfig>, Failure> {
    match inspect::inspect_in(root, name) {
        Ok(info) => match info.config {
            Some(config) => Ok(Some(config)),
            None => Err(fail(
                CORRUPT,
                format!(
                    "{name}: its static config cannot be read: {}",
                    info.problems.join("; ")
                ),
            )),
        },
        Err(InspectError::NotFound(_)) => Ok(None),
        Err(InspectError::Root(e)) => Err(root_failure(e)),
        Err(e) => Err(fail(2, e.to_string())),
    }
}

/// Sleeps until `due` (a pacing schedule: `pub --rate`, `replay`); returns at once if
/// it has passed.
pub fn sleep_until(due: Instant) {
    let now = Instant::now();
    if due > now {
        std::thread::sleep(due - now);
    }
}

impl Topic {
    /// Opens publish-subscribe service `name`; with `wait`, polls until it exists or
    /// `deadline` passes.
    pub fn open(root: &Path, name: &str, wait: bool, deadline: Option<Instant>) -> Result<Topic, Failure> {
        let mut said = false;
        loop {
            let found = match find_config(root, name) {
                Err(e) if e.code == NOT_FOUND && wait => None,
                other => other?,
            };
            match found {
                Some(config) => match Self::open_config(root, config, false) {
                    // Removed between the listing and the open: look again.
                    Err(e) if e.code == NOT_FOUND && wait => {}
                    other => return other,
                },
                None if wait && deadline.is_none_or(|d| Instant::now() < d) => {
                    if !said {
                        eprintln!(
                            "waiting for service {name:?} to be created under {}",
                            root.display()
                        );
                        said = true;
                    }
                }
                None => {
                    let hint = if wait {
                        "(not created within --timeout)"
                    } else {
                        "(start the program that creates it first, or pass --wait)"
                    };
                    return Err(fail(
                        NOT_FOUND,
                        format!("service {name:?} does not exist under {} {hint}", root.display()),
                    ));
                }
            }
            std::thread::sleep(WAIT_POLL);
        }
    }

    /// Opens the service `config` describes, or with `create` opens or creates it with
    /// the recorded settings (`replay`).
    pub fn open_config(root: &Path, config: StaticConfig, create: bool) -> Result<Topic, Failure> {
        Self::open_config_within(root, config, create, None)
    }

    /// [`Topic::open_config`], waiting at most `timeout` (if given) for the service's
    /// creator or holders: what a recorder that must not wait on one service gives.
    pub fn open_config_within(
        root: &Path,
        config: StaticConfig,
        create: bool,
        timeout: Option<Duration>,
    ) -> Result<Topic, Failure> {
        let name = config.name.clone();
        if config.publish_subscribe().is_none() {
            return Err(fail(
                WRONG_PATTERN,
                format!(
                    "service {name:?} is a {} service; these commands work on publish-subscribe services",
                    config.messaging_pattern()
                ),
            ));
        }
        let builder = Service::named(&name)
            .map_err(|e| fail(2, e.to_string()))?
            .root(root);
        // SAFETY: the ports made from this service loan only with `loan_raw`, receive
        // only with `receive_raw`, and read samples only through their addresses
        // (`copy_payload`), as `raw_payload_type` requires.
        let b = unsafe {
            let b = builder
                .publish_subscribe::<[u8]>()
                .raw_payload_type(config.payload.clone());
            let b = match timeout {
                Some(t) => b.timeout(t),
                None => b,
            };
            match &config.user_header {
                // The header too, read through `copy_header_into` and written by
                // `pub` / `replay` through the loan's header address only.
                Some(h) => b.raw_user_header(h.clone()),
                None => b,
            }
        };
        let opened = if create {
            // Recreated as recorded: settings, size classes, schema.
            b.like_config(&config).open_or_create().map_err(|e| match e {
                iox_service::OpenOrCreateError::Open(e) => open_failure(&name, e),
                e => fail(REFUSED, e.to_string()),
            })
        } else {
            let b = match &config.schema {
                Some(schema) => b.payload_schema(schema.clone()),
                None => b,
            };
            b.open().map_err(|e| open_failure(&name, e))
        }?;
        // From here on, the service as it is (an existing one may differ from `config`
        // where opening does not compare, such as its schema's presence).
        let config = opened.static_config().clone();
        let ranges = config.schema.as_ref().map(Schema::data_ranges);
        let header_ranges = config
            .user_header
            .as_ref()
            .and_then(|h| h.schema.as_ref())
            .map(Schema::data_ranges);
        Ok(Topic {
            name,
            config,
            service: opened,
            ranges,
            header_ranges,
        })
    }

    /// The payload's schema (its element's, for a slice), if recorded.
    pub fn schema(&self) -> Option<&Schema> {
        self.config.schema.as_ref()
    }

    /// Whether the service carries slices.
    pub fn is_slice(&self) -> bool {
        matches!(self.config.payload, PayloadType::Slice { .. })
    }

    /// A subscriber on the service.
    pub fn subscriber(&self) -> Result<Subscriber<[u8]>, Failure> {
        self.service
            .subscriber_builder()
            .create()
            .map_err(|e| fail(REFUSED, format!("{}: {e}", self.name)))
    }

    /// A publisher on the service.
    pub fn publisher(&self) -> Result<Publisher<[u8]>, Failure> {
        self.service
            .publisher_builder()
            .create()
            .map_err(|e| fail(REFUSED, format!("{}: {e}", self.name)))
    }

    /// The user header's schema, if the service has a header and it records one.
    pub fn header_schema(&self) -> Option<&Schema> {
        self.config.user_header.as_ref()?.schema.as_ref()
    }

    /// Bytes of the user header (0 without one).
    pub fn header_len(&self) -> usize {
        self.config.user_header.as_ref().map_or(0, |h| h.size())
    }

    /// A copy of `sample`'s user header into `out` (appended; nothing for a service
    /// without one), by the module docs' rule; false, with nothing appended, where its
    /// bytes may not be read.
    pub fn copy_header_into(&self, sample: &RawSample, out: &mut Vec<u8>) -> bool {
        let Some(header) = &self.config.user_header else {
            return true;
        };
        if !header_by_schema_or_bytes(&self.config) {
            return false;
        }
        let len = sample.header_len();
        let start = out.len();
        if header.identity.any_bit_pattern() {
            // SAFETY: the sample's `header_len` bytes at its header address are mapped
            // while `sample` lives; the header type has no padding and its publisher
            // wrote it before sending, so they are initialised bytes.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(sample.header_ptr(), len) });
            return true;
        }
        let Some(ranges) = &self.header_ranges else {
            return false;
        };
        out.resize(start + len, 0);
        for &(offset, n) in ranges {
            if offset + n > len {
                out.truncate(start);
                return false;
            }
            // SAFETY: in bounds (checked above); field bytes of the header its publisher
            // wrote (the schema was checked against the header's size).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    sample.header_ptr().add(offset),
                    out.as_mut_ptr().add(start + offset),
                    n,
                )
            };
        }
        true
    }

    /// A copy of `sample`'s payload (module docs), or `None` if the payload has padding
    /// or invalid bit patterns and no schema says where its fields are.
    pub fn copy_payload(&self, sample: &RawSample) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.copy_payload_into(sample, &mut out).then_some(out)
    }

    /// [`copy_payload`](Self::copy_payload) appended to `out` (reusing its
    /// allocation); false, with nothing appended, where that gives `None`.
    pub fn copy_payload_into(&self, sample: &RawSample, out: &mut Vec<u8>) -> bool {
        let len = sample.len_bytes();
        let start = out.len();
        if !by_schema_or_bytes(&self.config) {
            return false;
        }
        if self.config.payload.any_bit_pattern() {
            // SAFETY: the sample's `len_bytes` bytes at its address are mapped and stay
            // valid while `sample` lives; the payload type has no padding and every byte
            // of it was written by its publisher (a loan is sent only once written), so
            // they are initialised bytes.
            let bytes = unsafe { std::slice::from_raw_parts(sample.as_ptr(), len) };
            out.extend_from_slice(bytes);
            return true;
        }
        let Some(ranges) = self.ranges.as_ref() else {
            return false;
        };
        out.resize(start + len, 0);
        let element = self.config.payload.element_size();
        for base in (0..len).step_by(element.max(1)) {
            for &(offset, n) in ranges {
                if base + offset + n > len {
                    out.truncate(start);
                    return false;
                }
                // SAFETY: in bounds (checked above); these are the field bytes of a
                // value the publisher wrote (the schema was checked against the
                // payload's size when the config was read).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        sample.as_ptr().add(base + offset),
                        out.as_mut_ptr().add(start + base + offset),
                        n,
                    )
                };
            }
        }
        true
    }
}

fn open_failure(name: &str, e: OpenError) -> Failure {
    match e {
        OpenError::DoesNotExist(_) => fail(NOT_FOUND, e.to_string()),
        OpenError::Root { source, .. } => root_failure(source),
        OpenError::WrongPattern { .. } => {
            fail(WRONG_PATTERN, format!("{e} (`iox show {name}` describes it)"))
        }
        e => fail(REFUSED, e.to_string()),
    }
}

/// Whether `name` matches glob `pattern` (`*` matches across `/` too, so `robot/*`
/// takes `robot/arm/pose`); a pattern that is not a valid glob matches itself only.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    match glob::Pattern::new(pattern) {
        Ok(p) => p.matches(name),
        Err(_) => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("robot/*", "robot/pose"));
        assert!(glob_match("robot/*", "robot/arm/pose"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("robot/*", "robo/pose"));
        assert!(!glob_match("exact", "exactly"));
        assert!(glob_match("[", "["));
    }
}
