//! Readiness descriptors of subscribers across real processes: readable exactly when a
//! sample is there (after the receiver found nothing), armed at once for samples queued
//! before the descriptor was taken, a SIGKILLed armed receiver stalls no publisher and
//! leaves no socket behind, long roots work, and waiting for ports sleeps until a port
//! of another process appears.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iox_service::{PubSubService, Service};
use iox_testkit::{Reaped, env, readable, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(60);

fn open(root: &Path, name: &str) -> PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap()
}

fn sockets(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        // Readiness sockets only (each holder's descriptor hand-over socket, `.h.`, is
        // another matter).
        .filter(|n| n.ends_with(".sock") && !n.contains(".h."))
        .collect()
}

#[test]
fn descriptor_becomes_readable_when_a_sample_arrives_from_another_process() {
    const TEST: &str = "descriptor_becomes_readable_when_a_sample_arrives_from_another_process";
    const N: u64 = 200;
    if role().as_deref() == Some("publisher") {
        let root: PathBuf = env("ROOT");
        let data = open(&root, "ready/data");
        let acks = open(&root, "ready/acks");
        let p = data.publisher_builder().create().unwrap();
        let ack = acks.subscriber_builder().create().unwrap();
        assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        for i in 0..N {
            p.loan_uninit().unwrap().write_payload(i).send().unwrap();
            // One at a time: the receiver must sleep on its descriptor before each.
            let got = ack.receive_timeout(LIMIT).unwrap().expect("an ack in time");
            assert_eq!(*got, i);
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let data = open(root, "ready/data");
    let acks = open(root, "ready/acks");
    let s = data.subscriber_builder().create().unwrap();
    let ack = acks.publisher_builder().create().unwrap();
    // Nothing sent yet: taking the descriptor arms it, and it is not readable.
    assert!(!readable(&s, Duration::ZERO));
    let child = spawn_self(TEST, "publisher", &[("ROOT", root.display().to_string())]);
    assert_eq!(ack.wait_for_subscribers(1, LIMIT).unwrap(), 1);
    let mut next = 0;
    while next < N {
        assert!(readable(&s, LIMIT), "no readiness for sample {next}");
        while let Some(sample) = s.receive().unwrap() {
            assert_eq!(*sample, next, "in order, each once");
            next += 1;
            ack.loan_uninit().unwrap().write_payload(*sample).send().unwrap();
        }
    }
    wait_ok(child, LIMIT);
    // Drained, and the publisher is gone: no token left behind.
    assert_eq!(s.receive().unwrap().map(|s| *s), None);
    assert!(!readable(&s, Duration::ZERO), "readable with nothing to receive");
}

#[test]
fn samples_queued_before_the_descriptor_is_taken_make_it_readable_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path(), "ready/queued");
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(7).send().unwrap();
    assert!(readable(&s, Duration::ZERO));
    assert_eq!(s.receive().unwrap().map(|s| *s), Some(7));
    assert_eq!(s.receive().unwrap().map(|s| *s), None);
    assert!(!readable(&s, Duration::ZERO));
    // Sent while armed: readable again, once.
    p.loan_uninit().unwrap().write_payload(8).send().unwrap();
    assert!(readable(&s, Duration::ZERO));
    assert_eq!(s.receive().unwrap().map(|s| *s), Some(8));
    assert_eq!(s.receive().unwrap().map(|s| *s), None);
    assert!(!readable(&s, Duration::ZERO));
}

#[test]
fn a_killed_armed_subscriber_stalls_no_publisher_and_leaves_no_socket() {
    const TEST: &str = "a_killed_armed_subscriber_stalls_no_publisher_and_leaves_no_socket";
    if role().as_deref() == Some("subscriber") {
        let root: PathBuf = env("ROOT");
        let svc = open(&root, "ready/killed");
        let s = svc.subscriber_builder().create().unwrap();
        assert_eq!(s.receive().unwrap().map(|s| *s), None);
        let _ = readable(&s, Duration::ZERO); // arms
        std::fs::write(root.join("armed"), b"").unwrap();
        loop {
            // Sleep on the descriptor (never receive: the queue fills) until killed.
            readable(&s, LIMIT);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = open(root, "ready/killed");
    let p = svc.publisher_builder().create().unwrap();
    let child = Reaped::new(spawn_self(
        TEST,
        "subscriber",
        &[("ROOT", root.display().to_string())],
    ));
    assert!(wait_until(LIMIT, || root.join("armed").exists()));
    assert_eq!(sockets(root).len(), 1, "the subscriber's socket");
    p.loan_uninit().unwrap().write_payload(1).send().unwrap();
    child.kill();
    // Sends to the dead subscriber (its queue full, its socket unread) never block.
    let start = Instant::now();
    for i in 0..1000 {
        let _ = p.loan_uninit().unwrap().write_payload(i).send();
    }
    assert!(start.elapsed() < LIMIT);
    let report = Service::cleanup_dead_in(root, "ready/killed").unwrap();
    assert_eq!(report.ports, 1, "{report:?}");
    assert_eq!(svc.port_counts(), (1, 0));
    assert_eq!(
        sockets(root),
        Vec::<String>::new(),
        "the dead subscriber's socket went"
    );
    drop((p, svc));
    let left: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        left.iter().all(|n| n == "armed" || n.starts_with("iox_node_")),
        "nothing of the service left: {left:?}"
    );
}

#[test]
fn a_root_too_long_for_a_socket_address_works() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r".repeat(120));
    std::fs::create_dir(&root).unwrap();
    let svc = open(&root, "ready/long-root");
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    assert!(!readable(&s, Duration::ZERO));
    p.loan_uninit().unwrap().write_payload(5).send().unwrap();
    assert!(readable(&s, LIMIT));
    assert_eq!(s.receive().unwrap().map(|s| *s), Some(5));
    assert_eq!(sockets(&root).len(), 1);
    drop(s);
    assert_eq!(sockets(&root), Vec::<String>::new(), "removed with its port");
}

#[test]
fn waiting_for_ports_sleeps_until_another_process_connects() {
    const TEST: &str = "waiting_for_ports_sleeps_until_another_process_connects";
    if role().as_deref() == Some("subscriber") {
        let root: PathBuf = env("ROOT");
        let svc = open(&root, "ready/ports");
        let s = svc.subscriber_builder().create().unwrap();
        assert_eq!(s.wait_for_publishers(1, LIMIT).unwrap(), 1);
        assert_eq!(*s.receive_timeout(LIMIT).unwrap().expect("a sample"), 9);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = open(root, "ready/ports");
    let p = svc.publisher_builder().create().unwrap();
    // Nobody there: the bounded wait returns what it found when it ends.
    let start = Instant::now();
    assert_eq!(p.wait_for_subscribers(1, Duration::from_millis(30)).unwrap(), 0);
    assert!(start.elapsed() >= Duration::from_millis(30));
    let child = spawn_self(TEST, "subscriber", &[("ROOT", root.display().to_string())]);
    assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
    p.loan_uninit().unwrap().write_payload(9).send().unwrap();
    wait_ok(child, LIMIT);
}

/// The state letter of process `pid` (`R`, `S`, ...) from `/proc/<pid>/stat`.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn a_sender_killed_before_it_rings_leaves_the_receiver_armed_for_the_next() {
    const TEST: &str = "a_sender_killed_before_it_rings_leaves_the_receiver_armed_for_the_next";
    if role().as_deref() == Some("publisher") {
        let root: PathBuf = env("ROOT");
        let svc = open(&root, "ready/stalled");
        let p = svc.publisher_builder().create().unwrap();
        // Stalls in the wake, after its push, before it rings (IOX_TEST_STALL).
        let _ = p.loan_uninit().unwrap().write_payload(1).send();
        unreachable!("the stall point parks this thread");
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = open(root, "ready/stalled");
    let s = svc.subscriber_builder().create().unwrap();
    let p = svc.publisher_builder().create().unwrap();
    assert!(!readable(&s, Duration::ZERO)); // armed
    let child = Reaped::new(spawn_self(
        TEST,
        "publisher",
        &[
            ("ROOT", root.display().to_string()),
            ("IOX_TEST_STALL", "wake-before-ring".into()),
        ],
    ));
    let pid = child.id();
    // Its sample is queued and the child sleeps: parked at the stall point.
    assert!(wait_until(LIMIT, || s.pending() == 1 && process_state(pid) == Some('S')));
    assert!(!readable(&s, Duration::ZERO), "it never rang");
    child.kill();
    // The next sender finds the receiver still armed and rings.
    p.loan_uninit().unwrap().write_payload(2).send().unwrap();
    assert!(readable(&s, LIMIT), "the arming was used up by the dead sender");
    let mut got: Vec<u64> = std::iter::from_fn(|| s.receive().unwrap().map(|s| *s)).collect();
    got.sort_unstable(); // two publishers: read round-robin
    assert_eq!(got, vec![1, 2]);
}

#[test]
fn a_root_too_long_for_a_socket_address_signals_samples_queued_before_the_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("q".repeat(120));
    std::fs::create_dir(&root).unwrap();
    let svc = open(&root, "ready/long-root-queued");
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(3).send().unwrap();
    assert!(
        readable(&s, Duration::ZERO),
        "queued before as_fd: readable at once"
    );
    assert_eq!(s.receive().unwrap().map(|s| *s), Some(3));
}

#[test]
fn a_port_created_while_another_thread_releases_the_same_slot_keeps_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path(), "ready/slot-reuse");
    let p = svc.publisher_builder().create().unwrap();
    for round in 0..50u64 {
        let old = svc.subscriber_builder().create().unwrap();
        let _ = readable(&old, Duration::ZERO);
        p.loan_uninit().unwrap().write_payload(round).send().unwrap();
        let sample = old.receive().unwrap().expect("a sample");
        drop(old);
        // The last sample frees the slot on another thread while this one creates a
        // subscriber in it.
        let releaser = std::thread::spawn(move || drop(sample));
        let new = svc.subscriber_builder().create().unwrap();
        releaser.join().unwrap();
        assert!(!readable(&new, Duration::ZERO));
        p.loan_uninit().unwrap().write_payload(round).send().unwrap();
        assert!(
            readable(&new, LIMIT),
            "round {round}: the new port's socket is gone"
        );
        assert_eq!(new.receive().unwrap().map(|s| *s), Some(round));
    }
}
