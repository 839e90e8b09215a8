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

/// Issue 45, item 8: one root reached by two paths (a symlink, a volume bind-mounted
/// twice) in one process: the second path's open failed with "iox_node_<id>.lock
/// exists and is locked". Roots are keyed by the directory they are. The child opens
/// one service by both paths and a second by the other path; ports of the two
/// handles talk; the parent (a third process, by the first path) sees one node of the
/// child and, once it is gone, nothing left.
#[test]
fn one_root_by_two_paths_is_one_root() {
    const TEST: &str = "one_root_by_two_paths_is_one_root";
    let open = |root: &std::path::Path, name: &str| {
        Service::named(name)
            .unwrap()
            .root(root)
            .publish_subscribe::<u64>()
            .open_or_create()
    };
    if iox_testkit::role().as_deref() == Some("two-paths") {
        let (root, link): (std::path::PathBuf, std::path::PathBuf) =
            (iox_testkit::env("ROOT"), iox_testkit::env("LINK"));
        let by_root = open(&root, "paths/one").unwrap();
        let by_link = open(&link, "paths/one").expect("the same root by another path");
        let other = open(&link, "paths/two").unwrap();
        let p = by_link.publisher_builder().create().unwrap();
        let s = by_root.subscriber_builder().create().unwrap();
        p.loan_uninit().unwrap().write_payload(8).send().unwrap();
        assert_eq!(*s.receive().unwrap().unwrap(), 8);
        let nodes = std::fs::read_dir(&root)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("iox_node_")
            })
            .count();
        assert_eq!(nodes, 1, "one node file for one root");
        drop((p, s, by_root, by_link, other));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    iox_testkit::wait_ok(
        iox_testkit::spawn_self(
            TEST,
            "two-paths",
            &[
                ("ROOT", root.display().to_string()),
                ("LINK", link.display().to_string()),
            ],
        ),
        std::time::Duration::from_secs(60),
    );
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
