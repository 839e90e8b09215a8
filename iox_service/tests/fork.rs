//! A child made by `fork` (without `exec`) holds copies of its parent's ports, loans
//! and samples; none of them is its own. Its drops must not release the parent's
//! chunks, and its operations fail with `ForkedProcess` instead of acting for the
//! parent.

use std::time::Duration;

use iox_service::{LoanError, PortCreateError, ReceiveError, SendError, Service};
use iox_testkit::{Gate, role, spawn_self, wait_ok, wait_until};

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
/// held would leave the child's copy locked for good. The gate is opened once the fork
/// returned, or after 2 s if it waits for the registry (as it must). Both threads do
/// the registry's work alone (no service): after its node, the other thread takes no
/// lock a fork could copy held (a whole `open` would, e.g. while it starts the
/// descriptor responder, and then the child's `open` could wait on that instead).
fn fork_while_the_registry_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let (root_a, root_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&root_a).unwrap();
    std::fs::create_dir_all(&root_b).unwrap();
    let gate = Gate::new(dir.path(), "registry");
    iox_service::testing::stall_at("node-registry-held", gate.path());
    let holder = std::thread::spawn(move || iox_service::testing::node_for_root(&root_a).is_ok());
    assert!(
        gate.wait_reached(Duration::from_secs(30)),
        "the holder never reached the stall point"
    );
    let forked = dir.path().join("forked");
    let opener = {
        let (forked, gate_dir) = (forked.clone(), gate.path().to_path_buf());
        std::thread::spawn(move || {
            wait_until(Duration::from_secs(2), || forked.exists());
            std::fs::write(gate_dir.join("open"), b"").unwrap();
        })
    };
    // SAFETY: the other threads of this process are the stalled holder (the node
    // registry's work only) and the opener (which polls a file and writes one); the
    // child takes only the registry's locks, which is what this test checks.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = iox_service::testing::node_for_root(&root_b).is_ok();
        // SAFETY: leaves the child at once (no exit handlers, no harness output).
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    std::fs::write(&forked, b"").unwrap();
    let mut status = 0;
    let exited = wait_until(Duration::from_secs(20), || {
        // SAFETY: polls the child just forked; `status` is a valid out pointer.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
    });
    if !exited {
        // SAFETY: kills and reaps the child we forked.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
    }
    opener.join().unwrap();
    assert!(holder.join().unwrap(), "the holder could not make its node");
    assert!(
        exited && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child could not make its node (it hung: {}; status {status:#x})",
        !exited
    );
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
