//! The descriptor hand-over (`handover` in the crate) against holders that answer
//! wrongly, die mid-exchange or never answer: every newcomer ends with a clear error,
//! or gets the service through another holder, within its open timeout; it never
//! hangs and never maps the wrong memory. Holders are child processes of this test
//! binary; how they misbehave is set by `iox_service::testing::HANDOVER_ENV`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::{OpenError, PubSubService, Service};
use iox_testkit::{Gate, Reaped, env, role, spawn_self, wait_until};

const LIMIT: Duration = Duration::from_secs(60);
const NAME: &str = "handover/camera";

/// A test's temp directory, with the service root `root/` in it (gates go beside it).
fn scene() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    (dir, root)
}

fn open_or_create(root: &Path) -> PubSubService<u64> {
    Service::named(NAME)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap()
}

fn open(root: &Path, timeout: Duration) -> Result<PubSubService<u64>, OpenError> {
    Service::named(NAME)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .timeout(timeout)
        .open()
}

/// A child holding the service (created or opened) until its gate opens; answers
/// hand-over requests as `how` says (`None`: correctly).
fn holder(test: &str, root: &Path, gate: &Gate, how: Option<&str>) -> Reaped {
    let mut envs = vec![
        ("ROOT", root.display().to_string()),
        ("HELD", gate.path().display().to_string()),
    ];
    if let Some(how) = how {
        envs.push((iox_service::testing::HANDOVER_ENV, how.to_string()));
    }
    let child = Reaped::new(spawn_self(test, "holder", &envs));
    assert!(gate.wait_reached(LIMIT), "the holder never opened the service");
    child
}

/// The holder's side of every test here.
fn run_holder() -> bool {
    if role().as_deref() != Some("holder") {
        return false;
    }
    let svc = open_or_create(&env::<PathBuf>("ROOT"));
    let held: PathBuf = env("HELD");
    std::fs::write(held.join("reached"), b"").unwrap();
    assert!(wait_until(LIMIT, || held.join("open").exists()), "never let go");
    drop(svc);
    true
}

/// Each wrong answer of the only holder: a specific error, at once (a holder that
/// answered wrongly will not answer better a moment later).
#[test]
fn a_holder_that_answers_wrongly_gets_a_specific_error() {
    const TEST: &str = "a_holder_that_answers_wrongly_gets_a_specific_error";
    if run_holder() {
        return;
    }
    for (how, expect) in [
        ("garbage", "not an iox hand-over reply"),
        ("no-fd", "announced 1 descriptors and sent 0"),
        ("oversized", "oversized reply"),
        ("wrong-fd", "named"),
        ("unsealed", "lacks seals"),
        ("short", "4096 bytes long"),
        ("same-name", "inode"),
        ("other-nonce", "named"),
    ] {
        let (dir, root) = scene();
        let gate = Gate::new(dir.path(), "held");
        let _holder = holder(TEST, &root, &gate, Some(how));
        let started = std::time::Instant::now();
        let e = open(&root, LIMIT)
            .err()
            .unwrap_or_else(|| panic!("{how}: opened"));
        assert!(
            matches!(&e, OpenError::MemfdUnreachable { tried, .. } if tried.iter().any(|t| t.contains(expect))),
            "{how}: {e}"
        );
        assert!(started.elapsed() < LIMIT / 2, "{how}: waited for the timeout");
        println!("{how}: {e}");
        gate.open();
    }
}

/// A holder that never answers: the newcomer gives up on it within its timeout and
/// says why.
#[test]
fn a_silent_holder_ends_in_a_timeout_that_says_so() {
    const TEST: &str = "a_silent_holder_ends_in_a_timeout_that_says_so";
    if run_holder() {
        return;
    }
    let (dir, root) = scene();
    let gate = Gate::new(dir.path(), "held");
    let _holder = holder(TEST, &root, &gate, Some("silent"));
    let Err(e) = open(&root, Duration::from_millis(1500)) else {
        panic!("opened through a silent holder");
    };
    assert!(
        matches!(&e, OpenError::TimedOut { last, .. } if last.contains("did not answer within")),
        "{e}"
    );
}

/// A wrong holder first in the users table and a good one after it: the newcomer
/// passes over the first and gets the service from the second; samples flow. (The
/// wrong one created the service and answered the good one's request correctly.)
#[test]
fn a_wrong_holder_is_passed_over_for_a_good_one() {
    const TEST: &str = "a_wrong_holder_is_passed_over_for_a_good_one";
    if run_holder() {
        return;
    }
    let (dir, root) = scene();
    let (bad, good) = (Gate::new(dir.path(), "bad"), Gate::new(dir.path(), "good"));
    let envs = [
        ("ROOT", root.display().to_string()),
        ("HELD", bad.path().display().to_string()),
        (iox_service::testing::HANDOVER_ENV, "garbage".to_string()),
        (iox_service::testing::HANDOVER_FROM_ENV, "1".to_string()),
    ];
    let _bad = Reaped::new(spawn_self(TEST, "holder", &envs));
    assert!(
        bad.wait_reached(LIMIT),
        "the wrong holder never created the service"
    );
    let _good = holder(TEST, &root, &good, None);
    let svc = open(&root, LIMIT).expect("through the good holder");
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(7).send().unwrap();
    assert_eq!(*s.receive().unwrap().unwrap(), 7);
    bad.open();
    good.open();
}

/// The only holder SIGKILLed in the middle of an exchange (it read our request and
/// had not replied): the newcomer sees the connection close, finds the holder dead,
/// and the dead service is removed: `open` says it does not exist.
#[test]
fn the_only_holder_killed_mid_exchange_leaves_a_clear_answer() {
    const TEST: &str = "the_only_holder_killed_mid_exchange_leaves_a_clear_answer";
    if run_holder() {
        return;
    }
    let (dir, root) = scene();
    let (held, stall) = (Gate::new(dir.path(), "held"), Gate::new(dir.path(), "stall"));
    let mut envs = vec![
        ("ROOT", root.display().to_string()),
        ("HELD", held.path().display().to_string()),
    ];
    envs.extend(stall.env("handover-before-reply"));
    let victim = Reaped::new(spawn_self(TEST, "holder", &envs));
    assert!(held.wait_reached(LIMIT));
    let opened = std::thread::scope(|t| {
        let h = t.spawn(|| open(&root, LIMIT).map(|_| ()));
        assert!(stall.wait_reached(LIMIT), "our request never reached the holder");
        victim.kill();
        h.join().unwrap()
    });
    assert!(matches!(opened, Err(OpenError::DoesNotExist(_))), "{opened:?}");
    assert!(
        !Service::exists_in(&root, NAME).unwrap(),
        "the dead service was removed"
    );
}

/// The first holder in the users table SIGKILLed, a second one alive: the newcomer
/// passes over the dead one (its lock is free) and gets the service from the live one.
#[test]
fn a_dead_holder_is_passed_over_for_a_live_one() {
    const TEST: &str = "a_dead_holder_is_passed_over_for_a_live_one";
    if run_holder() {
        return;
    }
    let (dir, root) = scene();
    let (first, second) = (Gate::new(dir.path(), "first"), Gate::new(dir.path(), "second"));
    let victim = holder(TEST, &root, &first, None);
    let _live = holder(TEST, &root, &second, None);
    victim.kill();
    let svc = open(&root, LIMIT).expect("through the live holder");
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(9).send().unwrap();
    assert_eq!(*s.receive().unwrap().unwrap(), 9);
    second.open();
}

/// Issue 45, item 6: offers were shared by (root, stem, incarnation). A handle going
/// away dropped the process's last node (its id forgotten) and, before it withdrew its
/// offer, another thread opened the service again with a new id and shared the old
/// offer, whose socket is named with the dead id. Its user entry names the new id, so
/// once the creator left no newcomer could get the payload, and `iox clean` deleted
/// the live socket as a dead node's. Now a new id gets an offer of its own.
#[test]
fn an_offer_never_outlives_its_node_id() {
    const TEST: &str = "an_offer_never_outlives_its_node_id";
    if role().as_deref() == Some("reopener") {
        let root: PathBuf = env("ROOT");
        let dir: PathBuf = env("DIR");
        let first = open(&root, LIMIT).unwrap();
        let old_id = iox_service::testing::process_node_id();
        let gate = Gate::new(&dir, "withdraw");
        iox_service::testing::stall_at(iox_service::testing::Stall::HandoverBeforeWithdraw, gate.path());
        // Drops the only handle of this process: its node goes, then its offer (stalled
        // between the two).
        let dropper = std::thread::spawn(move || drop(first));
        assert!(gate.wait_reached(LIMIT));
        let second = open(&root, LIMIT).unwrap();
        assert_ne!(iox_service::testing::process_node_id(), old_id, "a new node id");
        gate.open();
        dropper.join().unwrap();
        std::fs::write(dir.join("reopened"), b"").unwrap();
        assert!(wait_until(LIMIT, || dir.join("done").exists()));
        drop(second);
        return;
    }
    let (dir, root) = scene();
    let creator = open_or_create(&root);
    let child = Reaped::new(spawn_self(
        TEST,
        "reopener",
        &[
            ("ROOT", root.display().to_string()),
            ("DIR", dir.path().display().to_string()),
        ],
    ));
    assert!(wait_until(LIMIT, || dir.path().join("reopened").exists()));
    // The creator leaves: the reopened handle is the only holder.
    drop(creator);
    let newcomer = open(&root, Duration::from_secs(5)).expect("the reopened handle hands the payload over");
    drop(newcomer);
    // A cleanup finds nothing dead to remove: the live holder's socket stays.
    Service::cleanup_all_dead_in(&root).unwrap();
    let again = open(&root, Duration::from_secs(5)).expect("still reachable after a cleanup");
    drop(again);
    std::fs::write(dir.path().join("done"), b"").unwrap();
    let mut child = child.into_inner();
    assert!(child.wait().unwrap().success());
}

/// Issue 45, item 11: when the open's time was up at the check before a live holder
/// was asked, the error said "no live process holds its descriptor". It is a timeout
/// that says the time was up.
#[test]
fn a_deadline_before_a_live_holder_is_asked_is_a_timeout() {
    const TEST: &str = "a_deadline_before_a_live_holder_is_asked_is_a_timeout";
    if run_holder() {
        return;
    }
    let (dir, root) = scene();
    let gate = Gate::new(dir.path(), "held");
    let _holder = holder(TEST, &root, &gate, None);
    let Err(e) = open(&root, Duration::ZERO) else {
        panic!("opened with no time at all");
    };
    assert!(
        matches!(&e, OpenError::TimedOut { last, .. } if last.contains("time was up") && !last.contains("no live process")),
        "{e}"
    );
    gate.open();
}
