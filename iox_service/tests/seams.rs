//! Regression tests for the seam bugs: each holds a race window open across real
//! processes with a gated stall point (`iox_service::testing`), acts inside it, and
//! checks that nothing live was taken for dead, nothing was delivered twice or lost,
//! no value invalid for its type reached safe code, and no receiver spun.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::{PortCreateError, PubSubService, Service};
use iox_testkit::{Gate, env, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(60);

/// A test's temp directory: the service root (`root/`) and the gates beside it.
struct Scene {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Scene {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        Self { dir, root }
    }

    fn gate(&self, name: &str) -> Gate {
        Gate::new(self.dir.path(), name)
    }

    /// This test re-run as `role`, its root in `ROOT` and `envs` besides.
    fn spawn(&self, test: &str, role: &str, envs: &[(&str, String)]) -> std::process::Child {
        let mut all = vec![("ROOT", self.root.display().to_string())];
        all.extend(envs.iter().cloned());
        spawn_self(test, role, &all)
    }
}

/// A gate handed to a child that arms it itself (`testing::stall_at`), as `key`.
fn gate_env<'a>(key: &'a str, gate: &Gate) -> (&'a str, String) {
    (key, gate.path().display().to_string())
}

fn open_u64(root: &Path, name: &str, publishers: u32) -> PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .max_publishers(publishers)
        .max_subscribers(2)
        .open_or_create()
        .unwrap()
}

/// Bug 1: a liveness probe opened a node's file; the node dropped its last service
/// (its file unlinked) and opened another (a new file under the same name); the
/// probe then took the lock of the old, unlinked file. The node lives: its new
/// publisher must keep its slot and its loan.
#[test]
fn a_node_that_replaced_its_file_during_a_probe_is_alive() {
    const TEST: &str = "a_node_that_replaced_its_file_during_a_probe_is_alive";
    if role().as_deref() == Some("cleaner") {
        let root: PathBuf = env("ROOT");
        let gate: PathBuf = env("GATE");
        // A user of the service, so it outlives the other process's drop of it.
        let svc = open_u64(&root, "seam/node", 1);
        iox_service::testing::stall_at(iox_service::testing::Stall::ProbeAfterOpen, &gate);
        let report = Service::cleanup_dead_in(&root, "seam/node").unwrap();
        assert_eq!(report.ports, 0, "a live node's port was recovered: {report:?}");
        match svc.publisher_builder().create() {
            Err(PortCreateError::TooManyPorts { .. }) => {}
            Err(e) => panic!("unexpected error: {e}"),
            Ok(_) => panic!("got the live process's publisher slot"),
        }
        return;
    }
    let scene = Scene::new();
    let root = &scene.root;
    let gate = scene.gate("gate");
    let svc = open_u64(root, "seam/node", 1);
    let publisher = svc.publisher_builder().create().unwrap();
    let cleaner = scene.spawn(TEST, "cleaner", &[gate_env("GATE", &gate)]);
    // The cleaner has opened our node file and stopped before testing its lock.
    assert!(gate.wait_reached(LIMIT), "the cleaner never probed our node");
    // Our last use of the root goes (the node file is unlinked), then a new one comes
    // (a new node file, same name), with a publisher holding a loan.
    drop(publisher);
    drop(svc);
    let svc = open_u64(root, "seam/node", 1);
    let publisher = svc.publisher_builder().create().unwrap();
    let loan = publisher.loan_uninit().unwrap();
    gate.open();
    wait_ok(cleaner, LIMIT);
    // Our loan is still ours: it sends.
    loan.write_payload(7).send().unwrap();
}

/// Bug 4: a publisher read an armed subscriber's `waiting` word and rang it; before
/// it cleared that arming, the subscriber went and a new one took its slot and armed.
/// The stale clear must not consume the new subscriber's arming: the next send rings.
#[test]
fn a_stale_sender_does_not_clear_the_arming_of_a_new_port_in_the_slot() {
    const TEST: &str = "a_stale_sender_does_not_clear_the_arming_of_a_new_port_in_the_slot";
    if role().as_deref() == Some("publisher") {
        let root: PathBuf = env("ROOT");
        let svc = open_one_subscriber(&root, "seam/wake");
        let p = svc.publisher_builder().create().unwrap();
        assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        // Rings the armed subscriber, then stops at the gate before clearing.
        p.loan_uninit().unwrap().write_payload(1).send().unwrap();
        // The gate opened: the slot has a new subscriber, armed.
        p.loan_uninit().unwrap().write_payload(2).send().unwrap();
        return;
    }
    let scene = Scene::new();
    let gate = scene.gate("gate");
    let svc = open_one_subscriber(&scene.root, "seam/wake");
    let first = svc.subscriber_builder().create().unwrap();
    assert!(!iox_testkit::readable(&first, Duration::ZERO)); // armed
    let publisher = scene.spawn(TEST, "publisher", &gate.env("wake-after-ring"));
    assert!(gate.wait_reached(LIMIT), "the publisher never rang");
    drop(first);
    let second = svc.subscriber_builder().create().unwrap();
    assert!(!iox_testkit::readable(&second, Duration::ZERO)); // armed, nothing queued
    gate.open();
    wait_ok(publisher, LIMIT);
    assert!(
        iox_testkit::readable(&second, Duration::ZERO),
        "the second send did not ring: its arming was cleared by the first"
    );
    assert_eq!(*second.receive().unwrap().unwrap(), 2);
}

fn open_one_subscriber(root: &Path, name: &str) -> PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .max_subscribers(1)
        .open_or_create()
        .unwrap()
}

/// This thread's CPU time (user + system).
fn thread_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage, which we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD is valid on Linux.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Bug 5: a publisher stopped (then SIGKILLed) inside its drop-oldest claim on a full
/// queue. While it lives, a blocking receive sleeps instead of spinning on the claim;
/// once it is dead, the receiver resolves the claim itself (no third process) and gets
/// what was queued.
#[test]
fn a_receiver_behind_a_claim_sleeps_and_resolves_a_dead_claimer() {
    const TEST: &str = "a_receiver_behind_a_claim_sleeps_and_resolves_a_dead_claimer";
    if role().as_deref() == Some("publisher") {
        let root: PathBuf = env("ROOT");
        let svc = open_buffer_two(&root, "seam/claim");
        let p = svc.publisher_builder().create().unwrap();
        assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        for i in 1..=3 {
            // The third finds the queue full and claims its oldest entry: the gate.
            p.loan_uninit().unwrap().write_payload(i).send().unwrap();
        }
        unreachable!("killed at the gate");
    }
    let scene = Scene::new();
    let gate = scene.gate("gate");
    let svc = open_buffer_two(&scene.root, "seam/claim");
    let s = svc.subscriber_builder().create().unwrap();
    let publisher =
        iox_testkit::Reaped::new(scene.spawn(TEST, "publisher", &gate.env("queue-drop-oldest-claimed")));
    assert!(gate.wait_reached(LIMIT), "the publisher never claimed");
    // A live claimer: the entry behind its claim waits, and the receiver sleeps.
    let wall = Duration::from_millis(300);
    let cpu = thread_cpu();
    let started = std::time::Instant::now();
    assert!(s.receive_timeout(wall).unwrap().is_none());
    let (spent, waited) = (thread_cpu() - cpu, started.elapsed());
    assert!(
        spent < waited / 2,
        "receive_timeout spun: {spent:?} of CPU in {waited:?}"
    );
    // Dead: the receiver resolves the claim and gets both samples, in order.
    publisher.kill();
    let got: Vec<u64> = (0..2)
        .map(|_| {
            *s.receive_timeout(Duration::from_secs(10))
                .unwrap()
                .expect("a sample")
        })
        .collect();
    assert_eq!(got, vec![1, 2]);
}

/// Bug 5, a queue of one: the only entry is the one a publisher, stopped (then
/// SIGKILLed) in its drop-oldest claim, was taking, so nothing is queued outside the
/// claim. A blocking receive still looks, finds the claim, and resolves it once the
/// claimer is dead: the entry is back (the claimer had not taken it) and arrives.
#[test]
fn a_receiver_of_one_behind_a_dead_claimer_gets_its_entry() {
    const TEST: &str = "a_receiver_of_one_behind_a_dead_claimer_gets_its_entry";
    if role().as_deref() == Some("publisher") {
        let root: PathBuf = env("ROOT");
        let svc = open_buffer(&root, "seam/claim-one", 1);
        let p = svc.publisher_builder().create().unwrap();
        assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        for i in 1..=2 {
            // The second finds the queue full and claims its only entry: the gate.
            p.loan_uninit().unwrap().write_payload(i).send().unwrap();
        }
        unreachable!("killed at the gate");
    }
    let scene = Scene::new();
    let gate = scene.gate("gate");
    let svc = open_buffer(&scene.root, "seam/claim-one", 1);
    let s = svc.subscriber_builder().create().unwrap();
    let publisher =
        iox_testkit::Reaped::new(scene.spawn(TEST, "publisher", &gate.env("queue-drop-oldest-claimed")));
    assert!(gate.wait_reached(LIMIT), "the publisher never claimed");
    assert_eq!(s.pending(), 0, "the claimed entry is not counted as pending");
    publisher.kill();
    // Well before the deadline (a receive that never looks behind the claim gets the
    // entry only from its last look, at the deadline).
    let deadline = Duration::from_secs(60);
    let started = std::time::Instant::now();
    let got = s
        .receive_timeout(deadline)
        .unwrap()
        .expect("the entry behind the dead claim");
    assert_eq!(*got, 1);
    assert!(
        started.elapsed() < deadline / 2,
        "the entry came only at the deadline ({:?})",
        started.elapsed()
    );
}

/// A blocking receive found one publisher's queue claimed by a live publisher
/// (stopped in its drop-oldest claim) and nothing else; before it slept, a second
/// publisher sent. The claim holds back only its own queue: the receive takes the
/// other sample without going to sleep (it used to count every queued entry as not
/// ready while any queue was claimed, and slept out its recovery period).
#[test]
fn a_claim_on_one_queue_does_not_hold_back_another() {
    const TEST: &str = "a_claim_on_one_queue_does_not_hold_back_another";
    const NAME: &str = "seam/claim-other";
    match role().as_deref() {
        Some("claimer") => {
            let svc = open_buffer_two(&env::<PathBuf>("ROOT"), NAME);
            let p = svc.publisher_builder().create().unwrap();
            assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
            for i in 1..=3 {
                // The third finds the queue full and claims its oldest entry: the gate.
                p.loan_uninit().unwrap().write_payload(i).send().unwrap();
            }
            unreachable!("killed at the gate");
        }
        Some("receiver") => {
            let svc = open_buffer_two(&env::<PathBuf>("ROOT"), NAME);
            let s = svc.subscriber_builder().create().unwrap();
            let go: PathBuf = env("GO");
            assert!(wait_until(LIMIT, || go.join("open").exists()), "never let go");
            // The environment stalls this receive at `receive-before-wait`; this
            // stalls it if it is about to sleep.
            iox_service::testing::stall_at(
                iox_service::testing::Stall::ReceiveBeforeSleep,
                &env::<PathBuf>("SLEEPING"),
            );
            let got = s.receive_timeout(LIMIT).unwrap().map(|s| *s);
            assert_eq!(got, Some(42), "the other publisher's sample");
            return;
        }
        _ => {}
    }
    let scene = Scene::new();
    let (claimed, go) = (scene.gate("claimed"), scene.gate("go"));
    let (waiting, sleeping) = (scene.gate("waiting"), scene.gate("sleeping"));
    let svc = open_buffer_two(&scene.root, NAME);
    // The second publisher exists before the receive looks.
    let other = svc.publisher_builder().create().unwrap();
    let mut envs = vec![gate_env("GO", &go), gate_env("SLEEPING", &sleeping)];
    envs.extend(waiting.env("receive-before-wait"));
    let mut receiver = iox_testkit::Reaped::new(scene.spawn(TEST, "receiver", &envs));
    assert!(
        wait_until(LIMIT, || svc.port_counts().1 == 1),
        "no subscriber came"
    );
    let _claimer =
        iox_testkit::Reaped::new(scene.spawn(TEST, "claimer", &claimed.env("queue-drop-oldest-claimed")));
    assert!(claimed.wait_reached(LIMIT), "the publisher never claimed");
    go.open();
    assert!(waiting.wait_reached(LIMIT), "the receive never got to its wait");
    other.loan_uninit().unwrap().write_payload(42).send().unwrap();
    waiting.open();
    let mut exited = None;
    let decided = wait_until(LIMIT, || {
        exited = receiver.try_wait();
        exited.is_some() || sleeping.reached()
    });
    assert!(decided, "the receive neither slept nor returned");
    let slept = sleeping.reached();
    sleeping.open();
    assert!(
        !slept,
        "the receive slept with a sample ready in an unclaimed queue"
    );
    assert!(
        exited.is_some_and(|s| s.success()),
        "the receiver failed: {exited:?}"
    );
}

fn open_buffer_two(root: &Path, name: &str) -> PubSubService<u64> {
    open_buffer(root, name, 2)
}

fn open_buffer(root: &Path, name: &str, buffer: u32) -> PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .max_publishers(2)
        .subscriber_buffer(buffer)
        .open_or_create()
        .unwrap()
}

/// Bug 2: a `[u8]` carrier of `bool`'s identity wrote bytes that are no `bool`, and a
/// `Subscriber<bool>` in another process handed safe code a `&bool` holding 2 (first
/// through `send_payload_bytes`, then through a plain loan filled with 2 and sent).
/// A payload type that not every byte string is a value of is not carried at all:
/// `open` and `create` refuse it with `NotCarriable`, so no `[u8]` port of it exists;
/// and a carrier claiming `bool` is valid for every bit pattern never meets a `bool`
/// reader. Should the open succeed, the carrier tries the loan path and the parent's
/// reader catches the 2.
#[test]
fn bytes_never_become_an_invalid_value_of_a_typed_reader() {
    const TEST: &str = "bytes_never_become_an_invalid_value_of_a_typed_reader";
    if role().as_deref() == Some("carrier") {
        let root: PathBuf = env("ROOT");
        let carrier = Service::named("seam/bool")
            .unwrap()
            .root(&root)
            .publish_subscribe::<[u8]>()
            .carry_payload_type(<bool as iox_service::Payload>::payload_type())
            .chunk_sizes(&[1])
            .open();
        match carrier {
            Err(iox_service::OpenError::NotCarriable { payload, .. }) => {
                assert_eq!(payload.type_name(), "bool");
            }
            Err(other) => panic!("refused for another reason: {other}"),
            Ok(carrier) => {
                // The path the refusal closes: a loan written with 2 and sent.
                let p = carrier.publisher_builder().create().unwrap();
                let _ = p.send_payload_bytes(&[&[2u8]]);
                let mut loan = p.loan_slice_uninit(1).unwrap();
                loan.payload_mut()[0].write(2);
                // SAFETY: the one byte was just written.
                let sent = unsafe { loan.assume_init() }.send();
                panic!("a [u8] port of a bool service was built and sent: {sent:?}");
            }
        }
        let created = Service::named("seam/bool-new")
            .unwrap()
            .root(&root)
            .publish_subscribe::<[u8]>()
            .carry_payload_type(<bool as iox_service::Payload>::payload_type())
            .chunk_sizes(&[1])
            .create();
        assert!(
            matches!(created, Err(iox_service::CreateError::NotCarriable { .. })),
            "{created:?}"
        );
        // A peer that lies about the type (say, a remote bridge) meets another identity.
        let forged = iox_service::PayloadType::Typed {
            type_name: "bool".into(),
            size: 1,
            alignment: 1,
            invalid_bit_patterns: false,
        };
        let lied = Service::named("seam/bool")
            .unwrap()
            .root(&root)
            .publish_subscribe::<[u8]>()
            .carry_payload_type(forged)
            .chunk_sizes(&[1])
            .open();
        assert!(
            matches!(lied, Err(iox_service::OpenError::IncompatiblePayload { .. })),
            "{lied:?}"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let typed = Service::named("seam/bool")
        .unwrap()
        .root(root)
        .publish_subscribe::<bool>()
        .create()
        .unwrap();
    let s = typed.subscriber_builder().create().unwrap();
    wait_ok(
        spawn_self(TEST, "carrier", &[("ROOT", root.display().to_string())]),
        LIMIT,
    );
    assert!(s.receive().unwrap().is_none(), "a sample reached the bool reader");
    // And a bool sample is not read back as bytes either (no padding question asked).
    let p = typed.publisher_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(true).send().unwrap();
    let got = s.receive().unwrap().unwrap();
    assert!(*got);
    assert!(got.payload_bytes().is_none());
}

/// Bug 3: a publisher with history checked a subscriber slot's state word, then
/// pushed; in between the subscriber went and a new one took the slot. The push
/// landed in the new subscriber's queue, and the history it was then given held the
/// same sample again: a duplicate out of order, and a chunk lost to `AlreadyHeld`.
/// The new subscriber must see the history once, in order, then the live samples.
#[test]
fn a_slot_changing_hands_mid_send_gets_the_history_once_in_order() {
    slot_changes_hands_mid_send(
        "a_slot_changing_hands_mid_send_gets_the_history_once_in_order",
        false,
    );
}

/// Bug 3, the subscriber's side: as above, but the new subscriber receives between
/// the stray push and the publisher's next send (which would drain the stray first).
/// The stray is found under the subscriber's claim, before this publisher gave it
/// its history, and dropped (not delivered); the history then arrives once, in order.
#[test]
fn a_stray_from_before_the_history_is_dropped_by_the_new_subscriber() {
    slot_changes_hands_mid_send(
        "a_stray_from_before_the_history_is_dropped_by_the_new_subscriber",
        true,
    );
}

/// The two tests above: a publisher (a child) sends 1, stops before pushing 2 while
/// the subscriber slot changes hands, then sends 3; with `look_between`, it stops once
/// more after pushing 2 (the stray) while the new subscriber receives.
fn slot_changes_hands_mid_send(test: &str, look_between: bool) {
    if role().as_deref() == Some("publisher") {
        let root: PathBuf = env("ROOT");
        let gate: PathBuf = env("GATE");
        let svc = open_history(&root, "seam/history");
        let p = svc.publisher_builder().create().unwrap();
        assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        p.loan_uninit().unwrap().write_payload(1).send().unwrap();
        // The next send stops between its look at the slot and its push.
        iox_service::testing::stall_at(iox_service::testing::Stall::HistorySendBeforePush, &gate);
        p.loan_uninit().unwrap().write_payload(2).send().unwrap();
        if look_between {
            // The stray is pushed: hold the next send until the new subscriber looked.
            let after: PathBuf = env("AFTER");
            std::fs::write(after.join("reached"), b"").unwrap();
            assert!(
                wait_until(LIMIT, || after.join("open").exists()),
                "never let go on"
            );
        }
        // The slot has a new subscriber now: it gets the history, then this.
        p.loan_uninit().unwrap().write_payload(3).send().unwrap();
        return;
    }
    let scene = Scene::new();
    let gate = scene.gate("gate");
    let after = scene.gate("after");
    let svc = open_history(&scene.root, "seam/history");
    let first = svc.subscriber_builder().create().unwrap();
    let publisher = scene.spawn(
        test,
        "publisher",
        &[gate_env("GATE", &gate), gate_env("AFTER", &after)],
    );
    assert!(gate.wait_reached(LIMIT), "the publisher never reached its push");
    assert_eq!(*first.receive().unwrap().unwrap(), 1);
    drop(first);
    let second = svc.subscriber_builder().create().unwrap();
    gate.open();
    if look_between {
        assert!(after.wait_reached(LIMIT), "the publisher never pushed the stray");
        assert_eq!(second.pending(), 1, "the stray is queued");
        assert!(
            second.receive().unwrap().is_none(),
            "a stray from before the history was delivered"
        );
        assert_eq!(second.pending(), 0, "the stray was dropped");
        after.open();
    }
    wait_ok(publisher, LIMIT);
    let mut got = Vec::new();
    while let Some(s) = second.receive().unwrap() {
        got.push(*s);
    }
    assert_eq!(got, vec![1, 2, 3], "history once, in order, then live");
    // Nothing leaked: every chunk is back once the ports are gone.
    drop(second);
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks(), "chunks lost");
}

fn open_history(root: &Path, name: &str) -> PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(4)
        .history(2)
        .open_or_create()
        .unwrap()
}

/// A request slot lost to a leaving server: a client dropped its pending response
/// while the server it went to was dropping (the request queued, never handled). The
/// server freed the words ABANDONED for it before its slot said FREE, so a client
/// that looked in between marked its word ABANDONED for a server that never looked
/// again: with one active request per client, the client could never send again.
/// The server now says FREE first; stopped right after, the client's drop frees the
/// word, and the client sends to the next server.
#[test]
fn a_request_abandoned_while_its_server_leaves_frees_its_slot() {
    const TEST: &str = "a_request_abandoned_while_its_server_leaves_frees_its_slot";
    if role().as_deref() == Some("server") {
        let root: PathBuf = env("ROOT");
        let gate: PathBuf = env("GATE");
        let svc = open_one_request(&root);
        let server = svc.server_builder().create().unwrap();
        assert!(
            wait_until(LIMIT, || server.pending_requests() == 1),
            "no request came"
        );
        iox_service::testing::stall_at(iox_service::testing::Stall::ServerLeftBeforeScan, &gate);
        drop(server);
        return;
    }
    let scene = Scene::new();
    let gate = scene.gate("gate");
    let svc = open_one_request(&scene.root);
    let client = svc.client_builder().create().unwrap();
    let child = scene.spawn(TEST, "server", &[gate_env("GATE", &gate)]);
    assert!(wait_until(LIMIT, || svc.port_counts().1 == 1), "no server came");
    let pending = client.loan_uninit().unwrap().write_payload(1).send().unwrap();
    assert!(gate.wait_reached(LIMIT), "the server never left");
    drop(pending);
    gate.open();
    wait_ok(child, LIMIT);
    let _server = svc.server_builder().create().unwrap();
    let again = client.loan_uninit().unwrap().write_payload(2).send();
    assert!(again.is_ok(), "the request slot was lost: {:?}", again.err());
}

fn open_one_request(root: &Path) -> iox_service::RequestResponseService<u64, u64> {
    Service::named("seam/request-slot")
        .unwrap()
        .root(root)
        .request_response::<u64, u64>()
        .max_active_requests_per_client(1)
        .open_or_create()
        .unwrap()
}

/// A port's creation that finds every slot taken while another process is recovering
/// the service waits for that recoverer and gets the dead port's slot: it is not
/// `TooManyPorts` (the soak of blackboard writers killed at random met it, as a
/// replacement writer's creation raced a replacement reader's recovery).
#[test]
fn a_port_created_while_another_process_recovers_gets_the_dead_ports_slot() {
    const TEST: &str = "a_port_created_while_another_process_recovers_gets_the_dead_ports_slot";
    match role().as_deref() {
        Some("dies") => {
            // Holds the only publisher slot until SIGKILLed.
            let svc = open_u64(&env::<PathBuf>("ROOT"), "seam/claim", 1);
            let _publisher = svc.publisher_builder().create().unwrap();
            loop {
                std::thread::park();
            }
        }
        Some("recoverer") => {
            // Its subscriber's creation recovers the dead publisher, stalled with the
            // recovery lock held (the gate from the environment).
            let svc = open_u64(&env::<PathBuf>("ROOT"), "seam/claim", 1);
            let _subscriber = svc.subscriber_builder().create().unwrap();
            return;
        }
        _ => {}
    }
    let scene = Scene::new();
    let svc = open_u64(&scene.root, "seam/claim", 1);
    let dies = iox_testkit::Reaped::new(scene.spawn(TEST, "dies", &[]));
    assert!(wait_until(LIMIT, || svc.port_counts().0 == 1));
    dies.kill();
    let locked = scene.gate("locked");
    let recoverer = scene.spawn(TEST, "recoverer", &locked.env("recovery-locked"));
    assert!(locked.wait_reached(LIMIT), "the recoverer never took the lock");
    // Our publisher's creation finds the slot taken and the recoverer busy.
    let behind = scene.gate("behind");
    iox_service::testing::stall_at(iox_service::testing::Stall::ClaimBehindRecoverer, behind.path());
    let created = std::thread::scope(|s| {
        // (A publisher stays in its thread: the result leaves it.)
        let creating = s.spawn(|| svc.publisher_builder().create().map(drop));
        assert!(
            behind.wait_reached(LIMIT),
            "the creation did not wait behind the recoverer"
        );
        locked.open();
        behind.open();
        creating.join().unwrap()
    });
    created.expect("the dead publisher's slot, once recovered");
    wait_ok(recoverer, LIMIT);
    // Freed again when that publisher went: the slot is usable.
    let publisher = svc.publisher_builder().create().unwrap();
    publisher.loan_uninit().unwrap().write_payload(1).send().unwrap();
}

/// An inspection (what `iox show` and Python's open without a dtype use) found no
/// static config while another process was creating the service; the creator then
/// finished (config written, segment alive) before the inspection opened the dynamic
/// segment. The service is alive and has its config: the inspection says so, rather
/// than "alive, no config" (which Python reported as "its creator died").
#[test]
fn an_inspection_that_raced_a_creation_reports_its_config() {
    const TEST: &str = "an_inspection_that_raced_a_creation_reports_its_config";
    const NAME: &str = "seam/inspected";
    match role().as_deref() {
        Some("creator") => {
            let root: PathBuf = env("ROOT");
            let _svc = open_u64(&root, NAME, 1); // stalls before its config (CREATE gate)
            std::fs::write(root.join("../created"), b"").unwrap();
            let done = root.join("../inspected");
            assert!(
                wait_until(LIMIT, || done.exists()),
                "the inspector never finished"
            );
            return;
        }
        Some("inspector") => {
            let root: PathBuf = env("ROOT");
            let gate: PathBuf = env("GATE");
            iox_service::testing::stall_at(iox_service::testing::Stall::InspectAfterConfigRead, &gate);
            let info = iox_service::inspect::inspect_in(&root, NAME).unwrap();
            assert!(
                info.config.is_some(),
                "an alive service without its config: {info:?}"
            );
            assert_eq!(info.health, iox_service::inspect::Health::Alive, "{info:?}");
            assert!(info.problems.is_empty(), "{:?}", info.problems);
            assert!(
                info.files.iter().any(|f| f.ends_with(".service")),
                "{:?}",
                info.files
            );
            return;
        }
        _ => {}
    }
    let scene = Scene::new();
    let create = scene.gate("create");
    let inspect = scene.gate("inspect");
    // The creator stops with its segment made and no config yet.
    let creator = scene.spawn(TEST, "creator", &create.env("create-before-config"));
    assert!(
        create.wait_reached(LIMIT),
        "the creator never reached create-before-config"
    );
    // The inspector finds no config, and stops before it opens the segment.
    let inspector = scene.spawn(TEST, "inspector", &[gate_env("GATE", &inspect)]);
    assert!(inspect.wait_reached(LIMIT), "the inspector never read the config");
    // The creator finishes; then the inspector goes on.
    create.open();
    let created = scene.dir.path().join("created");
    assert!(
        wait_until(LIMIT, || created.exists()),
        "the creator never finished"
    );
    inspect.open();
    wait_ok(inspector, LIMIT);
    std::fs::write(scene.dir.path().join("inspected"), b"").unwrap();
    wait_ok(creator, LIMIT);
}
