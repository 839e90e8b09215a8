//! Memory types: how a service's pool is meant to be used, recorded per service.
//!
//! Each type has a stable numeric code, stored in files and compared between processes:
//! `Cpu` 0x0000, `Locked` 0x0001 (page-locked with `mlock`), `CudaPinned` 0x0002
//! (registered with the CUDA driver), and `User(code)` for `code >= 0x0100`, a range
//! kept for users' own kinds (an RDMA registration, a Vulkan import). Codes below
//! 0x0100 that iox does not know are an error, so a file written by a newer iox with a
//! new built-in type is refused rather than misread.
//!
//! In RON the type reads as `Cpu`, `Locked`, `CudaPinned` or `User(256)`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// First code of the range reserved for users' own memory kinds.
pub const USER_CODE_MIN: u16 = 0x0100;

/// The memory type of a pool.
///
/// ```
/// use iox_mempool::MemoryType;
/// assert_eq!(MemoryType::from_code(0x0002).unwrap(), MemoryType::CudaPinned);
/// assert_eq!(MemoryType::User(0x0100).code(), 0x0100);
/// assert!(MemoryType::from_code(0x0042).is_err());
/// assert!(MemoryType::user(7).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(try_from = "MemoryTypeSpec", into = "MemoryTypeSpec")]
pub enum MemoryType {
    /// Ordinary pageable memory. Pinning it is a no-op.
    #[default]
    Cpu,
    /// Page-locked with `mlock` when a port pins it.
    Locked,
    /// Page-locked and registered with the CUDA driver when a port pins it.
    CudaPinned,
    /// A user-defined kind; `code >= 0x0100`. Pinned by the pinner registered for it.
    User(u16),
}

/// Why a memory type code was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MemoryTypeError {
    /// A code below 0x0100 that this version of iox does not know.
    #[error(
        "memory type code {0:#06x} is unknown (known: 0x0000 Cpu, 0x0001 Locked, 0x0002 CudaPinned; users' own start at 0x0100)"
    )]
    Unknown(u16),
    /// `User` with a code inside the reserved built-in range.
    #[error("user memory type code {0:#06x} is reserved for iox; user codes start at 0x0100")]
    ReservedUserCode(u16),
}

impl MemoryType {
    /// A user-defined type, checking that `code >= 0x0100`.
    pub fn user(code: u16) -> Result<Self, MemoryTypeError> {
        if code >= USER_CODE_MIN {
            Ok(MemoryType::User(code))
        } else {
            Err(MemoryTypeError::ReservedUserCode(code))
        }
    }

    /// The stable numeric code.
    pub fn code(self) -> u16 {
        match self {
            MemoryType::Cpu => 0x0000,
            MemoryType::Locked => 0x0001,
            MemoryType::CudaPinned => 0x0002,
            MemoryType::User(code) => code,
        }
    }

    /// The type with this code.
    pub fn from_code(code: u16) -> Result<Self, MemoryTypeError> {
        match code {
            0x0000 => Ok(MemoryType::Cpu),
            0x0001 => Ok(MemoryType::Locked),
            0x0002 => Ok(MemoryType::CudaPinned),
            c if c >= USER_CODE_MIN => Ok(MemoryType::User(c)),
            c => Err(MemoryTypeError::Unknown(c)),
        }
    }

    /// Checks a value that may have been built directly as `User(code)`.
    pub fn validate(self) -> Result<Self, MemoryTypeError> {
        match self {
            MemoryType::User(code) => Self::user(code),
            other => Ok(other),
        }
    }
}

impl std::fmt::Display for MemoryType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryType::User(code) => write!(f, "User({code:#06x})"),
            other => write!(f, "{other:?}"),
        }
    }
}

#[derive(Serialize, Deserialize)]
enum MemoryTypeSpec {
    Cpu,
    Locked,
    CudaPinned,
    User(u16),
}

impl TryFrom<MemoryTypeSpec> for MemoryType {
    type Error = MemoryTypeError;
    fn try_from(spec: MemoryTypeSpec) -> Result<Self, MemoryTypeError> {
        match spec {
            MemoryTypeSpec::Cpu => Ok(MemoryType::Cpu),
            MemoryTypeSpec::Locked => Ok(MemoryType::Locked),
            MemoryTypeSpec::CudaPinned => Ok(MemoryType::CudaPinned),
            MemoryTypeSpec::User(code) => MemoryType::user(code),
        }
    }
}

impl From<MemoryType> for MemoryTypeSpec {
    fn from(t: MemoryType) -> Self {
        match t {
            MemoryType::Cpu => MemoryTypeSpec::Cpu,
            MemoryType::Locked => MemoryTypeSpec::Locked,
            MemoryType::CudaPinned => MemoryTypeSpec::CudaPinned,
            MemoryType::User(code) => MemoryTypeSpec::User(code),
        }
    }
}
