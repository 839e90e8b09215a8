//! `Subscriber::receive_async` (the `tokio` feature) across real processes: children
//! publish, the parent awaits on tokio's reactor. Built only with the feature
//! (`cargo test --workspace --all-features`, or `-p iox_service --features tokio`).
#![cfg(feature = "tokio")]

use std::time::{Duration, Instant};

use iox_service::{Overflow, PubSubService, SendError, Service, Subscriber};
use iox_testkit::{Reaped, env, role, spawn_self, wait_ok};

const LIMIT: Duration = Duration::from_secs(120);
const COUNT: u64 = 2_000;

fn open(root: &std::path::Path, name: &str) -> PubSubService<[u64; 2]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u64; 2]>()
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(4)
        .overflow(Overflow::Reject)
        .open_or_create()
        .unwrap()
}

async fn take_all(sub: &mut Subscriber<[u64; 2]>, id: u64) {
    for seq in 0..COUNT {
        let s = sub.receive_async().await.unwrap();
        assert_eq!(*s, [id, seq], "out of order, lost or duplicated");
    }
}

#[test]
fn receive_async_across_processes() {
    const TEST: &str = "receive_async_across_processes";
    if role().is_some() {
        let svc = open(
            std::path::Path::new(&env::<String>("IOX_ROOT")),
            &env::<String>("SERVICE"),
        );
        let publisher = svc.publisher_builder().create().unwrap();
        assert_eq!(publisher.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        let id: u64 = env("ID");
        for seq in 0..COUNT {
            let start = Instant::now();
            while let Err(e) = publisher.loan_uninit().unwrap().write_payload([id, seq]).send() {
                assert!(matches!(e, SendError::QueueFull { .. }), "{e}");
                assert!(start.elapsed() < LIMIT, "the subscriber stopped reading");
                std::thread::yield_now();
            }
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let services: Vec<_> = (0..2).map(|i| open(dir.path(), &format!("async/{i}"))).collect();
    let mut subs: Vec<_> = services
        .iter()
        .map(|s| s.subscriber_builder().create().unwrap())
        .collect();
    let children: Vec<_> = (0..2)
        .map(|i| {
            Reaped::new(spawn_self(
                TEST,
                "publisher",
                &[
                    ("IOX_ROOT", dir.path().display().to_string()),
                    ("SERVICE", format!("async/{i}")),
                    ("ID", i.to_string()),
                ],
            ))
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    // Two subscribers awaited concurrently on one thread: each wait parks in the
    // reactor, so neither starves the other.
    let [a, b] = &mut subs[..] else { unreachable!() };
    runtime.block_on(async { tokio::join!(take_all(a, 0), take_all(b, 1)) });
    for c in children {
        wait_ok(c.into_inner(), LIMIT);
    }
    for s in &subs {
        assert!(s.receive().unwrap().is_none(), "exactly once");
    }
}

/// The future can be spawned on a multi-threaded runtime: it is `Send`.
#[test]
fn receive_async_future_is_send() {
    fn is_send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path(), "async/send");
    let mut sub = svc.subscriber_builder().create().unwrap();
    let future = sub.receive_async();
    is_send(&future);
}

/// `Listener::wait_async`: a child process notifies 200 distinct ids; the parent
/// awaits each on tokio's reactor and sees every one exactly once.
#[test]
fn listener_wait_async_across_processes() {
    const TEST: &str = "listener_wait_async_across_processes";
    const IDS: u32 = 200;
    let open_event = |root: &std::path::Path| {
        Service::named("async/event")
            .unwrap()
            .root(root)
            .event()
            .event_id_max(255)
            .open_or_create()
            .unwrap()
    };
    if role().is_some() {
        let event = open_event(std::path::Path::new(&env::<String>("IOX_ROOT")));
        let notifier = event.notifier_builder().create().unwrap();
        let start = Instant::now();
        while event.port_counts().1 == 0 {
            assert!(start.elapsed() < LIMIT, "no listener");
            std::thread::yield_now();
        }
        for id in 1..=IDS {
            assert_eq!(
                notifier
                    .notify_with_custom_event_id(iox_service::EventId::new(id))
                    .unwrap(),
                1
            );
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let event = open_event(dir.path());
    let mut listener = event.listener_builder().create().unwrap();
    let child = spawn_self(
        TEST,
        "notifier",
        &[("IOX_ROOT", dir.path().display().to_string())],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let mut seen = vec![0u32; IDS as usize + 1];
    runtime.block_on(async {
        for _ in 0..IDS {
            let id = listener.wait_async().await.unwrap().as_value() as usize;
            seen[id] += 1;
        }
    });
    wait_ok(child, LIMIT);
    assert!(seen[1..].iter().all(|&n| n == 1), "each id once: {seen:?}");
    assert_eq!(listener.try_wait_one().unwrap(), None);
}
