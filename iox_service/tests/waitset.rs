//! The WaitSet across real processes: this test binary re-executes itself as children
//! (see `iox_testkit`), each test with its own `IOX_ROOT`. Children publish; the
//! parent waits. Synchronisation is through the IPC (port counts, samples) or bounded
//! polling of visible effects, never bare sleeps.

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use iox_service::{
    CallbackProgression, Overflow, PubSubService, SendError, Service, Subscriber, WaitSet,
    WaitSetAttachError, WaitSetRunResult,
};
use iox_testkit::{Reaped, env, role, root_env, self_command, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(120);

/// A sample: which publisher, and its sequence number.
type Msg = [u64; 2];

/// A child's root (its `IOX_ROOT`).
fn child_root() -> PathBuf {
    env::<String>("IOX_ROOT").into()
}

fn open(root: &Path, name: &str, subscribers: u32) -> PubSubService<Msg> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<Msg>()
        .max_publishers(1)
        .max_subscribers(subscribers)
        .subscriber_buffer(8)
        .overflow(Overflow::Reject)
        .open_or_create()
        .unwrap()
}

/// The child's part in most tests: publish `COUNT` samples `[ID, seq]` on `SERVICE`
/// (created with `SUBS` subscribers) once a subscriber is there, retrying while its
/// queue is full. Queued samples stay for the subscriber after the child exits.
fn publish_child() {
    let svc = open(&child_root(), &env::<String>("SERVICE"), env("SUBS"));
    let publisher = svc.publisher_builder().create().unwrap();
    assert_eq!(publisher.wait_for_subscribers(1, LIMIT).unwrap(), 1);
    let id: u64 = env("ID");
    for seq in 0..env::<u64>("COUNT") {
        let start = Instant::now();
        loop {
            match publisher.loan_uninit().unwrap().write_payload([id, seq]).send() {
                Ok(_) => break,
                Err(SendError::QueueFull { .. }) => std::thread::yield_now(),
                Err(e) => panic!("send failed: {e}"),
            }
            assert!(start.elapsed() < LIMIT, "the subscriber stopped reading");
        }
    }
}

fn spawn_publisher(
    test: &str,
    dir: &tempfile::TempDir,
    service: &str,
    subs: u32,
    id: u64,
    count: u64,
) -> Reaped {
    Reaped::new(spawn_self(
        test,
        "publisher",
        &[
            root_env(dir),
            ("SERVICE", service.into()),
            ("SUBS", subs.to_string()),
            ("ID", id.to_string()),
            ("COUNT", count.to_string()),
        ],
    ))
}

/// Receives until `None`, checking per-publisher order; how many arrived.
fn drain(sub: &Subscriber<Msg>, next: &mut [u64]) -> u64 {
    let mut n = 0;
    while let Some(s) = sub.receive().unwrap() {
        let [id, seq] = *s;
        assert_eq!(
            seq, next[id as usize],
            "publisher {id}: out of order or duplicated"
        );
        next[id as usize] += 1;
        n += 1;
    }
    n
}

fn root_is_empty(dir: &tempfile::TempDir) -> bool {
    std::fs::read_dir(dir.path()).unwrap().next().is_none()
}

#[test]
fn three_publishers_a_listener_and_an_interval_in_one_waitset() {
    const TEST: &str = "three_publishers_a_listener_and_an_interval_in_one_waitset";
    const COUNT: u64 = 2_000;
    const IDS: u32 = 10;
    let open_events = |root: &Path| {
        Service::named("ws/three/events")
            .unwrap()
            .root(root)
            .event()
            .event_id_max(IDS)
            .open_or_create()
            .unwrap()
    };
    match role().as_deref() {
        Some("notifier") => {
            let events = open_events(&child_root());
            let notifier = events.notifier_builder().create().unwrap();
            // The parent's listener exists before this child starts.
            for id in 1..=IDS {
                assert_eq!(notifier.notify_with_custom_event_id(id.into()).unwrap(), 1);
            }
            return;
        }
        Some(_) => return publish_child(),
        None => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let services: Vec<_> = (0..3)
        .map(|i| open(dir.path(), &format!("ws/three/{i}"), 1))
        .collect();
    let subs: Vec<_> = services
        .iter()
        .map(|s| s.subscriber_builder().create().unwrap())
        .collect();
    let events = open_events(dir.path());
    let listener = events.listener_builder().create().unwrap();
    let waitset = WaitSet::new().unwrap();
    let guards: Vec<_> = subs
        .iter()
        .map(|s| waitset.attach_notification(s).unwrap())
        .collect();
    let listened = waitset.attach_notification(&listener).unwrap();
    let tick = waitset.attach_interval(Duration::from_millis(2)).unwrap();
    let children: Vec<_> = (0..3)
        .map(|i| spawn_publisher(TEST, &dir, &format!("ws/three/{i}"), 1, i, COUNT))
        .collect();
    let notifier = Reaped::new(spawn_self(TEST, "notifier", &[root_env(&dir)]));
    let (mut next, mut ticks, mut got) = (vec![0u64; 3], 0u64, 0u64);
    let mut ids = Vec::new();
    let start = Instant::now();
    let result = waitset
        .wait_and_process(|id| {
            if id.has_event_from(&tick) {
                ticks += 1;
            }
            for (i, g) in guards.iter().enumerate() {
                if id.has_event_from(g) {
                    got += drain(&subs[i], &mut next);
                }
            }
            if id.has_event_from(&listened) {
                listener.try_wait_all(|e| ids.push(e.as_value())).unwrap();
            }
            assert!(start.elapsed() < LIMIT, "missing: samples {next:?}, ids {ids:?}");
            if got == 3 * COUNT && ticks >= 3 && ids.len() == IDS as usize {
                CallbackProgression::Stop
            } else {
                CallbackProgression::Continue
            }
        })
        .unwrap();
    assert_eq!(result, WaitSetRunResult::StopRequest);
    assert_eq!(next, vec![COUNT; 3]);
    ids.sort_unstable();
    assert_eq!(ids, (1..=IDS).collect::<Vec<_>>(), "every id exactly once");
    for c in children {
        wait_ok(c.into_inner(), LIMIT);
    }
    wait_ok(notifier.into_inner(), LIMIT);
    // Exactly once: nothing more arrives.
    for s in &subs {
        assert!(s.receive().unwrap().is_none());
    }
    assert_eq!(listener.try_wait_one().unwrap(), None);
}

#[test]
fn raw_epoll_over_subscriber_descriptors_across_processes() {
    const TEST: &str = "raw_epoll_over_subscriber_descriptors_across_processes";
    const COUNT: u64 = 2_000;
    use rustix::event::epoll;
    if role().is_some() {
        return publish_child();
    }
    let dir = tempfile::tempdir().unwrap();
    let subs: Vec<_> = (0..2)
        .map(|i| {
            let svc = open(dir.path(), &format!("ws/raw/{i}"), 1);
            let sub = svc.subscriber_builder().create().unwrap();
            (svc, sub)
        })
        .collect();
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    for (i, (_, sub)) in subs.iter().enumerate() {
        epoll::add(
            &ep,
            sub.as_fd(),
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )
        .unwrap();
    }
    let children: Vec<_> = (0..2)
        .map(|i| spawn_publisher(TEST, &dir, &format!("ws/raw/{i}"), 1, i, COUNT))
        .collect();
    let mut next = vec![0u64; 2];
    let mut events = Vec::with_capacity(8);
    let start = Instant::now();
    while next != [COUNT; 2] {
        assert!(start.elapsed() < LIMIT, "samples missing: {next:?}");
        events.clear();
        let timeout = rustix::event::Timespec {
            tv_sec: 10,
            tv_nsec: 0,
        };
        epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&timeout)).unwrap();
        for e in &events {
            drain(&subs[e.data.u64() as usize].1, &mut next);
        }
    }
    for c in children {
        wait_ok(c.into_inner(), LIMIT);
    }
}

#[test]
fn a_waker_ends_the_wait_from_another_thread() {
    let waitset = WaitSet::new().unwrap();
    let waker = waitset.waker();
    fn send_sync_clone<T: Send + Sync + Clone>(_: &T) {}
    send_sync_clone(&waker);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        // Wake once the main thread says it is about to wait (a wake before the wait
        // would end it too: the eventfd keeps it).
        ready_rx.recv().unwrap();
        waker.wake();
    });
    ready_tx.send(()).unwrap();
    let result = waitset
        .wait_and_process(|_| panic!("nothing is attached"))
        .unwrap();
    assert_eq!(result, WaitSetRunResult::Interrupt);
    thread.join().unwrap();
    // Consumed: the next bounded wait times out.
    let result = waitset
        .wait_and_process_once_with_timeout(|_| CallbackProgression::Continue, Duration::from_millis(10))
        .unwrap();
    assert_eq!(result, WaitSetRunResult::Timeout);
}

/// The child of the signal tests: a WaitSet, then the subscriber (its socket file
/// tells the parent the handlers are installed), then a wait that must end with a
/// termination request.
fn waiting_child() {
    let waitset = WaitSet::new().unwrap();
    let svc = open(&child_root(), "ws/term", 1);
    let sub = svc.subscriber_builder().create().unwrap();
    let guard = waitset.attach_notification(&sub).unwrap();
    let result = waitset
        .wait_and_process(|id| {
            assert!(id.has_event_from(&guard));
            while sub.receive().unwrap().is_some() {}
            CallbackProgression::Continue
        })
        .unwrap();
    assert_eq!(result, WaitSetRunResult::TerminationRequest);
    // Returning drops the guard, the subscriber, the service: their files go.
}

fn has_socket(dir: &tempfile::TempDir) -> bool {
    std::fs::read_dir(dir.path())
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".sock"))
}

fn signal(child: &Reaped, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

#[test]
fn sigterm_ends_wait_and_process_and_the_files_go() {
    const TEST: &str = "sigterm_ends_wait_and_process_and_the_files_go";
    if role().is_some() {
        return waiting_child();
    }
    let dir = tempfile::tempdir().unwrap();
    let child = Reaped::new(spawn_self(TEST, "waiter", &[root_env(&dir)]));
    assert!(
        wait_until(LIMIT, || has_socket(&dir)),
        "the child never subscribed"
    );
    signal(&child, rustix::process::Signal::TERM);
    wait_ok(child.into_inner(), LIMIT);
    assert!(root_is_empty(&dir), "files left behind");
}

/// Whether `pid` has `signal` pending (not yet delivered), from /proc.
fn pending(pid: u32, signal: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let bit = 1u64 << (signal - 1);
    status
        .lines()
        .filter_map(|l| l.strip_prefix("ShdPnd:").or_else(|| l.strip_prefix("SigPnd:")))
        .any(|mask| u64::from_str_radix(mask.trim(), 16).unwrap_or(0) & bit != 0)
}

#[test]
fn a_second_signal_while_one_is_pending_terminates_the_default_way() {
    const TEST: &str = "a_second_signal_while_one_is_pending_terminates_the_default_way";
    if role().is_some() {
        let _waitset = WaitSet::new().unwrap();
        std::fs::write(child_root().join("ready"), b"").unwrap();
        // Busy elsewhere (not waiting): blocks until the parent closes our stdin.
        let mut buf = String::new();
        let _ = std::io::stdin().read_line(&mut buf);
        panic!("the second SIGTERM did not terminate the process");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = self_command(TEST, "busy", &[root_env(&dir)]);
    let mut child = cmd.stdin(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdin = child.stdin.take();
    let child = Reaped::new(child);
    assert!(wait_until(LIMIT, || dir.path().join("ready").exists()));
    signal(&child, rustix::process::Signal::TERM);
    let first = Instant::now();
    // Delivered (its handler ran, or runs with SIGTERM blocked until it returns).
    assert!(wait_until(LIMIT, || !pending(child.id(), 15)));
    // A signal within the grace after the first is the same request (the next test):
    // this one comes after it, so the program stuck elsewhere is terminated.
    let grace = Duration::from_millis(300) + Duration::from_millis(50);
    assert!(wait_until(LIMIT, || first.elapsed() > grace));
    signal(&child, rustix::process::Signal::TERM);
    let mut child = child.into_inner();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < LIMIT, "the child did not terminate");
        std::thread::sleep(Duration::from_millis(1));
    };
    drop(stdin);
    assert_eq!(status.signal(), Some(15), "{status}");
}

/// Issue 45, item 10: `timeout -s INT` signals the process and then its process group,
/// two SIGINTs at once, and the second killed a recorder before it had handled the
/// first. Two signals close together are one request: the program's wait reports it
/// and the program ends on its own (exit 0), however busy it was when they came.
#[test]
fn two_signals_at_once_are_one_request() {
    const TEST: &str = "two_signals_at_once_are_one_request";
    if role().is_some() {
        let waitset = WaitSet::new().unwrap();
        let root = child_root();
        std::fs::write(root.join("ready"), b"").unwrap();
        // Busy elsewhere while both come (the parent says when it sent them).
        assert!(wait_until(LIMIT, || root.join("sent").exists()));
        let result = waitset
            .wait_and_process_once_with_timeout(|_| CallbackProgression::Continue, LIMIT)
            .unwrap();
        assert_eq!(result, WaitSetRunResult::TerminationRequest);
        std::fs::write(root.join("finished"), b"").unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let child = Reaped::new(spawn_self(TEST, "busy", &[root_env(&dir)]));
    assert!(wait_until(LIMIT, || dir.path().join("ready").exists()));
    signal(&child, rustix::process::Signal::INT);
    // Two deliveries, not one merged signal: the second is sent once the first is in.
    assert!(wait_until(LIMIT, || !pending(child.id(), 2)));
    signal(&child, rustix::process::Signal::INT);
    std::fs::write(dir.path().join("sent"), b"").unwrap();
    wait_ok(child.into_inner(), LIMIT);
    assert!(dir.path().join("finished").exists());
}

#[test]
fn a_deadline_fires_when_the_publisher_stops_and_not_while_it_sends() {
    const TEST: &str = "a_deadline_fires_when_the_publisher_stops_and_not_while_it_sends";
    const COUNT: u64 = 100;
    const DEADLINE: Duration = Duration::from_secs(1);
    if role().is_some() {
        // A publisher paced by a WaitSet interval (2 ms), then gone.
        let svc = open(&child_root(), "ws/deadline", 1);
        let publisher = svc.publisher_builder().create().unwrap();
        assert_eq!(publisher.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        let waitset = WaitSet::new().unwrap();
        let _tick = waitset.attach_interval(Duration::from_millis(2)).unwrap();
        let mut seq = 0;
        let result = waitset
            .wait_and_process(|_| {
                publisher
                    .loan_uninit()
                    .unwrap()
                    .write_payload([0, seq])
                    .send()
                    .unwrap();
                seq += 1;
                if seq == COUNT {
                    CallbackProgression::Stop
                } else {
                    CallbackProgression::Continue
                }
            })
            .unwrap();
        assert_eq!(result, WaitSetRunResult::StopRequest);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = open(dir.path(), "ws/deadline", 1);
    let sub = svc.subscriber_builder().create().unwrap();
    let waitset = WaitSet::new().unwrap();
    let guard = waitset.attach_deadline(&sub, DEADLINE).unwrap();
    let child = Reaped::new(spawn_self(TEST, "pacer", &[root_env(&dir)]));
    let mut next = vec![0u64];
    let mut last_sample = None;
    let mut missed_at = None;
    waitset
        .wait_and_process(|id| {
            if id.has_event_from(&guard) {
                if drain(&sub, &mut next) > 0 {
                    last_sample = Some(Instant::now());
                }
            } else if id.has_missed_deadline(&guard) {
                // Before the first sample the child may still be starting: allowed.
                if next[0] > 0 {
                    assert_eq!(
                        next[0], COUNT,
                        "the deadline fired while the publisher was sending"
                    );
                    missed_at = Some(Instant::now());
                    return CallbackProgression::Stop;
                }
            }
            CallbackProgression::Continue
        })
        .unwrap();
    let quiet = missed_at.unwrap() - last_sample.unwrap();
    assert!(
        quiet >= DEADLINE - Duration::from_millis(50),
        "fired after {quiet:?} of silence"
    );
    wait_ok(child.into_inner(), LIMIT);
}

#[test]
fn dropping_a_guard_detaches() {
    let dir = tempfile::tempdir().unwrap();
    let open_in = |name: &str| {
        Service::named(name)
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<u64>()
            .open_or_create()
            .unwrap()
    };
    let (a, b) = (open_in("ws/detach/a"), open_in("ws/detach/b"));
    let (sa, sb) = (
        a.subscriber_builder().create().unwrap(),
        b.subscriber_builder().create().unwrap(),
    );
    let (pa, pb) = (
        a.publisher_builder().create().unwrap(),
        b.publisher_builder().create().unwrap(),
    );
    let waitset = WaitSet::new().unwrap();
    let ga = waitset.attach_notification(&sa).unwrap();
    let gb = waitset.attach_notification(&sb).unwrap();
    assert!(matches!(
        waitset.attach_notification(&sa),
        Err(WaitSetAttachError::AlreadyAttached)
    ));
    assert!(matches!(
        waitset.attach_interval(Duration::ZERO),
        Err(WaitSetAttachError::ZeroDuration { .. })
    ));
    // A guard of another WaitSet matches nothing here.
    let other = WaitSet::new().unwrap();
    let foreign = other.attach_notification(&sb).unwrap();
    assert_eq!(waitset.len(), 2);

    let send = |p: &iox_service::Publisher<u64>, v| p.loan_uninit().unwrap().write_payload(v).send().unwrap();
    let round = |waitset: &WaitSet, fired: &mut Vec<&str>, ga: Option<&iox_service::WaitSetGuard>| {
        waitset.wait_and_process_once_with_timeout(
            |id| {
                assert!(!id.has_event_from(&foreign));
                if ga.is_some_and(|g| id.has_event_from(g)) {
                    fired.push("a");
                    while sa.receive().unwrap().is_some() {}
                }
                if id.has_event_from(&gb) {
                    fired.push("b");
                    while sb.receive().unwrap().is_some() {}
                }
                CallbackProgression::Continue
            },
            Duration::from_millis(200),
        )
    };
    send(&pa, 1);
    send(&pb, 2);
    let mut fired = Vec::new();
    assert_eq!(
        round(&waitset, &mut fired, Some(&ga)).unwrap(),
        WaitSetRunResult::AllEventsHandled
    );
    fired.sort();
    assert_eq!(fired, ["a", "b"]);

    drop(ga);
    assert_eq!(waitset.len(), 1);
    send(&pa, 3);
    let mut fired = Vec::new();
    let result = waitset
        .wait_and_process_once_with_timeout(|_| panic!("a is detached"), Duration::from_millis(50))
        .unwrap();
    assert_eq!(result, WaitSetRunResult::Timeout);
    send(&pb, 4);
    round(&waitset, &mut fired, None).unwrap();
    assert_eq!(fired, ["b"]);

    // Attached again: the sample sent while detached is reported.
    let ga = waitset.attach_notification(&sa).unwrap();
    let mut fired = Vec::new();
    round(&waitset, &mut fired, Some(&ga)).unwrap();
    assert_eq!(fired, ["a"]);
}

#[test]
fn two_hundred_attachments_one_firing() {
    const TEST: &str = "two_hundred_attachments_one_firing";
    const COUNT: u64 = 1_000;
    if role().is_some() {
        return publish_child();
    }
    let dir = tempfile::tempdir().unwrap();
    // 199 quiet subscribers over five services, and one on the service that fires.
    let quiet: Vec<_> = (0..5)
        .map(|i| open(dir.path(), &format!("ws/many/quiet{i}"), 40))
        .collect();
    let quiet_subs: Vec<_> = (0..199)
        .map(|i| quiet[i / 40].subscriber_builder().create().unwrap())
        .collect();
    let hot = open(dir.path(), "ws/many/hot", 1);
    let hot_sub = hot.subscriber_builder().create().unwrap();
    let waitset = WaitSet::new().unwrap();
    let quiet_guards: Vec<_> = quiet_subs
        .iter()
        .map(|s| waitset.attach_notification(s).unwrap())
        .collect();
    let hot_guard = waitset.attach_notification(&hot_sub).unwrap();
    assert_eq!(waitset.len(), 200);
    let child = spawn_publisher(TEST, &dir, "ws/many/hot", 1, 0, COUNT);
    let mut next = vec![0u64];
    let mut fired = HashSet::new();
    let start = Instant::now();
    waitset
        .wait_and_process(|id| {
            fired.insert(id);
            assert!(
                !quiet_guards.iter().any(|g| id.has_event_from(g)),
                "a quiet one fired"
            );
            assert!(id.has_event_from(&hot_guard));
            drain(&hot_sub, &mut next);
            assert!(start.elapsed() < LIMIT, "samples missing: {next:?}");
            if next[0] == COUNT {
                CallbackProgression::Stop
            } else {
                CallbackProgression::Continue
            }
        })
        .unwrap();
    assert_eq!(fired.len(), 1);
    wait_ok(child.into_inner(), LIMIT);
}

/// The WaitSet takes any `AsFd`: an event listener, notified from another process.
#[test]
fn an_event_listener_in_a_waitset_across_processes() {
    const TEST: &str = "an_event_listener_in_a_waitset_across_processes";
    let open_events = |root: &Path| {
        Service::named("ws/events")
            .unwrap()
            .root(root)
            .event()
            .event_id_max(16)
            .open_or_create()
            .unwrap()
    };
    if role().is_some() {
        // The parent's listener exists before we start.
        let events = open_events(&child_root());
        let notifier = events.notifier_builder().create().unwrap();
        for id in 1..=10 {
            assert_eq!(notifier.notify_with_custom_event_id(id.into()).unwrap(), 1);
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let events = open_events(dir.path());
    let listener = events.listener_builder().create().unwrap();
    let waitset = WaitSet::new().unwrap();
    let guard = waitset.attach_notification(&listener).unwrap();
    let child = Reaped::new(spawn_self(TEST, "notifier", &[root_env(&dir)]));
    let mut seen = HashSet::new();
    let start = Instant::now();
    waitset
        .wait_and_process(|id| {
            assert!(id.has_event_from(&guard));
            listener
                .try_wait_all(|e| {
                    seen.insert(e.as_value());
                })
                .unwrap();
            assert!(start.elapsed() < LIMIT, "ids missing: {seen:?}");
            if seen.len() == 10 {
                CallbackProgression::Stop
            } else {
                CallbackProgression::Continue
            }
        })
        .unwrap();
    assert_eq!(seen, (1..=10).collect());
    wait_ok(child.into_inner(), LIMIT);
}
