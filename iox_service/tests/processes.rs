//! Behaviour across real processes: this test binary re-executes itself as children
//! (see `iox_testkit`), each test with its own `IOX_ROOT`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use iox_service::{MemoryType, OpenError, Overflow, PubSubService, SendError, Service};
use iox_testkit::{env, role, root_env, self_command, spawn_self, vm_lck_kib, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(120);

/// Calls `send` until the sample reaches the one subscriber (Reject policy: a full
/// queue refuses, and we try again once the subscriber has read).
fn send_reliably(mut send: impl FnMut() -> Result<usize, SendError>) {
    let start = Instant::now();
    loop {
        match send() {
            Ok(1) => return,
            Ok(n) => panic!("delivered to {n} subscribers"),
            Err(SendError::QueueFull { .. }) => std::thread::yield_now(),
            Err(e) => panic!("send failed: {e}"),
        }
        assert!(start.elapsed() < LIMIT, "subscriber stopped reading");
    }
}

fn connected<P: ?Sized + iox_service::Payload>(svc: &PubSubService<P>, pubs: usize, subs: usize) -> bool {
    let (p, s) = svc.port_counts();
    p >= pubs && s >= subs
}

#[test]
fn typed_round_trip_ten_thousand_samples() {
    const N: u64 = 10_000;
    let open = || {
        Service::named("typed")
            .unwrap()
            .publish_subscribe::<[u64; 8]>()
            .overflow(Overflow::Reject)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("publisher") {
        let svc = open();
        let p = svc.publisher_builder().create().unwrap();
        assert!(wait_until(LIMIT, || connected(&svc, 1, 1)));
        for i in 0..N {
            let v = [i, i * 3, i ^ 0xFFFF, 0, 0, 0, i + 7, !i];
            send_reliably(|| p.loan_uninit().unwrap().write_payload(v).send());
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("typed")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u64; 8]>()
        .overflow(Overflow::Reject)
        .open_or_create()
        .unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let child = spawn_self(
        "typed_round_trip_ten_thousand_samples",
        "publisher",
        &[root_env(&dir)],
    );
    for i in 0..N {
        let got = s
            .receive_timeout(LIMIT)
            .unwrap()
            .expect("sample within the limit");
        assert_eq!(*got, [i, i * 3, i ^ 0xFFFF, 0, 0, 0, i + 7, !i]);
    }
    wait_ok(child, LIMIT);
    assert!(s.receive().unwrap().is_none());
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks());
}

fn slice_len(i: usize) -> usize {
    // Mostly small (1 B .. 64 KiB), every 500th one large (1 MiB .. 16 MiB, 16 MiB last).
    if i % 500 == 499 {
        if i == 9_999 {
            16 << 20
        } else {
            (1 << 20) + (i * 7919) % (15 << 20)
        }
    } else {
        1 + (i * 2_654_435_761) % (64 << 10)
    }
}

fn byte(i: usize, j: usize) -> u8 {
    (j.wrapping_mul(31) ^ i) as u8
}

#[test]
fn slice_round_trip_ten_thousand_samples_1b_to_16mib() {
    const N: usize = 10_000;
    let open = |b: Service| {
        b.publish_subscribe::<[u8]>()
            .size_classes(&[(64 << 10, 16), (16 << 20, 4)])
            .allow_pool_exhaustion(true)
            .overflow(Overflow::Reject)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("publisher") {
        let svc = open(Service::named("slices").unwrap());
        let p = svc.publisher_builder().create().unwrap();
        assert!(wait_until(LIMIT, || connected(&svc, 1, 1)));
        for i in 0..N {
            send_reliably(|| {
                p.loan_slice_uninit(slice_len(i))
                    .unwrap()
                    .write_from_fn(|j| byte(i, j))
                    .send()
            });
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Service::named("slices").unwrap().root(dir.path()));
    let s = svc.subscriber_builder().create().unwrap();
    let child = spawn_self(
        "slice_round_trip_ten_thousand_samples_1b_to_16mib",
        "publisher",
        &[root_env(&dir)],
    );
    for i in 0..N {
        let got = s
            .receive_timeout(LIMIT)
            .unwrap()
            .expect("sample within the limit");
        assert_eq!(got.len(), slice_len(i), "sample {i}");
        assert!(
            got.iter().enumerate().all(|(j, &b)| b == byte(i, j)),
            "content of sample {i}"
        );
    }
    wait_ok(child, LIMIT);
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks());
}

#[test]
fn eight_processes_race_open_or_create() {
    use std::io::{BufRead, BufReader, Read};
    if role().as_deref() == Some("racer") {
        let svc = Service::named("race")
            .unwrap()
            .publish_subscribe::<u64>()
            .max_subscribers(8)
            .open_or_create()
            .unwrap();
        let _s = svc.subscriber_builder().create().unwrap();
        println!("creator={}", svc.is_creator());
        // Keep the service open until the parent has heard from all eight (it closes
        // our stdin then).
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut children: Vec<_> = (0..8)
        .map(|_| {
            self_command("eight_processes_race_open_or_create", "racer", &[root_env(&dir)])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut creators = 0;
    for c in &mut children {
        let mut lines = BufReader::new(c.stdout.as_mut().unwrap()).lines();
        // The harness prints "test NAME ... " without a newline before the test runs.
        let line = lines
            .find(|l| l.as_ref().map_or(true, |l| l.contains("creator=")))
            .unwrap()
            .unwrap();
        creators += usize::from(line.ends_with("creator=true"));
    }
    assert_eq!(creators, 1, "exactly one process creates");
    for mut c in children {
        drop(c.stdin.take());
        assert!(c.wait().unwrap().success(), "a racer failed");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the last one removed everything"
    );
}

#[test]
fn two_publishers_three_subscribers_every_sample_in_order() {
    const N: u64 = 1000;
    let open = |b: Service| {
        b.publish_subscribe::<(u64, u64)>()
            .max_publishers(2)
            .max_subscribers(3)
            .subscriber_buffer(N as u32)
            .open_or_create()
            .unwrap()
    };
    match role().as_deref() {
        Some("publisher") => {
            let id: u64 = env("PUB_ID");
            let svc = open(Service::named("fan").unwrap());
            let p = svc.publisher_builder().create().unwrap();
            assert!(wait_until(LIMIT, || connected(&svc, 2, 3)));
            for seq in 0..N {
                assert_eq!(
                    p.loan_uninit().unwrap().write_payload((id, seq)).send().unwrap(),
                    3
                );
            }
            // Stay connected until the subscribers are done: the other publisher may
            // not have seen all five ports yet, and would wait for us forever.
            assert!(wait_until(LIMIT, || svc.port_counts().1 == 0));
            return;
        }
        Some("subscriber") => {
            let svc = open(Service::named("fan").unwrap());
            let s = svc.subscriber_builder().create().unwrap();
            let mut next = [0u64; 2];
            while next != [N, N] {
                let got = s
                    .receive_timeout(LIMIT)
                    .unwrap()
                    .expect("sample within the limit");
                let (id, seq) = *got;
                assert_eq!(seq, next[id as usize], "publisher {id} out of order or lost");
                next[id as usize] += 1;
            }
            assert!(s.receive().unwrap().is_none());
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Service::named("fan").unwrap().root(dir.path()));
    let name = "two_publishers_three_subscribers_every_sample_in_order";
    let subs: Vec<_> = (0..3)
        .map(|_| spawn_self(name, "subscriber", &[root_env(&dir)]))
        .collect();
    assert!(wait_until(LIMIT, || connected(&svc, 0, 3)));
    let pubs: Vec<_> = (0..2)
        .map(|i| spawn_self(name, "publisher", &[root_env(&dir), ("PUB_ID", i.to_string())]))
        .collect();
    for c in pubs.into_iter().chain(subs) {
        wait_ok(c, LIMIT);
    }
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks());
}

#[test]
fn overflow_drops_oldest_across_processes_and_pool_is_full_after() {
    let open = |b: Service| {
        b.publish_subscribe::<u32>()
            .subscriber_buffer(3)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("publisher") {
        let svc = open(Service::named("overflow").unwrap());
        let p = svc.publisher_builder().create().unwrap();
        for i in 0..10 {
            assert_eq!(p.loan_uninit().unwrap().write_payload(i).send().unwrap(), 1);
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Service::named("overflow").unwrap().root(dir.path()));
    let s = svc.subscriber_builder().create().unwrap();
    wait_ok(
        spawn_self(
            "overflow_drops_oldest_across_processes_and_pool_is_full_after",
            "publisher",
            &[root_env(&dir)],
        ),
        LIMIT,
    );
    let got: Vec<u32> = std::iter::from_fn(|| s.receive().unwrap().map(|x| *x)).collect();
    assert_eq!(got, vec![7, 8, 9]);
    // The other process counted what it dropped, exactly.
    assert_eq!(s.missed(), 7);
    drop(s);
    // A subscriber taking the freed slot starts from 0.
    let again = svc.subscriber_builder().create().unwrap();
    assert_eq!(again.missed(), 0);
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks());
}

#[test]
fn rejected_samples_count_as_missed_across_processes() {
    let open = |b: Service| {
        b.publish_subscribe::<u32>()
            .subscriber_buffer(2)
            .overflow(Overflow::Reject)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("publisher") {
        let svc = open(Service::named("reject").unwrap());
        let p = svc.publisher_builder().create().unwrap();
        let mut refused = 0;
        for i in 0..6 {
            if let Err(SendError::QueueFull { rejected, .. }) =
                p.loan_uninit().unwrap().write_payload(i).send()
            {
                refused += rejected;
            }
        }
        assert_eq!(refused, 4);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Service::named("reject").unwrap().root(dir.path()));
    let full = svc.subscriber_builder().create().unwrap();
    let child = spawn_self(
        "rejected_samples_count_as_missed_across_processes",
        "publisher",
        &[root_env(&dir)],
    );
    wait_ok(child, LIMIT);
    let got: Vec<u32> = std::iter::from_fn(|| full.receive().unwrap().map(|x| *x)).collect();
    assert_eq!(got, vec![0, 1]);
    assert_eq!(full.missed(), 4);
}

#[test]
fn blocking_receive_is_woken_by_another_process() {
    let open = |b: Service| b.publish_subscribe::<u64>().open_or_create().unwrap();
    if role().as_deref() == Some("publisher") {
        let svc = open(Service::named("wake").unwrap());
        let p = svc.publisher_builder().create().unwrap();
        // Send only once the subscriber is asleep in receive_timeout.
        assert!(wait_until(LIMIT, || svc.waiting_subscribers() > 0));
        p.loan_uninit().unwrap().write_payload(99).send().unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Service::named("wake").unwrap().root(dir.path()));
    let s = svc.subscriber_builder().create().unwrap();
    let child = spawn_self(
        "blocking_receive_is_woken_by_another_process",
        "publisher",
        &[root_env(&dir)],
    );
    // Block far longer than the test may run, on another thread: only the send can
    // wake it, so a receive that returns at all was woken by the send. The watchdog
    // fails the test if it never is.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let got = s
            .receive_timeout(Duration::from_secs(24 * 3600))
            .unwrap()
            .map(|v| *v);
        let _ = tx.send(got);
    });
    let got = rx
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("the blocked receive was not woken within {LIMIT:?}"));
    assert_eq!(got, Some(99), "woken with the sample");
    wait_ok(child, LIMIT);
}

#[test]
fn a_subscriber_that_sleeps_again_is_woken_again() {
    // The first sleep sets the subscriber's may-wait bit; later sleeps find it set
    // (it is sticky) and publishers must still wake them, each time. The subscriber
    // acknowledges each sample on a second service, so the publisher sends the next
    // one only into a new sleep.
    const ROUNDS: u64 = 5;
    let open = |b: Service, name: &str| {
        b.publish_subscribe::<u64>()
            .open_or_create()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    if role().as_deref() == Some("publisher") {
        let svc = open(Service::named("wake-again").unwrap(), "data");
        let acks = open(Service::named("wake-again/ack").unwrap(), "acks");
        let p = svc.publisher_builder().create().unwrap();
        let ack = acks.subscriber_builder().create().unwrap();
        for i in 0..ROUNDS {
            if i > 0 {
                let got = ack.receive_timeout(LIMIT).unwrap().expect("an ack");
                assert_eq!(*got, i - 1);
            }
            assert!(wait_until(LIMIT, || svc.waiting_subscribers() > 0));
            p.loan_uninit().unwrap().write_payload(i).send().unwrap();
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Service::named("wake-again").unwrap().root(dir.path()), "data");
    let acks = open(Service::named("wake-again/ack").unwrap().root(dir.path()), "acks");
    let s = svc.subscriber_builder().create().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ack = acks.publisher_builder().create().unwrap();
        assert!(wait_until(LIMIT, || acks.port_counts().1 == 1));
        for _ in 0..ROUNDS {
            let got = s
                .receive_timeout(Duration::from_secs(24 * 3600))
                .unwrap()
                .map(|v| *v);
            if let Some(v) = got {
                ack.loan_uninit().unwrap().write_payload(v).send().unwrap();
            }
            let _ = tx.send(got);
        }
    });
    let child = spawn_self(
        "a_subscriber_that_sleeps_again_is_woken_again",
        "publisher",
        &[root_env(&dir)],
    );
    for i in 0..ROUNDS {
        let got = rx
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("sleep {i} was not woken within {LIMIT:?}"));
        assert_eq!(got, Some(i));
    }
    wait_ok(child, LIMIT);
}

#[test]
fn a_busy_polling_subscriber_receives_a_new_slots_publisher_and_what_it_left() {
    // The parent holds the first two publisher slots idle, so the child publishes
    // from the third, which no publisher had when the subscriber started polling;
    // the child exits with samples still queued. A subscriber that only ever calls
    // `receive` (never waits) must get every one, in order.
    const N: u64 = 2_000;
    let open = |b: Service| {
        b.publish_subscribe::<u64>()
            .max_publishers(3)
            .subscriber_buffer(64)
            .overflow(Overflow::Reject)
            .open_or_create()
            .unwrap()
    };
    if role().as_deref() == Some("publisher") {
        let svc = open(Service::named("new-slot").unwrap());
        let p = svc.publisher_builder().create().unwrap();
        assert_eq!(p.publisher_slot(), 2);
        for i in 0..N {
            send_reliably(|| p.loan_uninit().unwrap().write_payload(i).send());
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(Service::named("new-slot").unwrap().root(dir.path()));
    let idle = [
        svc.publisher_builder().create().unwrap(),
        svc.publisher_builder().create().unwrap(),
    ];
    let s = svc.subscriber_builder().create().unwrap();
    assert!(s.receive().unwrap().is_none());
    let child = spawn_self(
        "a_busy_polling_subscriber_receives_a_new_slots_publisher_and_what_it_left",
        "publisher",
        &[root_env(&dir)],
    );
    let start = Instant::now();
    let mut next = 0;
    let mut child = Some(child);
    while next < N {
        if next == N - 64
            && let Some(child) = child.take()
        {
            // The last 64 fit the queue: the publisher sends them and exits.
            wait_ok(child, LIMIT);
            assert_eq!(s.pending(), 64);
        }
        match s.receive().unwrap() {
            Some(v) => {
                assert_eq!((*v, v.publisher_slot()), (next, 2));
                next += 1;
            }
            None => std::thread::yield_now(),
        }
        assert!(start.elapsed() < LIMIT, "received {next} of {N}");
    }
    assert!(s.receive().unwrap().is_none());
    drop(idle);
}

#[test]
fn wrong_payload_type_from_another_process_is_refused() {
    if role().as_deref() == Some("opener") {
        let e = Service::named("typed-x")
            .unwrap()
            .publish_subscribe::<f32>()
            .open()
            .unwrap_err();
        assert!(matches!(e, OpenError::IncompatiblePayload { .. }), "{e}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _svc = Service::named("typed-x")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    wait_ok(
        spawn_self(
            "wrong_payload_type_from_another_process_is_refused",
            "opener",
            &[root_env(&dir)],
        ),
        LIMIT,
    );
}

#[test]
fn locked_service_pinned_port_raises_vm_lck_by_the_pool_size() {
    if role().is_none() {
        // Alone in a child, so no other test's pins move VmLck meanwhile.
        let dir = tempfile::tempdir().unwrap();
        let child = spawn_self(
            "locked_service_pinned_port_raises_vm_lck_by_the_pool_size",
            "child",
            &[root_env(&dir)],
        );
        return wait_ok(child, LIMIT);
    }
    let svc = Service::named("locked")
        .unwrap()
        .publish_subscribe::<[u8]>()
        .size_classes(&[(1 << 20, 8)])
        .allow_pool_exhaustion(true)
        .memory_type(MemoryType::Locked)
        .open_or_create()
        .unwrap();
    let len_kib = svc.pool_info().len as u64 / 1024;
    let before = vm_lck_kib();
    let unpinned = svc.subscriber_builder().create().unwrap();
    assert_eq!(vm_lck_kib(), before, "an unpinned port locks nothing");
    let pinned = match svc.publisher_builder().pin_memory(true).create() {
        Ok(p) => p,
        Err(e) => {
            iox_testkit::skip(
                "locked_service_pinned_port_raises_vm_lck_by_the_pool_size",
                iox_testkit::REQUIRE_MLOCK,
                format!("mlock refused ({e}); needs CAP_IPC_LOCK or a larger `ulimit -l`"),
            );
            return;
        }
    };
    assert!(
        vm_lck_kib() >= before + len_kib,
        "VmLck {} < {before} + {len_kib}",
        vm_lck_kib()
    );
    drop(pinned);
    assert_eq!(vm_lck_kib(), before);
    drop(unpinned);
}
