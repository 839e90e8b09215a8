//! The install for C and C++ programs as a user runs it: `scripts/install-c.sh` into a
//! fresh prefix, the examples (iox_ffi/examples) configured and built by CMake through
//! `find_package(iox)`, a program built with `pkg-config --cflags --libs iox` (from the
//! prefix, and from the tarball `install-c.sh --tarball` makes, unpacked elsewhere), and the
//! built examples talking to Rust over the examples' service, each side its own process.
//! Needs cmake and pkg-config (CI installs cmake); without them it says so and passes.
//! The programs run without the `LD_LIBRARY_PATH` that `cargo test` sets, so they load
//! the installed library, as a user's would.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use iox_testkit::{Reaped, wait_ok};

mod common;
use common::{feed, readings};

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Installs into `prefix` the libraries this `cargo test` built (see
/// `cross_language.rs`), through the script users run.
fn install(prefix: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let exe = std::env::current_exe().unwrap();
    run(Command::new(repo.join("scripts/install-c.sh"))
        .arg(prefix)
        .env("IOX_FFI_LIB_DIR", exe.parent().unwrap()));
}

#[test]
fn cmake_and_pkg_config_build_examples_that_talk_to_rust() {
    if !have("cmake") || !have("pkg-config") {
        iox_testkit::skip(
            "cmake_and_pkg_config_build_examples_that_talk_to_rust",
            "IOX_REQUIRE_CMAKE",
            "cmake or pkg-config not found",
        );
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let prefix = work.path().join("prefix");
    install(&prefix);
    let build: PathBuf = work.path().join("build");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    run(Command::new("cmake")
        .arg("-S")
        .arg(&examples)
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())));
    run(Command::new("cmake").arg("--build").arg(&build));

    // pkg-config: the same C example built by hand.
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "iox"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .unwrap();
    assert!(pc.status.success(), "{}", String::from_utf8_lossy(&pc.stderr));
    let flags = String::from_utf8(pc.stdout).unwrap();
    let by_hand = work.path().join("c_publisher_pc");
    run(Command::new("gcc")
        .arg(examples.join("publisher.c"))
        .arg("-o")
        .arg(&by_hand)
        .args(flags.split_whitespace()));
    let usage = Command::new(&by_hand)
        .arg("--bad")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert_eq!(
        usage.status.code(),
        Some(2),
        "the pkg-config build runs and prints its usage"
    );

    // The tarball: unpacked elsewhere, the same program builds and runs against it.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let tarball = work.path().join("iox-c.tar.gz");
    run(Command::new(repo.join("scripts/install-c.sh"))
        .arg("--tarball")
        .arg(&tarball)
        .env(
            "IOX_FFI_LIB_DIR",
            std::env::current_exe().unwrap().parent().unwrap(),
        ));
    let unpacked = work.path().join("elsewhere");
    std::fs::create_dir_all(&unpacked).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&unpacked));
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "iox"])
        .env("PKG_CONFIG_PATH", unpacked.join("iox/lib/pkgconfig"))
        .output()
        .unwrap();
    assert!(pc.status.success(), "{}", String::from_utf8_lossy(&pc.stderr));
    let flags = String::from_utf8(pc.stdout).unwrap();
    assert!(flags.contains("elsewhere/iox"), "{flags}");
    let from_tarball = work.path().join("c_publisher_tarball");
    run(Command::new("gcc")
        .arg(examples.join("publisher.c"))
        .arg("-o")
        .arg(&from_tarball)
        .args(flags.split_whitespace()));
    let usage = Command::new(&from_tarball)
        .arg("--bad")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2), "the tarball's build runs");

    let root = tempfile::tempdir().unwrap();
    let root_env = ("IOX_ROOT", root.path());

    // C publisher -> Rust subscriber.
    let svc = readings(root.path());
    let sub = svc.subscriber_builder().create().unwrap();
    let child = Command::new(build.join("c_publisher"))
        .args(["--count", "3"])
        .env(root_env.0, root_env.1)
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_ok(child, Duration::from_secs(60));
    for seq in 0..3u64 {
        let r = sub
            .receive_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("a reading");
        assert_eq!((r.seq, r.value), (seq, seq as f64 * 0.5));
    }
    drop(sub);

    // Rust publisher -> the C++ subscriber example, then the C++ WaitSet example (it
    // sleeps until readings arrive; its heartbeat lines are left out).
    let publisher = svc.publisher_builder().create().unwrap();
    let out = feed(
        Command::new(build.join("cpp_subscriber")).args(["--count", "3"]),
        root.path(),
        &publisher,
        0..3,
    );
    assert_eq!(
        out,
        "cpp_subscriber: got seq 0 value 0.0\ncpp_subscriber: got seq 1 value 0.5\ncpp_subscriber: got seq 2 value 1.0\n"
    );
    let out = feed(
        Command::new(build.join("cpp_waitset")).args(["--count", "3"]),
        root.path(),
        &publisher,
        10..13,
    );
    let got: Vec<&str> = out.lines().filter(|l| !l.ends_with("waiting")).collect();
    assert_eq!(
        got,
        [
            "cpp_waitset: got seq 10 value 5.0",
            "cpp_waitset: got seq 11 value 5.5",
            "cpp_waitset: got seq 12 value 6.0"
        ]
    );

    // The request-response example: its server and its client, two processes.
    let example = build.join("cpp_request_response");
    let server = Command::new(&example)
        .args(["server", "--count", "2"])
        .env(root_env.0, root_env.1)
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let server = Reaped::new(server);
    let out = Command::new(&example)
        .args(["client", "--count", "2"])
        .env(root_env.0, root_env.1)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "client: 1 squared is 1\nclient: 2 squared is 4\n"
    );
    wait_ok(server.into_inner(), Duration::from_secs(30));
}
