//! Blackboards between C, C++ and Rust, each in its own process: the C API's calls
//! and refusals (`tests/programs/c_blackboard.c`, signed keys, a change listener, an
//! attribute C records and Rust requires), and
//! the C++ example (`examples/blackboard.cpp`) sharing `examples/robot` with Rust both
//! ways, its listener woken by Rust's updates. Processes synchronise through their
//! output and the blackboard itself.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use iox_service::{BlackboardService, Service};
use iox_testkit::{Reaped, wait_ok};

mod common;
use common::build;

/// The board of the C++ example (and the Rust `blackboard` example), held open here.
fn robot(root: &std::path::Path) -> BlackboardService<u32> {
    Service::named("examples/robot")
        .unwrap()
        .root(root)
        .blackboard::<u32>()
        .add::<f64>(0, 0.0)
        .add::<[f32; 3]>(1, [0.0; 3])
        .open_or_create()
        .unwrap()
}

/// Runs `exe args` with `IOX_ROOT` set; its output, after it exited successfully.
fn run(exe: &std::path::Path, root: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(exe)
        .args(args)
        .env("IOX_ROOT", root)
        .output()
        .expect("run the program");
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_c_program_uses_every_call_and_refuses_mistakes() {
    c_blackboard_with_rust(&build("tests/programs/c_blackboard.c", "c_blackboard", &[]));
}

#[test]
fn the_c_program_is_clean_under_sanitizers() {
    let sanitize = [
        "-fsanitize=address,undefined",
        "-fno-omit-frame-pointer",
        "-fno-sanitize-recover=all",
    ];
    c_blackboard_with_rust(&build(
        "tests/programs/c_blackboard.c",
        "c_blackboard_asan",
        &sanitize,
    ));
}

/// Runs the C program beside Rust: Rust reads what C wrote and writes what C waits for.
fn c_blackboard_with_rust(exe: &std::path::Path) {
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(exe)
        .arg(root.path())
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let child = Reaped::new(child);
    assert_eq!(lines.next().unwrap().unwrap(), "updated");
    let board = Service::named("ffi/board")
        .unwrap()
        .root(root.path())
        .blackboard::<i16>()
        .add::<u64>(-5, 0)
        .add::<f32>(300, 0.0)
        .require_attribute("owner", "c_blackboard")
        .open()
        .unwrap();
    assert_eq!(board.attributes().get("owner"), Some("c_blackboard"));
    let reader = board.reader_builder().create().unwrap();
    let speed = reader.entry::<u64>(&-5).unwrap();
    assert_eq!((speed.get().unwrap(), speed.generation()), (42, 2));
    let writer = board.writer_builder().create().unwrap();
    writer.entry::<f32>(&300).unwrap().update_with_copy(2.5).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "key 300 is 2.5");
    wait_ok(child.into_inner(), Duration::from_secs(30));
}

#[test]
fn the_cpp_example_and_rust_share_a_blackboard_both_ways() {
    let exe = build("examples/blackboard.cpp", "cpp_blackboard", &[]);
    let root = tempfile::tempdir().unwrap();
    let board = robot(root.path()); // keeps it alive between the C++ runs
    let out = run(&exe, root.path(), &["write", "3"]);
    assert_eq!(out.lines().last(), Some("update 3: generation 4"));
    let reader = board.reader_builder().create().unwrap();
    assert_eq!(reader.entry::<f64>(&0).unwrap().get().unwrap(), 1.5);
    assert_eq!(
        reader.entry::<[f32; 3]>(&1).unwrap().get().unwrap(),
        [3.0, 6.0, 0.0]
    );
    let writer = board.writer_builder().create().unwrap();
    writer.entry::<f64>(&0).unwrap().update_with_copy(7.25).unwrap();
    writer
        .entry::<[f32; 3]>(&1)
        .unwrap()
        .update_with_copy([1.0, 2.0, 3.0])
        .unwrap();
    drop(writer);
    assert_eq!(
        run(&exe, root.path(), &["read"]),
        "speed 7.25\nposition [1, 2, 3] (generation 5)\n"
    );
    // A C++ program that declares another type for a key is refused on open, by name.
    let wrong = Service::named("examples/robot")
        .unwrap()
        .root(root.path())
        .blackboard::<u32>()
        .add::<f32>(0, 0.0)
        .open()
        .unwrap_err();
    assert!(wrong.to_string().contains("f64"), "{wrong}");
}

#[test]
fn a_cpp_listener_wakes_for_rust_updates() {
    let exe = build("examples/blackboard.cpp", "cpp_blackboard_watch", &[]);
    let root = tempfile::tempdir().unwrap();
    let board = robot(root.path());
    let mut child = Command::new(&exe)
        .args(["watch", "2"])
        .env("IOX_ROOT", root.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let child = Reaped::new(child);
    assert_eq!(lines.next().unwrap().unwrap(), "watching");
    let writer = board.writer_builder().create().unwrap();
    writer.entry::<f64>(&0).unwrap().update_with_copy(1.0).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "key 0 changed: speed 1");
    writer
        .entry::<[f32; 3]>(&1)
        .unwrap()
        .update_with_copy([4.0, 0.0, 0.0])
        .unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "key 1 changed: speed 1");
    wait_ok(child.into_inner(), Duration::from_secs(30));
}

/// The C++ block of the guide's "Blackboards from C and C++" (docs/guide/c-cpp.md) in a
/// `main`, compiled and run: it writes and reads back its speed.
#[test]
fn the_guide_blackboard_excerpt_compiles_and_runs() {
    let guide = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/c-cpp.md"))
        .unwrap();
    let section = &guide[guide.find("## Blackboards from C and C++").expect("the section")..];
    let start = section.find("```cpp\n").expect("a cpp block") + "```cpp\n".len();
    let end = start + section[start..].find("```").expect("the block's end");
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("guide_blackboard.cpp");
    std::fs::write(
        &source,
        format!(
            "#include <array>\n#include <cstdio>\n#include \"iox_blackboard.hpp\"\nint main() {{\n{}\n    std::printf(\"speed %g\\n\", speed);\n}}\n",
            &section[start..end]
        ),
    )
    .unwrap();
    let exe = build(&source, "guide_blackboard", &[]);
    let root = tempfile::tempdir().unwrap();
    assert_eq!(run(&exe, root.path(), &[]), "speed 1.5\n");
}
