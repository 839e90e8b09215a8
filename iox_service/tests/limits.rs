//! Limits and pool sizing: every limit error states its rule; slice pools are sized so
//! a subscriber that stops reading cannot make a publisher's loan fail, unless the user
//! opts in to a smaller pool. The slow subscriber runs in its own process (this test
//! binary re-executed, see `iox_testkit`), each test with its own root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_mempool::LoanError::Exhausted as PoolExhausted;
use iox_service::static_config::{InvalidConfig, MAX_OPEN_HANDLES};
use iox_service::{CreateError, LoanError, OpenError, Overflow, PubSubBuilder, Service};
use iox_testkit::{Reaped, env, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(120);
const CHUNK: usize = 4096;

fn builder(root: &Path, name: &str) -> PubSubBuilder<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
}

fn invalid(e: CreateError) -> InvalidConfig {
    match e {
        CreateError::InvalidSetting { source, .. } => source,
        e => panic!("expected an invalid setting, got {e}"),
    }
}

#[test]
fn every_limit_error_states_its_rule() {
    let dir = tempfile::tempdir().unwrap();
    let typed = |name: &str| {
        Service::named(name)
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<u64>()
    };
    let e = invalid(typed("a").max_publishers(64).create().unwrap_err());
    let InvalidConfig::Limit {
        what,
        value,
        max,
        rule,
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!((*what, *value, *max), ("max_publishers", 64, 46));
    assert!(rule.contains("publishers + subscribers <= 47"), "{e}");
    assert!(e.to_string().contains("owner bit"), "{e}");

    let e = invalid(
        typed("b")
            .max_publishers(30)
            .max_subscribers(30)
            .create()
            .unwrap_err(),
    );
    assert!(
        matches!(
            e,
            InvalidConfig::TooManyPorts {
                ports: 60,
                max: 47,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("max_publishers + max_subscribers is 60; at most 47 ports"),
        "{e}"
    );

    let e = invalid(
        typed("c")
            .max_publishers(16)
            .max_subscribers(16)
            .subscriber_buffer(1 << 16)
            .create()
            .unwrap_err(),
    );
    assert!(matches!(e, InvalidConfig::TooManyQueueSlots { .. }), "{e}");
    assert!(e.to_string().contains("queue slots per service"), "{e}");

    // Every bounded setting, at 0 and above its maximum: a Limit with a rule.
    type Set = fn(PubSubBuilder<u64>, u32) -> PubSubBuilder<u64>;
    let settings: [(&str, Set, u32); 5] = [
        ("max_publishers", |b, v| b.max_publishers(v), 47),
        ("max_subscribers", |b, v| b.max_subscribers(v), 47),
        ("subscriber_buffer", |b, v| b.subscriber_buffer(v), (1 << 16) + 1),
        ("max_loans", |b, v| b.max_loans(v), 257),
        ("max_held", |b, v| b.max_held(v), 257),
    ];
    for (name, set, too_big) in settings {
        for v in [0, too_big] {
            let e = invalid(set(typed("d"), v).create().unwrap_err());
            let InvalidConfig::Limit { what, rule, .. } = &e else {
                panic!("{name} = {v}: {e}")
            };
            assert_eq!(*what, name);
            assert!(
                rule.starts_with("; ") && rule.len() > 10,
                "{name}: no rule in {e}"
            );
        }
    }
    // The open-handle limit's error says the rule too (its number, from the constant).
    let e = OpenError::TooManyUsers {
        name: "x".into(),
        max: MAX_OPEN_HANDLES,
    };
    assert!(e.to_string().contains("at most 128 per service"), "{e}");
}

#[test]
fn size_classes_below_the_worst_case_are_refused_naming_the_count() {
    let dir = tempfile::tempdir().unwrap();
    // Default limits: 2 x (2 loans + 1 spare + 8 x 4) + 8 x 2 = 86.
    let e = invalid(
        builder(dir.path(), "small")
            .size_classes(&[(16 << 20, 4)])
            .create()
            .unwrap_err(),
    );
    assert!(
        matches!(
            e,
            InvalidConfig::PoolTooSmall {
                chunk_size: 0x100_0000,
                count: 4,
                needed: 86
            }
        ),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("86") && text.contains("allow_pool_exhaustion"),
        "{text}"
    );
    // Lower limits, smaller worst case: 1 x (2 + 1 + 1 x 2) + 1 x 2 = 7.
    let e = invalid(
        builder(dir.path(), "small")
            .max_publishers(1)
            .max_subscribers(1)
            .subscriber_buffer(2)
            .size_classes(&[(256, 7), (CHUNK, 6)])
            .create()
            .unwrap_err(),
    );
    assert!(
        matches!(
            e,
            InvalidConfig::PoolTooSmall {
                chunk_size: CHUNK,
                count: 6,
                needed: 7
            }
        ),
        "{e}"
    );
    let ok = builder(dir.path(), "enough")
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(2)
        .size_classes(&[(256, 7), (CHUNK, 9)])
        .create()
        .unwrap();
    let counts: Vec<u32> = ok
        .static_config()
        .layout
        .classes()
        .iter()
        .map(|c| c.count)
        .collect();
    assert_eq!(counts, [7, 9]);
    // Derived counts: every class gets the worst case.
    let derived = builder(dir.path(), "derived")
        .chunk_sizes(&[256, CHUNK])
        .create()
        .unwrap();
    let counts: Vec<u32> = derived
        .static_config()
        .layout
        .classes()
        .iter()
        .map(|c| c.count)
        .collect();
    assert_eq!(counts, [86, 86]);
    // A count of 0 stays a layout error.
    let e = builder(dir.path(), "zero")
        .size_classes(&[(64, 0)])
        .create()
        .unwrap_err();
    assert!(matches!(e, CreateError::Layout { .. }), "{e}");
}

#[test]
fn opting_in_to_a_small_pool_lets_a_stopped_subscriber_exhaust_it() {
    let dir = tempfile::tempdir().unwrap();
    let svc = builder(dir.path(), "opt-in")
        .size_classes(&[(CHUNK, 4)])
        .allow_pool_exhaustion(true)
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let send = || p.loan_slice_uninit(CHUNK).map(|l| l.write_from_fn(|_| 7).send());
    let mut held = Vec::new();
    for _ in 0..2 {
        assert_eq!(send().unwrap(), Ok(1));
        held.push(s.receive().unwrap().unwrap());
    }
    // The subscriber holds 2 and stops reading: 4 chunks do not last 10 x buffer sends.
    let mut exhausted = false;
    for _ in 0..40 {
        match send() {
            Ok(sent) => assert_eq!(sent, Ok(1)),
            Err(LoanError::Pool(PoolExhausted { .. })) => {
                exhausted = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(exhausted, "a 4-chunk pool outlasted a stopped subscriber");
}

fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("signal.{name}"))
}

fn signal(dir: &Path, name: &str) {
    std::fs::write(file(dir, name), b"").unwrap();
}

fn wait_signal(dir: &Path, name: &str) {
    assert!(
        wait_until(LIMIT, || file(dir, name).exists()),
        "no {name:?} signal within {LIMIT:?}"
    );
}

/// Default limits and derived counts: a subscriber process holds its maximum and stops
/// reading; a publisher process sends 10 x the buffer of the largest class, and every
/// loan succeeds (DropOldest replaces what the stopped subscriber has queued).
#[test]
fn a_stopped_subscriber_never_exhausts_a_default_slice_pool() {
    const TEST: &str = "a_stopped_subscriber_never_exhausts_a_default_slice_pool";
    let open = |root: &Path| {
        builder(root, "slow")
            .chunk_sizes(&[256, CHUNK])
            .overflow(Overflow::DropOldest)
            .open_or_create()
            .unwrap()
    };
    match role().as_deref() {
        Some("subscriber") => {
            let root: PathBuf = env("TEST_DIR");
            let svc = open(&root);
            let s = svc.subscriber_builder().create().unwrap();
            signal(&root, "sub-ready");
            let max_held = svc.pubsub_config().max_held as usize;
            let held: Vec<_> = (0..max_held)
                .map(|_| s.receive_timeout(LIMIT).unwrap().expect("a sample"))
                .collect();
            signal(&root, "held");
            // Stops reading until the publisher is done.
            wait_signal(&root, "pub-done");
            assert_eq!(s.pending(), svc.pubsub_config().subscriber_buffer as usize);
            drop(held);
        }
        Some("publisher") => {
            let root: PathBuf = env("TEST_DIR");
            let svc = open(&root);
            let p = svc.publisher_builder().create().unwrap();
            let c = svc.pubsub_config();
            let (max_held, buffer) = (c.max_held as usize, c.subscriber_buffer as usize);
            let send = |len: usize| {
                let loan = match p.loan_slice_uninit(len) {
                    Ok(l) => l,
                    Err(LoanError::Pool(e @ PoolExhausted { .. })) => {
                        panic!("a stopped subscriber exhausted the pool: {e}")
                    }
                    Err(e) => panic!("{e}"),
                };
                assert_eq!(loan.write_from_fn(|i| i as u8).send(), Ok(1));
            };
            for _ in 0..max_held {
                send(CHUNK);
            }
            wait_signal(&root, "held");
            for i in 0..10 * buffer {
                send(if i % 3 == 0 { 100 } else { CHUNK });
            }
            // The largest class alone, too.
            for _ in 0..10 * buffer {
                send(CHUNK);
            }
            signal(&root, "pub-done");
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let svc = open(root);
            let envs = [
                ("IOX_ROOT", root.display().to_string()),
                ("TEST_DIR", root.display().to_string()),
            ];
            let sub = Reaped::new(spawn_self(TEST, "subscriber", &envs));
            wait_signal(root, "sub-ready");
            let publisher = spawn_self(TEST, "publisher", &envs);
            wait_ok(publisher, LIMIT);
            wait_ok(sub.into_inner(), LIMIT);
            drop(svc);
        }
    }
}
