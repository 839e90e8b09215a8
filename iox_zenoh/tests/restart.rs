//! The bridge program SIGKILLed and restarted: the dead bridge's ports are recovered,
//! the flow resumes, no chunk is leaked.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const PROBE: u64 = u64::MAX;

fn spawn_bridge(root: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_iox-zenoh"))
        .args(["--export", "k/*", "--status-interval", "0", "--connect"])
        .arg(format!("tcp/127.0.0.1:{port}"))
        .arg("--root")
        .arg(root)
        .stdin(Stdio::null())
        .spawn()
        .expect("start iox-zenoh")
}

fn in_use(root: &std::path::Path) -> (u32, usize) {
    let info = iox_service::inspect::inspect_in(root, "k/data").unwrap();
    (
        info.classes.iter().map(|c| c.in_use).sum(),
        info.subscribers.dead + info.publishers.dead,
    )
}

#[test]
fn bridge_sigkill_and_restart_recovers_and_resumes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let port = free_port();
    let bb = bridge(b.path(), &[], &["k/*"], Some(port), None);
    let svc_a = bytes_service(a.path(), "k/data");
    let svc_b = bytes_service(b.path(), "k/data");
    let sub = svc_b.subscriber_builder().create().unwrap();
    let publisher = svc_a.publisher_builder().create().unwrap();
    let send = |seq: u64| {
        publisher
            .loan_slice_uninit(4096)
            .unwrap()
            .write_from_slice(&payload(seq, 4096))
            .send()
            .unwrap();
    };

    let mut child = spawn_bridge(a.path(), port);
    warm_up(|| send(PROBE), &sub);
    // Samples queued for the bridge when it dies (its subscriber holds chunks).
    for _ in 0..3 {
        send(PROBE);
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for _ in 0..3 {
        send(PROBE);
    }

    let mut child = spawn_bridge(a.path(), port);
    warm_up(|| send(PROBE), &sub);
    for i in 0..10 {
        send(i);
        let s = loop {
            let s = next(&sub, Duration::from_secs(10)).expect("the flow resumes");
            if seq_of(&s) != PROBE {
                break s;
            }
        };
        assert_eq!(seq_of(&s), i);
        assert_eq!(checksum(&s), checksum(&payload(i, 4096)));
    }
    assert!(
        iox_testkit::wait_until(Duration::from_secs(5), || in_use(a.path()).1 == 0),
        "the killed bridge's port was recovered"
    );
    // Stop the new bridge cleanly: only the publisher's spare chunk stays in use.
    terminate(&child);
    let status = child.wait().unwrap();
    assert!(status.success(), "the bridge ends cleanly on SIGTERM: {status}");
    assert!(
        iox_testkit::wait_until(Duration::from_secs(5), || in_use(a.path()) == (1, 0)),
        "no chunk leaked: {:?} chunks in use / dead ports",
        in_use(a.path())
    );
    bb.stop();
}

fn terminate(child: &Child) {
    // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
}
