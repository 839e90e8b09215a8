//! The bridge never lets one service delay the others: another user's services, whose
//! only holder is stopped (`SIGSTOP`: it answers no hand-over), sit on both hosts where
//! the bridges' patterns match them: on host A three that A's export scanner would
//! export, on host B one that B's import would open for a key A exports. The bridges
//! open them off their scanning and forwarding paths (each on a thread of its own,
//! with a short timeout, backed off while they keep failing), so a good service
//! created on A reaches B at once and flows at its 50 Hz without gaps (an earlier
//! bridge opened them one after another in its scanner, under the exports' lock, for
//! the open's 10 s timeout each). Root only (the stranger runs as `nobody`).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use iox_service::{PubSubService, Service};
use iox_testkit::hostile::{StoppedStranger, ready_and_hold};
use iox_testkit::role;

const LIMIT: Duration = Duration::from_secs(60);
const RATE_HZ: u64 = 50;
const MEASURE: Duration = Duration::from_secs(3);

/// `bytes_service`'s settings, open to anyone (the stranger's services).
fn open_to_all(root: &Path, name: &str) -> PubSubService<[u8]> {
    bytes_builder(root, name).permissions(0o666).create().unwrap()
}

fn roots() -> (PathBuf, PathBuf) {
    (
        PathBuf::from(iox_testkit::env::<String>("ROOT_A")),
        PathBuf::from(iox_testkit::env::<String>("ROOT_B")),
    )
}

#[test]
fn a_stranger_s_stopped_services_delay_no_export_or_import() {
    const TEST: &str = "a_stranger_s_stopped_services_delay_no_export_or_import";
    if role().as_deref() == Some("stranger") {
        let (a, b) = roots();
        let held: Vec<_> = ["cam/evil1", "cam/evil2", "cam/evil3"]
            .iter()
            .map(|n| open_to_all(&a, n))
            .chain([open_to_all(&b, "cam/bad")])
            .collect();
        let _keep = held;
        ready_and_hold(&a.join("stranger-ready"));
    }
    if !iox_testkit::root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for root in [&a, &b] {
        std::fs::create_dir(root).unwrap();
        std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    }
    let envs = [
        ("ROOT_A", a.display().to_string()),
        ("ROOT_B", b.display().to_string()),
    ];
    let _stranger = StoppedStranger::start(TEST, "stranger", &envs, &a.join("stranger-ready"), LIMIT);
    let (ba, bb) = pair(&a, &["cam/**"], &[], &b, &[], &["cam/**"]);
    // On A: a service B also holds a stopped one of (cam/bad), then the good one, both
    // sent at 50 Hz.
    let stop = Arc::new(AtomicBool::new(false));
    let flows: Vec<_> = ["cam/bad", "cam/good"]
        .into_iter()
        .map(|name| {
            let (svc, stop) = (bytes_service(&a, name), stop.clone());
            std::thread::spawn(move || {
                let publisher = svc.publisher_builder().create().unwrap();
                let start = Instant::now();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let bytes = payload(i, 64);
                    let loan = publisher.loan_slice_uninit(bytes.len()).unwrap();
                    loan.write_from_slice(&bytes).send().unwrap();
                    i += 1;
                    // The publisher's pacing (what is measured), not a synchronisation.
                    let next = start + Duration::from_millis(i * 1000 / RATE_HZ);
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
        })
        .collect();
    let created = Instant::now();
    // B's bridge creates cam/good on B when its first sample arrives.
    let mut good = None;
    assert!(
        iox_testkit::wait_until(LIMIT, || {
            good = Service::named("cam/good")
                .unwrap()
                .root(&b)
                .publish_subscribe::<[u8]>()
                .open()
                .ok();
            good.is_some()
        }),
        "cam/good never reached host B: {}",
        bb.status()
    );
    let sub = good.unwrap().subscriber_builder().create().unwrap();
    let first = next(&sub, LIMIT).expect("a first cam/good sample on B");
    let first_after = created.elapsed();
    let mut last = Instant::now();
    let (mut count, mut gap) = (0u64, Duration::ZERO);
    let mut seq = seq_of(&first);
    drop(first);
    while last.duration_since(created) < first_after + MEASURE {
        let s = next(&sub, Duration::from_secs(15)).expect("cam/good stopped arriving on B");
        assert!(seq_of(&s) > seq, "out of order");
        seq = seq_of(&s);
        gap = gap.max(last.elapsed());
        last = Instant::now();
        count += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for f in flows {
        f.join().unwrap();
    }
    let status_a = ba.status().to_string();
    let status_b = bb.status().to_string();
    eprintln!(
        "cam/good reached B {:.0} ms after it was created on A, then {count} samples in {:.1} s (about {} sent at {RATE_HZ} Hz), largest gap {} ms; A: {status_a}; B: {status_b}",
        first_after.as_secs_f64() * 1000.0,
        MEASURE.as_secs_f64(),
        MEASURE.as_secs() * RATE_HZ,
        gap.as_millis()
    );
    assert!(
        first_after < Duration::from_secs(5),
        "cam/good took {first_after:?} to reach B"
    );
    assert!(
        gap < Duration::from_millis(500),
        "a gap of {gap:?} in cam/good on B"
    );
    assert!(
        count >= MEASURE.as_secs() * RATE_HZ * 3 / 4,
        "only {count} samples arrived"
    );
    assert!(
        !status_a.contains("cam/evil1: sent"),
        "A exported a stopped service: {status_a}"
    );
    assert!(
        status_b.contains("skipped 1 [cam/bad]"),
        "B tried cam/bad and skipped it: {status_b}"
    );
    ba.stop();
    bb.stop();
}
