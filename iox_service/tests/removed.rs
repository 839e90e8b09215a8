//! A service removed under live ports (`iox remove --force`, i.e. `Service::remove_in`):
//! its ports find out on their next slow-path operation, with a specific error, and
//! reopening creates a fresh service that works. Publisher and subscriber run in their
//! own processes (this test binary re-executed, see `iox_testkit`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::{PortCreateError, PubSubService, ReceiveError, SendError, Service};
use iox_testkit::{Reaped, env, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(120);
const NAME: &str = "removed/under/ports";

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

fn open(root: &Path) -> PubSubService<u64> {
    Service::named(NAME)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap()
}

fn connected(svc: &PubSubService<u64>) -> bool {
    let (p, s) = svc.port_counts();
    p >= 1 && s >= 1
}

#[test]
fn ports_of_a_removed_service_are_told_and_reopening_works() {
    const TEST: &str = "ports_of_a_removed_service_are_told_and_reopening_works";
    match role().as_deref() {
        Some("publisher") => {
            let root: PathBuf = env("TEST_DIR");
            let svc = open(&root);
            let p = svc.publisher_builder().create().unwrap();
            assert!(wait_until(LIMIT, || connected(&svc)));
            assert_eq!(p.loan_uninit().unwrap().write_payload(1).send(), Ok(1));
            signal(&root, "pub-ready");
            wait_signal(&root, "removed");
            assert!(svc.is_removed() && p.is_service_removed());
            // Once the old subscriber is gone, a send reaches no one: told, not Ok(0).
            wait_signal(&root, "old-sub-dropped");
            assert_eq!(
                p.loan_uninit().unwrap().write_payload(2).send(),
                Err(SendError::ServiceRemoved)
            );
            let e = svc.publisher_builder().create().unwrap_err();
            assert!(matches!(e, PortCreateError::ServiceRemoved { .. }), "{e}");
            drop((p, svc));
            let svc = open(&root);
            assert!(!svc.is_removed());
            let p = svc.publisher_builder().create().unwrap();
            assert!(wait_until(LIMIT, || connected(&svc)));
            assert_eq!(p.loan_uninit().unwrap().write_payload(3).send(), Ok(1));
            wait_signal(&root, "new-sub-done");
        }
        Some("subscriber") => {
            let root: PathBuf = env("TEST_DIR");
            let svc = open(&root);
            let s = svc.subscriber_builder().create().unwrap();
            assert_eq!(*s.receive_timeout(LIMIT).unwrap().expect("first sample"), 1);
            signal(&root, "sub-ready");
            wait_signal(&root, "removed");
            // Nothing queued: the next wait is refused at once, as is a poll.
            let e = s.receive_timeout(LIMIT).unwrap_err();
            assert!(matches!(e, ReceiveError::ServiceRemoved), "{e}");
            let e = s.receive().unwrap_err();
            assert!(matches!(e, ReceiveError::ServiceRemoved), "{e}");
            assert!(s.is_service_removed());
            let e = svc.subscriber_builder().create().unwrap_err();
            assert!(matches!(e, PortCreateError::ServiceRemoved { .. }), "{e}");
            drop((s, svc));
            signal(&root, "old-sub-dropped");
            let svc = open(&root);
            let s = svc.subscriber_builder().create().unwrap();
            assert_eq!(
                *s.receive_timeout(LIMIT)
                    .unwrap()
                    .expect("sample of the new service"),
                3
            );
            signal(&root, "new-sub-done");
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let envs = [
                ("IOX_ROOT", root.display().to_string()),
                ("TEST_DIR", root.display().to_string()),
            ];
            let sub = Reaped::new(spawn_self(TEST, "subscriber", &envs));
            let publisher = Reaped::new(spawn_self(TEST, "publisher", &envs));
            wait_signal(root, "pub-ready");
            wait_signal(root, "sub-ready");
            // What `iox remove --force` does.
            assert!(Service::remove_in(root, NAME).unwrap());
            assert!(!Service::exists_in(root, NAME).unwrap());
            signal(root, "removed");
            wait_ok(publisher.into_inner(), LIMIT);
            wait_ok(sub.into_inner(), LIMIT);
        }
    }
}

/// In one process: a handle that did not see the removal keeps working; a send that
/// reaches a subscriber of the removed service still delivers (no check on that path),
/// and queued samples are still received before the error.
#[test]
fn queued_samples_of_a_removed_service_are_still_received_first() {
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path());
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    assert!(!svc.is_removed());
    assert!(Service::remove_in(dir.path(), NAME).unwrap());
    assert!(svc.is_removed());
    assert_eq!(p.loan_uninit().unwrap().write_payload(5).send(), Ok(1));
    assert_eq!(*s.receive().unwrap().unwrap(), 5);
    assert!(matches!(s.receive(), Err(ReceiveError::ServiceRemoved)));
    assert!(matches!(
        s.receive_timeout(Duration::ZERO),
        Err(ReceiveError::ServiceRemoved)
    ));
    drop(s);
    assert_eq!(
        p.loan_uninit().unwrap().write_payload(6).send(),
        Err(SendError::ServiceRemoved)
    );
    drop((p, svc));
    let fresh = open(dir.path());
    assert!(fresh.is_creator() && !fresh.is_removed());
}

/// A subscriber asleep in `receive_timeout` without a deadline is woken by the removal
/// and told, rather than sleeping on a service no one can publish to any more.
#[test]
fn a_sleeping_subscriber_is_woken_by_the_removal() {
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path());
    let s = svc.subscriber_builder().create().unwrap();
    let (done, result) = std::sync::mpsc::channel();
    let sleeper = std::thread::spawn(move || {
        let got = s.receive_timeout(Duration::MAX).map(|s| s.is_some());
        done.send(matches!(got, Err(ReceiveError::ServiceRemoved)))
            .unwrap();
    });
    // Removing while it sleeps (or just before: then its first check sees it).
    assert!(wait_until(LIMIT, || svc.waiting_subscribers() == 1));
    assert!(Service::remove_in(dir.path(), NAME).unwrap());
    let told = result
        .recv_timeout(LIMIT)
        .expect("the sleeping subscriber was not woken by the removal");
    assert!(told, "woken with ServiceRemoved");
    sleeper.join().unwrap();
}
