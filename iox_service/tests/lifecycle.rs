//! The life of a service's files in one process: what is laid out under the root and
//! removed with the last port, explicit removal against old users, removals racing
//! opens, and node liveness by the locked node file. (Across processes: `removed.rs`,
//! `crash.rs`, `nodes.rs`.)

use std::time::Duration;

use iox_service::Service;

fn service(dir: &tempfile::TempDir, name: &str) -> Service {
    Service::named(name).unwrap().root(dir.path())
}

fn text_of(dir: &std::path::Path, stem: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{stem}.service"))).unwrap()
}

#[test]
fn files_are_laid_out_as_designed_and_removed_with_the_last_port() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "camera/front")
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap();
    assert!(svc.is_creator());
    let stem = iox_service::ServiceName::new("camera/front").unwrap().stem();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // The payload is a sealed memfd, not a file; this process offers it to newcomers
    // on its hand-over socket.
    assert_eq!(names.len(), 5, "{names:?}");
    for ext in ["chunks", "dynamic", "service"] {
        assert!(names.contains(&format!("{stem}.{ext}")), "{names:?}");
    }
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(&format!("{stem}.h.")) && n.ends_with(".sock")),
        "{names:?}"
    );
    assert!(text_of(dir.path(), &stem).contains("backing: Memfd("));
    // Group access: a memfd too (handed over after a credentials check).
    let shared = service(&dir, "camera/shared")
        .publish_subscribe::<u64>()
        .permissions(0o660)
        .create()
        .unwrap();
    let shared_stem = iox_service::ServiceName::new("camera/shared").unwrap().stem();
    assert!(!dir.path().join(format!("{shared_stem}.pool")).exists());
    assert!(text_of(dir.path(), &shared_stem).contains("backing: Memfd("));
    drop(shared);
    // A file only when asked for.
    let filed = service(&dir, "camera/filed")
        .publish_subscribe::<u64>()
        .permissions(0o660)
        .backing(iox_service::Backing::File)
        .create()
        .unwrap();
    let filed_stem = iox_service::ServiceName::new("camera/filed").unwrap().stem();
    assert!(dir.path().join(format!("{filed_stem}.pool")).exists());
    assert!(text_of(dir.path(), &filed_stem).contains("backing: File"));
    drop(filed);
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("iox_node_") && n.ends_with(".lock"))
    );
    let text = std::fs::read_to_string(dir.path().join(format!("{stem}.service"))).unwrap();
    assert!(text.contains("name: \"camera/front\""), "{text}");
    assert!(text.contains("memory_type: Cpu"), "{text}");
    let publisher = svc.publisher_builder().create().unwrap();
    drop(svc);
    assert!(
        Service::exists_in(dir.path(), "camera/front").unwrap(),
        "the port keeps it alive"
    );
    drop(publisher);
    assert!(!Service::exists_in(dir.path(), "camera/front").unwrap());
    // Our node file too, unless this process still uses another root (parallel
    // tests do): then it stays, locked, until the last one goes.
    assert_eq!(
        iox_service::testing::files_but_own_node(dir.path()),
        Vec::<String>::new(),
        "no file left"
    );
}

#[test]
fn explicit_remove_does_not_let_old_users_delete_the_next_incarnation() {
    let dir = tempfile::tempdir().unwrap();
    let old = service(&dir, "again")
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap();
    assert!(Service::remove_in(dir.path(), "again").unwrap());
    let new = service(&dir, "again")
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap();
    assert!(new.is_creator(), "the name is free after remove");
    drop(old);
    assert!(
        Service::exists_in(dir.path(), "again").unwrap(),
        "the old user removed the new service"
    );
    let p = new.publisher_builder().create().unwrap();
    let s = service(&dir, "again")
        .publish_subscribe::<u64>()
        .open()
        .unwrap()
        .subscriber_builder()
        .create()
        .unwrap();
    p.loan_uninit().unwrap().write_payload(3).send().unwrap();
    assert_eq!(*s.receive().unwrap().unwrap(), 3);
}

#[test]
fn removes_racing_open_or_create_never_leave_debris() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let root = root.clone();
            std::thread::spawn(move || {
                for i in 0..150 {
                    if (i + t) % 3 == 0 {
                        Service::remove_in(&root, "race/remove").unwrap();
                    } else {
                        let svc = Service::named("race/remove")
                            .unwrap()
                            .root(&root)
                            .publish_subscribe::<u32>()
                            .open_or_create()
                            .unwrap();
                        // Another thread may have removed it since we opened it, and
                        // up to four threads share its two publisher slots.
                        match svc.publisher_builder().create() {
                            Ok(p) => drop(p),
                            Err(
                                iox_service::PortCreateError::ServiceRemoved { .. }
                                | iox_service::PortCreateError::TooManyPorts { .. },
                            ) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Whatever interleaving happened, the name works and leaves nothing behind.
    let svc = Service::named("race/remove")
        .unwrap()
        .root(&root)
        .publish_subscribe::<u32>()
        .timeout(Duration::from_secs(2))
        .open_or_create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(5).send().unwrap();
    assert_eq!(*s.receive().unwrap().unwrap(), 5);
    drop((p, s, svc));
    let left = iox_service::testing::files_but_own_node(&root);
    assert!(left.is_empty(), "debris: {left:?}");
}

/// Liveness is the node file's lock alone: no pid is read from a node id (pids repeat
/// across PID namespaces). The file says the pid and PID namespace, for people; an
/// id no file names is dead, and so is a node whose file was deleted by hand (which
/// is why iox only deletes node files it proved dead).
#[test]
fn a_node_is_alive_exactly_while_its_locked_file_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "liveness")
        .publish_subscribe::<u8>()
        .create()
        .unwrap();
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|f| f.starts_with("iox_node_"))
        .unwrap();
    let id = iox_service::testing::parse_node_file_name(&file).unwrap();
    assert!(iox_service::testing::is_alive(dir.path(), id));
    let text = std::fs::read_to_string(dir.path().join(&file)).unwrap();
    let ns = std::fs::metadata("/proc/self/ns/pid")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .unwrap();
    assert_eq!(text.trim(), format!("pid {} pidns {ns}", std::process::id()));
    assert!(
        !iox_service::testing::is_alive(dir.path(), id ^ 1),
        "an id no file names"
    );
    std::fs::remove_file(dir.path().join(&file)).unwrap();
    assert!(
        !iox_service::testing::is_alive(dir.path(), id),
        "judged by the file alone"
    );
    drop(svc);
}
