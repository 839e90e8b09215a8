//! The connected-subscriber set (`shm/connected.rs`): a publisher delivers to the
//! subscribers whose bit is set, so the set must follow subscribers through SIGKILL,
//! recovery and slot reuse. Checked by behaviour (who gets what, and exact pool
//! counts), across real processes: this binary re-executes itself as children (see
//! `iox_testkit`).

use std::path::Path;
use std::time::Duration;

use iox_service::{Overflow, PubSubService, Service};
use iox_testkit::{Reaped, env, role, spawn_self, wait_until};

const NAME: &str = "connected";
const LIMIT: Duration = Duration::from_secs(60);

fn open(root: &Path) -> PubSubService<u64> {
    Service::named(NAME)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .max_subscribers(4)
        .overflow(Overflow::DropOldest)
        .open_or_create()
        .unwrap()
}

/// A child subscriber that connects and then waits to be killed, holding one sample
/// and with more queued for it.
fn run_child() {
    let root = std::path::PathBuf::from(env::<String>("IOX_ROOT"));
    let svc = open(&root);
    let s = svc.subscriber_builder().create().unwrap();
    let mut held = None;
    loop {
        if held.is_none() {
            held = s.receive().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Free chunks: all but the publisher's spare (`spares` publishers alive).
fn assert_exact(svc: &PubSubService<u64>, spares: u64) {
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks() - spares, "chunks lost");
}

#[test]
fn a_sigkilled_subscriber_leaves_the_set_and_its_slot_is_reused() {
    if role().as_deref() == Some("subscriber") {
        run_child();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path());
    let publisher = svc.publisher_builder().create().unwrap();
    let child = Reaped::new(spawn_self(
        "a_sigkilled_subscriber_leaves_the_set_and_its_slot_is_reused",
        "subscriber",
        &[("IOX_ROOT", dir.path().display().to_string())],
    ));
    assert!(wait_until(LIMIT, || svc.port_counts().1 == 1));
    // Connected: every send reaches it (it holds one sample; the rest stay queued).
    for i in 0..10 {
        assert_eq!(publisher.loan_uninit().unwrap().write_payload(i).send(), Ok(1));
    }
    child.kill();
    // Dead but not yet recovered: its bit is still set, so sends still reach its
    // queue (nothing is lost: recovery drains it).
    assert_eq!(publisher.loan_uninit().unwrap().write_payload(10).send(), Ok(1));
    let report = Service::cleanup_dead_in(dir.path(), NAME).unwrap();
    assert_eq!(report.ports, 1);
    // Recovered: its bit is clear, no send reaches the slot, and every chunk it held
    // or had queued is back.
    assert_eq!(publisher.loan_uninit().unwrap().write_payload(11).send(), Ok(0));
    assert_exact(&svc, 1);
    // The slot is taken again: the new subscriber gets only what is sent from now on.
    let s = svc.subscriber_builder().create().unwrap();
    assert_eq!(publisher.loan_uninit().unwrap().write_payload(12).send(), Ok(1));
    assert_eq!(*s.receive().unwrap().unwrap(), 12);
    assert!(s.receive().unwrap().is_none());
    drop(s);
    assert_eq!(publisher.loan_uninit().unwrap().write_payload(13).send(), Ok(0));
    assert_exact(&svc, 1);
}

/// Subscribers connect and close in another thread, over and over, taking the same
/// slots again, while the publisher sends without pause: each subscriber receives in
/// order, and when all are gone no chunk is stranded in a queue of a closed
/// subscriber.
#[test]
fn slots_reused_while_sending_strand_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path());
    let publisher = svc.publisher_builder().create().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (svc, stop) = (svc.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 200 {
                let subs: Vec<_> = (0..3)
                    .map(|_| svc.subscriber_builder().create().unwrap())
                    .collect();
                for s in &subs {
                    let mut last = None;
                    for _ in 0..4 {
                        if let Some(v) = s.receive().unwrap() {
                            assert!(last.is_none_or(|l| *v > l), "out of order");
                            last = Some(*v);
                        }
                    }
                }
                drop(subs);
                rounds += 1;
            }
            rounds
        })
    };
    for i in 0..200_000u64 {
        publisher.loan_uninit().unwrap().write_payload(i).send().unwrap();
        if i == 100_000 {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = churn.join().unwrap();
    assert!(rounds >= 200);
    assert_eq!(svc.port_counts().1, 0);
    assert_eq!(publisher.loan_uninit().unwrap().write_payload(0).send(), Ok(0));
    assert_exact(&svc, 1);
}
