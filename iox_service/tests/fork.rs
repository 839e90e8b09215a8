//! A child made by `fork` (without `exec`) holds copies of its parent's ports, loans
//! and samples; none of them is its own. Its drops must not release the parent's
//! chunks, and its operations fail with `ForkedProcess` instead of acting for the
//! parent.

use std::time::Duration;

use iox_service::{LoanError, PortCreateError, ReceiveError, SendError, Service};
use iox_testkit::{role, spawn_self, wait_ok};

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
