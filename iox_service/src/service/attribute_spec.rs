//! What a builder says about attributes ([`crate::attributes`]): those it records when
//! it creates the service, and those it requires of a service it opens. Kept in the
//! builders' shared [`Target`], applied by the protocol functions (`service::create`,
//! `open`, `open_or_create`) for every pattern, so no pattern handles attributes.
//!
//! Decisions, as an iceoryx2 user expects them (its "attribute specifier" and
//! "attribute verifier"):
//! - `.attribute(key, value)` is recorded when the builder creates the service; on
//!   open it is not compared with the service's (a program that opens-or-creates
//!   says what it would record, not what it demands). A key given again replaces
//!   its value.
//! - `.require_attribute(key, value)` and `.require_attribute_key(key)` are checked on
//!   open: a missing key is [`OpenError::MissingAttribute`], another value
//!   [`OpenError::IncompatibleAttribute`], both naming the service, the key and the
//!   values. `open_or_create` treats them as it treats another payload type: a stale
//!   service no live process uses is replaced, one in use is refused.
//! - A builder that may create (`create`, `open_or_create`) must satisfy its own
//!   requirements, so every service it returns satisfies them; otherwise it fails
//!   before touching anything, whichever of open or create would have happened, with
//!   [`CreateError::InvalidSetting`] naming the key.
//! - Keys and values are checked (length, characters, how many) when the builder is
//!   used, not when they are given: builder methods do not fail. Every operation
//!   checks all of them, so an invalid one fails `open` too
//!   ([`OpenError::InvalidSetting`]), not only the creation that would record it.

use super::{CreateError, OpenError, Target};
use crate::attributes::{self, AttributeError, Attributes};
use crate::static_config::InvalidConfig;

/// A builder's attributes: those to record, and those to require (`None`: the key
/// must exist).
#[derive(Debug, Clone, Default)]
pub(crate) struct AttributeSpec {
    /// As given, in order (checked, sorted and deduplicated by `recorded`).
    record: Vec<(String, String)>,
    /// As given, in order.
    require: Vec<(String, Option<String>)>,
}

impl AttributeSpec {
    pub(crate) fn record(&mut self, key: String, value: String) {
        self.record.push((key, value));
    }

    pub(crate) fn require(&mut self, key: String, value: Option<String>) {
        self.require.push((key, value));
    }

    /// The attributes to record: every key and value checked, a later value of a key
    /// replacing an earlier one.
    fn recorded(&self) -> Result<Attributes, AttributeError> {
        let mut a = Attributes::new();
        for (k, v) in &self.record {
            a.insert(k, v)?;
        }
        Ok(a)
    }

    /// Every requirement's key and value checked (one that breaks a rule could never
    /// be met: said so rather than reported as missing).
    fn check_required(&self) -> Result<(), AttributeError> {
        for (k, v) in &self.require {
            attributes::check_key(k)?;
            if let Some(v) = v {
                attributes::check_value(k, v)?;
            }
        }
        Ok(())
    }

    /// The first requirement `found` does not meet: (key, required value, found value).
    fn unmet<'a>(&'a self, found: &'a Attributes) -> Option<(&'a str, Option<&'a str>, Option<&'a str>)> {
        self.require.iter().find_map(|(k, want)| {
            let have = found.get(k);
            let met = match want {
                None => have.is_some(),
                Some(w) => have == Some(w.as_str()),
            };
            (!met).then_some((k.as_str(), want.as_deref(), have))
        })
    }
}

/// For a builder that may create: its attributes, checked, and its requirements met by
/// them. Called before anything else is done.
pub(super) fn for_create(t: &Target) -> Result<Attributes, CreateError> {
    let invalid = |e: AttributeError| CreateError::InvalidSetting {
        name: t.name.to_string(),
        source: InvalidConfig::Attribute(e),
    };
    let spec = &t.attributes;
    let recorded = spec.recorded().map_err(invalid)?;
    spec.check_required().map_err(invalid)?;
    if let Some((key, required, found)) = spec.unmet(&recorded) {
        return Err(invalid(AttributeError::Unsatisfied {
            key: key.to_owned(),
            required: required.map(str::to_owned),
            recorded: found.map(str::to_owned),
        }));
    }
    Ok(recorded)
}

/// For a builder that only opens: every key and value it was given checked.
pub(super) fn check_for_open(t: &Target) -> Result<(), OpenError> {
    let spec = &t.attributes;
    spec.recorded()
        .map(drop)
        .and_then(|()| spec.check_required())
        .map_err(|e| OpenError::InvalidSetting {
            name: t.name.to_string(),
            source: InvalidConfig::Attribute(e),
        })
}

/// Whether the attributes `found` of an existing service meet the requirements.
pub(super) fn verify(t: &Target, found: &Attributes) -> Result<(), OpenError> {
    let Some((key, required, have)) = t.attributes.unmet(found) else {
        return Ok(());
    };
    let (name, key, required) = (t.name.to_string(), key.to_owned(), required.map(str::to_owned));
    Err(match (have, required) {
        (Some(found), Some(required)) => OpenError::IncompatibleAttribute {
            name,
            key,
            required,
            found: found.to_owned(),
        },
        (_, required) => OpenError::MissingAttribute { name, key, required },
    })
}

/// The attribute methods every service builder has (their one definition; each
/// builder has a `target: Target` field). `$pattern` is the builder's call on a
/// `Service` in the examples (e.g. `"event()"`).
macro_rules! attribute_methods {
    ($pattern:literal) => {
        /// Records attribute `key` with `value` in the static config when this builder
        /// creates the service (see [`crate::attributes`] for the rules: a key is 1 to
        /// 128 bytes of printable ASCII without `=` or whitespace, a value at most 8192
        /// bytes without control characters but `\n` and `\t`, at most 32 per
        /// service). A key given again replaces its value. Not compared with an
        /// existing service's on open (that is
        /// [`require_attribute`](Self::require_attribute)). An invalid key or value
        /// fails `create`, `open` and `open_or_create` with `InvalidSetting` naming it.
        ///
        /// ```
        /// # let dir = tempfile::tempdir().unwrap();
        /// use iox_service::Service;
        #[doc = concat!("let svc = Service::named(\"doc/attribute\")?.root(dir.path()).", $pattern)]
        ///     .attribute("ros2/type", "std_msgs/msg/String")
        ///     .create()?;
        /// assert_eq!(svc.attributes().get("ros2/type"), Some("std_msgs/msg/String"));
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.target.attributes.record(key.into(), value.into());
            self
        }

        /// Requires an existing service to have attribute `key` with exactly `value`
        /// when opening: otherwise `open` fails with
        /// [`OpenError::IncompatibleAttribute`](crate::OpenError::IncompatibleAttribute)
        /// (another value) or
        /// [`OpenError::MissingAttribute`](crate::OpenError::MissingAttribute), naming
        /// the key and both values. A builder that may create must record it too (with
        /// [`attribute`](Self::attribute)), else it fails with `InvalidSetting`.
        ///
        /// ```
        /// # let dir = tempfile::tempdir().unwrap();
        /// use iox_service::{OpenError, Service};
        #[doc = concat!("let svc = Service::named(\"doc/require\")?.root(dir.path()).", $pattern)]
        ///     .attribute("unit", "m")
        ///     .create()?;
        #[doc = concat!("let same = Service::named(\"doc/require\")?.root(dir.path()).", $pattern)]
        ///     .require_attribute("unit", "m")
        ///     .open()?;
        #[doc = concat!("let other = Service::named(\"doc/require\")?.root(dir.path()).", $pattern)]
        ///     .require_attribute("unit", "ft")
        ///     .open();
        /// assert!(matches!(other, Err(OpenError::IncompatibleAttribute { .. })));
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn require_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.target
                .attributes
                .require(key.into(), Some(value.into()));
            self
        }

        /// Requires an existing service to have attribute `key`, with any value, when
        /// opening: otherwise `open` fails with
        /// [`OpenError::MissingAttribute`](crate::OpenError::MissingAttribute). A
        /// builder that may create must record it too.
        ///
        /// ```
        /// # let dir = tempfile::tempdir().unwrap();
        /// use iox_service::{OpenError, Service};
        #[doc = concat!("let svc = Service::named(\"doc/require_key\")?.root(dir.path()).", $pattern)]
        ///     .create()?;
        #[doc = concat!("let opened = Service::named(\"doc/require_key\")?.root(dir.path()).", $pattern)]
        ///     .require_attribute_key("ros2/qos")
        ///     .open();
        /// assert!(matches!(opened, Err(OpenError::MissingAttribute { .. })));
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn require_attribute_key(mut self, key: impl Into<String>) -> Self {
            self.target.attributes.require(key.into(), None);
            self
        }
    };
}
pub(crate) use attribute_methods;
