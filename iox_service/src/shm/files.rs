//! Every file name under the root, and the two file operations the protocols rely on.
//!
//! For a service whose name hashes to `H` ([`crate::ServiceName::stem`] is `iox_H`):
//! `iox_H.service` (static config), `iox_H.dynamic` (the dynamic segment, anchor of an
//! incarnation), and the pool's `iox_H.chunks` and, with the file backing, `iox_H.pool`
//! (named by `iox_mempool`, [`iox_mempool::Pool::file_names`]). Node lock files and
//! temporary files are named in [`crate::node`]. Nothing else in the crate builds or
//! parses these names.

use std::path::Path;

/// The prefix of every service stem.
const STEM_PREFIX: &str = "iox_";
const CONFIG_SUFFIX: &str = ".service";
const DYNAMIC_SUFFIX: &str = ".dynamic";

/// The static config's file name.
pub(crate) fn config_name(stem: &str) -> String {
    format!("{stem}{CONFIG_SUFFIX}")
}

/// The dynamic segment's file name.
pub(crate) fn dynamic_name(stem: &str) -> String {
    format!("{stem}{DYNAMIC_SUFFIX}")
}

/// The stem of a static config or dynamic segment file name (`None` for any other
/// file, node lock files included).
pub(crate) fn stem_of(file_name: &str) -> Option<&str> {
    file_name
        .strip_suffix(CONFIG_SUFFIX)
        .or_else(|| file_name.strip_suffix(DYNAMIC_SUFFIX))
        .filter(|s| s.starts_with(STEM_PREFIX) && !s.starts_with("iox_node_"))
}

/// The stem of a static config file name only.
pub(crate) fn stem_of_config(file_name: &str) -> Option<&str> {
    file_name
        .strip_suffix(CONFIG_SUFFIX)
        .filter(|s| s.starts_with(STEM_PREFIX))
}

/// Renames `from` to `to` in `root` unless `to` exists (`EEXIST` then): the exclusive
/// step of creating a dynamic segment, a removal anchor or a node file.
pub(crate) fn rename_noreplace(root: &Path, from: &str, to: &str) -> rustix::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        root.join(from),
        rustix::fs::CWD,
        root.join(to),
        rustix::fs::RenameFlags::NOREPLACE,
    )
}

/// Whether `path` is the file `file` is (same device and inode).
pub(crate) fn same_file(file: &std::fs::File, path: &Path) -> bool {
    let ours = rustix::fs::fstat(file);
    let there = rustix::fs::lstat(path);
    matches!((ours, there), (Ok(a), Ok(b)) if a.st_dev == b.st_dev && a.st_ino == b.st_ino)
}
