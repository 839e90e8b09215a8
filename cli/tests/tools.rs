//! `iox echo`, `hz` and `pub` against Rust ports in this test process: the tool runs as
//! its own process, each test under its own root.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iox_service::{PubSubService, Service, ZeroCopySafe};
use iox_testkit::wait_until;

mod common;
use common::{code, iox, spawn, text};

const LIMIT: Duration = Duration::from_secs(60);

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Vec3 {
    x: f32,
    y: f32,
    z: f32,
}

/// Nested struct, a `bool`, an array, padding (before `stamp`).
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Pose {
    position: Vec3,
    ok: bool,
    id: u16,
    grid: [u8; 3],
    stamp: u64,
}

fn pose(i: u8) -> Pose {
    Pose {
        position: Vec3 {
            x: f32::from(i),
            y: 2.5,
            z: -3.0,
        },
        ok: i.is_multiple_of(2),
        id: 7 + u16::from(i),
        grid: [i, 2, 3],
        stamp: 1000 + u64::from(i),
    }
}

fn poses(root: &Path) -> PubSubService<Pose> {
    Service::named("robot/pose")
        .unwrap()
        .root(root)
        .publish_subscribe::<Pose>()
        .open_or_create()
        .unwrap()
}

#[test]
fn echo_prints_a_derived_struct_with_field_names() {
    let dir = tempfile::tempdir().unwrap();
    let svc = poses(dir.path());
    let publisher = svc.publisher_builder().create().unwrap();
    for json in [false, true] {
        let mut args = vec!["echo", "robot/pose", "--count", "2", "--timeout", "60s"];
        if json {
            args.push("--json");
        }
        let child = spawn(dir.path(), &args);
        assert!(
            wait_until(LIMIT, || svc.port_counts().1 == 1),
            "iox echo never subscribed"
        );
        for i in 0..2 {
            publisher
                .loan_uninit()
                .unwrap()
                .write_payload(pose(i))
                .send()
                .unwrap();
        }
        let out = child.into_inner().wait_with_output().unwrap();
        assert_eq!(code(&out), 0, "{}", text(&out));
        let lines: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(Into::into)
            .collect();
        if json {
            let v: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
            assert_eq!(v["position"]["x"], 1.0);
            assert_eq!(v["ok"], false);
            assert_eq!(v["grid"], serde_json::json!([1, 2, 3]));
            assert_eq!(v["stamp"], 1001);
        } else {
            assert_eq!(
                lines,
                [
                    "(position: (x: 0.0, y: 2.5, z: -3.0), ok: true, id: 7, grid: [0, 2, 3], stamp: 1000)",
                    "(position: (x: 1.0, y: 2.5, z: -3.0), ok: false, id: 8, grid: [1, 2, 3], stamp: 1001)",
                ]
            );
        }
        assert!(wait_until(LIMIT, || svc.port_counts().1 == 0));
    }
    // `show` lists the fields.
    let out = iox(dir.path(), &["show", "robot/pose"]);
    let shown = text(&out);
    assert!(
        shown.contains("position: Vec3 @ 0") || shown.contains("position: tools::Vec3 @ 0"),
        "{shown}"
    );
    assert!(shown.contains("stamp: u64 @ 24"), "{shown}");
}

#[test]
fn echo_prints_slices_capped_and_unknown_types_as_hex() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("scan")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u32]>()
        .max_slice_len(64)
        .create()
        .unwrap();
    // RON cut at 4 elements; JSON cut (the count beside the numeric array); JSON whole.
    for (flags, expected) in [
        (&["--max-elements", "4"][..], "[0, 10, 20, 30, \"... 6 more\"]\n"),
        (
            &["--max-elements", "4", "--json"][..],
            "{\"elements\": [0, 10, 20, 30], \"more\": 6}\n",
        ),
        (
            &["--max-elements", "0", "--json"][..],
            "[0, 10, 20, 30, 40, 50, 60, 70, 80, 90]\n",
        ),
    ] {
        let mut args = vec!["echo", "scan", "--count", "1", "--timeout", "60s"];
        args.extend_from_slice(flags);
        let child = spawn(dir.path(), &args);
        assert!(wait_until(LIMIT, || svc.port_counts().1 == 1));
        let p = svc.publisher_builder().create().unwrap();
        p.loan_slice_uninit(10)
            .unwrap()
            .write_from_fn(|i| i as u32 * 10)
            .send()
            .unwrap();
        let out = child.into_inner().wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{}", text(&out));
        drop(p);
        assert!(wait_until(LIMIT, || svc.port_counts() == (0, 0)));
    }

    // A hand-written impl records no schema: bytes as hex.
    #[derive(Clone, Copy)]
    #[repr(C)]
    struct Opaque([u8; 4]);
    // SAFETY: four bytes, every pattern valid, no padding.
    unsafe impl ZeroCopySafe for Opaque {
        const ANY_BIT_PATTERN: bool = true;
    }
    let svc = Service::named("opaque")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<Opaque>()
        .create()
        .unwrap();
    assert_eq!(svc.static_config().schema, None);
    let child = spawn(
        dir.path(),
        &["echo", "opaque", "--count", "1", "--timeout", "60s"],
    );
    assert!(wait_until(LIMIT, || svc.port_counts().1 == 1));
    let p = svc.publisher_builder().create().unwrap();
    p.loan_uninit()
        .unwrap()
        .write_payload(Opaque([0xde, 0xad, 0xbe, 0xef]))
        .send()
        .unwrap();
    let out = child.into_inner().wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\"deadbeef\"\n",
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("no schema recorded"), "{}", text(&out));
}

/// A steady 200 Hz publisher (absolute schedule in a thread of this process), and
/// `iox hz` in its own process: the rate it reports is within 10 %.
#[test]
fn hz_reports_a_steady_200_hz_publisher() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("tick")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let done = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            let p = svc.publisher_builder().create().unwrap();
            let start = Instant::now();
            let mut i = 0u32;
            while !done.load(Ordering::Relaxed) && start.elapsed() < LIMIT {
                // The publisher's pacing: the thing measured, not a synchronisation.
                let due = start + Duration::from_millis(5) * i;
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                p.loan_uninit()
                    .unwrap()
                    .write_payload(u64::from(i))
                    .send()
                    .unwrap();
                i += 1;
            }
        });
        let out = spawn(
            dir.path(),
            &[
                "hz",
                "tick",
                "--json",
                "--count",
                "3",
                "--window",
                "200",
                "--timeout",
                "60s",
            ],
        )
        .into_inner()
        .wait_with_output()
        .unwrap();
        done.store(true, Ordering::Relaxed);
        out
    });
    assert_eq!(code(&out), 0, "{}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a report")).unwrap();
    let hz = last["hz"].as_f64().unwrap();
    assert!((180.0..=220.0).contains(&hz), "{stdout}");
    let mean = last["mean_s"].as_f64().unwrap();
    assert!(last["min_s"].as_f64().unwrap() <= mean && mean <= last["max_s"].as_f64().unwrap());
    assert!(last["window"].as_u64().unwrap() >= 100, "{stdout}");
}

#[test]
fn pub_reaches_a_rust_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let svc = poses(dir.path());
    let s = svc.subscriber_builder().create().unwrap();
    let value = "(position: (x: 1.5, y: 2.5, z: -3.0), ok: true, id: 9, grid: [4, 5, 6], stamp: 77)";
    let out = iox(dir.path(), &["pub", "robot/pose", value]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        text(&out).contains("published to 1 subscriber(s)"),
        "{}",
        text(&out)
    );
    let got = *s.receive_timeout(LIMIT).unwrap().expect("the published value");
    let want = Pose {
        position: Vec3 {
            x: 1.5,
            y: 2.5,
            z: -3.0,
        },
        ok: true,
        id: 9,
        grid: [4, 5, 6],
        stamp: 77,
    };
    assert_eq!(got, want);

    // JSON, at a rate, a count of them.
    let json =
        r#"{"position": {"x": 0, "y": 0, "z": 0}, "ok": false, "id": 1, "grid": [0, 0, 0], "stamp": 5}"#;
    let out = iox(
        dir.path(),
        &["pub", "robot/pose", json, "--rate", "200", "--count", "3"],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    for _ in 0..3 {
        let got = *s.receive_timeout(LIMIT).unwrap().expect("three values");
        assert_eq!((got.id, got.stamp, got.ok), (1, 5, false));
    }
}

#[test]
fn pub_refuses_bad_input_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let svc = poses(dir.path());
    let s = svc.subscriber_builder().create().unwrap();
    let good = "position: (x: 1.0, y: 2.0, z: 3.0), ok: true, id: 9, grid: [4, 5, 6], stamp: 77";
    let cases = [
        (format!("({good}, speed: 3)"), "`speed` is not a field"),
        (
            format!("({})", good.replace("id: 9", "id: 70000")),
            "`id`: 70000 is out of range for u16",
        ),
        (
            format!("({})", good.replace("id: 9", "id: -1")),
            "`id`: -1 is out of range",
        ),
        (
            format!("({})", good.replace("ok: true", "ok: 1")),
            "`ok` is a bool",
        ),
        (
            format!("({})", good.replace("x: 1.0", "x: \"far\"")),
            "`position.x` is a number",
        ),
        (
            format!("({})", good.replace("[4, 5, 6]", "[4, 5]")),
            "`grid` is an array of 3",
        ),
        (
            format!("({})", good.replace("stamp: 77", "")),
            "field `stamp` is missing",
        ),
        ("(position: ".to_owned(), "not RON or JSON"),
    ];
    for (value, expected) in &cases {
        let out = iox(dir.path(), &["pub", "robot/pose", value]);
        assert_eq!(code(&out), 2, "{value}: {}", text(&out));
        assert!(text(&out).contains(expected), "{value}: {}", text(&out));
    }
    assert!(s.receive().unwrap().is_none(), "nothing was published");

    let out = iox(dir.path(), &["pub", "nothing/here", "1"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    let _event = Service::named("ev")
        .unwrap()
        .root(dir.path())
        .event()
        .create()
        .unwrap();
    let out = iox(dir.path(), &["pub", "ev", "1"]);
    assert_eq!(code(&out), 6, "{}", text(&out));
    let out = iox(dir.path(), &["echo", "ev", "--count", "1"]);
    assert_eq!(code(&out), 6, "{}", text(&out));
}

/// A flag written by hand: `bool` inside, no schema (bytes of unknown layout).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Flags {
    armed: bool,
}

// SAFETY: one `bool`; not valid for every bit pattern (the default), no schema.
unsafe impl ZeroCopySafe for Flags {}

/// A derived struct around it: its schema has a field of unknown layout.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Cmd {
    speed: f32,
    flags: Flags,
}

/// Bytes of unknown layout in a payload that has a `bool` (or padding) are neither
/// written by `pub` (they might have to be 0 or 1) nor read by `echo` (they might be
/// padding).
#[test]
fn bytes_of_unknown_layout_are_neither_written_nor_read() {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("cmd")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<Cmd>()
        .create()
        .unwrap();
    let schema = svc
        .static_config()
        .schema
        .clone()
        .expect("the derive records one");
    assert!(!schema.is_complete(), "{schema:?}");
    let s = svc.subscriber_builder().create().unwrap();
    let out = iox(dir.path(), &["pub", "cmd", r#"(speed: 1.0, flags: "02")"#]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        text(&out).contains("no schema that describes every byte"),
        "{}",
        text(&out)
    );
    assert!(s.receive().unwrap().is_none(), "nothing was published");

    let echo = spawn(dir.path(), &["echo", "cmd", "--count", "1", "--timeout", "60s"]);
    assert!(wait_until(LIMIT, || svc.port_counts().1 == 2));
    let p = svc.publisher_builder().create().unwrap();
    let cmd = Cmd {
        speed: 2.0,
        flags: Flags { armed: true },
    };
    p.loan_uninit().unwrap().write_payload(cmd).send().unwrap();
    let out = echo.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(line.contains("unreadable_bytes: 8"), "{line}");
}

/// Bad numbers on the command line are usage errors, not panics.
#[test]
fn bad_numbers_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let _svc = Service::named("tick")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    for rate in ["1e-300", "0", "-5", "NaN"] {
        let out = iox(dir.path(), &["pub", "tick", "1", "--rate", rate]);
        assert_eq!(code(&out), 2, "--rate {rate}: {}", text(&out));
    }
    let out = iox(
        dir.path(),
        &[
            "hz",
            "tick",
            "--window",
            "18446744073709551615",
            "--timeout",
            "10ms",
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
}
