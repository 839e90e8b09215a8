//! The benchmark program runs end to end (quick mode, throughput and pinning parts:
//! every transport, two processes each), so it cannot rot unnoticed. Figures are not
//! checked here: speed is measured by running the program, not in tests.

use std::process::Command;

#[test]
fn pingpong_quick_runs_every_transport() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pingpong"))
        .args(["--quick", "--only", "throughput,pinning", "--csv"])
        .arg(dir.path().join("out.csv"))
        .env("IOX_ROOT", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "| 8 B | iox |",
        "| 8 B | iceoryx2 |",
        "| 64 KiB | unix-socket |",
        "pinned cost per MiB",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
}
