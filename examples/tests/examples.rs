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

/// SIGTERM to a subscriber sleeping in its WaitSet: it leaves its loop, exits 0, and
/// the service's files go with its ports.
#[test]
fn sigterm_stops_a_waiting_subscriber_cleanly() {
    sigterm_stops_cleanly(
        env!("CARGO_BIN_EXE_subscriber"),
        "subscriber: waiting for readings",
    );
}

/// A publisher with no subscriber says that it waits (and for what), and SIGTERM
/// stops it as cleanly.
#[test]
fn a_publisher_without_subscriber_says_it_waits() {
    sigterm_stops_cleanly(
        env!("CARGO_BIN_EXE_publisher"),
        "publisher: waiting up to 30 s for a subscriber (run `subscriber` in another terminal)",
    );
}

/// Starts `exe` alone in its own root, expects `first` as its first line (printed
/// once its WaitSet and signal handling are set up), sends it SIGTERM, and expects a
/// clean exit: status 0, "termination requested", no file left.
fn sigterm_stops_cleanly(exe: &str, first: &str) {
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};
    const LIMIT: Duration = Duration::from_secs(60);
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(exe)
        .args(["--count", "1000000"])
        .env("IOX_ROOT", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let child = &mut child;
    // Read on a thread so that a silent child fails the test instead of hanging it.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next());
        lines.map_while(Result::ok).collect::<Vec<_>>()
    });
    let got = rx.recv_timeout(LIMIT);
    if !matches!(&got, Ok(Some(Ok(l))) if l == first) {
        let _ = child.kill();
        panic!("unexpected start of {exe}: {got:?}");
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("{exe} did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let rest = reader.join().unwrap();
    assert!(status.success(), "{status}: {rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("termination requested")),
        "{rest:?}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "files left behind"
    );
}

/// An example that fails prints the error's message (what to do), not its `Debug`
/// form, and exits 1: here a root that is a file.
#[test]
fn a_failing_example_prints_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, b"").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_subscriber"))
        .env("IOX_ROOT", &file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("is not a directory: set IOX_ROOT to a directory"),
        "{stderr}"
    );
    // No `Debug` form: no enum variant with its fields.
    assert!(!stderr.contains('{'), "{stderr}");
}

#[test]
fn frames_moves_16_mib_frames() {
    let out = run(env!("CARGO_BIN_EXE_frames"), &["--count", "8"]);
    assert!(out.contains("frames: 8 x 16 MiB"), "{out}");
}

/// The same on 2 MiB huge pages (56 of them: 7 frames of 16 MiB), as the guide's
/// "Huge pages" shows it.
#[test]
fn frames_moves_16_mib_frames_on_huge_pages() {
    if !iox_testkit::huge_pages_or_skip("frames_moves_16_mib_frames_on_huge_pages", 56) {
        return;
    }
    let out = run(env!("CARGO_BIN_EXE_frames"), &["--count", "8", "--pages", "2m"]);
    assert!(out.contains("frames: 8 x 16 MiB"), "{out}");
    assert!(out.contains("pool on 2 MiB (hugetlb)"), "{out}");
}

/// Without a GPU the CUDA example must say why and fail; with one it must run.
/// Without a GPU that is a skip of the GPU path (`IOX_REQUIRE_GPU=1` fails it).
#[cfg(feature = "cuda")]
#[test]
fn gpu_pinned_runs_or_explains_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu_pinned"))
        .args(["--count", "4"])
        .env("IOX_ROOT", dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if iox_cuda::CudaPinner::new(0).is_ok() {
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains("GiB/s"), "{stdout}");
    } else {
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        assert!(stderr.contains("gpu_pinned cannot run here"), "{stderr}");
        iox_testkit::skip(
            "gpu_pinned_runs_or_explains_why_not",
            iox_testkit::REQUIRE_GPU,
            "no usable CUDA device: only checked that gpu_pinned explains why it cannot run",
        );
    }
}

/// Test 7 of issue 18: the GPU example end to end against the CUDA driver double
/// (`cuda_double/`, loaded through `LD_LIBRARY_PATH`; the real driver with
/// `IOX_CUDA_DRIVER=real`): it exits 0 after its own checks (every frame's bytes
/// read back from the device through the frame's device address), and its two
/// processes pinned the pool once each.
#[cfg(feature = "cuda")]
#[test]
fn gpu_pinned_runs_end_to_end_against_the_driver_double() {
    use iox_testkit::cuda_double::Driver;
    let dir = tempfile::tempdir().unwrap();
    let driver = Driver::new(dir.path());
    if !driver.is_double()
        && let Err(e) = iox_cuda::CudaPinner::new(0)
    {
        iox_testkit::skip(
            "gpu_pinned_runs_end_to_end_against_the_driver_double",
            iox_testkit::REQUIRE_GPU,
            format!("no usable CUDA device: {e}"),
        );
        return;
    }
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu_pinned"))
        .args(["--count", "4"])
        .env("IOX_ROOT", &root)
        .envs(driver.envs())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("gpu_pinned: 4 x 16 MiB"), "{stdout}");
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "files left behind");
    if let Some(calls) = driver.calls() {
        let registers: Vec<_> = calls
            .iter()
            .filter(|c| c.name == "cuMemHostRegister_v2")
            .collect();
        let unregisters = calls.iter().filter(|c| c.name == "cuMemHostUnregister").count();
        assert_eq!((registers.len(), unregisters), (2, 2), "one pin per process");
        assert!(registers.iter().all(|c| c.result == 0));
        assert_ne!(registers[0].pid, registers[1].pid);
    }
}

/// The device-memory example end to end against the CUDA driver double (the real
/// driver with `IOX_CUDA_DRIVER=real`): two processes, 16 MiB tensors in a
/// `CudaDevice` pool, the last one checked on the host; each process mapped the pool
/// once (one create and export, one import), and no file is left behind. Its
/// `--measure` mode runs too (the figures are the double's).
#[cfg(feature = "cuda")]
#[test]
fn gpu_device_runs_end_to_end_against_the_driver_double() {
    use iox_testkit::cuda_double::Driver;
    let dir = tempfile::tempdir().unwrap();
    let driver = Driver::new(dir.path());
    if !driver.is_double()
        && let Err(e) = iox_cuda::device_uuid(0)
    {
        iox_testkit::skip(
            "gpu_device_runs_end_to_end_against_the_driver_double",
            iox_testkit::REQUIRE_GPU,
            format!("no usable CUDA device: {e}"),
        );
        return;
    }
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    for args in [&["--count", "4"][..], &["--measure", "--count", "4"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_gpu_device"))
            .args(args)
            .env("IOX_ROOT", &root)
            .envs(driver.envs())
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
        let expect = if args[0] == "--measure" {
            "device hand-off"
        } else {
            "received 4 tensors of 16 MiB"
        };
        assert!(stdout.contains(expect), "{stdout}");
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "files left behind");
    }
    if let Some(calls) = driver.calls() {
        let count = |name: &str| calls.iter().filter(|c| c.name == name).count();
        // The pipeline: one service; the measurement: two device services, each
        // made once and imported once.
        assert_eq!(count("cuMemCreate"), 3);
        assert_eq!(count("cuMemImportFromShareableHandle"), 3);
        assert_eq!(count("cuMemRelease"), 6, "every mapping released");
    }
}

/// Built without the `cuda` feature the GPU example is not built at all: say so.
#[cfg(not(feature = "cuda"))]
#[test]
fn gpu_pinned_runs_or_explains_why_not() {
    iox_testkit::skip(
        "gpu_pinned_runs_or_explains_why_not",
        iox_testkit::REQUIRE_GPU,
        "built without the `cuda` feature (cargo test -p iox_examples --features cuda)",
    );
}

/// `camera subscribe` and `camera publish` in two processes: frames with their user
/// headers arrive whole (the subscriber checks every field and pixel), and the service
/// goes with them.
#[test]
fn camera_moves_frames_with_headers_between_two_processes() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_camera");
    let mut subscriber = Command::new(exe)
        .args(["subscribe", "--count", "3"])
        .env("IOX_ROOT", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(subscriber.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let publisher = Command::new(exe)
        .args(["publish", "--count", "3"])
        .env("IOX_ROOT", dir.path())
        .output()
        .unwrap();
    assert!(
        publisher.status.success(),
        "{}",
        String::from_utf8_lossy(&publisher.stderr)
    );
    let got: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(subscriber.wait().unwrap().success());
    assert_eq!(
        got,
        (0..3)
            .map(|i| format!("camera: frame {i} stamp {} 64x{} mono8 ok", 1_000_000 + i, 48 - i))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "files left behind"
    );
}
