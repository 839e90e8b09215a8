//! Which processes (nodes) are alive, as one recovery pass or cleanup sees them: each
//! node looked up once through its lock file ([`crate::node`]), and the files of the
//! dead ones (lock files, readiness sockets) removed when the pass ends, after what
//! they held was recovered.

use std::collections::HashMap;
use std::path::Path;

use crate::node;

/// Node liveness for one recovery pass (each node looked up once). The lock files of
/// nodes found dead are removed when the pass ends ([`Liveness::finish`], or drop),
/// after their ports and handles were recovered: while a dead node's file is there,
/// its death stays provable by the lock alone.
pub struct Liveness<'a> {
    root: &'a Path,
    me: u64,
    seen: HashMap<u64, bool>,
    pub files_removed: usize,
}

impl<'a> Liveness<'a> {
    pub fn new(root: &'a Path, me: u64) -> Self {
        Self {
            root,
            me,
            seen: HashMap::new(),
            files_removed: 0,
        }
    }

    pub fn me(&self) -> u64 {
        self.me
    }

    pub fn root(&self) -> &'a Path {
        self.root
    }

    /// Whether `node` is alive (this process's own node always is).
    pub fn alive(&mut self, node: u64) -> bool {
        if node == self.me {
            return true;
        }
        if let Some(&alive) = self.seen.get(&node) {
            return alive;
        }
        let alive = node::is_alive(self.root, node);
        self.seen.insert(node, alive);
        alive
    }

    /// Removes the readiness sockets and then the lock files of the nodes found dead
    /// so far; returns how many files went.
    pub fn finish(&mut self) -> usize {
        let dead: Vec<u64> = self.seen.iter().filter(|(_, a)| !**a).map(|(&n, _)| n).collect();
        if !dead.is_empty() {
            self.files_removed += remove_sockets_of(self.root, &dead);
        }
        for (&node, alive) in self.seen.iter_mut() {
            if !*alive && node::remove_if_dead(self.root, node) {
                self.files_removed += 1;
            }
            *alive = true; // done with it
        }
        self.files_removed
    }
}

/// Removes the readiness sockets (see [`crate::doorbell`]) of the `dead` nodes under
/// `root`, whatever service they belong to; how many went.
fn remove_sockets_of(root: &Path, dead: &[u64]) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| crate::shm::files::parse_socket_name(name).is_some_and(|n| dead.contains(&n)))
        .filter(|name| std::fs::remove_file(root.join(name)).is_ok())
        .count()
}

impl Drop for Liveness<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}
