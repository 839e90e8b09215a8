//! C and C++ programs (tests/programs and the examples, compiled here with the system's gcc and g++
//! against this crate's `libiox_ffi.so`) and Rust in separate processes, on one
//! service: C++ publisher -> Rust subscriber, Rust publisher -> C subscriber, the C
//! API's answers to a caller's mistakes (also under AddressSanitizer and
//! UndefinedBehaviorSanitizer), a C++ subscriber SIGKILLed while it holds samples, and
//! service attributes recorded on one side and read and required on the other;
//! frames with a user header between Rust, C (handle and held APIs) and C++ both ways.
//! Each test has its own root; processes synchronise through their output and the
//! services themselves, never by sleeping.

use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{ChildStdout, Command, Stdio};
use std::time::Duration;

use iox_service::{PubSubService, Service, ZeroCopySafe};
use iox_testkit::{Reaped, wait_ok};

mod common;
use common::{build, camera, receive_frame, send_frames};

/// The payload of tests/programs/reading.h.
#[derive(Debug, Clone, Copy, ZeroCopySafe)]
#[iox(type_name = "ffi/Reading")]
#[repr(C)]
struct Reading {
    seq: u64,
    value: f64,
}

fn service(root: &Path, name: &str) -> PubSubService<Reading> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<Reading>()
        .subscriber_buffer(64)
        .open_or_create()
        .unwrap()
}

/// Starts `command` with its output piped to us; killed if the test ends early.
fn spawn_piped(command: &mut Command) -> (Reaped, Lines<BufReader<ChildStdout>>) {
    let mut child = command.stdout(Stdio::piped()).spawn().expect("start the program");
    let out = child.stdout.take().expect("piped");
    (Reaped::new(child), BufReader::new(out).lines())
}

/// The next line a child prints (a child that dies ends its output; each program
/// gives up on its own after 10 s without a sample).
fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    lines
        .next()
        .expect("the child ended its output early")
        .expect("the child's output")
}

#[test]
fn a_cpp_publisher_reaches_a_rust_subscriber() {
    let exe = build("tests/programs/cpp_publisher.cpp", "cpp_publisher", &[]);
    let root = tempfile::tempdir().unwrap();
    let svc = service(root.path(), "ffi/cpp-to-rust");
    let sub = svc.subscriber_builder().create().unwrap();
    let child = Command::new(&exe)
        .args([root.path().to_str().unwrap(), "ffi/cpp-to-rust", "50"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_ok(child, Duration::from_secs(30));
    for seq in 0..50u64 {
        let s = sub
            .receive_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("a reading");
        assert_eq!((s.seq, s.value), (seq, seq as f64 * 0.5));
    }
    assert!(sub.receive().unwrap().is_none());
}

#[test]
fn a_rust_publisher_reaches_a_c_subscriber() {
    let exe = build("tests/programs/c_subscriber.c", "c_subscriber", &[]);
    let root = tempfile::tempdir().unwrap();
    let (child, mut lines) =
        spawn_piped(Command::new(&exe).args([root.path().to_str().unwrap(), "ffi/rust-to-c", "50"]));
    assert_eq!(next_line(&mut lines), "ready");
    let svc = service(root.path(), "ffi/rust-to-c");
    let publisher = svc.publisher_builder().create().unwrap();
    for seq in 0..50u64 {
        let n = publisher
            .loan_uninit()
            .unwrap()
            .write_payload(Reading {
                seq,
                value: seq as f64 * 0.5,
            })
            .send()
            .unwrap();
        assert_eq!(n, 1, "the C subscriber is connected");
    }
    assert_eq!(next_line(&mut lines), "received 50 sum 1225");
    wait_ok(child.into_inner(), Duration::from_secs(30));
}

/// Runs a program of checks (`PROGRAM ROOT`, closing with "N passed, 0 failed").
fn run_misuse(exe: &Path) {
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(exe)
        .arg(root.path())
        // The Rust library is not instrumented; its process-lifetime allocations
        // (thread-locals, the node registry) are not leaks.
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0")
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(" passed, 0 failed"),
        "{} ({:?}):\n{text}\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn c_mistakes_get_a_status_and_a_message() {
    run_misuse(&build("tests/programs/c_misuse.c", "c_misuse", &[]));
}

#[test]
fn held_loans_and_samples_refuse_misuse_and_outlive_their_ports() {
    run_misuse(&build("tests/programs/c_held.c", "c_held", &[]));
}

#[test]
fn every_part_of_the_cpp_layer_works() {
    run_misuse(&build("tests/programs/cpp_api.cpp", "cpp_api", &[]));
}

#[test]
fn c_and_cpp_programs_are_clean_under_sanitizers() {
    let sanitize = [
        "-fsanitize=address,undefined",
        "-fno-omit-frame-pointer",
        "-fno-sanitize-recover=all",
    ];
    run_misuse(&build("tests/programs/c_misuse.c", "c_misuse_asan", &sanitize));
    run_misuse(&build("tests/programs/c_held.c", "c_held_asan", &sanitize));
    run_misuse(&build("tests/programs/cpp_api.cpp", "cpp_api_asan", &sanitize));
    let exe = build(
        "tests/programs/cpp_publisher.cpp",
        "cpp_publisher_asan",
        &sanitize,
    );
    let root = tempfile::tempdir().unwrap();
    let svc = service(root.path(), "ffi/asan");
    let sub = svc.subscriber_builder().create().unwrap();
    let out = Command::new(&exe)
        .args([root.path().to_str().unwrap(), "ffi/asan", "20"])
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut got = 0;
    while sub.receive().unwrap().is_some() {
        got += 1;
    }
    assert_eq!(got, 20);

    // The C++ examples: the subscriber and the WaitSet loop fed by a Rust publisher, and request-response
    // between the example's own server and client processes.
    let sub_exe = build(
        "examples/subscriber.cpp",
        "cpp_subscriber_example_asan",
        &sanitize,
    );
    let rr_exe = build(
        "examples/request_response.cpp",
        "cpp_request_response_asan",
        &sanitize,
    );
    let publisher = common::readings(root.path())
        .publisher_builder()
        .create()
        .unwrap();
    common::feed(
        Command::new(&sub_exe)
            .args(["--count", "2"])
            .env("ASAN_OPTIONS", "detect_leaks=0"),
        root.path(),
        &publisher,
        0..2,
    );
    let ws_exe = build("examples/waitset.cpp", "cpp_waitset_asan", &sanitize);
    let out = common::feed(
        Command::new(&ws_exe)
            .args(["--count", "2"])
            .env("ASAN_OPTIONS", "detect_leaks=0"),
        root.path(),
        &publisher,
        2..4,
    );
    assert!(out.contains("got seq 3"), "{out}");
    let server = Reaped::new(
        Command::new(&rr_exe)
            .args(["server", "--count", "2"])
            .env("IOX_ROOT", root.path())
            .env("ASAN_OPTIONS", "detect_leaks=0")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let out = Command::new(&rr_exe)
        .args(["client", "--count", "2"])
        .env("IOX_ROOT", root.path())
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "client: 1 squared is 1\nclient: 2 squared is 4\n"
    );
    wait_ok(server.into_inner(), Duration::from_secs(30));
}

#[test]
fn a_killed_cpp_subscriber_holding_samples_loses_nothing() {
    let exe = build("tests/programs/cpp_holder.cpp", "cpp_holder", &[]);
    let root = tempfile::tempdir().unwrap();
    let name = "ffi/holder";
    let svc = service(root.path(), name);
    let total = svc.pool_info().total_chunks();
    let publisher = svc.publisher_builder().create().unwrap();
    let (child, mut lines) = spawn_piped(Command::new(&exe).args([root.path().to_str().unwrap(), name, "2"]));
    assert_eq!(next_line(&mut lines), "ready");
    // Two: a subscriber's default `max_held`.
    for seq in 0..2u64 {
        let sample = publisher
            .loan_uninit()
            .unwrap()
            .write_payload(Reading { seq, value: 0.0 });
        assert_eq!(sample.send().unwrap(), 1);
    }
    assert_eq!(next_line(&mut lines), "holding 2");
    // Held: two samples by the C++ process, and our spare.
    assert_eq!(svc.pool_info().free_chunks(), total - 3);
    child.kill();
    let report = Service::cleanup_dead_in(root.path(), name).unwrap();
    assert_eq!(report.ports, 1, "the C++ subscriber's port was recovered");
    assert_eq!(
        svc.pool_info().free_chunks(),
        total - 1,
        "everything but our spare is free again"
    );
}

#[test]
fn a_c_waitset_wakes_for_samples_events_deadlines_and_intervals() {
    let exe = build("tests/programs/c_waitset.c", "c_waitset", &[]);
    let root = tempfile::tempdir().unwrap();
    let (child, mut lines) = spawn_piped(Command::new(&exe).arg(root.path()));
    // It says ready once its subscriber's 20 ms deadline passed and its interval ticked.
    assert_eq!(next_line(&mut lines), "ready");
    let readings = Service::named("ffi/ws-readings")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<Reading>()
        .subscriber_buffer(64)
        .open()
        .unwrap();
    let events = Service::named("ffi/ws-events")
        .unwrap()
        .root(root.path())
        .event()
        .open()
        .unwrap();
    let publisher = readings.publisher_builder().create().unwrap();
    let notifier = events.notifier_builder().create().unwrap();
    for seq in 0..3u64 {
        let sample = publisher
            .loan_uninit()
            .unwrap()
            .write_payload(Reading { seq, value: 0.0 });
        assert_eq!(sample.send().unwrap(), 1);
    }
    assert_eq!(notifier.notify_with_custom_event_id(7.into()).unwrap(), 1);
    let mut seen = Vec::new();
    loop {
        let line = next_line(&mut lines);
        if line == "done" {
            break;
        }
        seen.push(line);
    }
    seen.sort();
    assert_eq!(seen, ["event 7", "sample 0", "sample 1", "sample 2"]);
    wait_ok(child.into_inner(), Duration::from_secs(30));
}

#[test]
fn a_cpp_notifier_reaches_a_rust_listener() {
    let exe = build("tests/programs/cpp_notifier.cpp", "cpp_notifier", &[]);
    let root = tempfile::tempdir().unwrap();
    let events = Service::named("ffi/events")
        .unwrap()
        .root(root.path())
        .event()
        .open_or_create()
        .unwrap();
    let listener = events.listener_builder().create().unwrap();
    let out = Command::new(&exe)
        .args([root.path().to_str().unwrap(), "ffi/events", "3", "5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "notified 3 reached 1\nnotified 5 reached 1\n"
    );
    let mut ids = Vec::new();
    while let Some(id) = listener.timed_wait_one(Duration::from_secs(10)).unwrap() {
        ids.push(id.as_value());
        if ids.len() == 2 {
            break;
        }
    }
    ids.sort();
    assert_eq!(ids, [3, 5]);
}

fn request_response(root: &Path, name: &str) -> iox_service::RequestResponseService<Reading, u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .request_response::<Reading, u64>()
        .open_or_create()
        .unwrap()
}

#[test]
fn a_cpp_client_is_answered_by_a_rust_server() {
    let exe = build("tests/programs/cpp_client.cpp", "cpp_client", &[]);
    let root = tempfile::tempdir().unwrap();
    let svc = request_response(root.path(), "ffi/rr-cpp");
    let server = svc.server_builder().create().unwrap();
    let mut child = Reaped::new(
        Command::new(&exe)
            .args([root.path().to_str().unwrap(), "ffi/rr-cpp", "3"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut served = 0;
    while served < 3 {
        let Some(active) = server.receive_timeout(Duration::from_secs(10)).unwrap() else {
            panic!("no request within 10 s (child: {:?})", child.try_wait());
        };
        assert_eq!(active.value, active.seq as f64 * 0.5);
        for k in 0..2 {
            active
                .loan_uninit()
                .unwrap()
                .write_payload(active.seq * 10 + k)
                .send()
                .unwrap();
        }
        served += 1;
    }
    let out = child.into_inner().wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "request 0: 0 1\nrequest 1: 10 11\nrequest 2: 20 21\n"
    );
}

#[test]
fn a_rust_client_is_answered_by_a_c_server() {
    let exe = build("tests/programs/c_server.c", "c_server", &[]);
    let root = tempfile::tempdir().unwrap();
    let (child, mut lines) =
        spawn_piped(Command::new(&exe).args([root.path().to_str().unwrap(), "ffi/rr-c", "3"]));
    assert_eq!(next_line(&mut lines), "ready");
    let svc = request_response(root.path(), "ffi/rr-c");
    let client = svc.client_builder().create().unwrap();
    for seq in 0..3u64 {
        let pending = client
            .loan_uninit()
            .unwrap()
            .write_payload(Reading { seq, value: 0.0 })
            .send()
            .unwrap();
        let mut got = Vec::new();
        while let Some(r) = pending.receive_timeout(Duration::from_secs(10)).unwrap() {
            got.push(*r);
        }
        assert!(pending.is_finished(), "the stream ended, not the wait");
        assert_eq!(got, [seq * 10, seq * 10 + 1]);
    }
    assert_eq!(next_line(&mut lines), "served 3");
    wait_ok(child.into_inner(), Duration::from_secs(30));
}

#[test]
fn c_slices_reach_a_rust_slice_subscriber() {
    let exe = build("tests/programs/c_slices.c", "c_slices", &[]);
    let root = tempfile::tempdir().unwrap();
    let svc = Service::named("ffi/slices")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u32]>()
        .max_slice_len(1024)
        .subscriber_buffer(8)
        .open_or_create()
        .unwrap();
    let sub = svc.subscriber_builder().create().unwrap();
    let child = Command::new(&exe)
        .args([root.path().to_str().unwrap(), "ffi/slices"])
        .spawn()
        .unwrap();
    wait_ok(child, Duration::from_secs(30));
    for (k, len) in [1u32, 100, 1024].into_iter().enumerate() {
        let s = sub
            .receive_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("a slice");
        let want: Vec<u32> = (0..len).map(|i| k as u32 * 10000 + i).collect();
        assert_eq!(&*s, &want[..]);
    }
}

/// A C program picks the reject policy and gets a full queue as its own status (see
/// the program's comment).
#[test]
fn c_chooses_the_overflow_policy_and_sees_a_full_queue() {
    let exe = build("tests/programs/c_overflow.c", "c_overflow", &[]);
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(&exe).arg(root.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "overflow ok\n");
}

/// The C++ block of the guide's "From C and C++" (docs/guide/c-cpp.md), as written.
fn readme_cpp_block() -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/c-cpp.md"))
            .unwrap();
    let section = &readme[readme
        .find("## From C and C++")
        .expect("the README's C and C++ section")..];
    let start = section.find("```cpp\n").expect("a cpp block") + "```cpp\n".len();
    let end = start + section[start..].find("```").expect("the block's end");
    section[start..end].to_string()
}

/// The guide's C and C++ section's other `cpp` blocks: excerpts of the examples.
fn readme_cpp_excerpts() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/c-cpp.md"))
            .unwrap();
    let start = readme
        .find("## From C and C++")
        .expect("the README's C and C++ section");
    let end = readme[start + 1..]
        .find("\n## ")
        .map_or(readme.len(), |i| start + i + 1);
    let blocks: Vec<String> = readme[start..end]
        .split("```cpp\n")
        .skip(1)
        .map(|b| b[..b.find("```").expect("the block's end")].to_string())
        .collect();
    blocks[1..].to_vec()
}

/// The guide's user header and field layout excerpts (every `cpp` block after the
/// first) are lines of the camera example.
#[test]
fn the_readme_user_header_excerpt_is_in_the_camera_example() {
    let excerpts = readme_cpp_excerpts();
    assert_eq!(
        excerpts.len(),
        2,
        "the guide's user header and field layout excerpts"
    );
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/camera.cpp")).unwrap();
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    for line in excerpts
        .iter()
        .flat_map(|e| e.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        assert!(
            lines.contains(&line),
            "guide line not in examples/camera.cpp: {line}"
        );
    }
}

#[test]
fn the_readme_cpp_example_receives_from_a_rust_publisher() {
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("readme.cpp");
    std::fs::write(&source, readme_cpp_block()).unwrap();
    let exe = build(&source, "readme_cpp", &[]);
    let root = tempfile::tempdir().unwrap();
    let publisher = common::readings(root.path())
        .publisher_builder()
        .create()
        .unwrap();
    let out = common::feed(&mut Command::new(&exe), root.path(), &publisher, 0..3);
    assert_eq!(
        out,
        "got seq 0 value 0.0\ngot seq 1 value 0.5\ngot seq 2 value 1.0\n"
    );
}

/// Attributes a Rust process recorded, read and required by a C++ process (and the C
/// calls' answers to mistakes); a request-response service of `Reading` to `u64`.
#[test]
fn a_cpp_program_reads_and_requires_the_attributes_rust_recorded() {
    let exe = build("tests/programs/cpp_attributes.cpp", "cpp_attributes", &[]);
    let root = tempfile::tempdir().unwrap();
    let named = |n: &str| Service::named(n).unwrap().root(root.path());
    let _readings = named("ffi/attr/readings")
        .publish_subscribe::<Reading>()
        .attribute("unit", "m/s")
        .attribute("ros2/type", "ffi/Reading")
        .attribute("ros2/msgdef", "uint64 seq\nfloat64 value\n")
        .create()
        .unwrap();
    let _event = named("ffi/attr/event")
        .event()
        .attribute("role", "estop")
        .create()
        .unwrap();
    let _rr = named("ffi/attr/rr")
        .request_response::<Reading, u64>()
        .attribute("version", "2")
        .create()
        .unwrap();
    let out = Command::new(&exe)
        .args(["read", root.path().to_str().unwrap()])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(" passed, 0 failed"),
        "{:?}:\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "readings ros2/msgdef=uint64 seq\\nfloat64 value\\n",
        "readings ros2/type=ffi/Reading",
        "readings unit=m/s",
        "event role=estop",
        "rr version=2",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} missing:\n{text}");
    }
}

/// Attributes a C++ process recorded, required and read by Rust.
#[test]
fn rust_reads_and_requires_the_attributes_a_cpp_program_recorded() {
    // Its own name: the other test builds the same source at the same time.
    let exe = build("tests/programs/cpp_attributes.cpp", "cpp_attributes_creator", &[]);
    let root = tempfile::tempdir().unwrap();
    let (child, mut lines) = spawn_piped(
        Command::new(&exe)
            .args(["create", root.path().to_str().unwrap()])
            .env_remove("LD_LIBRARY_PATH"),
    );
    assert_eq!(next_line(&mut lines), "ready");
    let builder = || {
        Service::named("ffi/attr/from-cpp")
            .unwrap()
            .root(root.path())
            .event()
    };
    let svc = builder()
        .require_attribute("ros2/type", "std_msgs/msg/Empty")
        .require_attribute_key("note")
        .open()
        .unwrap();
    assert_eq!(
        svc.attributes().iter().collect::<Vec<_>>(),
        [
            ("note", "made in C++\n\tline 2"),
            ("ros2/type", "std_msgs/msg/Empty")
        ]
    );
    let e = builder().require_attribute("note", "other").open().unwrap_err();
    assert!(
        matches!(&e, iox_service::OpenError::IncompatibleAttribute { key, found, .. } if key == "note" && found == "made in C++\n\tline 2"),
        "{e}"
    );
    let notifier = svc.notifier_builder().create().unwrap();
    assert_eq!(notifier.notify_with_custom_event_id(1.into()).unwrap(), 1);
    assert_eq!(next_line(&mut lines), "done");
    wait_ok(child.into_inner(), Duration::from_secs(30));
}

#[test]
fn rust_frames_reach_a_c_subscriber_with_their_headers_and_mismatches_are_named() {
    let exe = build("tests/programs/c_camera.c", "c_camera_subscriber", &[]);
    let root = tempfile::tempdir().unwrap();
    // Created first: the C program's wrong openers find the service.
    let svc = camera(root.path());
    let publisher = svc.publisher_builder().create().unwrap();
    let (child, mut lines) =
        spawn_piped(Command::new(&exe).args([root.path().to_str().unwrap(), "subscribe", "4"]));
    let without = next_line(&mut lines);
    assert!(
        without.starts_with("refused: ")
            && without.contains("FrameHeader")
            && without.contains("no user header"),
        "{without}"
    );
    let other = next_line(&mut lines);
    assert!(other.contains("FrameHeader") && other.contains("u64"), "{other}");
    assert_eq!(next_line(&mut lines), "ready");
    assert_eq!(send_frames(&publisher, 0..4), [1, 1, 1, 1]);
    for (i, api) in ["handle", "held", "handle", "held"].into_iter().enumerate() {
        assert_eq!(next_line(&mut lines), format!("c_camera: frame {i} ok ({api})"));
    }
    wait_ok(child.into_inner(), Duration::from_secs(30));
}

#[test]
fn c_frames_reach_a_rust_subscriber_with_their_headers() {
    let exe = build("tests/programs/c_camera.c", "c_camera_publisher", &[]);
    let root = tempfile::tempdir().unwrap();
    let svc = camera(root.path());
    let subscriber = svc.subscriber_builder().create().unwrap();
    let child = Command::new(&exe)
        .args([root.path().to_str().unwrap(), "publish", "4"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Frames 0 and 2 through IoxLoan, 1 and 3 through IoxHeldLoan.
    for i in 0..4 {
        receive_frame(&subscriber, i);
    }
    wait_ok(child, Duration::from_secs(30));
    assert!(subscriber.receive().unwrap().is_none());
}

#[test]
fn the_cpp_camera_example_exchanges_frames_with_headers_with_rust() {
    let exe = build("examples/camera.cpp", "cpp_camera", &[]);
    let root = tempfile::tempdir().unwrap();
    let svc = camera(root.path());
    // C++ -> Rust (the example waits for our subscriber, then for it to leave).
    let subscriber = svc.subscriber_builder().create().unwrap();
    let child = Reaped::new(
        Command::new(&exe)
            .args(["publish", "--count", "3"])
            .env("IOX_ROOT", root.path())
            .env_remove("LD_LIBRARY_PATH")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    for i in 0..3 {
        receive_frame(&subscriber, i);
    }
    drop(subscriber);
    wait_ok(child.into_inner(), Duration::from_secs(30));
    // Rust -> C++.
    let publisher = svc.publisher_builder().create().unwrap();
    let (child, mut lines) = spawn_piped(
        Command::new(&exe)
            .args(["subscribe", "--count", "3"])
            .env("IOX_ROOT", root.path())
            .env_remove("LD_LIBRARY_PATH"),
    );
    assert_eq!(next_line(&mut lines), "ready");
    assert_eq!(send_frames(&publisher, 5..8), [1, 1, 1]);
    for i in 5..8 {
        assert_eq!(
            next_line(&mut lines),
            format!(
                "cpp_camera: frame {i} stamp {} 64x{} mono8 ok",
                1_000_000 + i,
                48 - i
            )
        );
    }
    wait_ok(child.into_inner(), Duration::from_secs(30));
}
