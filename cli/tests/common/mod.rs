//! Helpers shared by the `iox` tool's test files.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs the `iox` binary with `--root root` and `args`. (Not every test file that
/// includes this module runs one to its end.)
#[allow(dead_code)]
pub fn iox(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iox"))
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .expect("run iox")
}

/// Its stdout and stderr, as text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Its exit code.
pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

/// Starts the `iox` binary with `--root root` and `args`, stdout and stderr piped;
/// SIGKILLed if the test fails before taking it back (`into_inner`). (Not every test
/// file that includes this module starts one.)
#[allow(dead_code)]
pub fn spawn(root: &Path, args: &[&str]) -> iox_testkit::Reaped {
    let child = Command::new(env!("CARGO_BIN_EXE_iox"))
        .arg("--root")
        .arg(root)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start iox");
    iox_testkit::Reaped::new(child)
}
