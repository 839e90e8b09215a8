//! Sealed memfd payloads across real processes: the memory outlives its creator while
//! others use it and is gone when the last of them is SIGKILLed; seals stop another
//! process from truncating or growing it; a pool larger than a small tmpfs root works
//! with a memfd and fails cleanly as a file; wrong targets get specific errors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::{Backing, CreateError, PubSubBuilder, Service, ServiceName};
use iox_testkit::{Reaped, env, role, root_env, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(20);
const POOL_MIB: usize = 48;

/// These tests create 48 MiB pools; one of them measures the machine's Shmem, so
/// they take turns (the test harness would run them in parallel threads).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn builder(root: &Path, name: &str) -> PubSubBuilder<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .size_classes(&[(1 << 20, POOL_MIB)])
        .max_publishers(2)
        .max_subscribers(2)
}

fn shmem_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Shmem:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("Shmem in /proc/meminfo")
}

/// Processes holding the memfd of service `name` (by its /proc fd link).
fn holders(name: &str) -> Vec<u32> {
    let link = format!("/memfd:iox:{}", ServiceName::new(name).unwrap().stem());
    let mut pids = Vec::new();
    for proc_entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = proc_entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy().starts_with(&link)))
        {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn the_memfd_outlives_its_creator_and_dies_with_the_last_user() {
    let _turn = serial();
    const TEST: &str = "the_memfd_outlives_its_creator_and_dies_with_the_last_user";
    const NAME: &str = "memfd/life";
    if let Some(r) = role() {
        let root = PathBuf::from(env::<String>("IOX_ROOT"));
        match r.as_str() {
            // Creates the service, sends one sample to the user, exits normally.
            "creator" => {
                let svc = builder(&root, NAME).create().unwrap();
                let p = svc.publisher_builder().create().unwrap();
                assert!(wait_until(LIMIT, || svc.port_counts().1 == 1));
                let s = p.loan_slice_uninit(1 << 20).unwrap().write_from_fn(|i| i as u8);
                s.send().unwrap();
            }
            // Opens it through the creator, receives, then talks to itself forever.
            "user" => {
                let svc = builder(&root, NAME).open().unwrap();
                let s = svc.subscriber_builder().create().unwrap();
                let got = s.receive_timeout(LIMIT).unwrap().unwrap();
                assert_eq!(got[12345], (12345 % 256) as u8);
                drop(got);
                let p = svc.publisher_builder().create().unwrap();
                loop {
                    p.loan_slice_uninit(4096)
                        .unwrap()
                        .write_from_fn(|_| 7)
                        .send()
                        .unwrap();
                    assert!(s.receive_timeout(LIMIT).unwrap().is_some());
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = shmem_kib();
    let creator = spawn_self(TEST, "creator", &[root_env(root)]);
    let creator_pid = creator.id();
    assert!(
        wait_until(LIMIT, || holders(NAME).contains(&creator_pid)),
        "the creator holds the memfd"
    );
    // Ready once its publisher is up.
    assert!(wait_until(LIMIT, || {
        iox_service::inspect::inspect_in(root, NAME)
            .is_ok_and(|i| i.ports.iter().any(|p| p.kind == "publisher"))
    }));
    let user = Reaped::new(spawn_self(TEST, "user", &[root_env(root)]));
    wait_ok(creator, LIMIT);
    // The creator is gone; the user keeps communicating on the same memory.
    let sent = || {
        iox_service::inspect::inspect_in(root, NAME)
            .unwrap()
            .ports
            .iter()
            .find(|p| p.kind == "publisher")
            .map_or(0, |p| p.sent)
    };
    let first = {
        assert!(wait_until(LIMIT, || sent() > 0));
        sent()
    };
    assert!(
        wait_until(LIMIT, || sent() > first + 10),
        "the user stopped after its creator left"
    );
    assert_eq!(holders(NAME), vec![user.id()]);
    let during = shmem_kib();
    assert!(
        during >= before + (POOL_MIB as u64 * 1024) * 9 / 10,
        "the pool's pages are shared memory: {before} -> {during} KiB"
    );
    let stem = ServiceName::new(NAME).unwrap().stem();
    assert!(
        !root.join(format!("{stem}.pool")).exists(),
        "no payload file under the root"
    );

    user.kill(); // SIGKILL the last participant
    assert!(holders(NAME).is_empty(), "no process holds the memfd any more");
    let mut after = during;
    assert!(
        wait_until(LIMIT, || {
            after = shmem_kib();
            after + (POOL_MIB as u64 * 1024) * 8 / 10 < during
        }),
        "the kernel freed the pool: Shmem {before} -> {during} -> {after} KiB"
    );
    println!("Shmem: {before} KiB before, {during} KiB with the pool, {after} KiB after the last SIGKILL");
    // The service is dead: the next open_or_create removes it and creates it afresh.
    let svc = builder(root, NAME).open_or_create().unwrap();
    assert!(svc.is_creator());
}

#[test]
fn seals_stop_another_process_from_truncating_or_growing_the_pool() {
    let _turn = serial();
    const TEST: &str = "seals_stop_another_process_from_truncating_or_growing_the_pool";
    const NAME: &str = "memfd/sealed";
    if role().is_some() {
        // Finds the parent's memfd through /proc and tries to resize it.
        let parent: u32 = env("PARENT");
        let link = format!("/memfd:iox:{}", ServiceName::new(NAME).unwrap().stem());
        let fd = std::fs::read_dir(format!("/proc/{parent}/fd"))
            .unwrap()
            .flatten()
            .find(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy().starts_with(&link)))
            .expect("the parent holds the memfd");
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .open(fd.path())
            .unwrap();
        let len = file.metadata().unwrap().len();
        let shrink = file.set_len(0).unwrap_err();
        let grow = file.set_len(len * 2).unwrap_err();
        assert_eq!(shrink.kind(), std::io::ErrorKind::PermissionDenied, "{shrink}");
        assert_eq!(grow.kind(), std::io::ErrorKind::PermissionDenied, "{grow}");
        assert_eq!(file.metadata().unwrap().len(), len);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = builder(dir.path(), NAME).create().unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_slice_uninit(1 << 20)
        .unwrap()
        .write_from_fn(|i| i as u8)
        .send()
        .unwrap();
    let held = s.receive().unwrap().unwrap();
    wait_ok(
        spawn_self(
            TEST,
            "resizer",
            &[root_env(dir.path()), ("PARENT", std::process::id().to_string())],
        ),
        LIMIT,
    );
    // The reader still reads its sample (no SIGBUS), and the service keeps working.
    assert_eq!(held[(1 << 20) - 1], 255);
    drop(held);
    p.loan_slice_uninit(10)
        .unwrap()
        .write_from_fn(|_| 1)
        .send()
        .unwrap();
    assert_eq!(s.receive().unwrap().unwrap().len(), 10);
}

/// Unmounts on drop.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

const TMPFS_TEST: &str = "a_pool_larger_than_a_small_tmpfs_root_works_as_memfd_and_fails_cleanly_as_file";

#[test]
fn a_pool_larger_than_a_small_tmpfs_root_works_as_memfd_and_fails_cleanly_as_file() {
    let _turn = serial();
    if !rustix::process::geteuid().is_root() {
        iox_testkit::skip(
            TMPFS_TEST,
            iox_testkit::REQUIRE_ROOT,
            "mounting a 16 MiB tmpfs needs root",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(dir.path())
        .output();
    match mounted {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            iox_testkit::skip(
                TMPFS_TEST,
                iox_testkit::REQUIRE_ROOT,
                format!(
                    "cannot mount a tmpfs here: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            );
            return;
        }
        Err(e) => {
            iox_testkit::skip(
                TMPFS_TEST,
                iox_testkit::REQUIRE_ROOT,
                format!("cannot run mount: {e}"),
            );
            return;
        }
    }
    let _mount = Mount(dir.path().to_path_buf());
    let root = dir.path();
    // 48 MiB of payload under a 16 MiB root.
    let svc = builder(root, "memfd/big")
        .backing(Backing::Memfd)
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    for round in 0..POOL_MIB {
        p.loan_slice_uninit(1 << 20)
            .unwrap()
            .write_from_fn(|i| (i + round) as u8)
            .send()
            .unwrap();
        let got = s.receive().unwrap().unwrap();
        assert_eq!(got[1000], (1000 + round) as u8);
    }
    let e = builder(root, "file/big")
        .backing(Backing::File)
        .create()
        .unwrap_err();
    assert!(
        matches!(
            &e,
            CreateError::Root {
                source: iox_service::RootError::NoSpace { .. },
                ..
            }
        ),
        "{e}"
    );
    println!("file backing on a 16 MiB tmpfs: {e}");
    assert!(
        !Service::exists_in(root, "file/big").unwrap(),
        "nothing left of the failed create"
    );
    drop((p, s, svc));
}
