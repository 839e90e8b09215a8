//! The benchmark program runs end to end (quick mode: throughput and pinning parts, and
//! the latency part at two sizes with the floor; every transport, two processes each),
//! so it cannot rot unnoticed. Figures are not
//! checked here: speed is measured by running the program, not in tests. iceoryx2's
//! files of each run are removed afterwards (`iceoryx2_files`).

use std::process::Command;

#[test]
fn pingpong_quick_runs_every_transport() {
    let dir = tempfile::tempdir().unwrap();
    let _iceoryx2 = iox_benches::iceoryx2_files::RemovedOnDrop(dir.path().into());
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

/// The latency part in quick mode, restricted by `--sizes`: the floor and the typed rows
/// run at 8 B only, every transport (iox from C++ too, where g++ is installed) gets its
/// ratio to the floor, and the CSV holds their rows.
#[test]
fn pingpong_quick_latency_covers_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    let _iceoryx2 = iox_benches::iceoryx2_files::RemovedOnDrop(dir.path().into());
    let csv = dir.path().join("out.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_pingpong"))
        .args(["--quick", "--only", "latency", "--sizes", "8,64", "--csv"])
        .arg(&csv)
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
        "| 8 B | floor (shared word) |",
        "| 64 B | iox |",
        "iox / floor = ",
        "iceoryx2 / floor = ",
        "unix-socket / floor = ",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    assert!(!stdout.contains("| 64 B | floor"), "floor ran at 64 B:\n{stdout}");
    assert!(!stdout.contains("| 4 KiB |"), "--sizes ignored:\n{stdout}");
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.contains("\nfloor (shared word),8,"), "no floor row in\n{csv}");
    // iox from C++ runs wherever g++ builds its ping-pong (CI has it).
    let cpp = Command::new("g++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if cpp {
        assert!(
            stdout.contains("iox from C++ / floor = "),
            "no C++ ratio in\n{stdout}"
        );
        assert!(csv.contains("\niox from C++,64,"), "no C++ row in\n{csv}");
    }
    // At 8 B also the typed rows (iox's and iceoryx2's u64 loans) and the floor.
    for needle in ["\niox typed u64,8,", "\niceoryx2 typed u64,8,"] {
        assert!(csv.contains(needle), "no {needle:?} row in\n{csv}");
    }
    assert!(!csv.contains("typed u64,64,"), "typed rows ran at 64 B:\n{csv}");
    assert!(
        stdout.contains("| 8 B typed u64 |"),
        "no typed ratio in\n{stdout}"
    );
    let per_size = 3 + usize::from(cpp);
    assert_eq!(
        csv.lines().count(),
        1 + (per_size + 3) + per_size,
        "unexpected rows in\n{csv}"
    );
}

/// The blocking wake-up benchmark runs end to end in quick mode: every case (iox,
/// iceoryx2, iox with 1,000 attached), both sizes, the ratio table and the idle part.
#[test]
fn wakeup_quick_runs_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let _iceoryx2 = iox_benches::iceoryx2_files::RemovedOnDrop(dir.path().into());
    let out = Command::new(env!("CARGO_BIN_EXE_wakeup"))
        .args(["--quick", "--idle-secs", "1"])
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
        "| 1 MiB | iceoryx2 |",
        "| 8 B | iox, 1000 attached |",
        "| 1 MiB | ", // the ratio table
        "WaitSet over 1000 subscribers, nothing firing",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
}

/// The huge-page benchmark runs end to end at its smallest (one round, a
/// pool of 256 MiB): the 4 KiB row always, a huge-page row where 2 MiB pages are reserved (or a
/// line saying why not).
#[test]
fn hugepages_runs_every_page_size_the_machine_has() {
    let out = Command::new(env!("CARGO_BIN_EXE_hugepages"))
        .args(["--rounds", "1", "--pool-mib", "256", "--frames", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("| 4 KiB | "), "{stdout}");
    assert!(stdout.contains("| transparent huge pages"), "{stdout}");
    assert!(
        stdout.contains("| 2 MiB (hugetlb) | ") || stdout.contains("# 2 MiB (hugetlb): skipped"),
        "{stdout}"
    );
}

/// The live-view benchmark runs end to end at its smallest (one round, small frames),
/// with `iox foxglove` (built here if it is not) and the SDK's server side by side.
#[test]
fn foxglove_runs_every_viewer_on_both_servers() {
    let built = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "iox_cli", "--bin", "iox"])
        .status()
        .unwrap();
    assert!(built.success());
    let bench = std::path::Path::new(env!("CARGO_BIN_EXE_foxglove"));
    let out = Command::new(bench)
        .args([
            "--rounds",
            "1",
            "--seconds",
            "0.2",
            "--size",
            "65536",
            "--rate",
            "500",
        ])
        .arg("--iox")
        .arg(bench.with_file_name("iox"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "| no viewer | ",
        "| a stalled client | ",
        "| a reading and a stalled client | ",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
}
