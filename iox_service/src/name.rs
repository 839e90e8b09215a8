//! Service names and the file stem derived from them.
//!
//! A service name is 1..=255 bytes of printable UTF-8 (no control characters, so no
//! NUL or newline). It may contain `/` (`camera/front`): names never become paths
//! themselves. Files use the stem `iox_<H>`, `H` the 16-hex-digit xxh3 hash of the
//! name, so any valid name maps to a safe file name inside the root. The full name is
//! stored in the static config, and an opener whose name hashes alike but differs is
//! told so ([`crate::OpenError::NameCollision`]).

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
    /// The name holds a control character (NUL, newline, ...).
    #[error("service name {name:?} contains the control character {ch:?}; use printable characters only")]
    ControlCharacter {
        /// The name given.
        name: String,
        /// The offending character.
        ch: char,
    },
}

/// A validated service name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceName(String);

impl ServiceName {
    /// Validates `name`.
    ///
    /// ```
    /// use iox_service::ServiceName;
    /// assert!(ServiceName::new("camera/front").is_ok());
    /// assert!(ServiceName::new("").is_err());
    /// assert!(ServiceName::new("a\0b").is_err());
    /// ```
    pub fn new(name: &str) -> Result<Self, NameError> {
        if name.is_empty() {
            return Err(NameError::Empty);
        }
        if name.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong(name.len()));
        }
        if let Some(ch) = name.chars().find(|c| c.is_control()) {
            return Err(NameError::ControlCharacter {
                name: name.to_owned(),
                ch,
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
