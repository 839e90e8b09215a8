//! Payload protection across real processes: a process whose ports on a service are
//! only subscribers maps the payload read-only (a write through a sample faults
//! instead of corrupting what other readers see); a process that publishes maps it
//! writable.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use iox_service::Service;
use iox_testkit::{role, spawn_self, wait_until};

const LIMIT: Duration = Duration::from_secs(60);
const VALUE: u64 = 0x5eed_5eed_5eed_5eed;

fn open(root: Option<&std::path::Path>) -> iox_service::PubSubService<u64> {
    let mut b = Service::named("read-only/camera").unwrap();
    if let Some(root) = root {
        b = b.root(root);
    }
    b.publish_subscribe::<u64>()
        .max_subscribers(2)
        .open_or_create()
        .unwrap()
}

/// Waits for the child to end and returns the signal that ended it, if any.
fn signal_of(mut child: std::process::Child) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.signal();
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("child did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The child creates the service and only subscribes; the parent opens it and
/// publishes. The child's write through the sample it received faults (SIGSEGV), and
/// a second subscriber in the parent still reads the value the publisher wrote.
#[test]
fn a_subscriber_only_process_cannot_write_into_samples() {
    if role().as_deref() == Some("subscriber") {
        let svc = open(None);
        assert!(
            svc.is_creator(),
            "the child creates the service (and maps it read-only)"
        );
        let sub = svc.subscriber_builder().create().unwrap();
        let sample = sub.receive_timeout(LIMIT).unwrap().expect("a sample");
        assert_eq!(*sample, VALUE);
        let ptr = sample.as_ptr().cast_mut();
        // SAFETY: deliberately wrong: writing into a received sample, which a
        // subscriber-only mapping must refuse with SIGSEGV (the test's point). Nothing
        // in this process reads the byte afterwards.
        unsafe { std::ptr::write_volatile(ptr, 0) };
        // Reaching this line means the write went through: fail loudly.
        std::process::exit(3);
    }
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_self(
        "a_subscriber_only_process_cannot_write_into_samples",
        "subscriber",
        &[("IOX_ROOT", dir.path().display().to_string())],
    );
    // The child created the service once its subscriber shows up.
    let mut svc = None;
    assert!(wait_until(LIMIT, || {
        if svc.is_none() && Service::exists_in(dir.path(), "read-only/camera").unwrap() {
            svc = Some(open(Some(dir.path())));
        }
        svc.as_ref().is_some_and(|s| s.port_counts().1 == 1)
    }));
    let svc = svc.unwrap();
    let witness = svc.subscriber_builder().create().unwrap();
    let publisher = svc.publisher_builder().create().unwrap();
    assert_eq!(
        publisher
            .loan_uninit()
            .unwrap()
            .write_payload(VALUE)
            .send()
            .unwrap(),
        2
    );
    assert_eq!(
        signal_of(child),
        Some(libc_sigsegv()),
        "the child's write must fault"
    );
    let got = witness
        .receive_timeout(LIMIT)
        .unwrap()
        .expect("the witness's copy");
    assert_eq!(*got, VALUE, "the faulting write changed nothing");
}

/// A process that publishes and subscribes on one handle has one writable mapping:
/// samples it receives point into the pool at the same addresses its loans do.
#[test]
fn a_publishing_process_maps_the_payload_writable_once() {
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Some(dir.path()));
    let sub = svc.subscriber_builder().create().unwrap();
    let before = svc.pool_info().base;
    let publisher = svc.publisher_builder().create().unwrap();
    assert_eq!(
        svc.pool_info().base,
        before,
        "made writable in place, not mapped again"
    );
    let mut loan = publisher.loan_uninit().unwrap();
    loan.payload_mut().write(7);
    // SAFETY: written just above.
    unsafe { loan.assume_init() }.send().unwrap();
    assert_eq!(*sub.receive().unwrap().unwrap(), 7);
}

fn libc_sigsegv() -> i32 {
    11 // SIGSEGV on Linux
}
