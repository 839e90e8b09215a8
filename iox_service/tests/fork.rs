//! A child made by `fork` (without `exec`) holds copies of its parent's ports, loans
//! and samples; none of them is its own. Its drops must not release the parent's
//! chunks, and its operations fail with `ForkedProcess` instead of acting for the
//! parent. And no process-global lock is ever copied held: a child forked while
//! another thread is inside any of them can take it (the node registry, the offers of
//! the descriptor hand-over, the WaitSet's signal registrations, every lock at all).

use std::time::Duration;

use iox_service::{LoanError, PortCreateError, ReceiveError, SendError, Service};
#[cfg(not(feature = "cuda"))]
use iox_testkit::root_env;
use iox_testkit::{Gate, fork_inside, role, spawn_self, wait_ok};

/// Runs in a re-executed, single-threaded test process (fork in a multi-threaded test
/// harness would copy only one of its threads).
fn parent_then_fork() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("fork/check")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let publisher = svc.publisher_builder().create().unwrap();
    let subscriber = svc.subscriber_builder().create().unwrap();
    publisher.loan_uninit().unwrap().write_payload(42).send().unwrap();
    let sample = subscriber.receive().unwrap().unwrap();
    let loan = publisher.loan_uninit().unwrap().write_payload(7);
    let free = svc.pool_info().free_chunks();

    let parent_node = iox_service::testing::process_node_id();
    // SAFETY: this process runs one test thread (the test harness runs one test, with
    // one test thread, in a re-executed child) and iox's descriptor responder, which
    // sleeps in `epoll_wait` holding no lock between requests and gets none here; so
    // the child may run arbitrary code.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // The child: every operation refuses, every drop leaves the parent's chunks.
        let checks = [
            matches!(publisher.loan_uninit(), Err(LoanError::ForkedProcess)),
            matches!(subscriber.receive(), Err(ReceiveError::ForkedProcess)),
            matches!(
                subscriber.receive_timeout(Duration::from_millis(1)),
                Err(ReceiveError::ForkedProcess)
            ),
            matches!(loan.send(), Err(SendError::ForkedProcess)),
            matches!(
                svc.subscriber_builder().create(),
                Err(PortCreateError::ForkedProcess { .. })
            ),
        ];
        // Opening the service itself works: a node id of its own (not its parent's),
        // the payload handed over by the parent's responder, an offer of its own.
        let own = Service::named("fork/check")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<u64>()
            .open();
        let reopened = own.as_ref().is_ok_and(|own| {
            own.subscriber_builder().create().is_ok()
                && iox_service::testing::process_node_id() != parent_node
        });
        drop(own);
        let ok = checks.iter().all(|&c| c) && reopened;
        if !ok {
            eprintln!(
                "forked child: checks (loan, receive, receive_timeout, send, create) = {checks:?}, reopened with its own node: {reopened}"
            );
        }
        drop(sample);
        drop((publisher, subscriber, svc));
        // SAFETY: leaves the child at once, without running the parent's exit handlers
        // or the test harness's output twice.
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is a valid out pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's operations must fail with ForkedProcess (status {status:#x})"
    );
    assert_eq!(
        svc.pool_info().free_chunks(),
        free,
        "the child's drops released none of the parent's chunks"
    );
    assert_eq!(*sample, 42);
    assert_eq!(loan.send().unwrap(), 1, "the parent's loan still sends");
    assert_eq!(*subscriber.receive().unwrap().unwrap(), 7);
}

#[test]
fn a_forked_child_neither_uses_nor_releases_its_parents_ports() {
    if role().as_deref() == Some("forker") {
        parent_then_fork();
        return;
    }
    let child = spawn_self(
        "a_forked_child_neither_uses_nor_releases_its_parents_ports",
        "forker",
        &[],
    );
    wait_ok(child, Duration::from_secs(60));
}

/// Runs in a re-executed test process: one thread stalls while it holds the node
/// registry (making its node for root `a`); the main thread forks meanwhile; the child
/// must be able to make its own node (under root `b`). A fork that copied the registry
/// held would leave the child's copy locked for good. Both threads do the registry's
/// work alone (no service): after its node, the other thread takes no lock a fork
/// could copy held.
fn fork_while_the_registry_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let (root_a, root_b) = roots(dir.path());
    let gate = Gate::new(dir.path(), "registry");
    iox_service::testing::stall_at(iox_service::testing::Stall::NodeRegistryHeld, gate.path());
    let holder = std::thread::spawn(move || iox_service::testing::node_for_root(&root_a).is_ok());
    let forked = fork_inside(
        &gate,
        || iox_service::testing::node_for_root(&root_b).is_ok(),
        CHILD_LIMIT,
    );
    assert!(holder.join().unwrap(), "the holder could not make its node");
    forked.expect("the forked child could not make its node");
}

/// How long a forked child may take.
const CHILD_LIMIT: Duration = Duration::from_secs(20);

/// Two roots under `dir`.
fn roots(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    (a, b)
}

fn memfd_service(root: &std::path::Path, name: &str) -> Result<iox_service::PubSubService<u64>, String> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open_or_create()
        .map_err(|e| e.to_string())
}

#[test]
fn a_child_forked_while_another_thread_makes_a_node_can_make_its_own() {
    if role().as_deref() == Some("registry-forker") {
        fork_while_the_registry_is_held();
        return;
    }
    let child = spawn_self(
        "a_child_forked_while_another_thread_makes_a_node_can_make_its_own",
        "registry-forker",
        &[],
    );
    wait_ok(child, Duration::from_secs(90));
}

/// Issue 45, item 2: a thread inside `offer()` (creating a memfd service: the registry
/// of offers held) while another thread forks left the child's first open blocked
/// forever. The child opens a memfd service of its own (an offer of its own).
#[test]
fn a_child_forked_while_another_thread_offers_a_service_can_open_one() {
    const TEST: &str = "a_child_forked_while_another_thread_offers_a_service_can_open_one";
    if role().as_deref() != Some("forker") {
        wait_ok(spawn_self(TEST, "forker", &[]), Duration::from_secs(90));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (root_a, root_b) = roots(dir.path());
    let gate = Gate::new(dir.path(), "offer");
    iox_service::testing::stall_at(iox_service::testing::Stall::HandoverOfferHeld, gate.path());
    let holder = std::thread::spawn(move || memfd_service(&root_a, "fork/offered").map(drop));
    let forked = fork_inside(
        &gate,
        || match memfd_service(&root_b, "fork/own") {
            Ok(s) => s.publisher_builder().create().is_ok(),
            Err(e) => {
                eprintln!("forked child: {e}");
                false
            }
        },
        CHILD_LIMIT,
    );
    holder.join().unwrap().expect("the holder's service");
    forked.unwrap();
}

/// Issue 45, item 3: the WaitSet's registry of signal registrations, held by a thread
/// creating a WaitSet while another forks: the child creates its own WaitSet.
#[test]
fn a_child_forked_while_another_thread_makes_a_waitset_can_make_one() {
    const TEST: &str = "a_child_forked_while_another_thread_makes_a_waitset_can_make_one";
    if role().as_deref() != Some("forker") {
        wait_ok(spawn_self(TEST, "forker", &[]), Duration::from_secs(90));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new(dir.path(), "signals");
    iox_service::testing::stall_at(iox_service::testing::Stall::WaitsetSignalsHeld, gate.path());
    let holder = std::thread::spawn(|| iox_service::WaitSet::new().is_ok());
    let forked = fork_inside(&gate, || iox_service::WaitSet::new().is_ok(), CHILD_LIMIT);
    assert!(holder.join().unwrap(), "the holder's WaitSet");
    forked.unwrap();
}

/// Issue 45, item 3, for every process-global lock: after using each (services, a
/// WaitSet, a pinned port, a stall point; with the `cuda` feature also a CUDA-pinned
/// port and a device-memory service with its device ports, against the driver
/// double), one thread holds each lock in turn, stopped, while the main thread forks;
/// the child must take that lock at once. Every lock the process used is tried, and
/// the test fails if one it should have used is missing.
#[test]
fn a_child_forked_while_any_process_global_lock_is_held_can_take_it() {
    const TEST: &str = "a_child_forked_while_any_process_global_lock_is_held_can_take_it";
    if role().as_deref() != Some("every-lock") {
        let dir = tempfile::tempdir().unwrap();
        #[cfg(feature = "cuda")]
        {
            let Some(driver) = iox_testkit::cuda_double::Driver::for_test(TEST, dir.path(), || {
                iox_cuda::device_uuid(0).map(drop)
            }) else {
                return;
            };
            wait_ok(
                driver.spawn(TEST, "every-lock", dir.path(), &[]),
                Duration::from_secs(120),
            );
        }
        #[cfg(not(feature = "cuda"))]
        wait_ok(
            spawn_self(TEST, "every-lock", &[root_env(dir.path())]),
            Duration::from_secs(120),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    iox_service::testing::stall_at(iox_service::testing::Stall::BlackboardPinned, dir.path());
    let memfd = memfd_service(&root, "fork/all").unwrap();
    let _waitset = iox_service::WaitSet::new().unwrap();
    let locked = Service::named("fork/locked")
        .unwrap()
        .root(&root)
        .publish_subscribe::<u64>()
        .memory_type(iox_service::MemoryType::Locked)
        .open_or_create()
        .unwrap();
    let _pinned = locked.publisher_builder().pin_memory(true).create().unwrap();
    use iox_mempool::fork::Rank;
    #[allow(unused_mut)]
    let mut expected = vec![
        Rank::Nodes,
        Rank::RetiredNodes,
        Rank::Responder,
        Rank::WaitSetSignals,
        Rank::PinRegistry,
        Rank::TestStall,
    ];
    #[cfg(feature = "cuda")]
    let _cuda = {
        let pinned = Service::named("fork/cuda-pinned")
            .unwrap()
            .root(&root)
            .publish_subscribe::<u64>()
            .memory_type(iox_service::MemoryType::CudaPinned)
            .open_or_create()
            .unwrap();
        let sub = pinned.subscriber_builder().pin_memory(true).create().unwrap();
        let device = || {
            Service::named("fork/device")
                .unwrap()
                .root(&root)
                .publish_subscribe::<[u8]>()
                .memory_type(iox_service::MemoryType::CudaDevice)
                .max_slice_len(4096)
                .open_or_create()
                .unwrap()
        };
        let (first, second) = (device(), device());
        let publisher = first.device_publisher_builder().create().unwrap();
        let subscriber = second.device_subscriber_builder().create().unwrap();
        expected.extend([
            Rank::CudaPinnerRegistration,
            Rank::CudaImport,
            Rank::CudaDeviceMemory,
            Rank::CudaEvents,
            Rank::CudaContexts,
            Rank::CudaDriver,
        ]);
        (pinned, sub, first, second, publisher, subscriber)
    };
    let used = iox_mempool::fork::ranks_in_use();
    for rank in &expected {
        assert!(used.contains(&(*rank as u8)), "{rank:?} was never used: {used:?}");
    }
    for rank in used {
        let gate = Gate::new(dir.path(), &format!("rank-{rank}"));
        let gate_dir = gate.path().to_path_buf();
        let holder = std::thread::spawn(move || {
            let held = iox_mempool::fork::hold_rank(rank);
            iox_testkit::wait_at(&gate_dir);
            held.is_some()
        });
        let forked = fork_inside(
            &gate,
            || iox_mempool::fork::hold_rank(rank).is_some(),
            CHILD_LIMIT,
        );
        assert!(holder.join().unwrap());
        forked.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
    drop(memfd);
}

/// Every process-global lock of iox's libraries is a `ForkLock` (held across every
/// fork by the handlers of `iox_mempool::fork`), so the test above reaches them all: a
/// `static` of a std lock type anywhere in their sources fails this, but for the
/// exceptions named here with their reason.
#[test]
fn no_process_global_lock_escapes_the_fork_handlers() {
    const EXCEPTIONS: [(&str, &str); 2] = [
        // Read once from two environment variables, no blocking call inside; tests only.
        ("iox_process/src/stall.rs", "FROM_ENV"),
        // A unit test's fake liveness table.
        ("iox_process/src/robust_mutex.rs", "DEAD"),
    ];
    const LOCKS: [&str; 7] = [
        "Mutex<",
        "RwLock<",
        "LazyLock<",
        "OnceLock<",
        "OnceCell<",
        ": Once",
        "Condvar",
    ];
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = Vec::new();
    for krate in [
        "iox_mempool",
        "iox_process",
        "iox_service",
        "iox_cuda",
        "iox_ffi",
        "iox_python",
        "iox_zenoh",
        "iox_ros2",
        "iox_ros2_gateway",
        "cli",
    ] {
        let mut dirs = vec![workspace.join(krate).join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let file = path.strip_prefix(workspace).unwrap().display().to_string();
                for (n, line) in text.lines().enumerate() {
                    let Some(decl) = line.split("static ").nth(1) else {
                        continue;
                    };
                    if line.trim_start().starts_with("//") || !LOCKS.iter().any(|l| decl.contains(l)) {
                        continue;
                    }
                    if decl.contains("ForkLock") {
                        continue;
                    }
                    let name = decl.split(':').next().unwrap().trim();
                    if !EXCEPTIONS.contains(&(file.as_str(), name)) {
                        found.push(format!("{file}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "process-global locks that are not ForkLocks:\n{}",
        found.join("\n")
    );
}
