//! `iox record` never lets one service delay the others: another user's services that
//! match its patterns, whose only holder is stopped (`SIGSTOP`: it answers no
//! hand-over), appear while a good service flows at 50 Hz; the recorder opens them off
//! its receiving thread (with a short timeout, backed off when they keep failing), and
//! the good service's recording keeps its rate, with no gap (an earlier recorder
//! opened them on the receiving thread and stopped recording everything for the open's
//! 10 s timeout). Root only (the stranger runs as `nobody`); skips otherwise.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{code, spawn, text};
use iox_service::Service;
use iox_testkit::hostile::{StoppedStranger, ready_and_hold};
use iox_testkit::{role, wait_until};

const LIMIT: Duration = Duration::from_secs(60);
const RATE_HZ: u64 = 50;
const RECORD_FOR: Duration = Duration::from_secs(6);

/// The stranger: two services matching the recorder's pattern, open to anyone, held
/// by this process alone, which is then stopped.
fn stranger(root: &Path) -> ! {
    let held: Vec<_> = ["cam/evil", "cam/evil2"]
        .iter()
        .map(|name| {
            Service::named(name)
                .unwrap()
                .root(root)
                .publish_subscribe::<u64>()
                .permissions(0o666)
                .create()
                .unwrap()
        })
        .collect();
    let _keep = held;
    ready_and_hold(&root.join("stranger-ready"))
}

#[test]
fn a_stranger_s_stopped_services_do_not_stall_the_recording() {
    const TEST: &str = "a_stranger_s_stopped_services_do_not_stall_the_recording";
    if role().as_deref() == Some("stranger") {
        stranger(&PathBuf::from(iox_testkit::env::<String>("IOX_ROOT")));
    }
    if !iox_testkit::root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    for (p, mode) in [(dir.path(), 0o755), (root.as_path(), 0o1777)] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let file = dir.path().join("run.mcap");
    let good = Service::named("cam/good")
        .unwrap()
        .root(&root)
        .publish_subscribe::<u64>()
        .subscriber_buffer(4)
        .create()
        .unwrap();
    let recorder = spawn(
        &root,
        &[
            "record",
            "-o",
            file.to_str().unwrap(),
            "cam/*",
            "--duration",
            "6s",
        ],
    );
    assert!(
        wait_until(LIMIT, || good.port_counts().1 == 1),
        "iox record never subscribed to cam/good"
    );
    // The good flow, paced at 50 Hz until the recorder is done.
    let stop = Arc::new(AtomicBool::new(false));
    let flow = {
        let (good, stop) = (good.clone(), stop.clone());
        std::thread::spawn(move || {
            let publisher = good.publisher_builder().create().unwrap();
            let start = Instant::now();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                publisher.loan_uninit().unwrap().write_payload(i).send().unwrap();
                i += 1;
                // The publisher's pacing (what is measured), not a synchronisation.
                let next = start + Duration::from_millis(i * 1000 / RATE_HZ);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        })
    };
    let started = Instant::now();
    // A second in, the stranger's services appear and their holder stops.
    std::thread::sleep(Duration::from_secs(1));
    let envs = [("IOX_ROOT", root.display().to_string())];
    let _stranger = StoppedStranger::start(TEST, "stranger", &envs, &root.join("stranger-ready"), LIMIT);
    let out = recorder.into_inner().wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    flow.join().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    // Tried, and its open waited for the stopped holder until its (short) timeout.
    assert!(
        text(&out)
            .lines()
            .any(|l| l.contains("not recording cam/evil") && l.contains("did not answer")),
        "the recorder tried the stranger's services and said why it could not: {}",
        text(&out)
    );
    let buf = std::fs::read(&file).unwrap();
    let mut times = Vec::new();
    iox_cli::mcap_read::messages(&buf, |m| {
        // A typed service's channel is in the ROS 2 profile, named as ROS names it.
        if m.channel.topic == "/cam/good" {
            times.push(m.log_time);
        }
        Ok::<(), ()>(())
    })
    .unwrap();
    let gap_ms = times
        .windows(2)
        .map(|w| (w[1] - w[0]) / 1_000_000)
        .max()
        .unwrap_or(u64::MAX);
    let expected = RECORD_FOR.as_secs() * RATE_HZ;
    eprintln!(
        "cam/good at {RATE_HZ} Hz with the stranger's stopped services: {} messages recorded in {:.1} s (about {expected} sent), largest gap {gap_ms} ms",
        times.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(gap_ms < 500, "a gap of {gap_ms} ms in cam/good's recording");
    assert!(
        times.len() as u64 >= expected * 3 / 4,
        "only {} of about {expected} messages recorded",
        times.len()
    );
}
