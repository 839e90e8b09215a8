//! Service names and the file stem derived from them.
//!
//! **The name grammar.** A service name is one or more *segments* separated by single
//! `/` (`camera/front`, `robot1/arm/joint_states`), at most 255 bytes in all. A segment
//! is one or more ASCII letters, digits and the characters `_ - . ~ : + = ,`, and the
//! name starts with a letter, digit or `_`. So a name has no spaces, no empty segments
//! (`a//b`, a leading or trailing `/`), no wildcard or query characters (`* $ ? #`),
//! nothing outside ASCII, and never looks like an option (`-x`) or a home directory
//! (`~a`) on a command line. The rule is checked once, by [`ServiceName::new`] (which
//! `Service::named` calls), so a bad name fails where it is written, with the rule in
//! the message. It is the rule of names that mean the same everywhere a service name
//! travels: every valid name is also a Zenoh key expression without wildcards (the
//! bridge carries any service by its name) and an argument the shell and `iox` take
//! as written, unquoted.
//!
//! Names never become paths themselves. Files use the stem `iox_<H>`, `H` the
//! 16-hex-digit xxh3 hash of the name, so every name maps to a safe file name inside
//! the root. The full name is stored in the static config, and an opener whose name
//! hashes alike but differs is told so ([`crate::OpenError::NameCollision`]).

use thiserror::Error;

/// Longest service name, in bytes.
pub const MAX_NAME_LEN: usize = 255;

/// Why a service name was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    #[error("service name is empty")]
    Empty,
    /// The name is longer than 255 bytes.
    #[error("service name is {0} bytes long; at most {MAX_NAME_LEN} are allowed")]
    TooLong(usize),
    /// The name holds a character outside the grammar (see the module docs).
    #[error("service name {name:?} contains {ch:?} at byte {at}: {RULE}")]
    Character {
        /// The name given.
        name: String,
        /// The offending character.
        ch: char,
        /// Its byte offset.
        at: usize,
    },
    /// The name has an empty segment: `//`, or a leading or trailing `/`.
    #[error("service name {name:?} has an empty segment ('//', or a leading or trailing '/'): {RULE}")]
    EmptySegment {
        /// The name given.
        name: String,
    },
}

/// The name grammar, as every [`NameError`] about characters states it.
const RULE: &str = "a name is segments separated by single '/', each of ASCII letters, digits and _ - . ~ : + = ,; the name starts with a letter, digit or _ (e.g. \"camera/front\")";

/// Whether `c` may appear in a segment.
fn segment_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '~' | ':' | '+' | '=' | ',')
}

/// A validated service name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceName(String);

impl ServiceName {
    /// Validates `name` against the grammar (see the module docs).
    ///
    /// ```
    /// use iox_service::ServiceName;
    /// assert!(ServiceName::new("camera/front").is_ok());
    /// assert!(ServiceName::new("robot1/arm/joint_states").is_ok());
    /// for bad in ["", "camera front", "a//b", "/leading", "trailing/", "x*y", "a\0b", "caf\u{e9}", "-x", "~a"] {
    ///     assert!(ServiceName::new(bad).is_err(), "{bad:?}");
    /// }
    /// ```
    pub fn new(name: &str) -> Result<Self, NameError> {
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        if name.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong(name.len()));
        }
        if let Some((at, ch)) = name.char_indices().find(|&(_, c)| c != '/' && !segment_char(c)) {
            return Err(NameError::Character {
                name: name.to_owned(),
                ch,
                at,
            });
        }
        if let Some(first) = name.chars().next()
            && !(first.is_ascii_alphanumeric() || first == '_' || first == '/')
        {
            return Err(NameError::Character {
                name: name.to_owned(),
                ch: first,
                at: 0,
            });
        }
        if name.split('/').any(str::is_empty) {
            return Err(NameError::EmptySegment {
                name: name.to_owned(),
            });
        }
        Ok(Self(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The file stem of the service: `iox_<16 hex digits>`.
    pub fn stem(&self) -> String {
        format!("iox_{:016x}", xxhash_rust::xxh3::xxh3_64(self.0.as_bytes()))
    }
}

impl std::fmt::Display for ServiceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
