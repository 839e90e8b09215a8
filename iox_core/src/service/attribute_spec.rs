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
pub struct AttributeSpec {
    /// As given, in order (checked, sorted and deduplicated by `recorded`).
    record: Vec<(String, String)>,
    /// As given, in order.
    require: Vec<(String, Option<String>)>,
}

impl AttributeSpec {
    pub fn record(&mut self, key: String, value: String) {
        self.record.push((key, value));
    }

    pub fn require(&mut self, key: String, value: Option<String>) {
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
