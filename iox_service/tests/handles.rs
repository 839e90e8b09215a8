//! Every pattern's service handle answers the same questions: `cleanup_dead` recovers
//! the ports of a process SIGKILLed while it held them (publish-subscribe and the
//! blackboard here; events and request-response in their own tests), and
//! `is_removed` tells a request-response handle that its service was removed.

use std::time::Duration;

use iox_service::Service;
use iox_testkit::{Reaped, role, root_env, spawn_self, wait_until};

const LIMIT: Duration = Duration::from_secs(30);

fn park() -> ! {
    loop {
        std::thread::park(); // until SIGKILLed
    }
}

#[test]
fn pubsub_cleanup_dead_recovers_a_killed_publisher() {
    const TEST: &str = "pubsub_cleanup_dead_recovers_a_killed_publisher";
    let open = || {
        Service::named("handles/pubsub")
            .unwrap()
            .publish_subscribe::<u64>()
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("publisher") {
        let svc = open();
        let _p = svc.publisher_builder().create().unwrap();
        park();
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("handles/pubsub")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let child = Reaped::new(spawn_self(TEST, "publisher", &[root_env(dir.path())]));
    assert!(wait_until(LIMIT, || svc.port_counts().0 == 1));
    child.kill();
    let report = svc.cleanup_dead();
    assert_eq!(report.ports, 1, "{report:?}");
    assert_eq!(svc.port_counts(), (0, 0));
    assert_eq!(svc.cleanup_dead().ports, 0, "nothing left to recover");
}

#[test]
fn blackboard_cleanup_dead_recovers_a_killed_writer() {
    const TEST: &str = "blackboard_cleanup_dead_recovers_a_killed_writer";
    let builder = || {
        Service::named("handles/board")
            .unwrap()
            .blackboard::<u32>()
            .add::<u64>(0, 0)
    };
    if role().as_deref() == Some("writer") {
        let board = builder().open().unwrap();
        let _w = board.writer_builder().create().unwrap();
        park();
    }
    let dir = tempfile::tempdir().unwrap();
    let board = Service::named("handles/board")
        .unwrap()
        .root(dir.path())
        .blackboard::<u32>()
        .add::<u64>(0, 0)
        .create()
        .unwrap();
    let child = Reaped::new(spawn_self(TEST, "writer", &[root_env(dir.path())]));
    assert!(wait_until(LIMIT, || board.port_counts().0 == 1));
    child.kill();
    let report = board.cleanup_dead();
    assert_eq!(report.ports, 1, "{report:?}");
    assert_eq!(board.port_counts(), (0, 0));
}

#[test]
fn a_request_response_handle_tells_its_service_was_removed() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("handles/rr")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .create()
        .unwrap();
    assert!(!svc.is_removed());
    assert!(Service::remove_in(dir.path(), "handles/rr").unwrap());
    assert!(svc.is_removed());
    assert!(
        svc.client_builder().create().is_err(),
        "no new port on a removed service"
    );
}
