//! Sealed memfd payloads: pool memory that has no name under the root, cannot be
//! truncated or grown, and goes away with the last process that holds it.
//!
//! The creator makes the payload with `memfd_create` (close-on-exec, sealing
//! allowed), sizes it, allocates its pages and adds `F_SEAL_SHRINK | F_SEAL_GROW |
//! F_SEAL_SEAL`: from then on no process can change its size, so no reader can be
//! hit by SIGBUS through a truncation, and nobody can remove the seals. Its size and
//! inode identity ([`MemfdIdentity`]) are recorded by the user of the pool (iox_service
//! puts them in the static config). Another process obtains the file some other way
//! (iox_service opens `/proc/<pid>/fd/<n>` of a live participant) and hands it to
//! [`open_memfd`], which checks it is a memfd, sealed as above, of the recorded size
//! and identity, before mapping it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use memfd::{FileSeal, Memfd, MemfdOptions};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::segment::{self, Access, CreateSegmentError, Segment};

/// Where a pool's payload lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Backing {
    /// A named file under the root (`S.pool`): other users can open it with group
    /// permissions.
    File,
    /// A sealed memfd, reached through a participant process: same user only.
    Memfd,
}

/// Size and inode of a memfd payload, as recorded by its creator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemfdIdentity {
    /// Length in bytes.
    pub len: u64,
    /// Device of the inode.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// Why a file was refused as a pool's memfd. Each names the file.
#[derive(Debug, Error)]
pub enum MemfdError {
    /// Not a memfd (a named file, a pipe, ...).
    #[error("{} is not a memfd", path.display())]
    NotMemfd {
        /// The file.
        path: PathBuf,
    },
    /// A memfd without the seals a pool needs.
    #[error("{} lacks seals: it has {found}, a pool needs shrink, grow and seal", path.display())]
    MissingSeals {
        /// The file.
        path: PathBuf,
        /// The seals it has.
        found: String,
    },
    /// Another size than recorded.
    #[error("{} is {len} bytes long, the static config records {expected}", path.display())]
    WrongSize {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The size recorded.
        expected: u64,
    },
    /// Another memfd than the one recorded.
    #[error("{} is inode {found_dev}:{found_ino}, the static config records {dev}:{ino}", path.display())]
    WrongIdentity {
        /// The file.
        path: PathBuf,
        /// Its device.
        found_dev: u64,
        /// Its inode.
        found_ino: u64,
        /// The device recorded.
        dev: u64,
        /// The inode recorded.
        ino: u64,
    },
    /// A system call failed, or it cannot be mapped.
    #[error("{} cannot be used: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

const SEALS: [FileSeal; 3] = [FileSeal::SealShrink, FileSeal::SealGrow, FileSeal::SealSeal];

/// Creates a sealed memfd payload of `len` bytes named `iox:<name>` (the name only
/// shows in `/proc/<pid>/fd`), mapped read-write.
pub fn create_memfd(name: &str, len: usize) -> Result<(Segment, MemfdIdentity), CreateSegmentError> {
    let path = PathBuf::from(format!("memfd:iox:{name}"));
    let io = |op, source: std::io::Error| CreateSegmentError::Io {
        op,
        path: path.clone(),
        source,
    };
    if len == 0 {
        return Err(CreateSegmentError::ZeroSize);
    }
    let memfd = MemfdOptions::new()
        .allow_sealing(true)
        .close_on_exec(true)
        .create(format!("iox:{name}"))
        .map_err(|e| io("create", std::io::Error::other(e)))?;
    let file = memfd.as_file();
    file.set_len(len as u64).map_err(|e| io("size", e))?;
    segment::reserve(file, len).map_err(|e| match e {
        rustix::io::Errno::NOSPC => CreateSegmentError::NoSpace {
            path: path.clone(),
            len,
        },
        e => io("reserve memory for", e.into()),
    })?;
    memfd
        .add_seals(&SEALS)
        .map_err(|e| io("seal", std::io::Error::other(e)))?;
    let stat = rustix::fs::fstat(file).map_err(|e| io("stat", e.into()))?;
    let identity = MemfdIdentity {
        len: len as u64,
        dev: stat.st_dev,
        ino: stat.st_ino,
    };
    let segment = Segment::from_file(memfd.into_file(), path.clone(), Access::ReadWrite, len as u64)
        .map_err(|e| io("map", std::io::Error::other(e)))?;
    Ok((segment, identity))
}

/// Checks that `file` (named `path` in errors) is the sealed memfd `expected`
/// describes, and maps it.
pub fn open_memfd(
    file: File,
    path: PathBuf,
    access: Access,
    expected: MemfdIdentity,
) -> Result<Segment, MemfdError> {
    // The kernel names memfds "/memfd:<name>" in /proc; only they carry that prefix.
    let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(|source| {
        MemfdError::Io {
            path: path.clone(),
            source,
        }
    })?;
    if !link.to_string_lossy().starts_with("/memfd:") {
        return Err(MemfdError::NotMemfd { path });
    }
    let memfd = Memfd::try_from_file(file).map_err(|_| MemfdError::NotMemfd { path: path.clone() })?;
    let seals = memfd.seals().map_err(|e| MemfdError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    if !SEALS.iter().all(|s| seals.contains(s)) {
        let mut found: Vec<String> = seals.iter().map(|s| format!("{s:?}")).collect();
        found.sort();
        return Err(MemfdError::MissingSeals {
            path,
            found: if found.is_empty() {
                "none".into()
            } else {
                found.join(", ")
            },
        });
    }
    let stat = rustix::fs::fstat(memfd.as_file()).map_err(|e| MemfdError::Io {
        path: path.clone(),
        source: e.into(),
    })?;
    if stat.st_size as u64 != expected.len {
        return Err(MemfdError::WrongSize {
            path,
            len: stat.st_size as u64,
            expected: expected.len,
        });
    }
    if (stat.st_dev, stat.st_ino) != (expected.dev, expected.ino) {
        return Err(MemfdError::WrongIdentity {
            path,
            found_dev: stat.st_dev,
            found_ino: stat.st_ino,
            dev: expected.dev,
            ino: expected.ino,
        });
    }
    Segment::from_file(memfd.into_file(), path.clone(), access, expected.len).map_err(|e| MemfdError::Io {
        path,
        source: std::io::Error::other(e),
    })
}
