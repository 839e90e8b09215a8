//! Recordings that ROS 2's tools read, and recordings they wrote, checked with the
//! ROS venv's Python: `iox record` of services carrying CDR of ROS types (one, a
//! `JointState` with empty sequences, without its definition recorded: found in the
//! active virtual environment) and of an image service, decoded by MCAP's own ROS 2
//! reader (`mcap-ros2-support`) and by rosbags' `AnyReader` (which requires the ros2
//! profile) to the field values sent, with ROS topic names, and replayed; and a rosbag2 bag in MCAP storage written by `rosbags` replayed
//! by `iox replay` into iox subscribers (CDR, an image and a point cloud as header and
//! data).
//!
//! Needs the ROS venv (`scripts/ros-venv.sh DIR`, which installs those readers too;
//! `IOX_ROS_VENV=DIR`); skips without it unless `IOX_REQUIRE_ROS=1`. No DDS runs here.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use iox_ros2::carried::ros_service;
use iox_ros2::cdr::{Reader, Writer};
use iox_ros2::image::{IMAGE_TYPE, ImageHeader};
use iox_ros2::pointcloud::PointCloud2Header;
use iox_ros2::value::Value;
use iox_service::Service;
use iox_testkit::wait_until;

use common::{code, iox, spawn, text};

const LIMIT: Duration = Duration::from_secs(60);

fn venv(test: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("IOX_ROS_VENV").map(PathBuf::from);
    if venv.is_none() {
        iox_testkit::skip(
            test,
            "IOX_REQUIRE_ROS",
            "IOX_ROS_VENV is not set (scripts/ros-venv.sh DIR)",
        );
    }
    venv
}

/// Runs `tests/ros2/<script>` with the venv's Python; its standard output.
fn python(venv: &Path, script: &str, args: &[&Path]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ros2")
        .join(script);
    let out = Command::new(venv.join("bin/python"))
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn string_cdr(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.string(text.as_bytes());
    w.finish();
    out
}

#[test]
fn ros_typed_and_image_services_record_as_ros2_messages() {
    let Some(venv) = venv("ros_typed_and_image_services_record_as_ros2_messages") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("ros.mcap");
    let definition = iox_ros2::library::Library::with_prefixes(vec![venv.clone()])
        .definition_text("std_msgs/msg/String")
        .unwrap();
    let bytes_of = |name: &str| {
        Service::named(name)
            .unwrap()
            .root(root.path())
            .publish_subscribe::<[u8]>()
    };
    let chatter = ros_service(bytes_of("chatter"), "std_msgs/msg/String", &definition)
        .create()
        .unwrap();
    let images = Service::named("camera")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u8]>();
    // An image service a program made: no definition recorded, the built-in one is used.
    let camera = ros_service(images.user_header::<ImageHeader>(), IMAGE_TYPE, "")
        .create()
        .unwrap();
    // `iox list` shows what each carries, and filters by it.
    let listed = text(&iox(
        root.path(),
        &["list", "--attribute", "ros2/type=std_msgs/msg/String"],
    ));
    assert!(
        listed.contains("chatter") && !listed.contains("camera"),
        "{listed}"
    );
    // A JointState service made without its definition: the recorder finds it in the
    // active virtual environment (ROS 2 from PyPI), as a ROS user's shell has it.
    let joints = ros_service(bytes_of("joints"), "sensor_msgs/msg/JointState", "")
        .create()
        .unwrap();
    let recorder = Command::new(env!("CARGO_BIN_EXE_iox"))
        .arg("--root")
        .arg(root.path())
        .args([
            "record",
            "-o",
            file.to_str().unwrap(),
            "chatter",
            "camera",
            "joints",
        ])
        .args(["--count", "5"])
        .env("VIRTUAL_ENV", &venv)
        .env_remove("AMENT_PREFIX_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let recorder = iox_testkit::Reaped::new(recorder);
    assert!(wait_until(LIMIT, || chatter.port_counts().1 == 1
        && camera.port_counts().1 == 1
        && joints.port_counts().1 == 1));
    let text_pub = chatter.publisher_builder().create().unwrap();
    for n in 0..2 {
        let cdr = string_cdr(&format!("hello {n}"));
        text_pub
            .loan_slice_uninit(cdr.len())
            .unwrap()
            .write_from_slice(&cdr)
            .send()
            .unwrap();
    }
    let image_pub = camera.publisher_builder().create().unwrap();
    for n in 0..2u8 {
        let mut h = ImageHeader::new(2, 2, 2, "mono8", "cam").unwrap();
        h.sec = n as i32;
        let pixels = [n, n + 1, n + 2, n + 3];
        image_pub
            .loan_slice_uninit(4)
            .unwrap()
            .write_header(h)
            .write_from_slice(&pixels)
            .send()
            .unwrap();
    }
    // What a robot sends: positions, no velocities or efforts (empty sequences).
    let mut library = iox_ros2::library::Library::with_prefixes(vec![venv.clone()]);
    let joint = Value::Message(vec![
        ("name".into(), Value::Array(vec![Value::Text("elbow".into())])),
        ("position".into(), Value::Array(vec![Value::Float(0.5)])),
    ]);
    let mut cdr = Vec::new();
    iox_ros2::value::encode(&mut library, "sensor_msgs/msg/JointState", &joint, &mut cdr).unwrap();
    joints
        .publisher_builder()
        .create()
        .unwrap()
        .loan_slice_uninit(cdr.len())
        .unwrap()
        .write_from_slice(&cdr)
        .send()
        .unwrap();
    let out = recorder.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        text(&out).contains("ros2 profile"),
        "every service has a ROS form: {}",
        text(&out)
    );
    let joint_line = "/joints sensor_msgs/msg/JointState name=['elbow'] position=[0.5] velocity=[] effort=[]";
    // MCAP's ROS 2 reader.
    let decoded = python(&venv, "decode.py", &[&file]);
    let mut lines: Vec<&str> = decoded.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "/camera sensor_msgs/msg/Image sec=0 frame_id=cam height=2 width=2 encoding=mono8 step=2 data=00010203",
            "/camera sensor_msgs/msg/Image sec=1 frame_id=cam height=2 width=2 encoding=mono8 step=2 data=01020304",
            "/chatter std_msgs/msg/String data=hello 0",
            "/chatter std_msgs/msg/String data=hello 1",
            joint_line,
        ]
    );
    // rosbags' AnyReader (which refuses a file whose profile is not ros2).
    let decoded = python(&venv, "anyreader.py", &[&file]);
    let mut lines: Vec<&str> = decoded.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "/camera sensor_msgs/msg/Image sec=0 height=2 width=2 encoding=mono8 data=00010203",
            "/camera sensor_msgs/msg/Image sec=1 height=2 width=2 encoding=mono8 data=01020304",
            "/chatter std_msgs/msg/String data=hello 0",
            "/chatter std_msgs/msg/String data=hello 1",
            joint_line,
        ]
    );
    // Replayed into the services it was recorded from (`/joints` is `joints`), the
    // message as it was sent.
    drop((chatter, camera, joints));
    let again = tempfile::tempdir().unwrap();
    let player = spawn(
        again.path(),
        &[
            "replay",
            file.to_str().unwrap(),
            "--topics",
            "joints",
            "--wait-for-subscribers",
            "--timeout",
            "60s",
        ],
    );
    let mut replayed = None;
    assert!(wait_until(LIMIT, || {
        replayed = Service::named("joints")
            .unwrap()
            .root(again.path())
            .publish_subscribe::<[u8]>()
            .require_attribute("ros2/type", "sensor_msgs/msg/JointState")
            .open()
            .ok();
        replayed.is_some()
    }));
    let sub = replayed.unwrap().subscriber_builder().create().unwrap();
    let out = player.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let sample = sub.receive().unwrap().expect("the JointState was replayed");
    assert_eq!(&*sample, &cdr[..]);
}

#[test]
fn a_rosbag2_mcap_written_by_rosbags_replays_into_iox() {
    let Some(venv) = venv("a_rosbag2_mcap_written_by_rosbags_replays_into_iox") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bag = dir.path().join("bag");
    let file = PathBuf::from(python(&venv, "write_bag.py", &[&bag]).trim());
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let player = spawn(
        &root,
        &[
            "replay",
            file.to_str().unwrap(),
            "--wait-for-subscribers",
            "--timeout",
            "60s",
        ],
    );
    let (mut chatter, mut camera, mut lidar) = (None, None, None);
    assert!(wait_until(LIMIT, || {
        let bytes = |name| {
            Service::named(name)
                .unwrap()
                .root(&root)
                .publish_subscribe::<[u8]>()
        };
        chatter = chatter.take().or_else(|| {
            bytes("chatter")
                .require_attribute("ros2/type", "std_msgs/msg/String")
                .open()
                .ok()
        });
        camera = camera
            .take()
            .or_else(|| bytes("camera/front").user_header::<ImageHeader>().open().ok());
        lidar = lidar
            .take()
            .or_else(|| bytes("lidar").user_header::<PointCloud2Header>().open().ok());
        chatter.is_some() && camera.is_some() && lidar.is_some()
    }));
    let lidar_sub = lidar.unwrap().subscriber_builder().create().unwrap();
    let (chatter, camera) = (chatter.unwrap(), camera.unwrap());
    assert!(
        chatter
            .attributes()
            .get("ros2/definition")
            .unwrap()
            .contains("string data")
    );
    let (text_sub, image_sub) = (
        chatter.subscriber_builder().create().unwrap(),
        camera.subscriber_builder().create().unwrap(),
    );
    let out = player.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    for n in 0..3 {
        let s = text_sub.receive().unwrap().expect("every String was replayed");
        let mut r = Reader::new(&s).unwrap();
        assert_eq!(r.string("data").unwrap(), format!("hello {n}").as_bytes());
    }
    for n in 0..2u8 {
        let image = image_sub.receive().unwrap().expect("every Image was replayed");
        let h = image.user_header();
        assert_eq!((h.sec, h.height, h.width, h.step), (n as i32, 4, 4, 4));
        assert_eq!((h.encoding(), h.frame_id()), (&b"mono8"[..], &b"camera"[..]));
        assert_eq!(&*image, &(0..16u8).map(|i| i + n).collect::<Vec<_>>()[..]);
    }
    let cloud = lidar_sub
        .receive()
        .unwrap()
        .expect("the PointCloud2 was replayed");
    let h = cloud.user_header();
    assert_eq!(
        (h.sec, h.width, h.point_step, h.frame_id()),
        (5, 3, 12, &b"lidar"[..])
    );
    assert_eq!(
        h.fields().iter().map(|f| f.name()).collect::<Vec<_>>(),
        [b"x", b"y", b"z"]
    );
    let floats: Vec<f32> = cloud
        .chunks(4)
        .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(floats, [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 2.0, 4.0, 6.0]);
}
