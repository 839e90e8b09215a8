//! Where iox keeps its files.
//!
//! Every iox file lives directly in one directory, the *root*: `/dev/shm` unless the
//! environment variable `IOX_ROOT` names another directory (tests give each test a
//! fresh one so they never collide). The root is read at each call, not cached, so a
//! process that changes `IOX_ROOT` sees the change on its next open.

use std::path::PathBuf;

/// The environment variable that overrides the root directory.
pub const ROOT_ENV: &str = "IOX_ROOT";

/// The default root directory.
pub const DEFAULT_ROOT: &str = "/dev/shm";

/// The root directory iox uses now: `$IOX_ROOT` if set and non-empty, else `/dev/shm`.
///
/// ```
/// let root = iox_mempool::root::root_dir();
/// assert!(root.is_absolute() || std::env::var_os("IOX_ROOT").is_some());
/// ```
pub fn root_dir() -> PathBuf {
    match std::env::var_os(ROOT_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(DEFAULT_ROOT),
    }
}
