//! The event pattern across real processes: this test binary re-executes itself as
//! children (see `iox_testkit`), each test with its own `IOX_ROOT`.

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::{
    ConfigError, CreateError, EventId, EventService, InvalidConfig, NotifyError, OpenError,
    OpenOrCreateError, Service,
};
use iox_testkit::{Reaped, env, role, root_env, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(60);

fn open(name: &str) -> EventService {
    Service::named(name).unwrap().event().open().unwrap()
}

fn all(listener: &iox_service::Listener) -> Vec<u32> {
    let mut v = Vec::new();
    listener.try_wait_all(|id| v.push(id.as_value())).unwrap();
    v
}

/// The files under the root (this process's own node file aside: it stays while the
/// process uses other roots, as parallel tests do).
fn files(root: &Path) -> Vec<String> {
    iox_service::testing::files_but_own_node(root)
}

/// Waits (bounded) until `child` exits successfully.
fn reap_ok(child: std::process::Child) {
    wait_ok(child, LIMIT);
}

#[test]
fn notify_across_processes_coalesces_and_loses_no_distinct_id() {
    const NAME: &str = "events/coalesce";
    const TEST: &str = "notify_across_processes_coalesces_and_loses_no_distinct_id";
    if let Some(r) = role() {
        let event = open(NAME);
        let notifier = event.notifier_builder().create().unwrap();
        match r.as_str() {
            "burst" => {
                // Every id of 0..=200, three times each, in a scrambled order.
                for round in 0..3 {
                    for i in 0..=200u32 {
                        let id = (i * 37 + round) % 201;
                        assert_eq!(notifier.notify_with_custom_event_id(EventId::new(id)).unwrap(), 1);
                    }
                }
            }
            "one" => {
                notifier
                    .notify_with_custom_event_id(EventId::new(env("ID")))
                    .unwrap();
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let event = Service::named(NAME)
        .unwrap()
        .root(dir.path())
        .event()
        .event_id_max(300)
        .create()
        .unwrap();
    let listener = event.listener_builder().create().unwrap();
    reap_ok(spawn_self(TEST, "burst", &[root_env(dir.path())]));
    // 603 notifications of 201 distinct ids: each id exactly once, lowest first.
    assert_eq!(all(&listener), (0..=200).collect::<Vec<_>>());
    assert_eq!(all(&listener), Vec::<u32>::new());
    // A blocked wait is woken by another process's notify.
    let child = spawn_self(TEST, "one", &[root_env(dir.path()), ("ID", "299".into())]);
    let got = listener.timed_wait_one(LIMIT).unwrap();
    assert_eq!(got, Some(EventId::new(299)));
    reap_ok(child);
    drop((listener, event));
    assert_eq!(files(dir.path()), Vec::<String>::new());
}

#[test]
fn listener_killed_while_blocked_is_recovered_and_notifiers_never_block() {
    const NAME: &str = "events/dead-listener";
    const TEST: &str = "listener_killed_while_blocked_is_recovered_and_notifiers_never_block";
    if role().is_some() {
        let event = open(NAME);
        let listener = event.listener_builder().create().unwrap();
        let _ = listener.as_fd(); // armed too: its notifiers ring its socket
        loop {
            // Blocked here until killed (ids are taken and the wait resumes).
            let _ = listener.blocking_wait_one().unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let event = Service::named(NAME).unwrap().root(root).event().create().unwrap();
    let notifier = event.notifier_builder().create().unwrap();
    let child = Reaped::new(spawn_self(TEST, "listener", &[root_env(root)]));
    assert!(
        wait_until(LIMIT, || event.waiting_listeners() == 1),
        "the child never blocked"
    );
    assert!(
        files(root).iter().any(|f| f.ends_with(".sock")),
        "{:?}",
        files(root)
    );
    child.kill();
    // The dead listener's slot is still there: notifies reach it and return at once.
    let start = Instant::now();
    for i in 0..1000 {
        assert_eq!(
            notifier
                .notify_with_custom_event_id(EventId::new(i % 256))
                .unwrap(),
            1
        );
    }
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    let report = Service::cleanup_dead_in(root, NAME).unwrap();
    assert_eq!(report.ports, 1, "{report:?}");
    assert_eq!(report.users, 1, "{report:?}");
    assert_eq!(event.port_counts(), (1, 0));
    assert!(
        // The dead listener's readiness socket is gone (our hand-over socket stays).
        !files(root)
            .iter()
            .any(|f| f.ends_with(".sock") && !f.contains(".h.")),
        "{:?}",
        files(root)
    );
    assert_eq!(notifier.notify().unwrap(), 0);
    drop((notifier, event));
    assert_eq!(files(root), Vec::<String>::new());
}

#[test]
fn dead_notifier_is_reported_to_listeners_by_whoever_recovers_it() {
    const NAME: &str = "events/dead-notifier";
    const TEST: &str = "dead_notifier_is_reported_to_listeners_by_whoever_recovers_it";
    const CREATED: u32 = 1;
    const DEAD: u32 = 9;
    if role().is_some() {
        let event = open(NAME);
        let _notifier = event.notifier_builder().create().unwrap();
        loop {
            std::thread::park(); // until SIGKILLed
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let event = Service::named(NAME)
        .unwrap()
        .root(root)
        .event()
        .notifier_created_event(EventId::new(CREATED))
        .notifier_dead_event(EventId::new(DEAD))
        .create()
        .unwrap();
    assert_eq!(event.event_config().notifier_dead_event, Some(DEAD));
    let listener = event.listener_builder().create().unwrap();
    let child = Reaped::new(spawn_self(TEST, "notifier", &[root_env(root)]));
    // The child's notifier announces itself.
    assert_eq!(
        listener.timed_wait_one(LIMIT).unwrap(),
        Some(EventId::new(CREATED))
    );
    child.kill();
    // A listener blocked in another thread is woken by the recovery in this one.
    let waiter = std::thread::spawn(move || {
        let got = listener.timed_wait_one(LIMIT).unwrap();
        (got, listener)
    });
    assert!(wait_until(LIMIT, || event.waiting_listeners() == 1));
    let report = event.cleanup_dead();
    assert_eq!(report.ports, 1, "{report:?}");
    let (got, listener) = waiter.join().unwrap();
    assert_eq!(got, Some(EventId::new(DEAD)));
    assert_eq!(all(&listener), Vec::<u32>::new());
    assert_eq!(event.port_counts(), (0, 1));
    // Recovery by another route (port creation) reports it too.
    let child = Reaped::new(spawn_self(TEST, "notifier", &[root_env(root)]));
    assert_eq!(
        listener.timed_wait_one(LIMIT).unwrap(),
        Some(EventId::new(CREATED))
    );
    child.kill();
    let _own = event.notifier_builder().create().unwrap();
    let mut got = BTreeSet::new();
    listener
        .try_wait_all(|id| {
            got.insert(id.as_value());
        })
        .unwrap();
    assert_eq!(
        got,
        BTreeSet::from([CREATED, DEAD]),
        "our own notifier's created event, and the dead one"
    );
}

#[test]
fn notifier_created_and_dropped_events_reach_listeners() {
    const NAME: &str = "events/lifecycle";
    const TEST: &str = "notifier_created_and_dropped_events_reach_listeners";
    if role().is_some() {
        let event = open(NAME);
        let notifier = event
            .notifier_builder()
            .default_event_id(EventId::new(5))
            .create()
            .unwrap();
        notifier.notify().unwrap();
        drop(notifier);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let event = Service::named(NAME)
        .unwrap()
        .root(dir.path())
        .event()
        .event_id_max(15)
        .notifier_created_event(EventId::new(14))
        .notifier_dropped_event(EventId::new(15))
        .create()
        .unwrap();
    let listener = event.listener_builder().create().unwrap();
    reap_ok(spawn_self(TEST, "notifier", &[root_env(dir.path())]));
    assert_eq!(all(&listener), vec![5, 14, 15]);
    // Opening with other lifecycle settings is refused, naming the setting.
    let e = Service::named(NAME)
        .unwrap()
        .root(dir.path())
        .event()
        .notifier_dropped_event(EventId::new(3))
        .open()
        .unwrap_err();
    assert!(
        matches!(
            e,
            OpenError::IncompatibleLimit {
                what: "notifier_dropped_event",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("notifier_dropped_event"), "{e}");
}

#[test]
fn event_service_and_pubsub_service_refuse_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let event = Service::named("ev").unwrap().root(root).event().create().unwrap();
    let e = Service::named("ev")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap_err();
    let OpenOrCreateError::Open(e @ OpenError::WrongPattern { .. }) = e else {
        panic!("{e}")
    };
    let text = e.to_string();
    assert!(
        text.contains("event") && text.contains("publish-subscribe"),
        "{text}"
    );
    let pubsub = Service::named("ps")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let e = Service::named("ps")
        .unwrap()
        .root(root)
        .event()
        .open()
        .unwrap_err();
    assert!(matches!(e, OpenError::WrongPattern { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("uses the publish-subscribe pattern, not event"),
        "{e}"
    );
    drop((event, pubsub));
}

#[test]
fn bad_settings_ids_and_static_configs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let builder = |name: &str| Service::named(name).unwrap().root(root).event();
    // Settings out of bounds.
    let e = builder("a").event_id_max(1 << 20).create().unwrap_err();
    assert!(
        matches!(
            &e,
            CreateError::InvalidSetting {
                source: InvalidConfig::EventId {
                    what: "event_id_max",
                    ..
                },
                ..
            }
        ),
        "{e}"
    );
    let e = builder("a")
        .event_id_max(7)
        .notifier_dead_event(EventId::new(8))
        .create()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("notifier_dead_event is 8; it must be at most 7"),
        "{e}"
    );
    let e = builder("a").max_listeners(0).create().unwrap_err();
    assert!(e.to_string().contains("max_listeners"), "{e}");
    let e = builder("a")
        .max_notifiers(30)
        .max_listeners(30)
        .create()
        .unwrap_err();
    assert!(e.to_string().contains("47"), "{e}");
    // An id above the maximum.
    let event = builder("a").event_id_max(63).create().unwrap();
    let notifier = event.notifier_builder().create().unwrap();
    let e = notifier
        .notify_with_custom_event_id(EventId::new(64))
        .unwrap_err();
    assert_eq!(e, NotifyError::EventIdOutOfBounds { id: 64, max: 63 });
    assert!(e.to_string().contains("event_id_max 63"), "{e}");
    let bad_default = event
        .notifier_builder()
        .default_event_id(EventId::new(1000))
        .create()
        .unwrap();
    assert!(bad_default.notify().is_err());
    // A larger range than the service has is refused on open.
    let e = builder("a").event_id_max(64).open().unwrap_err();
    assert!(
        matches!(
            e,
            OpenError::IncompatibleLimit {
                what: "event_id_max",
                ..
            }
        ),
        "{e}"
    );
    // Garbled static configs: each a clear error, no panic.
    let config = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "service"))
        .unwrap();
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("event_id_max: 63"), "{text}");
    // Out of bounds: parsed, then refused by the event section's check.
    std::fs::write(&config, text.replace("event_id_max: 63", "event_id_max: 4000000")).unwrap();
    let e = builder("a").open().unwrap_err();
    assert!(
        matches!(
            &e,
            OpenError::Config(ConfigError::Invalid {
                what: InvalidConfig::EventId {
                    what: "event_id_max",
                    ..
                },
                ..
            })
        ),
        "{e}"
    );
    // Not of the shape: no pattern section, another pattern's name over an event
    // section, truncated, not text.
    let swapped = text.replace("pattern: Event(", "pattern: PublishSubscribe(");
    assert_ne!(swapped, text, "{text}");
    let malformed = [
        cut_pattern_section(&text),
        swapped,
        "(version: 3, pattern: Event".to_string(),
        "\u{0}\u{1}garbage".to_string(),
    ];
    for garbled in malformed {
        std::fs::write(&config, garbled).unwrap();
        let e = builder("a").open().unwrap_err();
        assert!(
            matches!(e, OpenError::Config(ConfigError::Malformed { .. })),
            "{e}"
        );
    }
    std::fs::write(&config, &text).unwrap();
    drop((notifier, bad_default, event));
}

/// The static config text without its `pattern: Event((...))` entry.
fn cut_pattern_section(text: &str) -> String {
    let start = text.find("    pattern:").expect("a pattern section");
    let close = "\n    )),\n";
    let end = start
        + text[start..]
            .find(close)
            .unwrap_or_else(|| panic!("its end in {text}"))
        + close.len();
    format!("{}{}", &text[..start], &text[end..])
}

#[test]
fn listener_descriptor_becomes_readable_on_another_process_notify() {
    const NAME: &str = "events/fd";
    const TEST: &str = "listener_descriptor_becomes_readable_on_another_process_notify";
    if role().is_some() {
        let event = open(NAME);
        event
            .notifier_builder()
            .create()
            .unwrap()
            .notify_with_custom_event_id(EventId::new(3))
            .unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let event = Service::named(NAME)
        .unwrap()
        .root(dir.path())
        .event()
        .create()
        .unwrap();
    let listener = event.listener_builder().create().unwrap();
    let readable = |timeout_ms: i32| {
        let mut fds = [rustix::event::PollFd::new(
            &listener,
            rustix::event::PollFlags::IN,
        )];
        let ts = rustix::event::Timespec {
            tv_sec: (timeout_ms / 1000) as _,
            tv_nsec: ((timeout_ms % 1000) * 1_000_000) as _,
        };
        rustix::event::poll(&mut fds, Some(&ts)).unwrap() == 1
    };
    assert!(!readable(0), "nothing pending yet");
    let child = spawn_self(TEST, "notifier", &[root_env(dir.path())]);
    assert!(
        readable(60_000),
        "the notify did not make the descriptor readable"
    );
    reap_ok(child);
    assert_eq!(all(&listener), vec![3]);
    // Empty again: the empty look consumed the token and re-armed.
    assert_eq!(all(&listener), Vec::<u32>::new());
    assert!(!readable(0));
    // Pending before the first as_fd: readable at once (a fresh listener).
    let second = event.listener_builder().create().unwrap();
    event.notifier_builder().create().unwrap().notify().unwrap();
    let mut fds = [rustix::event::PollFd::new(&second, rustix::event::PollFlags::IN)];
    assert_eq!(
        rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())).unwrap(),
        1
    );
}

#[test]
fn stress_notifier_processes_and_a_draining_listener() {
    const NAME: &str = "events/stress";
    const TEST: &str = "stress_notifier_processes_and_a_draining_listener";
    const CHILDREN: u32 = 4;
    const IDS: u32 = 60; // per child: ids k*IDS..(k+1)*IDS
    const ROUNDS: u32 = 2000;
    // Markers after the ids: start of the final round, and done.
    let start_id = |k: u32| CHILDREN * IDS + k;
    let done_id = |k: u32| CHILDREN * IDS + CHILDREN + k;
    if role().is_some() {
        let k: u32 = env("K");
        let event = open(NAME);
        let notifier = event.notifier_builder().create().unwrap();
        let notify = |id| {
            notifier.notify_with_custom_event_id(EventId::new(id)).unwrap();
        };
        for r in 0..ROUNDS {
            for i in 0..IDS {
                notify(k * IDS + (i + r) % IDS);
            }
        }
        notify(start_id(k));
        for i in 0..IDS {
            notify(k * IDS + i);
        }
        notify(done_id(k));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let event = Service::named(NAME)
        .unwrap()
        .root(dir.path())
        .event()
        .max_notifiers(CHILDREN)
        .event_id_max(CHILDREN * IDS + 2 * CHILDREN - 1)
        .create()
        .unwrap();
    let listener = event.listener_builder().create().unwrap();
    let children: Vec<_> = (0..CHILDREN)
        .map(|k| {
            Reaped::new(spawn_self(
                TEST,
                "notifier",
                &[root_env(dir.path()), ("K", k.to_string())],
            ))
        })
        .collect();
    let total = (CHILDREN * IDS + 2 * CHILDREN) as usize;
    // Per id: the last drain that took it; per child: the drain that took its start.
    let mut last_seen = vec![None::<usize>; total];
    let mut drain = 0usize;
    let started = Instant::now();
    while (0..CHILDREN).any(|k| last_seen[done_id(k) as usize].is_none()) {
        assert!(started.elapsed() < LIMIT * 2, "the markers never all arrived");
        drain += 1;
        let n = listener
            .timed_wait_all(
                |id| last_seen[id.as_value() as usize] = Some(drain),
                Duration::from_secs(5),
            )
            .unwrap();
        // A wait that timed out leaves nothing pending (no lost wake-up).
        if n == 0 {
            assert!(!listener.has_pending(), "a timed-out wait left ids pending");
        }
    }
    for c in children {
        reap_ok(c.into_inner());
    }
    drain += 1;
    listener
        .try_wait_all(|id| last_seen[id.as_value() as usize] = Some(drain))
        .unwrap();
    for k in 0..CHILDREN {
        let start = last_seen[start_id(k) as usize].expect("start marker");
        for id in k * IDS..(k + 1) * IDS {
            let seen = last_seen[id as usize].unwrap_or_else(|| panic!("id {id} never seen"));
            assert!(
                seen >= start,
                "id {id} last seen in drain {seen}, before its last notify (drain {start})"
            );
        }
    }
}

#[test]
fn a_blocked_listener_learns_that_its_service_was_removed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let event = Service::named("events/removed")
        .unwrap()
        .root(&root)
        .event()
        .create()
        .unwrap();
    let listener = event.listener_builder().create().unwrap();
    let waiter = std::thread::spawn(move || listener.timed_wait_one(LIMIT).map_err(|e| e.to_string()));
    assert!(wait_until(LIMIT, || event.waiting_listeners() == 1));
    assert!(Service::remove_in(&root, "events/removed").unwrap());
    let got = waiter.join().unwrap();
    assert!(got.as_ref().is_err_and(|e| e.contains("removed")), "{got:?}");
    assert!(event.is_removed());
}
