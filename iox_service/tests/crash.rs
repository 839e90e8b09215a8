//! Crash recovery across real processes: children SIGKILLed at random moments while
//! publishing, holding samples or with full queues; recoverers racing each other and
//! killed mid-recovery; creators killed mid-creation. After recovery the pool's free
//! count must be exact and no file of a dead process may remain.

use iox_service::testing::Stall;
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::{Backing, PubSubBuilder, PubSubService, Publisher, Service, Subscriber};
use iox_testkit::{Reaped, Rng, env, role, root_env, wait_ok, wait_until};

const NAME: &str = "crash/rounds";
const LIMIT: Duration = Duration::from_secs(20);

fn builder(root: &Path) -> PubSubBuilder<u64> {
    Service::named(NAME)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .max_publishers(3)
        .max_subscribers(4)
        .subscriber_buffer(4)
        .max_loans(3)
        .max_held(3)
}

/// The roles a child can take; each loops until it is killed.
fn run_child(role: &str) {
    let root = std::path::PathBuf::from(env::<String>("IOX_ROOT"));
    let mut rng = Rng::new(env("SEED"));
    if role == "recover" {
        // Runs recovery once (and nothing else that would) and writes how many ports
        // it recovered.
        let report = Service::cleanup_dead_in(&root, NAME).unwrap();
        std::fs::write(env::<String>("REPORT"), report.ports.to_string()).unwrap();
        return;
    }
    let svc = builder(&root).open().unwrap();
    match role {
        // Loans up to its limit, sends some, drops some, as fast as it can.
        "publisher" => {
            let p = svc.publisher_builder().create().unwrap();
            let mut n = 0u64;
            loop {
                let mut loans = Vec::new();
                for _ in 0..=rng.below(3) {
                    if let Ok(s) = p.loan_uninit() {
                        loans.push(s.write_payload(n));
                        n += 1;
                    }
                }
                for s in loans {
                    if rng.below(4) == 0 {
                        drop(s);
                    } else {
                        let _ = s.send();
                    }
                }
            }
        }
        // Receives and holds up to its limit, dropping at random.
        "holder" => {
            let s = svc.subscriber_builder().create().unwrap();
            let mut held = VecDeque::new();
            loop {
                if held.len() == 3 || (!held.is_empty() && rng.below(2) == 0) {
                    held.pop_front();
                }
                if let Ok(Some(sample)) = s.receive() {
                    held.push_back(sample);
                }
            }
        }
        // Never receives: its queues fill up.
        "full" => {
            let _s = svc.subscriber_builder().create().unwrap();
            loop {
                std::thread::park();
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// The files a root may hold: the service's four and the listed node ids' lock files.
fn unexpected_files(root: &Path, svc: &PubSubService<u64>) -> Vec<String> {
    let stem = iox_service::ServiceName::new(svc.name()).unwrap().stem();
    let allowed: BTreeSet<String> = ["service", "dynamic", "chunks", "pool"]
        .iter()
        .map(|ext| format!("{stem}.{ext}"))
        .collect();
    // Readiness sockets of our own live subscribers, and our descriptor hand-over
    // socket, end in our node id.
    let ours = node_files(root)
        .first()
        .and_then(|f| {
            Some(format!(
                ".{}.sock",
                f.strip_prefix("iox_node_")?.strip_suffix(".lock")?
            ))
        })
        .unwrap_or_default();
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| !allowed.contains(f) && !f.starts_with("iox_node_"))
        .filter(|f| {
            let socket = f.starts_with(&format!("{stem}.r")) || f.starts_with(&format!("{stem}.h."));
            !(socket && f.ends_with(&ours))
        })
        .chain(node_files(root).into_iter().skip(1)) // exactly one node: ours
        .collect()
}

fn node_files(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.starts_with("iox_node_"))
        .collect()
}

/// Sends `value` and receives until it arrives: the survivors still communicate.
fn round_trip(p: &Publisher<u64>, s: &Subscriber<u64>, value: u64) {
    let start = Instant::now();
    p.loan_uninit().unwrap().write_payload(value).send().unwrap();
    loop {
        match s.receive_timeout(Duration::from_millis(100)).unwrap() {
            Some(v) if *v == value => return,
            Some(_) => {}
            None => assert!(start.elapsed() < LIMIT, "survivors stopped communicating"),
        }
    }
}

/// Starts this test binary as a child with `role`; SIGKILLed when dropped.
fn spawn_self(test: &str, role: &str, envs: &[(&str, String)]) -> Reaped {
    Reaped::new(iox_testkit::spawn_self(test, role, envs))
}

fn kill(child: Reaped) {
    child.kill(); // SIGKILL, then reaped
}

#[test]
fn hundred_random_sigkills_lose_no_chunk_and_leave_no_file() {
    if let Some(r) = role() {
        return run_child(&r);
    }
    random_sigkills(
        "hundred_random_sigkills_lose_no_chunk_and_leave_no_file",
        Backing::Memfd,
        0,
    );
}

#[test]
fn hundred_random_sigkills_with_file_backing() {
    if let Some(r) = role() {
        return run_child(&r);
    }
    random_sigkills("hundred_random_sigkills_with_file_backing", Backing::File, 0);
}

/// The same with `.history(3)`: publishers keep their last samples in their history
/// queues and re-send them to each subscriber that connects, so children die in the
/// middle of that too; a dead publisher's history is recovered with the rest.
#[test]
fn hundred_random_sigkills_with_history() {
    if let Some(r) = role() {
        return run_child(&r);
    }
    random_sigkills("hundred_random_sigkills_with_history", Backing::Memfd, 3);
}

fn random_sigkills(test: &str, backing: Backing, history: u32) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let seed: u64 = std::env::var("IOX_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::process::id() as u64 ^ 0x5EED);
    println!("seed {seed} (set IOX_CRASH_SEED to repeat)");
    let mut rng = Rng::new(seed);
    let svc = builder(root).backing(backing).history(history).create().unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let total = svc.pool_info().total_chunks();
    // The survivor publisher's history is full from here on.
    for i in 0..history {
        round_trip(&p, &s, u64::from(i));
    }
    let start = Instant::now();
    let (mut rounds, mut lost, mut leaked) = (0u64, 0u64, 0usize);
    let mut on_demand = iox_service::CleanupReport::default();
    let mut marker = 1u64 << 40;
    // 100 in CI; IOX_CRASH_ROUNDS for a longer soak.
    let total_rounds: u64 = std::env::var("IOX_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    // No budget for the whole run: every step that waits on a child is bounded by
    // LIMIT and fails with what never happened.
    for round in 0..total_rounds {
        let role = ["publisher", "holder", "full"][rng.below(3) as usize];
        let child = spawn_self(test, role, &[root_env(root), ("SEED", rng.next().to_string())]);
        let want = if role == "publisher" { (2, 1) } else { (1, 2) };
        assert!(
            wait_until(LIMIT, || svc.port_counts() == want),
            "round {round}: child {role} never connected"
        );
        // Let it run for a random while (0-3 ms), the survivors busy too; then kill it.
        let until = Instant::now() + Duration::from_micros(rng.below(3000));
        while Instant::now() < until {
            let _ = p.loan_uninit().unwrap().write_payload(round).send();
            while let Ok(Some(_)) = s.receive() {}
        }
        kill(child);
        // Recovery: on demand, or (every fourth round) implicitly by creating a port.
        let report = if round % 4 != 3 {
            Service::cleanup_dead_in(root, NAME).unwrap()
        } else {
            drop(svc.subscriber_builder().create().unwrap());
            Default::default()
        };
        on_demand.add(&report);
        assert_eq!(
            svc.port_counts(),
            (1, 1),
            "round {round} ({role}): dead port not freed"
        );
        while let Ok(Some(_)) = s.receive() {}
        marker += 1;
        round_trip(&p, &s, marker);
        // Everything is free except the survivor publisher's spare chunk and history.
        let free = svc.pool_info().free_chunks();
        let missing = total - 1 - u64::from(history) - free;
        lost += missing;
        let extra = unexpected_files(root, &svc);
        leaked += extra.len();
        assert_eq!(
            (missing, &extra),
            (0, &Vec::new()),
            "round {round} ({role}, {backing:?}, seed {seed}, report {report:?}): chunks lost / files left"
        );
        rounds += 1;
    }
    println!(
        "{backing:?}: rounds {rounds}, chunks lost {lost}, files leaked {leaked}, in {:?}; on-demand recoveries: {on_demand:?}",
        start.elapsed()
    );
}

#[test]
fn racing_recoverers_and_a_recoverer_killed_midway_leave_an_exact_pool() {
    if let Some(r) = role() {
        return run_child(&r);
    }
    let test = "racing_recoverers_and_a_recoverer_killed_midway_leave_an_exact_pool";
    let dir = tempfile::tempdir().unwrap();
    let reports_dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = builder(root).create().unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let total = svc.pool_info().total_chunks();
    // Three victims: two holding samples, one publishing with loans.
    let victims: Vec<Reaped> = ["holder", "holder", "publisher"]
        .iter()
        .enumerate()
        .map(|(i, r)| spawn_self(test, r, &[root_env(root), ("SEED", i.to_string())]))
        .collect();
    assert!(wait_until(LIMIT, || svc.port_counts() == (2, 3)));
    for i in 0..50 {
        let _ = p.loan_uninit().unwrap().write_payload(i).send();
        while let Ok(Some(_)) = s.receive() {}
    }
    victims.into_iter().for_each(kill);
    let counts = svc.port_counts();
    assert_eq!(counts, (2, 3), "nobody recovers until asked");

    // A recoverer that stops after its first port, holding the lock; killed there.
    let stalled = spawn_self(
        test,
        "recover",
        &[
            root_env(root),
            ("SEED", "0".into()),
            ("REPORT", reports_dir.path().join("r0").display().to_string()),
            (
                iox_service::testing::STALL_ENV,
                Stall::RecoveryAfterFirstPort.name().into(),
            ),
        ],
    );
    assert!(wait_until(LIMIT, || {
        let (p, s) = svc.port_counts();
        p + s == 4
    }));
    kill(stalled);
    assert!(
        !reports_dir.path().join("r0").exists(),
        "the stalled recoverer never finished"
    );

    // Two recoverers at once finish the job (one of them may find the other busy).
    let reports: Vec<_> = (1..=2)
        .map(|i| reports_dir.path().join(format!("r{i}")))
        .collect();
    let racers: Vec<Reaped> = reports
        .iter()
        .map(|r| {
            spawn_self(
                test,
                "recover",
                &[
                    root_env(root),
                    ("SEED", "0".into()),
                    ("REPORT", r.display().to_string()),
                ],
            )
        })
        .collect();
    racers.into_iter().for_each(|c| wait_ok(c.into_inner(), LIMIT));
    let recovered: usize = reports
        .iter()
        .map(|r| std::fs::read_to_string(r).unwrap().parse::<usize>().unwrap())
        .sum();
    // The lock may have been free when one racer looked and busy for the other, or
    // both may have come one after the other; either way the rest is recovered once.
    let (p_left, s_left) = svc.port_counts();
    if p_left + s_left != 2 {
        // A racer that found the other busy recovered nothing; one more pass finishes.
        Service::cleanup_dead_in(root, NAME).unwrap();
    }
    assert!(recovered >= 1, "the racers recovered nothing");
    assert_eq!(svc.port_counts(), (1, 1));
    while let Ok(Some(_)) = s.receive() {}
    round_trip(&p, &s, 7);
    assert_eq!(svc.pool_info().free_chunks(), total - 1, "chunks lost");
    assert_eq!(unexpected_files(root, &svc), Vec::<String>::new());
}

#[test]
fn a_creator_killed_midway_does_not_block_the_next_open_or_create() {
    if let Some(r) = role() {
        assert_eq!(r, "creator");
        let root = std::path::PathBuf::from(env::<String>("IOX_ROOT"));
        let _ = builder(&root).open_or_create();
        unreachable!("the stall point parks forever");
    }
    for point in [Stall::CreateBeforeRename, Stall::CreateBeforeConfig] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let child = spawn_self(
            "a_creator_killed_midway_does_not_block_the_next_open_or_create",
            "creator",
            &[
                root_env(root),
                (iox_service::testing::STALL_ENV, point.name().into()),
            ],
        );
        let stem = iox_service::ServiceName::new(NAME).unwrap().stem();
        let made = |suffix: &str| {
            std::fs::read_dir(root).unwrap().any(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{stem}{suffix}"))
            })
        };
        let reached = if point == Stall::CreateBeforeRename {
            wait_until(LIMIT, || made(".dynamic."))
        } else {
            // The pool's bookkeeping is the last file before the static config.
            wait_until(LIMIT, || made(".chunks"))
        };
        assert!(reached, "{point}: creator never got there");
        kill(child);
        // A generous timeout: if the dead creator's leftovers blocked us, this ends in
        // OpenError::TimedOut (naming what it waited for) rather than in a timing assert.
        let svc = builder(root)
            .timeout(LIMIT)
            .open_or_create()
            .unwrap_or_else(|e| panic!("{point}: the dead creator blocked open_or_create: {e}"));
        assert!(svc.is_creator(), "{point}: the dead creator's service was joined");
        let p = svc.publisher_builder().create().unwrap();
        let s = svc.subscriber_builder().create().unwrap();
        round_trip(&p, &s, 1);
        // Nothing left behind, without a root-wide clean-up.
        assert_eq!(
            unexpected_files(root, &svc),
            Vec::<String>::new(),
            "{point}: files left"
        );
    }
}

#[test]
fn a_service_whose_last_user_died_is_removed_by_the_next_opener() {
    if let Some(r) = role() {
        assert_eq!(r, "holder");
        return run_child("holder");
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    {
        let svc = builder(root).create().unwrap();
        let child = spawn_self(
            "a_service_whose_last_user_died_is_removed_by_the_next_opener",
            "holder",
            &[root_env(root), ("SEED", "3".into())],
        );
        assert!(wait_until(LIMIT, || svc.port_counts() == (0, 1)));
        drop(svc); // the child is the last user now
        kill(child);
    }
    assert!(
        Service::exists_in(root, NAME).unwrap(),
        "files stay until someone looks"
    );
    let svc = builder(root).open_or_create().unwrap();
    assert!(
        svc.is_creator(),
        "the dead service was removed and created afresh"
    );
    assert_eq!(svc.pool_info().free_chunks(), svc.pool_info().total_chunks());
    assert_eq!(unexpected_files(root, &svc), Vec::<String>::new());
    drop(svc);
    let left = iox_service::testing::files_but_own_node(root);
    assert!(
        left.is_empty(),
        "the last user leaving removes everything: {left:?}"
    );
}

/// A service every user of which died is no reason to refuse an opener with other
/// settings: `open_or_create` removes it and creates it with its own (another payload
/// type, another buffer). While its user lives, the same open is refused, and `open`
/// never removes it.
#[test]
fn a_stale_service_with_other_settings_is_recreated_by_open_or_create() {
    const TEST: &str = "a_stale_service_with_other_settings_is_recreated_by_open_or_create";
    if let Some(r) = role() {
        assert_eq!(r, "holder");
        return run_child("holder");
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let other = || {
        Service::named(NAME)
            .unwrap()
            .root(root)
            .publish_subscribe::<u32>()
            .subscriber_buffer(8)
            .timeout(Duration::from_millis(500))
    };
    let child = {
        let svc = builder(root).create().unwrap();
        let child = spawn_self(TEST, "holder", &[root_env(root), ("SEED", "5".into())]);
        assert!(wait_until(LIMIT, || svc.port_counts() == (0, 1)));
        child
    }; // the child is the last user now
    let e = other().open_or_create().unwrap_err();
    assert!(
        matches!(
            e,
            iox_service::OpenOrCreateError::Open(iox_service::OpenError::IncompatiblePayload { .. })
        ),
        "a live user's service is refused: {e}"
    );
    kill(child);
    // `open` only opens: the stale service is refused, and stays.
    assert!(
        matches!(
            other().open(),
            Err(iox_service::OpenError::IncompatiblePayload { .. })
        ),
        "open refuses"
    );
    assert!(Service::exists_in(root, NAME).unwrap());
    let svc = other().open_or_create().unwrap();
    assert!(
        svc.is_creator(),
        "the stale service was removed and created afresh"
    );
    assert_eq!(svc.pubsub_config().subscriber_buffer, 8);
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(7).send().unwrap();
    assert_eq!(*s.receive().unwrap().unwrap(), 7u32);
}
