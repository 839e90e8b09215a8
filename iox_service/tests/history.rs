//! `.history(n)`: a subscriber that connects late gets each publisher's last `n`
//! samples first, in order, then live ones; kept samples are held like queued ones, so
//! a publisher SIGKILLed with a full history (or in the middle of sending or
//! re-sending one) loses and leaks nothing. Publishers run in their own processes
//! (this test binary re-executed, see `iox_testkit`), each test with its own root.

use iox_service::testing::Stall;
use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::static_config::{InvalidConfig, StaticConfig};
use iox_service::{
    CreateError, OpenError, Overflow, PubSubBuilder, PubSubService, Publisher, SendError, Service, Subscriber,
};
use iox_testkit::{Reaped, env, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(30);

fn builder(root: &Path, name: &str) -> PubSubBuilder<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
}

fn envs(root: &Path) -> [(&'static str, String); 2] {
    [
        ("IOX_ROOT", root.display().to_string()),
        ("TEST_DIR", root.display().to_string()),
    ]
}

fn signal(dir: &Path, name: &str) {
    std::fs::write(dir.join(format!("signal.{name}")), b"").unwrap();
}

fn wait_signal(dir: &Path, name: &str) {
    let file = dir.join(format!("signal.{name}"));
    assert!(
        wait_until(LIMIT, || file.exists()),
        "no {name:?} signal within {LIMIT:?}"
    );
}

fn send(p: &Publisher<u64>, value: u64) -> Result<usize, SendError> {
    p.loan_uninit().unwrap().write_payload(value).send()
}

/// Everything queued for `s` right now, in order.
fn drain(s: &Subscriber<u64>) -> Vec<u64> {
    std::iter::from_fn(|| s.receive().unwrap().map(|v| *v)).collect()
}

fn free(svc: &PubSubService<u64>) -> u64 {
    svc.pool_info().free_chunks()
}

/// The test of the issue: a publisher process sends 10 samples with history 4; a
/// subscriber in another process connects after that; the publisher, seeing it
/// connected through the service, sends live ones. The subscriber gets exactly the
/// last 4, in order, then the live ones.
#[test]
fn a_subscriber_connecting_after_ten_sends_gets_the_last_four_then_live_ones() {
    const TEST: &str = "a_subscriber_connecting_after_ten_sends_gets_the_last_four_then_live_ones";
    let open = |root: &Path| {
        builder(root, "history/late")
            .history(4)
            .subscriber_buffer(16)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("publisher") {
        let root: PathBuf = env("TEST_DIR");
        let svc = open(&root);
        let p = svc.publisher_builder().create().unwrap();
        for i in 0..10 {
            assert_eq!(send(&p, i), Ok(0), "nobody is connected yet");
        }
        signal(&root, "sent");
        assert!(
            wait_until(LIMIT, || svc.port_counts().1 == 1),
            "the subscriber never connected"
        );
        for i in 10..15 {
            assert_eq!(send(&p, i), Ok(1));
        }
        wait_signal(&root, "received");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = open(root);
    let publisher = Reaped::new(spawn_self(TEST, "publisher", &envs(root)));
    wait_signal(root, "sent");
    let s = svc.subscriber_builder().create().unwrap();
    let mut got = Vec::new();
    while got.len() < 9 {
        let sample = s.receive_timeout(LIMIT).unwrap().expect("a sample within LIMIT");
        got.push(*sample);
    }
    assert_eq!(got, [6, 7, 8, 9, 10, 11, 12, 13, 14]);
    signal(root, "received");
    wait_ok(publisher.into_inner(), LIMIT);
    assert_eq!(s.receive().unwrap().map(|v| *v), None, "nothing twice");
    drop(s);
    assert_eq!(
        free(&svc),
        svc.pool_info().total_chunks(),
        "the history went with its publisher"
    );
}

/// Publisher process for the kill tests: sends `COUNT` samples (0, 1, ...), signals
/// `sent`, and with `LATE` set waits for `go` and gives its history to the subscriber
/// that connected since; then parks until it is killed.
fn killed_publisher(name: &str) {
    let root: PathBuf = env("TEST_DIR");
    let svc = builder(&root, name).history(4).open().unwrap();
    let p = svc.publisher_builder().create().unwrap();
    for i in 0..env::<u64>("COUNT") {
        let _ = send(&p, i);
    }
    signal(&root, "sent");
    if std::env::var_os("LATE").is_some() {
        wait_signal(&root, "go");
        p.update_connections().unwrap();
    }
    loop {
        std::thread::park();
    }
}

/// A publisher SIGKILLed after filling its history, while a subscriber holds some of
/// those samples and has the others queued: recovery (run by creating a port) drains
/// the dead publisher's history, and once the subscriber drops its samples every chunk
/// is back in the pool.
#[test]
fn a_publisher_killed_with_a_full_history_leaks_no_chunk() {
    const TEST: &str = "a_publisher_killed_with_a_full_history_leaks_no_chunk";
    const NAME: &str = "history/killed";
    if role().is_some() {
        return killed_publisher(NAME);
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = builder(root, NAME)
        .history(4)
        .subscriber_buffer(4)
        .max_held(2)
        .create()
        .unwrap();
    let total = svc.pool_info().total_chunks();
    let s = svc.subscriber_builder().create().unwrap();
    let mut envs = envs(root).to_vec();
    envs.push(("COUNT", "10".into()));
    let publisher = Reaped::new(spawn_self(TEST, "publisher", &envs));
    wait_signal(root, "sent");
    // The subscriber has 6..=9 queued (its buffer is 4); the history is 6..=9 too.
    let held: Vec<_> = (0..2).map(|_| s.receive().unwrap().unwrap()).collect();
    assert_eq!((*held[0], *held[1]), (6, 7));
    // In use: the four kept (two held, two queued as well) and the publisher's spare.
    assert_eq!(free(&svc), total - 5);
    publisher.kill();
    // A late subscriber gets nothing from a dead publisher.
    let late = svc.subscriber_builder().create().unwrap(); // recovery runs first
    assert_eq!(svc.port_counts(), (0, 2), "the dead publisher's slot is free");
    assert_eq!(late.pending(), 0);
    // The spare is back; the kept chunks are the subscriber's alone now.
    assert_eq!(free(&svc), total - 4);
    drop(held);
    assert_eq!(free(&svc), total - 2, "6 and 7 were only held: free once dropped");
    assert_eq!(drain(&s), [8, 9]);
    assert_eq!(free(&svc), total, "no chunk leaked");
}

/// A publisher SIGKILLed in the middle of a send with history (the sample pushed to
/// the subscriber and into the history, not yet handed off) and one killed in the
/// middle of re-sending its history to a late subscriber (one kept sample pushed, not
/// yet handed off): recovery finishes each as a send, the subscriber gets the sample,
/// and every chunk returns to the pool.
#[test]
fn a_publisher_killed_mid_send_or_mid_resend_leaks_no_chunk() {
    const TEST: &str = "a_publisher_killed_mid_send_or_mid_resend_leaks_no_chunk";
    const NAME: &str = "history/midway";
    if role().is_some() {
        return killed_publisher(NAME);
    }
    for (point, count, late) in [
        // Stalls in its first send, which pushes sample 0.
        (Stall::HistorySendBeforeHandOff, 1, false),
        // Sends 0..6 (keeps 2..=5), then stalls re-sending 2 to the late subscriber.
        (Stall::SendOneBeforeHandOff, 6, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let svc = builder(root, NAME).history(4).create().unwrap();
        let total = svc.pool_info().total_chunks();
        let early = svc.subscriber_builder().create().unwrap();
        let mut envs = envs(root).to_vec();
        envs.push(("COUNT", count.to_string()));
        envs.push((iox_service::testing::STALL_ENV, point.name().into()));
        if late {
            envs.push(("LATE", "1".into()));
        }
        let publisher = Reaped::new(spawn_self(TEST, "publisher", &envs));
        let (watched, expected) = if late {
            wait_signal(root, "sent");
            assert_eq!(drain(&early), [2, 3, 4, 5], "{point}");
            let s = svc.subscriber_builder().create().unwrap();
            signal(root, "go");
            (Some(s), 2)
        } else {
            (None, 0)
        };
        let watched_sub = watched.as_ref().unwrap_or(&early);
        assert!(
            wait_until(LIMIT, || watched_sub.pending() == 1),
            "{point}: the publisher never reached its stall point"
        );
        publisher.kill();
        let report = Service::cleanup_dead_in(root, NAME).unwrap();
        assert_eq!(
            (report.ports, report.sends_finished),
            (1, 1),
            "{point}: {report:?}"
        );
        assert_eq!(drain(watched_sub), [expected], "{point}");
        assert!(drain(&early).is_empty() || late, "{point}");
        drop(watched);
        drop(early);
        assert_eq!(free(&svc), total, "{point}: chunks lost");
    }
}

/// `.history(n)` is part of the service: opening with another value is the
/// incompatibility error naming it, a history longer than the buffer is refused with
/// the rule, the pool grows by publishers x history, and the static config's text
/// only carries the field when it is set (files without it read as history 0).
#[test]
fn history_settings_are_checked_on_create_and_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let e = builder(root, "history/long").history(5).create().unwrap_err();
    let CreateError::InvalidSetting { source, .. } = e else {
        panic!("expected an invalid setting, got {e}");
    };
    assert_eq!(
        source,
        InvalidConfig::History {
            history: 5,
            buffer: 4
        }
    );
    let text = source.to_string();
    assert!(text.contains("subscriber_buffer (4)"), "{text}");
    assert!(
        builder(root, "history/long")
            .history(5)
            .subscriber_buffer(5)
            .create()
            .is_ok()
    );

    let svc = builder(root, "history/h2").history(2).create().unwrap();
    for other in [3, 0] {
        let e = builder(root, "history/h2").history(other).open().unwrap_err();
        match &e {
            OpenError::IncompatibleLimit {
                what: "history",
                requested,
                found,
                ..
            } => assert_eq!(
                (requested.as_str(), found.as_str()),
                (other.to_string().as_str(), "2")
            ),
            e => panic!("expected the history incompatibility, got {e}"),
        }
        assert!(e.to_string().contains("history"), "{e}");
    }
    let opened = builder(root, "history/h2").open().unwrap();
    assert_eq!(opened.pubsub_config().history, 2);
    assert!(builder(root, "history/h2").history(2).open().is_ok());

    // Default limits: 2 x (2 loans + 1 spare + 8 x 4 + 2 kept) + 8 x 2 = 90.
    assert_eq!(svc.pool_info().total_chunks(), 90);
    let e = Service::named("history/slices")
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .history(2)
        .size_classes(&[(64, 89)])
        .create()
        .unwrap_err();
    assert!(
        matches!(
            e,
            CreateError::InvalidSetting {
                source: InvalidConfig::PoolTooSmall { needed: 90, .. },
                ..
            }
        ),
        "{e}"
    );

    let with = svc.static_config().to_ron();
    assert!(with.contains("history: 2"), "{with}");
    let without = builder(root, "history/none").create().unwrap();
    let text = without.static_config().to_ron();
    assert!(text.contains("history: 0"), "{text}");
    let parsed = StaticConfig::parse(&text, Path::new("x.service")).unwrap();
    assert_eq!(parsed.publish_subscribe().unwrap().history, 0);
    assert_eq!(&parsed, without.static_config());
    let parsed = StaticConfig::parse(&with, Path::new("x.service")).unwrap();
    assert_eq!(parsed.publish_subscribe().unwrap().history, 2);
}

/// Two subscribers connecting at different times each get the history once, at the
/// next send or `update_connections`, and later sends reach them once each; one that
/// reconnects (a new subscriber in the same slot) gets it again.
#[test]
fn subscribers_connecting_at_different_times_each_get_the_history_once() {
    let dir = tempfile::tempdir().unwrap();
    let svc = builder(dir.path(), "history/two")
        .history(3)
        .subscriber_buffer(8)
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    for i in 0..5 {
        assert_eq!(send(&p, i), Ok(0));
    }
    let first = svc.subscriber_builder().create().unwrap();
    assert_eq!(
        first.pending(),
        0,
        "history arrives with the publisher's next send"
    );
    assert_eq!(send(&p, 5), Ok(1));
    assert_eq!(drain(&first), [2, 3, 4, 5]);
    for i in 6..8 {
        assert_eq!(send(&p, i), Ok(1));
    }
    let second = svc.subscriber_builder().create().unwrap();
    assert_eq!(p.update_connections(), Ok(3));
    assert_eq!(p.update_connections(), Ok(0), "once per subscriber");
    assert_eq!(send(&p, 8), Ok(2));
    assert_eq!(drain(&second), [5, 6, 7, 8]);
    assert_eq!(drain(&first), [6, 7, 8], "no duplicate for the first");
    assert_eq!(send(&p, 9), Ok(2));
    assert_eq!((drain(&first), drain(&second)), (vec![9], vec![9]));

    drop(second);
    let again = svc.subscriber_builder().create().unwrap();
    assert_eq!(send(&p, 10), Ok(2));
    assert_eq!(
        drain(&again),
        [7, 8, 9, 10],
        "a new subscriber in the slot gets it again"
    );
    assert_eq!(drain(&first), [10]);

    // A publisher without history: `update_connections` does nothing.
    let plain = builder(dir.path(), "history/plain").create().unwrap();
    let p0 = plain.publisher_builder().create().unwrap();
    assert_eq!(send(&p0, 1), Ok(0));
    let s0 = plain.subscriber_builder().create().unwrap();
    assert_eq!(p0.update_connections(), Ok(0));
    assert_eq!(send(&p0, 2), Ok(1));
    assert_eq!(drain(&s0), [2]);
}

/// History with a buffer no longer than it, under `DropOldest` and `Reject`, with a
/// subscriber that stops reading: nothing leaks, the pool is never exhausted, and
/// dropping the publisher returns its kept samples.
#[test]
fn history_with_a_small_buffer_leaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for overflow in [Overflow::DropOldest, Overflow::Reject] {
        let name = format!("history/small-{overflow:?}");
        let svc = builder(dir.path(), &name)
            .history(2)
            .subscriber_buffer(2)
            .max_held(1)
            .overflow(overflow)
            .create()
            .unwrap();
        let total = svc.pool_info().total_chunks();
        let p = svc.publisher_builder().create().unwrap();
        let stopped = svc.subscriber_builder().create().unwrap();
        let mut late = None;
        for i in 0..100u64 {
            let sent = send(&p, i);
            match overflow {
                Overflow::DropOldest => assert!(sent.is_ok(), "{sent:?}"),
                _ => assert!(
                    matches!(sent, Ok(_) | Err(SendError::QueueFull { .. })),
                    "{sent:?}"
                ),
            }
            if i == 40 {
                late = Some(svc.subscriber_builder().create().unwrap());
            }
            if let Some(l) = &late
                && i % 3 == 0
            {
                drop(drain(l));
            }
            if i % 10 == 0 {
                let _ = p.update_connections();
            }
        }
        drop(late);
        // The stopped subscriber has 2 queued, the history keeps 2 (maybe the same),
        // and the publisher has its spare.
        assert!(
            free(&svc) >= total - 5,
            "{overflow:?}: {} free of {total}",
            free(&svc)
        );
        let kept = drain(&stopped);
        assert_eq!(kept.len(), 2, "{overflow:?}");
        if overflow == Overflow::DropOldest {
            assert_eq!(kept, [98, 99]);
        }
        drop(stopped);
        // Only the kept two and the spare are in use.
        assert_eq!(free(&svc), total - 3, "{overflow:?}");
        drop(p);
        assert_eq!(
            free(&svc),
            total,
            "{overflow:?}: the publisher's history went with it"
        );
    }
}
