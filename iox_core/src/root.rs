//! The root directory every process of a service shares (`/dev/shm`, `$IOX_ROOT`, or
//! one given with `.root(..)`), and why it cannot be used ([`RootError`]): missing, not
//! a directory, read-only, full, out of inodes, or not ours to write.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why the root directory (`/dev/shm`, `$IOX_ROOT`, or the one given with `.root(..)`)
/// cannot be used. Each message names the directory and says what to do.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RootError {
    /// The root does not exist.
    #[error(
        "the iox root {} does not exist: create it (mkdir -p {}), or set IOX_ROOT to an existing directory",
        root.display(),
        root.display()
    )]
    Missing {
        /// The root.
        root: PathBuf,
    },
    /// The root is not a directory.
    #[error(
        "the iox root {} is not a directory: set IOX_ROOT to a directory (or remove that file and create the directory)",
        root.display()
    )]
    NotADirectory {
        /// The root.
        root: PathBuf,
    },
    /// This process may not create files in the root: it is read-only (a read-only
    /// mount) or not writable by this user.
    #[error(
        "the iox root {} is not writable by this process ({source}): mount it read-write or give this user write access to it, or set IOX_ROOT to a writable directory",
        root.display()
    )]
    PermissionDenied {
        /// The root.
        root: PathBuf,
        /// The error (`EACCES`, `EPERM` or `EROFS`).
        source: std::io::Error,
    },
    /// The root's file system is full (no space or no inodes left, or over quota).
    #[error(
        "the iox root {} is full ({source}): free space there (`iox clean` removes what dead processes left, `iox remove NAME` removes a service), or give it a larger file system",
        root.display()
    )]
    NoSpace {
        /// The root.
        root: PathBuf,
        /// The error (`ENOSPC` or `EDQUOT`).
        source: std::io::Error,
    },
    /// A service with an access policy in a root where others than its owner may
    /// replace files: writable by its group or by others without the sticky bit, or
    /// owned by another user than root or the service's creator (see `crate::access`).
    #[error(
        "the iox root {} lets other users replace files in it ({why}), so it cannot keep a service's access policy: use a root with the sticky bit (chmod +t, as /dev/shm has) owned by root or the service's creator, or one only trusted users may write",
        root.display()
    )]
    NotSafeForPolicies {
        /// The root.
        root: PathBuf,
        /// Its mode and owner, and what is wrong with them.
        why: String,
    },
    /// Another I/O error while using the root.
    #[error("cannot use the iox root {}: {what}: {source}", root.display())]
    Io {
        /// The root.
        root: PathBuf,
        /// The step.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

impl RootError {
    /// The root the error is about.
    pub fn root(&self) -> &Path {
        match self {
            Self::Missing { root }
            | Self::NotADirectory { root }
            | Self::PermissionDenied { root, .. }
            | Self::NoSpace { root, .. }
            | Self::NotSafeForPolicies { root, .. }
            | Self::Io { root, .. } => root,
        }
    }

    /// Classifies the error `source` of step `what` on a file directly under `root`.
    pub fn classify(root: &Path, what: &'static str, source: std::io::Error) -> Self {
        use rustix::io::Errno;
        let root = root.to_path_buf();
        match Errno::from_io_error(&source) {
            Some(Errno::NOENT) => match std::fs::metadata(&root) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::Missing { root },
                Ok(m) if !m.is_dir() => Self::NotADirectory { root },
                // The root is there: something else went missing.
                _ => Self::Io { root, what, source },
            },
            Some(Errno::NOTDIR) => Self::NotADirectory { root },
            Some(Errno::ACCESS | Errno::PERM | Errno::ROFS) => Self::PermissionDenied { root, source },
            Some(Errno::NOSPC | Errno::DQUOT) => Self::NoSpace { root, source },
            _ => Self::Io { root, what, source },
        }
    }

    /// `Missing` or `NotADirectory` if `root` is not a directory, without creating
    /// anything (for readers that found nothing under it).
    pub fn check_dir(root: &Path) -> Option<Self> {
        match std::fs::metadata(root) {
            Ok(m) if m.is_dir() => None,
            Ok(_) => Some(Self::NotADirectory {
                root: root.to_path_buf(),
            }),
            Err(e) => Some(Self::classify(root, "look at the root", e)),
        }
    }
}

/// Whether `root` can keep the access policy of a service created by `creator`: no one
/// but root, `creator` and the root directory's owner (who must be one of those two)
/// may replace a file in it (see [`RootError::NotSafeForPolicies`]).
pub fn safe_for_policies(root: &std::path::Path, creator: u32) -> Result<(), RootError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(root).map_err(|source| RootError::Io {
        root: root.to_path_buf(),
        what: "look at its owner and mode",
        source,
    })?;
    let (mode, owner) = (meta.mode() & 0o7777, meta.uid());
    let why = if owner != 0 && owner != creator {
        format!("it belongs to uid {owner}, who may remove any file in it")
    } else if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        format!("mode {mode:04o}: writable by others, without the sticky bit")
    } else {
        return Ok(());
    };
    Err(RootError::NotSafeForPolicies {
        root: root.to_path_buf(),
        why,
    })
}
