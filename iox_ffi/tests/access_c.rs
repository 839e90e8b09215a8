//! Access policies through the C ABI and the C++ layer, across real users:
//! - a C program running as a uid the policy lists as a reader
//!   (`tests/programs/c_access_reader.c`) opens a service Rust created, is refused a
//!   publisher with `IOX_STATUS_NOT_A_PUBLISHER` (the message naming the policy),
//!   subscribes and receives what Rust publishes;
//! - a C++ program creates a service with `iox::Options::access`
//!   (`tests/programs/cpp_access.cpp`), Rust reads the policy and permissions it
//!   recorded, and the same program running as a uid the policy does not name is
//!   refused at open with `IOX_STATUS_NOT_IN_ACCESS_POLICY`.
//!
//! The programs run as other users (`Command::uid`), so these tests need root;
//! otherwise they build the programs (the API compiles) and say why they skip.
//! Processes synchronise through the service's port counts and their output.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use iox_service::{AccessPolicy, Service};
use iox_testkit::{Reaped, wait_ok, wait_until};

mod common;
use common::{build, runnable_by_others};

/// A uid the policies list as a reader.
const READER: u32 = 1002;
/// A uid no policy here names.
const STRANGER: u32 = 1004;
const LIMIT: Duration = Duration::from_secs(60);

/// A fresh root directory that every user may create files in, sticky, as /dev/shm is.
fn shared_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// `program` run as user and group `uid` (no supplementary groups: std drops them when
/// root sets a uid), with the library it was built against.
fn as_user(program: &Path, uid: u32) -> Command {
    let mut cmd = Command::new(program);
    cmd.uid(uid)
        .gid(uid)
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

const READER_TEST: &str = "a_c_reader_subscribes_and_receives_but_is_refused_a_publisher";

#[test]
fn a_c_reader_subscribes_and_receives_but_is_refused_a_publisher() {
    let exe = build("tests/programs/c_access_reader.c", "c_access_reader", &[]);
    if !iox_testkit::root_or_skip(READER_TEST) {
        return;
    }
    runnable_by_others(&exe);
    let dir = shared_root();
    let root = dir.path();
    let name = "ffi/access/reader";
    let svc = Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .permissions(0o666)
        .access(AccessPolicy::new().read_uid(READER))
        .create()
        .unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let mut child = Reaped::new(
        as_user(&exe, READER)
            .arg(root)
            .args([name, &READER.to_string(), "42"])
            .spawn()
            .expect("start the C reader"),
    );
    // Its subscriber is the second one: then it is sent what it waits for (or it
    // failed before subscribing, and its output says why).
    let subscribed = wait_until(LIMIT, || svc.port_counts().1 == 2 || child.try_wait().is_some());
    if svc.port_counts().1 == 2 {
        assert_eq!(p.loan_uninit().unwrap().write_payload(42).send().unwrap(), 2);
    }
    // The program bounds its own wait (30 s).
    let out = child.into_inner().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        subscribed,
        "the C reader neither subscribed nor exited within {LIMIT:?}"
    );
    assert!(out.status.success(), "c_access_reader ({}): {stderr}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "subscribed\nreceived 42\n");
    assert_eq!(s.receive().unwrap().map(|v| *v), Some(42));
}

const STRANGER_TEST: &str = "a_cpp_program_creates_a_policy_that_refuses_a_stranger";

#[test]
fn a_cpp_program_creates_a_policy_that_refuses_a_stranger() {
    let exe = build("tests/programs/cpp_access.cpp", "cpp_access", &[]);
    if !iox_testkit::root_or_skip(STRANGER_TEST) {
        return;
    }
    runnable_by_others(&exe);
    let dir = shared_root();
    let root = dir.path();
    let name = "ffi/access/cpp";
    // The creator, as root: it holds the service until its standard input ends.
    let mut creator = Command::new(&exe)
        .arg("create")
        .arg(root)
        .args([name, &READER.to_string()])
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the C++ creator");
    let stdin = creator.stdin.take().unwrap();
    let mut lines = BufReader::new(creator.stdout.take().unwrap()).lines();
    let creator = Reaped::new(creator);
    assert_eq!(
        lines.next().expect("the creator's output").unwrap(),
        "created",
        "the C++ creator failed (its stderr is above)"
    );

    // What C++ recorded: its permissions, and the policy with its uid the creator.
    let svc = Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open()
        .unwrap();
    assert_eq!(svc.static_config().permissions, 0o666);
    let policy = svc.access_policy().expect("a policy recorded");
    assert_eq!(policy.creator, 0);
    assert!(
        policy.same_rules(&AccessPolicy::new().read_uid(READER)),
        "{policy}"
    );
    drop(svc);

    let out = as_user(&exe, STRANGER)
        .arg("stranger")
        .arg(root)
        .arg(name)
        .output()
        .expect("run the C++ stranger");
    assert!(
        out.status.success(),
        "cpp_access stranger ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "refused\n");

    drop(stdin);
    wait_ok(creator.into_inner(), LIMIT);
}
