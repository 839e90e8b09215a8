//! The request-response pattern across real processes: this test binary re-executes
//! itself as children (see `iox_testkit`), each test with its own `IOX_ROOT`.

use std::path::Path;

use iox_service::{CallbackProgression, RequestSendError, ResponseSendError, Service, WaitSet};
use iox_testkit::{Reaped, env, role, spawn_self, wait_ok, wait_until};

mod reqres_common;
use reqres_common::*;

#[test]
fn typed_round_trip_and_streaming_in_order() {
    const NAME: &str = "reqres/typed";
    const TEST: &str = "typed_round_trip_and_streaming_in_order";
    if let Some(r) = role() {
        assert_eq!(r, "server");
        serve(&planner(NAME), 2);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = create_planner(dir.path(), NAME);
    let client = svc.client_builder().create().unwrap();
    let server = Reaped::new(spawn_self(TEST, "server", &[root_env(dir.path())]));
    assert!(wait_until(WAIT, || svc.port_counts().1 == 1));
    let g = Goal {
        x: 7,
        y: 9,
        count: 1,
        client: 0,
    };
    let pending = client.loan_uninit().unwrap().write_payload(g).send().unwrap();
    assert_eq!(collect(&pending, g), 1);
    // Streaming: 1,000 responses through a buffer of 16, in order.
    let g = Goal {
        x: 1000,
        y: 3,
        count: 1000,
        client: 0,
    };
    let pending = client.loan_uninit().unwrap().write_payload(g).send().unwrap();
    assert_eq!(collect(&pending, g), 1000);
    drop(pending);
    wait_ok(server.into_inner(), LIMIT);
    assert!(wait_until(WAIT, || svc.requests_in_flight() == 0));
    let info = svc.pool_info();
    drop(client);
    assert_eq!(
        iox_service::inspect::inspect_in(dir.path(), NAME)
            .unwrap()
            .classes
            .iter()
            .map(|c| c.in_use)
            .sum::<u32>(),
        0,
        "{info:?}"
    );
}

#[test]
fn slice_round_trip() {
    const NAME: &str = "reqres/slice";
    const TEST: &str = "slice_round_trip";
    let open = |root: Option<&Path>| {
        let mut b = Service::named(NAME).unwrap();
        if let Some(r) = root {
            b = b.root(r);
        }
        b.request_response::<[u8], [u32]>()
            .request_slice_len(4096)
            .response_slice_len(1024)
            .open_or_create()
            .unwrap()
    };
    if role().is_some() {
        let svc = open(None);
        let server = svc.server_builder().create().unwrap();
        let active = server.receive_timeout(WAIT).unwrap().expect("a request");
        let sum: u32 = active.iter().map(|&b| u32::from(b)).sum();
        let len = active.len();
        active
            .loan_slice_uninit(len / 4)
            .unwrap()
            .write_from_fn(|i| i as u32 * sum)
            .send()
            .unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Some(dir.path()));
    let client = svc.client_builder().create().unwrap();
    let child = spawn_self(TEST, "server", &[root_env(dir.path())]);
    assert!(wait_until(WAIT, || svc.port_counts().1 == 1));
    let pending = client
        .loan_slice_uninit(4000)
        .unwrap()
        .write_from_fn(|i| (i % 7) as u8)
        .send()
        .unwrap();
    let expected_sum: u32 = (0..4000).map(|i| (i % 7) as u32).sum();
    let r = pending.receive_timeout(WAIT).unwrap().expect("a response");
    assert_eq!(r.len(), 1000);
    assert!(r.iter().enumerate().all(|(i, &v)| v == i as u32 * expected_sum));
    drop(r);
    assert!(pending.receive_timeout(WAIT).unwrap().is_none());
    assert!(pending.is_finished() && !pending.is_server_gone());
    wait_ok(child, LIMIT);
}

#[test]
fn two_servers_share_the_load_and_four_clients_get_their_own_responses() {
    const NAME: &str = "reqres/load";
    const TEST: &str = "two_servers_share_the_load_and_four_clients_get_their_own_responses";
    const PER_CLIENT: u32 = 1000;
    if let Some(r) = role() {
        let svc = planner(NAME);
        match r.as_str() {
            "server" => serve(&svc, env("HANDLE")),
            "client" => {
                let id: u32 = env("ID");
                let client = svc.client_builder().create().unwrap();
                let mut servers = [0usize; 2];
                for i in 0..PER_CLIENT {
                    let g = Goal {
                        x: u64::from(i),
                        y: u64::from(id),
                        count: 2,
                        client: id,
                    };
                    let pending = client.loan_uninit().unwrap().write_payload(g).send().unwrap();
                    servers[pending.server_slot()] += 1;
                    assert_eq!(collect(&pending, g), 2);
                }
                // Round robin over two live servers: each got half of this client's.
                assert_eq!(servers, [500, 500], "client {id}");
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let envs = |extra: (&'static str, String)| [root_env(dir.path()), extra];
    let svc = create_planner(dir.path(), NAME);
    let servers: Vec<_> = (0..2)
        .map(|_| {
            Reaped::new(spawn_self(
                TEST,
                "server",
                &envs(("HANDLE", (2 * PER_CLIENT).to_string())),
            ))
        })
        .collect();
    assert!(wait_until(WAIT, || svc.port_counts().1 == 2));
    let clients: Vec<_> = (0..4)
        .map(|id| spawn_self(TEST, "client", &envs(("ID", id.to_string()))))
        .collect();
    for c in clients {
        wait_ok(c, LIMIT);
    }
    for s in servers {
        wait_ok(s.into_inner(), LIMIT);
    }
    let info = iox_service::inspect::inspect_in(dir.path(), NAME).unwrap();
    assert_eq!(info.classes.iter().map(|c| c.in_use).sum::<u32>(), 0);
}

#[test]
fn errors_for_limits() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("reqres/limits")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .max_active_requests_per_client(2)
        .create()
        .unwrap();
    let client = svc.client_builder().create().unwrap();
    let err = client.loan_uninit().unwrap().write_payload(1).send().unwrap_err();
    assert_eq!(err, RequestSendError::NoServer);
    let server = svc.server_builder().create().unwrap();
    let a = client.loan_uninit().unwrap().write_payload(1).send().unwrap();
    let _b = client.loan_uninit().unwrap().write_payload(2).send().unwrap();
    let err = client.loan_uninit().unwrap().write_payload(3).send().unwrap_err();
    assert_eq!(err, RequestSendError::TooManyActiveRequests { max: 2 });
    // Abandoned: the server's send says so; its drop frees the slot.
    let first = server.receive().unwrap().unwrap();
    assert_eq!(*first, 1);
    drop(a);
    let e = first.loan_uninit().unwrap().write_payload(5).send().unwrap_err();
    assert_eq!(e, ResponseSendError::Abandoned);
    drop(first);
    let _c = client.loan_uninit().unwrap().write_payload(3).send().unwrap();
}

#[test]
fn server_waits_in_a_waitset_on_a_subscriber_and_its_server() {
    const NAME: &str = "reqres/waitset";
    const TOPIC: &str = "reqres/waitset-topic";
    const TEST: &str = "server_waits_in_a_waitset_on_a_subscriber_and_its_server";
    if role().is_some() {
        let svc = planner(NAME);
        let topic = Service::named(TOPIC)
            .unwrap()
            .publish_subscribe::<u64>()
            .open_or_create()
            .unwrap();
        let publisher = topic.publisher_builder().create().unwrap();
        let client = svc.client_builder().create().unwrap();
        assert_eq!(publisher.wait_for_subscribers(1, WAIT).unwrap(), 1);
        for i in 0..5u32 {
            publisher
                .loan_uninit()
                .unwrap()
                .write_payload(u64::from(i))
                .send()
                .unwrap();
            let g = Goal {
                x: u64::from(i),
                y: 1,
                count: 2,
                client: 1,
            };
            let pending = client.loan_uninit().unwrap().write_payload(g).send().unwrap();
            assert_eq!(collect(&pending, g), 2);
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = create_planner(dir.path(), NAME);
    let topic = Service::named(TOPIC)
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let subscriber = topic.subscriber_builder().create().unwrap();
    let server = svc.server_builder().create().unwrap();
    let child = Reaped::new(spawn_self(TEST, "client", &[root_env(dir.path())]));
    let ws = WaitSet::new().unwrap();
    let sub_guard = ws.attach_notification(&subscriber).unwrap();
    let srv_guard = ws.attach_notification(&server).unwrap();
    let (mut samples, mut requests) = (0, 0);
    while samples < 5 || requests < 5 {
        ws.wait_and_process_once_with_timeout(
            |id| {
                if id.has_event_from(&sub_guard) {
                    while let Some(s) = subscriber.receive().unwrap() {
                        assert_eq!(*s, samples);
                        samples += 1;
                    }
                }
                if id.has_event_from(&srv_guard) {
                    while let Some(active) = server.receive().unwrap() {
                        for i in 0..active.count {
                            let g = *active;
                            active
                                .loan_uninit()
                                .unwrap()
                                .write_payload(Waypoint {
                                    x: g.x + u64::from(i),
                                    y: 2,
                                    index: i,
                                    client: 1,
                                })
                                .send()
                                .unwrap();
                        }
                        requests += 1;
                    }
                }
                CallbackProgression::Continue
            },
            WAIT,
        )
        .unwrap();
    }
    drop((sub_guard, srv_guard));
    wait_ok(child.into_inner(), LIMIT);
}

#[test]
fn concurrent_requests_of_one_client_each_get_their_own_stream() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("reqres/interleaved")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .max_active_requests_per_client(3)
        .max_response_buffer(4)
        .create()
        .unwrap();
    let server = svc.server_builder().create().unwrap();
    let client = svc.client_builder().create().unwrap();
    let pendings: Vec<_> = (0..3u64)
        .map(|i| client.loan_uninit().unwrap().write_payload(i).send().unwrap())
        .collect();
    assert_eq!(svc.requests_in_flight(), 3);
    let actives: Vec<_> = (0..3).map(|_| server.receive().unwrap().unwrap()).collect();
    // Interleaved: request 2's responses first in each round, then 0, then 1.
    for round in 0..4u64 {
        for a in [&actives[2], &actives[0], &actives[1]] {
            a.loan_uninit()
                .unwrap()
                .write_payload(**a * 100 + round)
                .send()
                .unwrap();
        }
    }
    drop(actives);
    // The last pending reads first: the others' responses wait in the client's stash.
    for i in [1usize, 2, 0] {
        let got: Vec<u64> = std::iter::from_fn(|| pendings[i].receive().unwrap().map(|r| *r)).collect();
        assert_eq!(got, (0..4).map(|r| i as u64 * 100 + r).collect::<Vec<_>>());
        assert!(pendings[i].is_finished());
    }
    drop(pendings);
    assert_eq!(svc.requests_in_flight(), 0);
    let info = iox_service::inspect::inspect_in(dir.path(), "reqres/interleaved").unwrap();
    assert_eq!(info.classes.iter().map(|c| c.in_use).sum::<u32>(), 0);
}

/// Responses stashed for a pending response that is then dropped unread return to
/// the pool; the server's next response to the dropped request is refused; a new
/// request in the freed request slot gets only its own responses.
#[test]
fn a_dropped_pending_response_releases_its_stash_and_its_slot_starts_clean() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("reqres/stash")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .max_active_requests_per_client(2)
        .max_response_buffer(4)
        .create()
        .unwrap();
    let server = svc.server_builder().create().unwrap();
    let client = svc.client_builder().create().unwrap();
    let in_use = || {
        let info = iox_service::inspect::inspect_in(dir.path(), "reqres/stash").unwrap();
        info.classes.iter().map(|c| c.in_use).sum::<u32>()
    };
    let first = client.loan_uninit().unwrap().write_payload(1).send().unwrap();
    let second = client.loan_uninit().unwrap().write_payload(2).send().unwrap();
    let a1 = server.receive().unwrap().unwrap();
    let a2 = server.receive().unwrap().unwrap();
    for a in [&a1, &a1, &a2] {
        a.loan_uninit().unwrap().write_payload(**a * 10).send().unwrap();
    }
    // Reading the second takes the first's two responses into its stash.
    assert_eq!(*second.receive().unwrap().unwrap(), 20);
    drop(first);
    // A late response to the dropped request: released when someone takes it.
    assert!(
        a1.loan_uninit().unwrap().write_payload(11).send().is_err(),
        "the request was abandoned"
    );
    drop((a1, a2));
    assert!(second.receive().unwrap().is_none());
    assert!(second.is_finished());
    drop(second);
    assert_eq!(in_use(), 0, "the stash and every response returned to the pool");
    // The freed slots serve new requests with only their own responses.
    let third = client.loan_uninit().unwrap().write_payload(3).send().unwrap();
    let a3 = server.receive().unwrap().unwrap();
    a3.loan_uninit().unwrap().write_payload(30).send().unwrap();
    drop(a3);
    let got: Vec<u64> = std::iter::from_fn(|| third.receive().unwrap().map(|r| *r)).collect();
    assert_eq!(got, [30]);
    drop(third);
    assert_eq!(in_use(), 0);
}

#[test]
fn open_checks_types_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let _svc = Service::named("reqres/open")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u32>()
        .max_clients(2)
        .create()
        .unwrap();
    let wrong = Service::named("reqres/open")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .open();
    assert!(
        matches!(wrong, Err(iox_service::OpenError::IncompatiblePayload { .. })),
        "{wrong:?}"
    );
    let more = Service::named("reqres/open")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u32>()
        .max_clients(3)
        .open();
    assert!(
        matches!(
            more,
            Err(iox_service::OpenError::IncompatibleLimit {
                what: "max_clients",
                ..
            })
        ),
        "{more:?}"
    );
    let pubsub = Service::named("reqres/open")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .open();
    assert!(
        matches!(pubsub, Err(iox_service::OpenError::WrongPattern { .. })),
        "{pubsub:?}"
    );
    let too_many = Service::named("reqres/too-many")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .max_active_requests_per_client(65)
        .create();
    assert!(
        too_many
            .unwrap_err()
            .to_string()
            .contains("max_active_requests_per_client")
    );
}

#[test]
fn a_pending_response_in_a_waitset_wakes_for_responses_and_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("reqres/pending-waitset")
        .unwrap()
        .root(dir.path())
        .request_response::<u64, u64>()
        .create()
        .unwrap();
    let server = svc.server_builder().create().unwrap();
    let client = svc.client_builder().create().unwrap();
    let pending = client.loan_uninit().unwrap().write_payload(3).send().unwrap();
    let ws = WaitSet::new().unwrap();
    let guard = ws.attach_notification(&pending).unwrap();
    let active = server.receive().unwrap().unwrap();
    let mut got = Vec::new();
    let round = |ws: &WaitSet, got: &mut Vec<u64>| {
        ws.wait_and_process_once_with_timeout(
            |id| {
                if id.has_event_from(&guard) {
                    while let Some(r) = pending.receive().unwrap() {
                        got.push(*r);
                    }
                }
                CallbackProgression::Continue
            },
            WAIT,
        )
        .unwrap();
    };
    // The first round may be the descriptor's initial ring (nothing yet).
    round(&ws, &mut got);
    for i in 0..*active {
        active.loan_uninit().unwrap().write_payload(i).send().unwrap();
    }
    while got.len() < 3 {
        round(&ws, &mut got);
    }
    assert_eq!(got, [0, 1, 2]);
    drop(active);
    while !pending.is_finished() {
        round(&ws, &mut got);
    }
    assert_eq!(got, [0, 1, 2]);
}
