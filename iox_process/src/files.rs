//! Every file name under the root, and the two file operations the protocols rely on.
//!
//! For a service whose name hashes to `H` (`iox_service::ServiceName::stem` is `iox_H`):
//! `iox_H.service` (static config), `iox_H.dynamic` (the dynamic segment, anchor of an
//! incarnation), and the pool's `iox_H.chunks` and, with the file backing, `iox_H.pool`
//! (named by `iox_mempool`, [`iox_mempool::Pool::file_names`]). One node lock file per
//! process, `iox_node_<id>.lock` (see [`crate::node`]), temporary files
//! `<base>.<random>.<id>.tmp` that end in their writer's node id, one readiness socket
//! per receiving port, `iox_H.r<slot>.<generation>.<random>.<id>.sock` (see
//! `iox_service`'s doorbell), and one descriptor hand-over socket per holder,
//! `iox_H.h.<incarnation>.<random>.<id>.sock` (see `crate::handover`); these also end
//! in their owner's node id. Nothing else in the crate builds or parses these names.
//!
//! **Names a stranger can predict.** In a root shared by several users (`1777`), anyone
//! lists the names and may create files or bind sockets under names no one uses yet; in
//! a sticky directory, nobody but their owner (and root) can remove them. So every name
//! a process creates *after* a service exists carries a part drawn at random when it
//! is made: 64 bits for temporary files and readiness sockets, 32 for hand-over
//! sockets. Peers learn the readiness and hand-over names from the dynamic segment
//! (the port's header, the user entry), which only those the service's mode admits
//! can read; a name found taken is drawn again, never removed. What stays predictable
//! is a service's own name (`iox_H.*`): whoever may create files in the root may
//! create a service of any name first (see `docs/deploy.md`).

use std::path::Path;

/// The prefix of every service stem.
const STEM_PREFIX: &str = "iox_";
const CONFIG_SUFFIX: &str = ".service";
const DYNAMIC_SUFFIX: &str = ".dynamic";

/// The static config's file name.
pub fn config_name(stem: &str) -> String {
    format!("{stem}{CONFIG_SUFFIX}")
}

/// The dynamic segment's file name.
pub fn dynamic_name(stem: &str) -> String {
    format!("{stem}{DYNAMIC_SUFFIX}")
}

/// The stem of a static config or dynamic segment file name (`None` for any other
/// file, node lock files included).
pub fn stem_of(file_name: &str) -> Option<&str> {
    file_name
        .strip_suffix(CONFIG_SUFFIX)
        .or_else(|| file_name.strip_suffix(DYNAMIC_SUFFIX))
        .filter(|s| s.starts_with(STEM_PREFIX) && !s.starts_with("iox_node_"))
}

/// The stem of a static config file name only.
pub fn stem_of_config(file_name: &str) -> Option<&str> {
    file_name
        .strip_suffix(CONFIG_SUFFIX)
        .filter(|s| s.starts_with(STEM_PREFIX))
}

/// The file name of the node with `id`.
pub fn node_file_name(id: u64) -> String {
    format!("iox_node_{id:016x}.lock")
}

/// The node id a node file name stands for.
pub fn parse_node_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("iox_node_")?.strip_suffix(".lock")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// A fresh name for a temporary file for `base` written by `node`: a random part no
/// one can predict (see the module docs), and the node id at the end so recovery can
/// remove those of dead nodes. Create it with `O_EXCL`.
pub fn temp_file_name(base: &str, node: u64) -> String {
    let n = iox_mempool::random::random_u64();
    format!("{base}.{n:016x}.{node:016x}.tmp")
}

/// The node id in a temporary file name made by [`temp_file_name`].
pub fn parse_temp_file_name(name: &str) -> Option<u64> {
    let rest = name.strip_suffix(".tmp")?;
    let (_, hex) = rest.rsplit_once('.')?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// The readiness socket of receiver slot `slot` of service `stem`, owned by `node` in
/// the slot's `generation`, with the random part `nonce` its port recorded.
pub fn socket_name(stem: &str, slot: usize, generation: u64, nonce: u64, node: u64) -> String {
    format!("{stem}.r{slot}.{generation:x}.{nonce:016x}.{node:016x}{SOCKET_SUFFIX}")
}

const SOCKET_SUFFIX: &str = ".sock";

/// The descriptor hand-over socket of `node` for the incarnation of service `stem`
/// whose static config hashes to `incarnation`, with the random part `nonce` its user
/// entry records (see `crate::handover`); [`parse_socket_name`] reads its node id too.
pub fn handover_socket_name(stem: &str, incarnation: u64, nonce: u32, node: u64) -> String {
    format!("{stem}.h.{incarnation:016x}.{nonce:08x}.{node:016x}{SOCKET_SUFFIX}")
}

/// The node id in a socket's name made by [`socket_name`] or [`handover_socket_name`].
pub fn parse_socket_name(name: &str) -> Option<u64> {
    let rest = name.strip_suffix(SOCKET_SUFFIX)?;
    if !rest.starts_with(STEM_PREFIX) {
        return None;
    }
    let (_, hex) = rest.rsplit_once('.')?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// Renames `from` to `to` in `root` unless `to` exists (`EEXIST` then): the exclusive
/// step of creating a dynamic segment, a removal anchor or a node file.
pub fn rename_noreplace(root: &Path, from: &str, to: &str) -> rustix::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        root.join(from),
        rustix::fs::CWD,
        root.join(to),
        rustix::fs::RenameFlags::NOREPLACE,
    )
}

/// Whether `path` is the file `file` is (same device and inode).
pub fn same_file(file: &std::fs::File, path: &Path) -> bool {
    let ours = rustix::fs::fstat(file);
    let there = rustix::fs::lstat(path);
    matches!((ours, there), (Ok(a), Ok(b)) if a.st_dev == b.st_dev && a.st_ino == b.st_ino)
}
