//! The two bridges as two hosts: `scripts/zenoh_netns.sh` in two network namespaces
//! joined by a veth pair. Runs when root is available; skips with a printed reason
//! otherwise.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn two_hosts_in_network_namespaces() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = root.join("scripts/zenoh_netns.sh");
    // Examples are built with the tests, next to the test binaries' folder.
    let exe = std::env::current_exe().unwrap();
    let probe = exe.parent().unwrap().parent().unwrap().join("examples/probe");
    if !probe.exists() {
        iox_testkit::skip(
            "two_hosts_in_network_namespaces",
            "IOX_REQUIRE_ROOT",
            format!("{} is not built", probe.display()),
        );
        return;
    }
    let out = Command::new("bash")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_iox-zenoh"))
        .arg(&probe)
        .output()
        .expect("run the script");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {}
        Some(77) => iox_testkit::skip("two_hosts_in_network_namespaces", "IOX_REQUIRE_ROOT", text.trim()),
        _ => panic!("{} failed ({}):\n{text}", script.display(), out.status),
    }
}
