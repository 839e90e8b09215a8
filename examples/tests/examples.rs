//! The examples run as a newcomer runs them, each in its own `IOX_ROOT`, and leave
//! no file behind.

use std::process::Command;

fn run(exe: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(exe)
        .args(args)
        .env("IOX_ROOT", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{exe} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "files left behind"
    );
    stdout
}

#[test]
fn pubsub_moves_readings_between_two_processes() {
    let out = run(env!("CARGO_BIN_EXE_pubsub"), &["--count", "5"]);
    for seq in 0..5 {
        assert!(out.contains(&format!("subscriber: got seq {seq} value")), "{out}");
    }
    assert!(out.contains("pubsub: 5 readings"), "{out}");
}

#[test]
fn frames_moves_16_mib_frames() {
    let out = run(env!("CARGO_BIN_EXE_frames"), &["--count", "8"]);
    assert!(out.contains("frames: 8 x 16 MiB"), "{out}");
}
