//! Memory types: how a service's pool is meant to be used, recorded per service.
//!
//! Each type has a stable numeric code, stored in files and compared between processes:
//! `Cpu` 0x0000, `Locked` 0x0001 (page-locked with `mlock`), `CudaPinned` 0x0002
//! (registered with the CUDA driver), `CudaDevice` 0x0003 (the payload is memory of
//! one GPU, never mapped into the host's address space; which GPU is recorded beside
//! it, with the payload's backing), and `User(code)` for `code >= 0x0100`, a range
//! kept for users' own kinds (an RDMA registration, a Vulkan import). Codes below
//! 0x0100 that iox does not know are an error, so a file written by a newer iox with a
//! new built-in type is refused rather than misread.
//!
//! In RON the type reads as `Cpu`, `Locked`, `CudaPinned`, `CudaDevice` or `User(256)`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// First code of the range reserved for users' own memory kinds.
pub const USER_CODE_MIN: u16 = 0x0100;

/// The memory type of a pool.
///
/// ```
/// use iox_mempool::MemoryType;
/// assert_eq!(MemoryType::from_code(0x0002).unwrap(), MemoryType::CudaPinned);
/// assert_eq!(MemoryType::user(0x0100).unwrap().code(), 0x0100);
/// assert_eq!(MemoryType::from_code(0x0003).unwrap(), MemoryType::CudaDevice);
/// assert!(MemoryType::from_code(0x0042).is_err());
/// assert!(MemoryType::user(7).is_err());
/// ```
///
/// A `User` value always holds a valid code: [`UserCode`] can only be made through
/// [`UserCode::new`] (or [`MemoryType::user`], [`MemoryType::from_code`], or reading a
/// file, which refuse codes below 0x0100).
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
    /// Memory of one GPU, allocated with the CUDA driver's virtual memory management
    /// and handed between processes as an exported descriptor. Samples of it have a
    /// device address only: the host never reads or writes it, and nothing pins it.
    CudaDevice,
    /// A user-defined kind; its code is `>= 0x0100`. Pinned by the pinner registered
    /// for it.
    User(UserCode),
}

/// The code of a user-defined memory type: a `u16` of at least [`USER_CODE_MIN`],
/// checked when made, so a [`MemoryType::User`] is never invalid.
///
/// ```
/// use iox_mempool::memory::UserCode;
/// assert_eq!(UserCode::new(0x0100).unwrap().get(), 0x0100);
/// assert!(UserCode::new(0x00ff).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserCode(u16);

impl UserCode {
    /// The user code `code`, if `code >= 0x0100`.
    pub const fn new(code: u16) -> Result<Self, MemoryTypeError> {
        if code >= USER_CODE_MIN {
            Ok(Self(code))
        } else {
            Err(MemoryTypeError::ReservedUserCode(code))
        }
    }

    /// The code.
    pub const fn get(self) -> u16 {
        self.0
    }
}

impl TryFrom<u16> for UserCode {
    type Error = MemoryTypeError;
    fn try_from(code: u16) -> Result<Self, MemoryTypeError> {
        Self::new(code)
    }
}

impl From<UserCode> for u16 {
    fn from(code: UserCode) -> u16 {
        code.0
    }
}

/// Why a memory type code was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MemoryTypeError {
    /// A code below 0x0100 that this version of iox does not know.
    #[error(
        "memory type code {0:#06x} is unknown (known: 0x0000 Cpu, 0x0001 Locked, 0x0002 CudaPinned, 0x0003 CudaDevice; users' own start at 0x0100)"
    )]
    Unknown(u16),
    /// `User` with a code inside the reserved built-in range.
    #[error("user memory type code {0:#06x} is reserved for iox; user codes start at 0x0100")]
    ReservedUserCode(u16),
}

impl MemoryType {
    /// A user-defined type, checking that `code >= 0x0100`.
    pub const fn user(code: u16) -> Result<Self, MemoryTypeError> {
        match UserCode::new(code) {
            Ok(code) => Ok(MemoryType::User(code)),
            Err(e) => Err(e),
        }
    }

    /// The stable numeric code.
    pub fn code(self) -> u16 {
        match self {
            MemoryType::Cpu => 0x0000,
            MemoryType::Locked => 0x0001,
            MemoryType::CudaPinned => 0x0002,
            MemoryType::CudaDevice => 0x0003,
            MemoryType::User(code) => code.get(),
        }
    }

    /// The type with this code.
    pub fn from_code(code: u16) -> Result<Self, MemoryTypeError> {
        match code {
            0x0000 => Ok(MemoryType::Cpu),
            0x0001 => Ok(MemoryType::Locked),
            0x0002 => Ok(MemoryType::CudaPinned),
            0x0003 => Ok(MemoryType::CudaDevice),
            c if c >= USER_CODE_MIN => Ok(MemoryType::User(UserCode(c))),
            c => Err(MemoryTypeError::Unknown(c)),
        }
    }
}

impl std::fmt::Display for MemoryType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryType::User(code) => write!(f, "User({:#06x})", code.get()),
            other => write!(f, "{other:?}"),
        }
    }
}

/// The on-disk (serde) form: `User` carries the bare number, checked on the way in
/// (a bad code read from a file is a [`MemoryTypeError::ReservedUserCode`]).
#[derive(Serialize, Deserialize)]
enum MemoryTypeSpec {
    Cpu,
    Locked,
    CudaPinned,
    CudaDevice,
    User(u16),
}

impl TryFrom<MemoryTypeSpec> for MemoryType {
    type Error = MemoryTypeError;
    fn try_from(spec: MemoryTypeSpec) -> Result<Self, MemoryTypeError> {
        match spec {
            MemoryTypeSpec::Cpu => Ok(MemoryType::Cpu),
            MemoryTypeSpec::Locked => Ok(MemoryType::Locked),
            MemoryTypeSpec::CudaPinned => Ok(MemoryType::CudaPinned),
            MemoryTypeSpec::CudaDevice => Ok(MemoryType::CudaDevice),
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
            MemoryType::CudaDevice => MemoryTypeSpec::CudaDevice,
            MemoryType::User(code) => MemoryTypeSpec::User(code.get()),
        }
    }
}
