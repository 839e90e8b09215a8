//! The test command's tally (`scripts/count-tests.awk`) on a log of the shape cargo
//! and pytest print: a test binary's own result line counted once (a child's result
//! line before it is not), doctests counted, pytest's summary with its skips, and the
//! Rust tests the skip log names moved from passed to skipped (each once).

use std::process::Command;

const LOG: &str = "\
     Running unittests src/lib.rs (target/debug/deps/a-1)
test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
test result: ok. 7 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.20s
   Doc-tests a
test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.50s
\x1b[32m12 passed, 2 skipped in 3.40s\x1b[0m
";

#[test]
fn skipped_tests_are_counted_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (log, skips) = (dir.path().join("log"), dir.path().join("skips"));
    std::fs::write(&log, LOG).unwrap();
    // Two Rust tests skipped, one of them twice (a parent and its child).
    std::fs::write(&skips, "ros_test\tno venv\ngpu_test\tno GPU\nros_test\tno venv\n").unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/count-tests.awk");
    let out = Command::new("awk")
        .arg("-v")
        .arg(format!("skiplog={}", skips.display()))
        .args(["-f", script])
        .arg(&log)
        .output()
        .expect("run awk");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "ci: skipped ros_test: no venv",
            "ci: skipped gpu_test: no GPU",
            // 7 + 3 + 12 = 22 passed by the runners, 2 of them skips.
            "ci: 20 passed, 4 skipped, 1 failed",
        ],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without a skip log: the runners' own counts.
    let out = Command::new("awk")
        .args(["-f", script])
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "ci: 22 passed, 2 skipped, 1 failed\n"
    );
}
