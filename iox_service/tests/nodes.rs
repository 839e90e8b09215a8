//! The node files of one process under concurrency: threads making and dropping this
//! process's nodes under two roots at once (each a service handle opened and dropped
//! over and over, so the process's last node goes and comes back many times, and two
//! nodes are often dropped at the same moment). Invariant: while a handle is open,
//! the liveness probe every other process uses (`iox show`, recovery) finds its node
//! alive: never a live node without a locked file, which others would recover as dead.

use std::sync::{Arc, Barrier};

use iox_service::Service;

const THREADS: usize = 4;
const ROUNDS: usize = 300;

#[test]
fn nodes_made_and_dropped_at_once_under_two_roots_stay_alive_while_used() {
    let dir = tempfile::tempdir().unwrap();
    let roots: Vec<_> = ["a", "b"].iter().map(|r| dir.path().join(r)).collect();
    for r in &roots {
        std::fs::create_dir_all(r).unwrap();
    }
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (roots, start) = (roots.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for i in 0..ROUNDS {
                    // Two threads per root, each on a service of its own.
                    let root = &roots[(t + i) % 2];
                    let name = format!("nodes/t{t}");
                    let svc = Service::named(&name)
                        .unwrap()
                        .root(root)
                        .event()
                        .open_or_create()
                        .unwrap_or_else(|e| panic!("thread {t}, round {i}: open: {e}"));
                    let info = iox_service::inspect::inspect_in(root, &name).unwrap();
                    let dead: Vec<_> = info.users.iter().filter(|u| !u.alive).map(|u| u.node).collect();
                    assert!(
                        dead.is_empty(),
                        "thread {t}, round {i}: a live handle's node judged dead: {dead:x?}"
                    );
                    drop(svc);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
