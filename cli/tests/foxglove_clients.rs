//! `iox foxglove` with clients that are no pleasure to serve, against the reference
//! client (see `tests/foxglove.rs`): channels that come and go, a client that stalls,
//! clients that send garbage or vanish, a bridge SIGKILLed mid-stream, and other users
//! of the machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use iox_service::Service;
use iox_testkit::{Reaped, wait_until};

#[path = "foxglove/harness.rs"]
mod harness;
use harness::*;

#[test]
fn channels_follow_services_and_services_are_read_only_while_subscribed() {
    let Some(dir) = client_or_skip("channels_follow_services_and_services_are_read_only_while_subscribed")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let bridge = Bridge::start(root.path(), &["robot/*"]);
    let (_watcher, seen) = client_live(&dir, bridge.port, &["watch", "--timeout", "60"]);
    let has = |event: &str, topic: &str| {
        seen.lock()
            .unwrap()
            .iter()
            .any(|e| e["event"] == event && e["topic"] == topic)
    };
    assert!(wait_until(LIMIT, || seen
        .lock()
        .unwrap()
        .iter()
        .any(|e| e["event"] == "serverInfo")));
    // A matching service appears as a channel; one the glob does not take does not.
    let svc = |name: &str| Service::named(name).unwrap().root(root.path());
    let reading = svc("robot/reading")
        .publish_subscribe::<Reading>()
        .create()
        .unwrap();
    let other = svc("elsewhere").publish_subscribe::<Reading>().create().unwrap();
    assert!(
        wait_until(LIMIT, || has("advertise", "/robot/reading")),
        "{:?}",
        seen.lock().unwrap()
    );
    // Nobody subscribes: the bridge holds no port of it.
    assert_eq!(subscribers(root.path(), "robot/reading"), 0);
    // A client subscribes: the bridge subscribes, and lets go when the client leaves.
    let publisher = reading.publisher_builder().create().unwrap();
    let (reader, got) = client_live(&dir, bridge.port, &["decode", "/robot/reading=1000000"]);
    assert!(wait_until(LIMIT, || subscribers(root.path(), "robot/reading") == 1));
    let mut seq = 0;
    assert!(wait_until(LIMIT, || {
        seq += 1;
        publisher
            .loan_uninit()
            .unwrap()
            .write_payload(Reading {
                seq,
                value: 1.0,
                big: 0,
                flags: [0; 8],
            })
            .send()
            .unwrap();
        got.lock().unwrap().iter().any(|e| e["event"] == "message")
    }));
    reader.kill();
    assert!(wait_until(LIMIT, || subscribers(root.path(), "robot/reading") == 0));
    // The service goes: so does its channel.
    drop(publisher);
    drop(reading);
    assert!(
        wait_until(LIMIT, || has("unadvertise", "/robot/reading")),
        "{:?}",
        seen.lock().unwrap()
    );
    assert!(!has("advertise", "/elsewhere"));
    drop(other);
    // Created again: a channel again.
    let _again = svc("robot/reading")
        .publish_subscribe::<Reading>()
        .create()
        .unwrap();
    assert!(wait_until(LIMIT, || seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "advertise" && e["topic"] == "/robot/reading")
        .count()
        == 2));
    assert!(!bridge.log().contains("panicked"), "{}", bridge.log());
}

#[test]
fn a_stalled_client_loses_its_oldest_samples_counted_and_slows_no_one() {
    let Some(dir) = client_or_skip("a_stalled_client_loses_its_oldest_samples_counted_and_slows_no_one")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    // A pool of 8 chunks: were the bridge to hold chunks for a stalled client, the
    // publisher's loans would fail within a few samples.
    let service = Service::named("camera/big")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u8]>()
        .max_slice_len(256 << 10)
        .subscriber_buffer(2)
        .max_publishers(1)
        .create()
        .unwrap();
    let bridge = Bridge::start(root.path(), &["camera/big", "--backlog", "8"]);
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let frame = vec![7u8; 256 << 10];
    let (s, st) = (sent.clone(), stop.clone());
    let publishing = std::thread::spawn(move || {
        let publisher = service.publisher_builder().create().unwrap();
        while !st.load(Ordering::Relaxed) {
            publisher
                .loan_slice_uninit(frame.len())
                .expect("a loan never fails: the bridge holds no chunk")
                .write_from_slice(&frame)
                .send()
                .unwrap();
            s.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(500));
        }
    });
    let (_stalled, stalled_events) =
        client_live(&dir, bridge.port, &["stall", "/camera/big", "--timeout", "120"]);
    assert!(wait_until(LIMIT, || stalled_events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e["event"] == "stalled")));
    // Its window fills, then its queue: the oldest go, counted, and said.
    assert!(
        wait_until(LIMIT, || bridge.said("as the client read too slowly")),
        "{}",
        bridge.log()
    );
    // Meanwhile a healthy client is served all along.
    let events = client(&dir, bridge.port, &["decode", "/camera/big=20"]);
    assert_eq!(
        events.iter().filter(|e| e["event"] == "message").count(),
        20,
        "{events:?}"
    );
    stop.store(true, Ordering::Relaxed);
    publishing.join().expect("the publisher never failed a loan");
    assert!(sent.load(Ordering::Relaxed) > 20);
    let line = bridge
        .log
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains("as the client read too slowly"))
        .cloned()
        .unwrap();
    let dropped: u64 = line
        .split("(/camera/big: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line}"));
    assert!(dropped > 0, "{line}");
    drop(bridge);
}

#[test]
fn clients_that_misbehave_in_loops_leave_the_server_serving() {
    let Some(dir) = client_or_skip("clients_that_misbehave_in_loops_leave_the_server_serving") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = publish_every_kind(root.path(), stop.clone());
    let mut bridge = Bridge::start(root.path(), &[]);
    // Clients that subscribe and are SIGKILLed mid-stream, side by side with clients
    // sending garbage, refused handshakes, silent connections and oversized messages.
    let mut killed: Vec<Reaped> = (0..4)
        .map(|_| {
            client_live(
                &dir,
                bridge.port,
                &["decode", "/camera/image=1000000", "/blob=1000000"],
            )
            .0
        })
        .collect();
    let events = client(&dir, bridge.port, &["garbage", "10"]);
    assert_eq!(events.last().unwrap()["event"], "garbage done", "{events:?}");
    for k in killed.drain(..) {
        k.kill();
    }
    // Still serving, and still well.
    let events = client(&dir, bridge.port, &["decode", "/chatter=3", "/robot/reading=3"]);
    assert_eq!(message(&events, "/chatter")["value"]["data"], "hello foxglove");
    assert!(bridge.child.try_wait().is_none(), "{}", bridge.log());
    stop.store(true, Ordering::Relaxed);
    publisher.join().unwrap();
    assert!(!bridge.log().contains("panicked"), "{}", bridge.log());
}

/// `iox foxglove` SIGKILLed while clients read: the publisher keeps every chunk.
#[test]
fn a_bridge_killed_mid_stream_costs_the_publisher_nothing() {
    let Some(dir) = client_or_skip("a_bridge_killed_mid_stream_costs_the_publisher_nothing") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let service = Service::named("frames")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u8]>()
        .max_slice_len(1024)
        .subscriber_buffer(4)
        .create()
        .unwrap();
    let publisher = service.publisher_builder().create().unwrap();
    let bridge = Bridge::start(root.path(), &["frames"]);
    let (_reader, got) = client_live(&dir, bridge.port, &["decode", "/frames=1000000"]);
    assert!(wait_until(LIMIT, || {
        publisher
            .loan_slice_uninit(1024)
            .unwrap()
            .write_from_slice(&[1; 1024])
            .send()
            .unwrap();
        got.lock().unwrap().iter().any(|e| e["event"] == "message")
    }));
    bridge.child.kill();
    // The dead subscriber's queued samples come back: many more sends than the pool
    // has chunks all find one.
    for _ in 0..200 {
        publisher
            .loan_slice_uninit(1024)
            .expect("a chunk the killed bridge held was not given back")
            .write_from_slice(&[2; 1024])
            .send()
            .unwrap();
    }
}

/// Another user of this machine does not see this user's services through the bridge
/// (HTTP 403) unless its user allowed it; root does; a client beyond `--max-clients`
/// is refused (HTTP 503).
#[test]
fn other_users_and_clients_beyond_the_limit_are_refused() {
    let test = "other_users_and_clients_beyond_the_limit_are_refused";
    let Some(dir) = client_or_skip(test) else {
        return;
    };
    if !iox_testkit::root_or_skip(test) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let own = bridge_as(1001, root.path(), &["--max-clients", "1"]);
    assert_eq!(probe_as(&dir, own.port, 1001)["event"], "open");
    assert_eq!(probe_as(&dir, own.port, 0)["event"], "open", "root is admitted");
    let refused = probe_as(&dir, own.port, 1002);
    assert_eq!(
        (&refused["event"], &refused["status"]),
        (&"refused".into(), &403.into()),
        "{refused}"
    );
    assert!(
        refused["body"]
            .as_str()
            .unwrap()
            .contains("uid 1002 may not see them"),
        "{refused}"
    );
    assert!(own.said("refused"), "{}", own.log());
    // One client connected: the next is one too many.
    let (_watcher, seen) = client_live(&dir, own.port, &["watch", "--timeout", "60"]);
    assert!(wait_until(LIMIT, || seen
        .lock()
        .unwrap()
        .iter()
        .any(|e| e["event"] == "serverInfo")));
    let busy = probe_as(&dir, own.port, 1001);
    assert_eq!(busy["status"], 503, "{busy}");
    // Allowed: another user connects.
    let open = bridge_as(1001, root.path(), &["--allow-other-users"]);
    assert_eq!(probe_as(&dir, open.port, 1002)["event"], "open");
    // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d: still judged by owner.
    if std::net::TcpListener::bind("[::]:0").is_ok() {
        let dual = bridge_as(1001, root.path(), &["--listen", "[::]:0"]);
        assert_eq!(probe_as(&dir, dual.port, 1001)["event"], "open");
        let refused = probe_as(&dir, dual.port, 1002);
        assert_eq!(refused["status"], 403, "{refused}");
    }
}

/// Connections opened all at once count against `--max-clients` from before their
/// handshakes: one is served, the rest refused.
#[test]
fn clients_racing_for_the_last_slot_get_one() {
    let Some(dir) = client_or_skip("clients_racing_for_the_last_slot_get_one") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let bridge = Bridge::start(root.path(), &["--max-clients", "1"]);
    let events = client(&dir, bridge.port, &["race", "12"]);
    let race = events.last().unwrap();
    assert_eq!(
        (&race["open"], &race["refused"]),
        (&1.into(), &11.into()),
        "{race}"
    );
}

/// A client that reads nothing while asking for answers is disconnected once its
/// unread answers pass the limit, even with its writer stuck in a send.
#[test]
fn a_client_that_reads_nothing_and_floods_is_disconnected() {
    let Some(dir) = client_or_skip("a_client_that_reads_nothing_and_floods_is_disconnected") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let service = Service::named("frames")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u8]>()
        .max_slice_len(64 << 10)
        .create()
        .unwrap();
    let bridge = Bridge::start(root.path(), &["frames"]);
    let (_flooder, seen) = client_live(
        &dir,
        bridge.port,
        &["flood", "/frames", "6000", "--timeout", "120"],
    );
    let publisher = service.publisher_builder().create().unwrap();
    let frame = vec![3u8; 64 << 10];
    // Frames until the flood was sent, then until the bridge lets the client go.
    assert!(
        wait_until(LIMIT, || {
            publisher
                .loan_slice_uninit(frame.len())
                .unwrap()
                .write_from_slice(&frame)
                .send()
                .unwrap();
            bridge.said("left too many control messages unread")
        }),
        "{:?}\n{}",
        seen.lock().unwrap(),
        bridge.log()
    );
}
