//! Where the iceoryx2 transports keep their files. iceoryx2 leaves one global
//! management segment per file prefix in `/dev/shm` for the next process of that
//! prefix (by design). Under `IOX_ROOT` (each test's own temporary directory) the
//! benchmarks give iceoryx2 a prefix of that root's own, `iox2_b<hash>_`, and the
//! tests remove what is left under it ([`remove_files`]); run by hand, without
//! `IOX_ROOT`, iceoryx2 keeps its defaults, as any iceoryx2 program does.
//!
//! ```
//! let root = std::path::Path::new("/tmp/some-test-root");
//! assert!(iox_benches::iceoryx2_files::prefix(root).starts_with("iox2_b"));
//! ```

use std::path::Path;

use iceoryx2::prelude::{Config, FileName, NodeBuilder, SemanticString};

/// The prefix of iceoryx2's files for the benchmarks run under `root`.
pub fn prefix(root: &Path) -> String {
    let hash = xxhash_rust::xxh3::xxh3_64(root.as_os_str().as_encoded_bytes());
    format!("iox2_b{:012x}_", hash & 0xffff_ffff_ffff)
}

/// iceoryx2's node builder: with [`prefix`] of `$IOX_ROOT` if it is set.
pub fn node_builder() -> NodeBuilder {
    let Some(root) = std::env::var_os("IOX_ROOT") else {
        return NodeBuilder::new();
    };
    let mut config = Config::default();
    config.global.prefix = FileName::new(prefix(Path::new(&root)).as_bytes()).expect("a valid file name");
    NodeBuilder::new().config(&config)
}

/// Removes iceoryx2's files of the benchmarks run under `root` from `/dev/shm` (after
/// those processes are gone).
pub fn remove_files(root: &Path) {
    let prefix = prefix(root);
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Removes iceoryx2's files of the benchmarks run under its root when dropped (a
/// test's guard, so a failing test cleans up too).
#[derive(Debug)]
pub struct RemovedOnDrop(pub std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        remove_files(&self.0);
    }
}
