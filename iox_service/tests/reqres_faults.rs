//! Request-response faults across real processes: a server or a client SIGKILLed in
//! the middle of a request, a server dropped with requests it never received, and a
//! response sent with a timeout to a client that takes nothing.
//! This test binary re-executes itself as children (see `iox_testkit`), each test with
//! its own `IOX_ROOT`.

use iox_service::{RequestSendError, ResponseReceiveError, ResponseSendError, Service};
use iox_testkit::{Reaped, env, role, spawn_self, wait_ok, wait_until};

mod reqres_common;
use reqres_common::*;

#[test]
fn server_killed_mid_request_ends_the_stream_with_server_gone() {
    const NAME: &str = "reqres/server-crash";
    const TEST: &str = "server_killed_mid_request_ends_the_stream_with_server_gone";
    if role().is_some() {
        let svc = planner(NAME);
        let server = svc.server_builder().create().unwrap();
        let active = server.receive_timeout(WAIT).unwrap().expect("a request");
        for i in 0..3 {
            active
                .loan_uninit()
                .unwrap()
                .write_payload(Waypoint {
                    x: 0,
                    y: 0,
                    index: i,
                    client: 0,
                })
                .send()
                .unwrap();
        }
        // Holds the request (and a loan) until killed.
        let _loan = active.loan_uninit().unwrap();
        std::thread::park();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = create_planner(dir.path(), NAME);
    let client = svc.client_builder().create().unwrap();
    let server = Reaped::new(spawn_self(TEST, "server", &[root_env(dir.path())]));
    assert!(wait_until(WAIT, || svc.port_counts().1 == 1));
    let g = Goal {
        x: 0,
        y: 0,
        count: 3,
        client: 0,
    };
    let pending = client.loan_uninit().unwrap().write_payload(g).send().unwrap();
    for i in 0..3 {
        assert_eq!(
            pending.receive_timeout(WAIT).unwrap().expect("a response").index,
            i
        );
    }
    server.kill();
    // The blocked receive notices the dead server itself.
    let err = pending.receive_timeout(WAIT).unwrap_err();
    assert!(matches!(err, ResponseReceiveError::ServerGone), "{err}");
    assert!(pending.is_finished() && pending.is_server_gone());
    drop(pending);
    assert_eq!(svc.requests_in_flight(), 0);
    let info = iox_service::inspect::inspect_in(dir.path(), NAME).unwrap();
    assert_eq!(
        info.classes.iter().map(|c| c.in_use).sum::<u32>(),
        0,
        "request chunk recovered"
    );
    assert_eq!(
        client.loan_uninit().unwrap().write_payload(g).send().unwrap_err(),
        RequestSendError::NoServer
    );
}

#[test]
fn client_killed_mid_request_makes_the_server_see_client_gone() {
    const NAME: &str = "reqres/client-crash";
    const TEST: &str = "client_killed_mid_request_makes_the_server_see_client_gone";
    if role().is_some() {
        let svc = planner(NAME);
        let client = svc.client_builder().create().unwrap();
        let g = Goal {
            x: 0,
            y: 0,
            count: 0,
            client: 0,
        };
        let pending = client.loan_uninit().unwrap().write_payload(g).send().unwrap();
        let _first = pending.receive_timeout(WAIT).unwrap().expect("a response");
        std::thread::park();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = create_planner(dir.path(), NAME);
    let server = svc.server_builder().create().unwrap();
    let client = Reaped::new(spawn_self(TEST, "client", &[root_env(dir.path())]));
    let active = server.receive_timeout(WAIT).unwrap().expect("a request");
    active
        .loan_uninit()
        .unwrap()
        .write_payload(Waypoint {
            x: 1,
            y: 1,
            index: 0,
            client: 0,
        })
        .send()
        .unwrap();
    // The client holds the first response and waits; two more are queued for it.
    for i in 1..3 {
        active
            .loan_uninit()
            .unwrap()
            .write_payload(Waypoint {
                x: 1,
                y: 1,
                index: i,
                client: 0,
            })
            .send()
            .unwrap();
    }
    assert!(wait_until(WAIT, || svc.requests_in_flight() == 1));
    client.kill();
    // The server notices on a send (it looks at the client's liveness every 10 ms).
    let mut sends = 0;
    let gone = wait_until(WAIT, || {
        sends += 1;
        let r = active
            .loan_uninit()
            .unwrap()
            .write_payload(Waypoint {
                x: 0,
                y: 0,
                index: 9,
                client: 0,
            })
            .send();
        r == Err(ResponseSendError::ClientGone)
    });
    assert!(gone, "after {sends} sends");
    assert!(!active.is_connected());
    drop(active);
    // The server is otherwise unaffected, and nothing leaked.
    assert_eq!(server.pending_requests(), 0);
    let info = iox_service::inspect::inspect_in(dir.path(), NAME).unwrap();
    assert_eq!(info.classes.iter().map(|c| c.in_use).sum::<u32>(), 0);
    let c2 = svc.client_builder().create().unwrap();
    let p = c2
        .loan_uninit()
        .unwrap()
        .write_payload(Goal {
            x: 1,
            y: 2,
            count: 1,
            client: 5,
        })
        .send()
        .unwrap();
    let a = server.receive().unwrap().expect("the new request");
    a.loan_uninit()
        .unwrap()
        .write_payload(Waypoint {
            x: 1,
            y: 4,
            index: 0,
            client: 5,
        })
        .send()
        .unwrap();
    drop(a);
    assert_eq!(p.receive().unwrap().unwrap().client, 5);
}

#[test]
fn a_server_dropped_with_requests_unreceived_reports_server_gone() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("reqres/server-drop")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .create()
        .unwrap();
    let server = svc.server_builder().create().unwrap();
    let client = svc.client_builder().create().unwrap();
    let received = client.loan_uninit().unwrap().write_payload(1).send().unwrap();
    let active = server.receive().unwrap().unwrap();
    let unreceived = client.loan_uninit().unwrap().write_payload(2).send().unwrap();
    drop(server);
    // The request being handled still completes; the other one's server is gone.
    active.loan_uninit().unwrap().write_payload(10).send().unwrap();
    assert!(
        unreceived.receive().unwrap().is_none(),
        "the slot lives while a request is active"
    );
    drop(active);
    assert_eq!(*received.receive().unwrap().unwrap(), 10);
    assert!(received.receive().unwrap().is_none() && received.is_finished());
    assert!(!received.is_server_gone());
    assert!(matches!(
        unreceived.receive(),
        Err(ResponseReceiveError::ServerGone)
    ));
    drop((received, unreceived));
    assert_eq!(svc.requests_in_flight(), 0);
    let info = iox_service::inspect::inspect_in(dir.path(), "reqres/server-drop").unwrap();
    assert_eq!(info.classes.iter().map(|c| c.in_use).sum::<u32>(), 0);
}

#[test]
fn a_response_send_with_a_timeout_gives_up_on_a_full_queue_and_sends_nothing() {
    const NAME: &str = "reqres/send-timeout";
    const TEST: &str = "a_response_send_with_a_timeout_gives_up_on_a_full_queue_and_sends_nothing";
    // The (server, client) response queue holds at least 4 active requests x 16.
    const DEPTH: u32 = 4 * 16;
    let waypoint = |index| Waypoint {
        x: 5,
        y: 5,
        index,
        client: 0,
    };
    if role().is_some() {
        // The client: one request, then nothing taken until the parent says so.
        let svc = planner(NAME);
        let client = svc.client_builder().create().unwrap();
        let g = Goal {
            x: 5,
            y: 5,
            count: 0,
            client: 0,
        };
        let pending = client.loan_uninit().unwrap().write_payload(g).send().unwrap();
        let go: std::path::PathBuf = env("GO_FILE");
        assert!(wait_until(WAIT, || go.exists()), "never told to read");
        // How many the parent sent, written with the go.
        let sent: u32 = std::fs::read_to_string(&go).unwrap().parse().unwrap();
        let mut got = Vec::new();
        while let Some(w) = pending.receive_timeout(WAIT).unwrap() {
            got.push(*w);
        }
        assert!(pending.is_finished());
        assert_eq!(got, (0..sent).map(waypoint).collect::<Vec<_>>());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let svc = create_planner(dir.path(), NAME);
    let server = svc.server_builder().create().unwrap();
    let client = Reaped::new(spawn_self(
        TEST,
        "client",
        &[root_env(dir.path()), ("GO_FILE", go.display().to_string())],
    ));
    let active = server.receive_timeout(WAIT).unwrap().expect("a request");
    let timeout = std::time::Duration::from_millis(20);
    let send = |i| {
        active
            .loan_uninit()
            .unwrap()
            .write_payload(waypoint(i))
            .send_timeout(timeout)
    };
    // Sends with a timeout until the queue is full (the client reads nothing).
    let mut queued = 0;
    let full = loop {
        match send(queued) {
            Ok(()) => queued += 1,
            Err(e) => break e,
        }
        assert!(
            queued <= 4 * DEPTH,
            "{queued} responses queued for a client that reads none"
        );
    };
    assert!(matches!(full, ResponseSendError::Timeout(_)), "{full}");
    assert!(queued >= DEPTH, "only {queued} responses fit");
    // Again: the refused one's chunk came back (the loan finds one), nothing was sent.
    let again = send(queued);
    assert!(matches!(again, Err(ResponseSendError::Timeout(_))), "{again:?}");
    // Written whole, then renamed: the child never reads a half-written count.
    let tmp = dir.path().join("go.tmp");
    std::fs::write(&tmp, (queued + 1).to_string()).unwrap();
    std::fs::rename(&tmp, &go).unwrap();
    active
        .loan_uninit()
        .unwrap()
        .write_payload(waypoint(queued))
        .send()
        .unwrap();
    drop(active);
    wait_ok(client.into_inner(), LIMIT);
}
