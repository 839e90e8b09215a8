//! Two processes in two PID namespaces sharing one root, as two containers sharing a
//! volume at `IOX_ROOT` are: each is pid 1 in its own namespace (`unshare --pid
//! --fork --mount-proc`). Publish-subscribe (typed and 1 MiB slices), events and
//! request-response work across them in both start orders; one side SIGKILLed is
//! recovered from the other; nothing is left under the root after both exit.
//! Needs root (CI runs as root); otherwise it says why it skips.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::{EventId, Service};
use iox_testkit::{Reaped, env, role, spawn_self_in_pid_namespace, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(60);
const SLICE: usize = 1 << 20;

fn can_unshare(test: &str) -> bool {
    if !rustix::process::geteuid().is_root() {
        iox_testkit::skip(
            test,
            iox_testkit::REQUIRE_ROOT,
            "needs root to make PID namespaces (unshare --pid)",
        );
        return false;
    }
    true
}

struct Services {
    typed: iox_service::PubSubService<u64>,
    slices: iox_service::PubSubService<[u8]>,
    event: iox_service::EventService,
    rr: iox_service::RequestResponseService<u64, u64>,
}

fn services(root: &Path) -> Services {
    let named = |n: &str| Service::named(n).unwrap().root(root);
    Services {
        typed: named("ns/typed")
            .publish_subscribe::<u64>()
            .open_or_create()
            .unwrap(),
        slices: named("ns/slices")
            .publish_subscribe::<[u8]>()
            .max_publishers(1)
            .max_subscribers(1)
            .subscriber_buffer(1)
            .max_loans(1)
            .max_held(1)
            .size_classes(&[(SLICE, 4)])
            .open_or_create()
            .unwrap(),
        event: named("ns/event").event().open_or_create().unwrap(),
        rr: named("ns/rr")
            .request_response::<u64, u64>()
            .open_or_create()
            .unwrap(),
    }
}

/// The side that sends: publishes, notifies, serves one request, then waits for the
/// other side to leave.
fn sender(root: &Path) {
    assert_eq!(std::process::id(), 1, "not pid 1 of a new PID namespace");
    let s = services(root);
    let typed = s.typed.publisher_builder().create().unwrap();
    let slices = s.slices.publisher_builder().create().unwrap();
    let notifier = s.event.notifier_builder().create().unwrap();
    let server = s.rr.server_builder().create().unwrap();
    assert_eq!(typed.wait_for_subscribers(1, LIMIT).unwrap(), 1);
    assert_eq!(slices.wait_for_subscribers(1, LIMIT).unwrap(), 1);
    for i in 1..=3u64 {
        typed.loan_uninit().unwrap().write_payload(i).send().unwrap();
    }
    slices
        .loan_slice_uninit(SLICE)
        .unwrap()
        .write_from_fn(|i| (i % 251) as u8)
        .send()
        .unwrap();
    assert!(wait_until(LIMIT, || s.event.port_counts().1 == 1), "no listener");
    notifier.notify_with_custom_event_id(EventId::new(7)).unwrap();
    let active = server.receive_timeout(LIMIT).unwrap().expect("a request");
    let x = *active;
    active.loan_uninit().unwrap().write_payload(x + 1).send().unwrap();
    drop(active);
    assert!(
        wait_until(LIMIT, || s.typed.port_counts().1 == 0),
        "the receiving side never left"
    );
}

/// The side that receives: everything the sender sends, and a response.
fn receiver(root: &Path) {
    assert_eq!(std::process::id(), 1, "not pid 1 of a new PID namespace");
    let s = services(root);
    let typed = s.typed.subscriber_builder().create().unwrap();
    let slices = s.slices.subscriber_builder().create().unwrap();
    let listener = s.event.listener_builder().create().unwrap();
    let client = s.rr.client_builder().create().unwrap();
    let got: Vec<u64> = (0..3)
        .map(|_| *typed.receive_timeout(LIMIT).unwrap().expect("a typed sample"))
        .collect();
    assert_eq!(got, [1, 2, 3]);
    let slice = slices.receive_timeout(LIMIT).unwrap().expect("a 1 MiB sample");
    assert_eq!(slice.len(), SLICE);
    assert!(slice.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    drop(slice);
    assert_eq!(
        listener.timed_wait_one(LIMIT).unwrap().map(|id| id.as_value()),
        Some(7)
    );
    assert!(wait_until(LIMIT, || s.rr.port_counts().1 == 1), "no server");
    let pending = client.loan_uninit().unwrap().write_payload(41).send().unwrap();
    let r = pending.receive_timeout(LIMIT).unwrap().expect("a response");
    assert_eq!(*r, 42);
}

#[test]
fn every_pattern_works_between_two_pid_namespaces_in_both_orders() {
    const TEST: &str = "every_pattern_works_between_two_pid_namespaces_in_both_orders";
    match role().as_deref() {
        Some("sender") => return sender(&env::<PathBuf>("ROOT")),
        Some("receiver") => return receiver(&env::<PathBuf>("ROOT")),
        _ => {}
    }
    if !can_unshare(TEST) {
        return;
    }
    for sender_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let envs = [("ROOT", root.display().to_string())];
        let (first, second) = if sender_first {
            ("sender", "receiver")
        } else {
            ("receiver", "sender")
        };
        let a = spawn_self_in_pid_namespace(TEST, first, &envs);
        // The first one created its services before the second starts.
        assert!(
            wait_until(LIMIT, || Service::exists_in(&root, "ns/rr").unwrap()),
            "{first} never created its services"
        );
        let b = spawn_self_in_pid_namespace(TEST, second, &envs);
        wait_ok(b, LIMIT);
        wait_ok(a, LIMIT);
        let left: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            left.is_empty(),
            "sender first {sender_first}: left under the root: {left:?}"
        );
    }
}

/// The publisher's namespace SIGKILLed while it holds a loan: the subscriber's side
/// (another namespace) recovers its port and chunks, and the service works on.
#[test]
fn a_side_killed_in_its_namespace_is_recovered_from_the_other() {
    const TEST: &str = "a_side_killed_in_its_namespace_is_recovered_from_the_other";
    if role().as_deref() == Some("loaner") {
        let root: PathBuf = env("ROOT");
        let svc = Service::named("ns/killed")
            .unwrap()
            .root(&root)
            .publish_subscribe::<u64>()
            .max_publishers(1)
            .open_or_create()
            .unwrap();
        let p = svc.publisher_builder().create().unwrap();
        let _held = p.loan_uninit().unwrap();
        std::fs::write(root.join("../loaned"), b"").unwrap();
        std::thread::sleep(LIMIT * 2); // killed before this ends
        return;
    }
    if !can_unshare(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let child = Reaped::new(spawn_self_in_pid_namespace(
        TEST,
        "loaner",
        &[("ROOT", root.display().to_string())],
    ));
    assert!(
        wait_until(LIMIT, || dir.path().join("loaned").exists()),
        "no loan"
    );
    let svc = Service::named("ns/killed")
        .unwrap()
        .root(&root)
        .publish_subscribe::<u64>()
        .max_publishers(1)
        .open()
        .expect("opened across namespaces");
    // Alive in its namespace: its slot is taken, whatever its pid means here.
    assert!(
        svc.publisher_builder().create().is_err(),
        "took a live process's slot"
    );
    let info = iox_service::inspect::inspect_in(&root, "ns/killed").unwrap();
    assert!(
        info.users.iter().any(|u| u.other_namespace && u.pid == 1),
        "{:?}",
        info.users
    );
    // `unshare` dies at once; the namespace's process is killed as it goes (its lock
    // drops a moment later): look until a cleanup finds it dead.
    child.kill();
    let mut report = None;
    assert!(
        wait_until(LIMIT, || {
            let r = Service::cleanup_dead_in(&root, "ns/killed").unwrap();
            let found = r.ports > 0;
            report = Some(r);
            found
        }),
        "never found dead: {report:?}"
    );
    let report = report.unwrap();
    assert_eq!(report.ports, 1, "{report:?}");
    assert!(report.chunks_freed >= 1, "{report:?}");
    let p = svc.publisher_builder().create().expect("the dead one's slot");
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(5).send().unwrap();
    assert_eq!(*s.receive().unwrap().unwrap(), 5);
    drop((p, s, svc));
    let left = iox_service::testing::files_but_own_node(&root);
    assert!(left.is_empty(), "left under the root: {left:?}");
}
