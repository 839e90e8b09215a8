//! `iox foxglove` against an independent client: the Foxglove WebSocket protocol's
//! reference client (npm `@foxglove/ws-protocol`) and Foxglove's ROS 2 message readers,
//! run by node (`tests/foxglove/client.mjs`), decoding what the services' publishers
//! sent: every kind of service, both subprotocols, and the guide's page as written.
//! The tool, the client and the publishers are separate processes; clients that
//! misbehave, stall or belong to other users are `tests/foxglove_clients.rs`'s.
//!
//! Needs node and the client's packages (`npm ci --prefix cli/tests/foxglove`, which
//! the test scripts run); without them the tests say skipped (failed where
//! `IOX_REQUIRE_FOXGLOVE=1`, as in CI).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use iox_ros2::image::IMAGE_TYPE;
use iox_ros2::pointcloud::POINTCLOUD2_TYPE;
use iox_testkit::{Reaped, wait_until};

#[path = "foxglove/harness.rs"]
mod harness;
use harness::*;

#[test]
fn a_foxglove_client_decodes_every_kind_of_service() {
    let Some(dir) = client_or_skip("a_foxglove_client_decodes_every_kind_of_service") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = publish_every_kind(root.path(), stop.clone());
    let bridge = Bridge::start(root.path(), &[]);
    let topics = [
        "/robot/reading",
        "/robot/pairs",
        "/robot/wide",
        "/camera/image",
        "/lidar/points",
        "/chatter",
        "/tensor/frame",
        "/tensor/weights",
        "/blob",
    ];
    let wanted: Vec<String> = topics.iter().map(|t| format!("{t}=2")).collect();
    let wanted: Vec<&str> = std::iter::once("decode")
        .chain(wanted.iter().map(String::as_str))
        .collect();
    let events = client(&dir, bridge.port, &wanted);
    stop.store(true, Ordering::Relaxed);
    publisher.join().unwrap();

    // A derived struct: a ROS message written for it, every field by name, exact.
    let reading = message(&events, "/robot/reading");
    assert_eq!(reading["schemaName"], "iox_msgs/msg/Reading", "{reading}");
    let v = &reading["value"];
    assert!(v["seq"].as_str().unwrap().parse::<u64>().unwrap() >= 1, "{v}");
    assert_eq!(v["value"], 0.25);
    assert_eq!(
        v["big"],
        (-(1i64 << 60) - 1).to_string(),
        "64-bit integers arrive exact"
    );
    assert_eq!(v["flags"], serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8]));
    // A slice of structs and a struct ROS cannot hold: JSON with named fields, exact.
    let pairs = &message(&events, "/robot/pairs")["value"];
    assert_eq!(
        pairs["data"],
        serde_json::json!([{"a": 1.5, "b": -2}, {"a": 1.5, "b": -2}])
    );
    let wide = &message(&events, "/robot/wide")["value"];
    assert_eq!(wide["id"], ((1u128 << 100) + 7).to_string());
    assert_eq!(wide["x"], "inf");
    assert_eq!(wide["y"], -0.5);
    // The gateway's image and point-cloud headers: the ROS types Foxglove draws.
    let image = message(&events, "/camera/image");
    assert_eq!(image["schemaName"], IMAGE_TYPE);
    let img = &image["value"];
    assert_eq!(
        (&img["height"], &img["width"], &img["step"]),
        (&4.into(), &6.into(), &18.into())
    );
    assert_eq!(img["encoding"], "rgb8");
    assert_eq!(img["header"]["frame_id"], "cam");
    let pixel_sum: u64 = (0..72u64).sum();
    assert_eq!(img["data"]["length"], 72);
    assert_eq!(img["data"]["sum"], pixel_sum);
    let cloud = message(&events, "/lidar/points");
    assert_eq!(cloud["schemaName"], POINTCLOUD2_TYPE);
    assert_eq!(cloud["value"]["fields"][0]["name"], "x");
    assert_eq!(
        cloud["value"]["data"],
        serde_json::json!([0, 0, 128, 63, 0, 0, 0, 64])
    );
    // A ROS-typed CDR service, passed through.
    let chatter = message(&events, "/chatter");
    assert_eq!(chatter["schemaName"], "std_msgs/msg/String");
    assert_eq!(chatter["value"]["data"], "hello foxglove");
    // Host tensors: 3-D uint8 as an image, float32 as values.
    let frame = message(&events, "/tensor/frame");
    assert_eq!(frame["schemaName"], IMAGE_TYPE);
    let f = &frame["value"];
    assert_eq!(
        (&f["height"], &f["width"], &f["encoding"]),
        (&4.into(), &6.into(), &"rgb8".into())
    );
    assert_eq!(f["data"]["sum"], pixel_sum);
    let weights = &message(&events, "/tensor/weights")["value"];
    assert_eq!(weights["dtype"], "float32");
    assert_eq!(weights["shape"], serde_json::json!([2, 3]));
    assert_eq!(weights["data"], serde_json::json!([0.5, 1, 1.5, 2, 2.5, -3]));
    // Opaque bytes: the documented raw form.
    let blob = message(&events, "/blob");
    assert_eq!(blob["schemaName"], "iox_msgs/msg/Bytes");
    assert_eq!(blob["value"]["data"], serde_json::json!([0xde, 0xad, 0x01]));
    assert!(!bridge.log().contains("panicked"), "{}", bridge.log());
}

#[test]
fn the_sdk_subprotocol_is_accepted_too() {
    let Some(dir) = client_or_skip("the_sdk_subprotocol_is_accepted_too") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = publish_every_kind(root.path(), stop.clone());
    let bridge = Bridge::start(root.path(), &["chatter"]);
    let events = client(
        &dir,
        bridge.port,
        &["decode", "/chatter=1", "--subprotocol", "foxglove.sdk.v1"],
    );
    stop.store(true, Ordering::Relaxed);
    publisher.join().unwrap();
    assert_eq!(message(&events, "/chatter")["value"]["data"], "hello foxglove");
}

/// The guide's page "Live in Foxglove" (`docs/guide/foxglove.md`) as written: the
/// `live` example publishing, `iox foxglove` on its default address, and the page's
/// terminal check decoding the pose, the camera and the scan.
#[test]
fn the_live_in_foxglove_page_runs_as_written() {
    const START: [&str; 2] = [
        "cargo run --release --bin live &",
        "cargo run --release -p iox_cli --bin iox -- foxglove ",
    ];
    const CHECK: &str =
        "node cli/tests/foxglove/client.mjs 8765 decode /examples/live/pose=3 /examples/live/scan=1";
    let Some(dir) = client_or_skip("the_live_in_foxglove_page_runs_as_written") else {
        return;
    };
    let repo = dir.join("../../..");
    let page = std::fs::read_to_string(repo.join("docs/guide/foxglove.md")).unwrap();
    for line in START.iter().chain([&CHECK]) {
        assert!(page.contains(line), "the page no longer says {line:?}");
    }
    if std::net::TcpListener::bind("127.0.0.1:8765").is_err() {
        iox_testkit::skip(
            "the_live_in_foxglove_page_runs_as_written",
            "IOX_REQUIRE_FOXGLOVE_PORT",
            "port 8765 is in use on this machine",
        );
        return;
    }
    // The page's `cargo run`s, as built binaries (this test's `iox`, and `live` built
    // alongside it).
    let built = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "iox_examples", "--bin", "live"])
        .status()
        .unwrap();
    assert!(built.success());
    let root = tempfile::tempdir().unwrap();
    let iox = Path::new(env!("CARGO_BIN_EXE_iox"));
    let live = Reaped::new(
        Command::new(iox.with_file_name("live"))
            .env("IOX_ROOT", root.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bridge = Reaped::new(
        Command::new(iox)
            .arg("foxglove")
            .env("IOX_ROOT", root.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut args: Vec<&str> = CHECK.split(' ').skip(3).collect();
    args.extend(["/examples/live/camera=1", "--timeout", "60"]);
    let mut events = Vec::new();
    // The server may still be binding its port: the check is run until it connects.
    assert!(wait_until(LIMIT, || {
        let out = Command::new("node")
            .arg(dir.join("client.mjs"))
            .arg("8765")
            .args(&args)
            .output()
            .unwrap();
        events = self::events(&out.stdout);
        out.status.success()
    }));
    let pose = &message(&events, "/examples/live/pose")["value"];
    assert!(pose["x"].is_number() && pose["theta"].is_number(), "{pose}");
    let scan = &message(&events, "/examples/live/scan")["value"];
    assert_eq!(scan["shape"], serde_json::json!([360]));
    let camera = &message(&events, "/examples/live/camera")["value"];
    assert_eq!(
        (&camera["width"], &camera["height"], &camera["encoding"]),
        (&320.into(), &240.into(), &"rgb8".into())
    );
    assert_eq!(camera["data"]["length"], 320 * 240 * 3);
    drop((bridge, live));
}
