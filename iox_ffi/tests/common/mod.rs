//! Building the C and C++ test programs against the `libiox_ffi.so` of this test run.
// Each test crate uses part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `cargo test` put the `libiox_ffi.so` it built for this run: `deps/`, beside
/// the test binary (the copy in `target/<profile>/` is refreshed by `cargo build` only).
pub fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().expect("target/<profile>/deps").to_path_buf();
    assert!(
        dir.join("libiox_ffi.so").exists(),
        "libiox_ffi.so is not in {}: build the crate (cargo test -p iox_ffi builds it)",
        dir.display()
    );
    dir
}

/// Compiles `<source>` (a path in this crate: `tests/programs/...` or `examples/...`)
/// into a program named `name` (C for `.c`, C++17 for `.cpp`), with `extra` flags.
pub fn build(source: impl AsRef<Path>, name: &str, extra: &[&str]) -> PathBuf {
    let source = source.as_ref();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("iox_ffi_programs");
    std::fs::create_dir_all(&out).expect("a directory for the programs");
    let exe = out.join(name);
    let lib = library_dir();
    let (compiler, std) = if source.extension().is_some_and(|e| e == "cpp") {
        ("g++", "-std=c++17")
    } else {
        ("gcc", "-std=c11")
    };
    let output = Command::new(compiler)
        .arg(std)
        .args(["-Wall", "-Wextra", "-Werror", "-g", "-pthread"])
        .args(extra)
        .arg("-I")
        .arg(here.join("include"))
        .arg(here.join(source))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        // DT_RPATH (not RUNPATH): searched before LD_LIBRARY_PATH, which `cargo test`
        // sets to directories that may hold an older libiox_ffi.so of another build.
        .arg(format!("-Wl,--disable-new-dtags,-rpath,{}", lib.display()))
        .arg("-liox_ffi")
        .output()
        .unwrap_or_else(|e| panic!("run {compiler} (the C and C++ tests need gcc and g++): {e}"));
    assert!(
        output.status.success(),
        "{compiler} {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// Makes `program` (built by [`build`]) runnable by other users, for a test that runs it
/// with `.uid(..)`: the programs' directory and the program itself `0755`. Panics naming
/// the first path another user cannot reach: a directory on the way to the program or
/// to `libiox_ffi.so` without `o+x`, the library without `o+r`.
pub fn runnable_by_others(program: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()))
            .permissions()
            .mode()
    };
    let dir = program.parent().expect("the programs' directory");
    for p in [dir, program] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("chmod 0755 {}: {e}", p.display()));
    }
    let library = library_dir().join("libiox_ffi.so");
    for file in [program, library.as_path()] {
        for ancestor in file.ancestors().skip(1) {
            assert!(
                mode(ancestor) & 0o001 != 0,
                "{} is not searchable by other users, so a test's program running as another user cannot reach {}: `chmod o+x` it, or build in a directory they can reach (CARGO_TARGET_DIR)",
                ancestor.display(),
                file.display()
            );
        }
    }
    assert!(
        mode(&library) & 0o004 != 0,
        "{} is not readable by other users, who run this test's programs: `chmod o+r` it",
        library.display()
    );
}

/// The Rust examples' service (`iox_examples::readings`, with its settings) under `root`.
pub fn readings(root: &Path) -> iox_service::PubSubService<iox_examples::Reading> {
    iox_service::Service::named(iox_examples::SERVICE)
        .unwrap()
        .root(root)
        .publish_subscribe::<iox_examples::Reading>()
        .subscriber_buffer(16)
        .open_or_create()
        .unwrap()
}

/// Starts `program` (a subscriber of the examples' service, under `root`), waits for
/// its subscriber to connect, publishes a reading `(seq, seq / 2)` for each of `seqs`,
/// and returns what the program printed (it must exit successfully).
pub fn feed(
    program: &mut Command,
    root: &Path,
    publisher: &iox_service::Publisher<iox_examples::Reading>,
    seqs: std::ops::Range<u64>,
) -> String {
    use std::time::Duration;
    let svc = readings(root);
    let before = svc.port_counts().1;
    let child = program
        .env("IOX_ROOT", root)
        // The library the program was built against, not one from cargo's path.
        .env_remove("LD_LIBRARY_PATH")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the program");
    let child = iox_testkit::Reaped::new(child);
    assert!(
        iox_testkit::wait_until(Duration::from_secs(30), || svc.port_counts().1 > before),
        "the program's subscriber connects"
    );
    for seq in seqs {
        let r = iox_examples::Reading {
            seq,
            value: seq as f64 * 0.5,
        };
        assert_eq!(
            publisher.loan_uninit().unwrap().write_payload(r).send().unwrap(),
            1
        );
    }
    let out = child.into_inner().wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(iox_testkit::wait_until(Duration::from_secs(30), || svc
        .port_counts()
        .1
        == before));
    String::from_utf8(out.stdout).unwrap()
}

/// The `camera` examples' service (`iox_examples::CAMERA_SERVICE`, frames with a
/// `FrameHeader`, with their settings) under `root`.
pub fn camera(root: &Path) -> iox_service::PubSubService<[u8], iox_examples::FrameHeader> {
    iox_service::Service::named(iox_examples::CAMERA_SERVICE)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .user_header::<iox_examples::FrameHeader>()
        .max_slice_len(iox_examples::CAMERA_MAX_PIXELS)
        .subscriber_buffer(iox_examples::CAMERA_BUFFER)
        .open_or_create()
        .unwrap()
}

/// Sends the `camera` examples' frames `frames` through `publisher`: each header
/// written in place, then its pixels. Returns how many subscribers got each.
pub fn send_frames(
    publisher: &iox_service::Publisher<[u8], iox_examples::FrameHeader>,
    frames: std::ops::Range<u64>,
) -> Vec<usize> {
    frames
        .map(|i| {
            let h = iox_examples::frame_header(i);
            publisher
                .loan_slice_uninit((h.width * h.height) as usize)
                .unwrap()
                .write_header(h)
                .write_from_fn(|j| iox_examples::frame_pixel(i, j))
                .send()
                .unwrap()
        })
        .collect()
}

/// Receives one `camera` frame (10 s at most) and checks its header and pixels
/// against `iox_examples::frame_header(i)` / `frame_pixel(i, _)`.
pub fn receive_frame(subscriber: &iox_service::Subscriber<[u8], iox_examples::FrameHeader>, i: u64) {
    let frame = subscriber
        .receive_timeout(std::time::Duration::from_secs(10))
        .unwrap()
        .unwrap_or_else(|| panic!("frame {i} within 10 s"));
    assert_eq!(*frame.user_header(), iox_examples::frame_header(i));
    let h = frame.user_header();
    assert_eq!(frame.len(), (h.width * h.height) as usize);
    assert!(
        frame
            .iter()
            .enumerate()
            .all(|(j, &px)| px == iox_examples::frame_pixel(i, j)),
        "frame {i}'s pixels"
    );
}
