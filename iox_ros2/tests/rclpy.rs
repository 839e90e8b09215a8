//! The field-by-field conversion (`fixed::Plan`) against the real ROS 2: for installed
//! fixed-size message types, iox structs of the same fields are encoded here and by
//! `rclpy.serialization` (Fast DDS's CDR) in a child Python process from the ROS venv:
//! the messages have the same length and each side decodes the other's bytes to the
//! values sent (the bytes themselves differ only in alignment gaps, which rclpy leaves
//! unwritten). The definitions come from that venv's
//! install (`share/`), as a gateway reads them.
//!
//! Needs the ROS venv (`scripts/ros-venv.sh DIR`; `IOX_ROS_VENV=DIR`). Without it the
//! test says so and skips, unless `IOX_REQUIRE_ROS=1` (CI) makes that a failure.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use iox_ros2::fixed::{CdrError, Plan};
use iox_ros2::library::Library;

use common::{hex, unhex};
use iox_service::ZeroCopySafe;

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Point {
    x: f64,
    y: f64,
    z: f64,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Quaternion {
    x: f64,
    y: f64,
    z: f64,
    w: f64,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Pose {
    position: Point,
    orientation: Quaternion,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct PoseWithCovariance {
    pose: Pose,
    covariance: [f64; 36],
}

/// An `int8` then a `uint16`: a gap in both the struct and the CDR.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct NavSatStatus {
    status: i8,
    service: u16,
}

/// One byte: the CDR message is padded to 4.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct UInt8 {
    data: u8,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Flag {
    data: bool,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Time {
    sec: i32,
    nanosec: u32,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct ColorRGBA {
    r: f32,
    g: f32,
    b: f32,
    a: f32,
}

/// The Python side: for each JSON line `{"type", "fields", "hex"}`, builds the message
/// from `fields`, serialises it with rclpy, and deserialises `hex` (ours); prints
/// `{"hex": theirs, "fields": what ours decoded to}`.
const PEER: &str = r#"
import json, sys, importlib
from rclpy.serialization import serialize_message, deserialize_message

def msg_class(name):
    pkg, _, cls = name.split("/")
    return getattr(importlib.import_module(pkg + ".msg"), cls)

def fill(msg, fields):
    for k, v in fields.items():
        cur = getattr(msg, k)
        if isinstance(v, dict):
            fill(cur, v)
        else:
            setattr(msg, k, v)
    return msg

def dump(msg):
    out = {}
    for k in msg.get_fields_and_field_types():
        v = getattr(msg, k)
        if hasattr(v, "get_fields_and_field_types"):
            out[k] = dump(v)
        elif hasattr(v, "tolist"):
            out[k] = v.tolist()
        else:
            out[k] = v
    return out

for line in sys.stdin:
    req = json.loads(line)
    cls = msg_class(req["type"])
    theirs = serialize_message(fill(cls(), req["fields"])).hex()
    ours = dump(deserialize_message(bytes.fromhex(req["hex"]), cls))
    print(json.dumps({"hex": theirs, "fields": ours}), flush=True)
"#;

fn venv() -> Option<PathBuf> {
    std::env::var_os("IOX_ROS_VENV").map(PathBuf::from)
}

/// The venv's install prefix: where its `share/<pkg>/msg` are.
fn prefix(venv: &std::path::Path) -> PathBuf {
    venv.to_owned()
}

fn bytes_of<T: ZeroCopySafe>(value: &T) -> Vec<u8> {
    // SAFETY: the test's types are plain numbers, a `bool` and arrays of them; their
    // padding (NavSatStatus has a byte of it) is read as bytes here only to be
    // encoded, and the encoder reads only the field bytes the plan names.
    unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}

/// Whether decoded bytes are a case's value.
type Check = Box<dyn Fn(&[u8]) -> bool>;

/// One case: a message type, a value of its iox struct, the same value as rclpy fields.
struct Case {
    name: &'static str,
    schema: iox_service::Schema,
    value: Vec<u8>,
    fields: serde_json::Value,
    decoded: Check,
}

fn case<T: ZeroCopySafe + PartialEq>(name: &'static str, value: T, fields: serde_json::Value) -> Case {
    Case {
        name,
        schema: T::schema(),
        value: bytes_of(&value),
        fields,
        decoded: Box::new(move |b: &[u8]| {
            // SAFETY: `b` is a value the plan decoded: every field written (padding
            // zero), each bool 0 or 1; read unaligned from the byte buffer.
            unsafe { b.as_ptr().cast::<T>().read_unaligned() == value }
        }),
    }
}

#[test]
fn fixed_messages_match_what_rclpy_writes_and_reads() {
    const TEST: &str = "fixed_messages_match_what_rclpy_writes_and_reads";
    let Some(venv) = venv() else {
        iox_testkit::skip(
            TEST,
            "IOX_REQUIRE_ROS",
            "IOX_ROS_VENV is not set (scripts/ros-venv.sh DIR makes one)",
        );
        return;
    };
    let mut library = Library::with_prefixes(vec![prefix(&venv)]);
    let pose = Pose {
        position: Point {
            x: 1.5,
            y: -2.0,
            z: 3.25,
        },
        orientation: Quaternion {
            x: 0.0,
            y: 0.5,
            z: -0.5,
            w: 1.0,
        },
    };
    let mut covariance = [0.0; 36];
    for (i, c) in covariance.iter_mut().enumerate() {
        *c = i as f64 * 0.25;
    }
    let pose_json = serde_json::json!({
        "position": {"x": 1.5, "y": -2.0, "z": 3.25},
        "orientation": {"x": 0.0, "y": 0.5, "z": -0.5, "w": 1.0},
    });
    let cases = vec![
        case("geometry_msgs/msg/Pose", pose, pose_json.clone()),
        case(
            "geometry_msgs/msg/PoseWithCovariance",
            PoseWithCovariance { pose, covariance },
            serde_json::json!({"pose": pose_json, "covariance": covariance.to_vec()}),
        ),
        case(
            "sensor_msgs/msg/NavSatStatus",
            NavSatStatus {
                status: -1,
                service: 9,
            },
            serde_json::json!({"status": -1, "service": 9}),
        ),
        case(
            "std_msgs/msg/UInt8",
            UInt8 { data: 200 },
            serde_json::json!({"data": 200}),
        ),
        case(
            "std_msgs/msg/Bool",
            Flag { data: true },
            serde_json::json!({"data": true}),
        ),
        case(
            "builtin_interfaces/msg/Time",
            Time {
                sec: -5,
                nanosec: 999_999_999,
            },
            serde_json::json!({"sec": -5, "nanosec": 999_999_999u32}),
        ),
        case(
            "std_msgs/msg/ColorRGBA",
            ColorRGBA {
                r: 0.25,
                g: 0.5,
                b: 0.75,
                a: 1.0,
            },
            serde_json::json!({"r": 0.25, "g": 0.5, "b": 0.75, "a": 1.0}),
        ),
    ];
    let mut peer = Command::new(venv.join("bin/python"))
        .args(["-c", PEER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the ROS venv's python");
    let mut to_peer = peer.stdin.take().unwrap();
    let mut from_peer = std::io::BufReader::new(peer.stdout.take().unwrap());
    for c in &cases {
        let plan = Plan::new(&mut library, c.name, &c.schema).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let mut ours = Vec::new();
        plan.encode(&c.value, &mut ours);
        assert_eq!(ours.len(), plan.cdr_len(), "{}", c.name);
        let req = serde_json::json!({"type": c.name, "fields": c.fields, "hex": hex(&ours)});
        writeln!(to_peer, "{req}").unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut from_peer, &mut line).unwrap();
        let reply: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{}: {e}: {line:?}", c.name));
        let theirs = unhex(reply["hex"].as_str().unwrap());
        // The same length; the bytes differ only where CDR aligns (rclpy leaves its
        // alignment gaps unwritten, we write zeros): each side reads the other's.
        assert_eq!(ours.len(), theirs.len(), "{}: our CDR against rclpy's", c.name);
        assert_eq!(reply["fields"], c.fields, "{}: rclpy read our bytes", c.name);
        let mut back = vec![0xAA; plan.struct_size()];
        plan.decode(&theirs, &mut back).unwrap();
        assert!((c.decoded)(&back), "{}: we read rclpy's bytes", c.name);
    }
    drop(to_peer);
    assert!(peer.wait().unwrap().success());

    // Bad input from the DDS side: short, another encapsulation, a bool holding 2.
    let plan = Plan::new(&mut library, "std_msgs/msg/Bool", &Flag::schema()).unwrap();
    let mut out = [0u8; 1];
    assert!(matches!(
        plan.decode(&[0, 1, 0], &mut out),
        Err(CdrError::Short { .. })
    ));
    assert!(matches!(
        plan.decode(&[0, 3, 0, 0, 1, 0, 0, 0], &mut out),
        Err(CdrError::Encapsulation(_))
    ));
    let e = plan.decode(&[0, 1, 0, 0, 2, 0, 0, 0], &mut out).unwrap_err();
    assert_eq!(
        e,
        CdrError::Bool {
            field: "data".into(),
            value: 2
        }
    );
    // Big-endian CDR reads the same value.
    let plan = Plan::new(&mut library, "builtin_interfaces/msg/Time", &Time::schema()).unwrap();
    let mut t = [0u8; 8];
    plan.decode(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 7], &mut t)
        .unwrap();
    assert_eq!(bytes_of(&Time { sec: -5, nanosec: 7 }), t);
}

#[test]
fn mismatches_and_unfixed_types_name_the_field() {
    const TEST: &str = "mismatches_and_unfixed_types_name_the_field";
    let Some(venv) = venv() else {
        iox_testkit::skip(
            TEST,
            "IOX_REQUIRE_ROS",
            "IOX_ROS_VENV is not set (scripts/ros-venv.sh DIR makes one)",
        );
        return;
    };
    let mut library = Library::with_prefixes(vec![prefix(&venv)]);
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct WrongKind {
        x: f64,
        y: f32,
        z: f64,
    }
    let e = Plan::new(&mut library, "geometry_msgs/msg/Point", &WrongKind::schema()).unwrap_err();
    assert!(
        e.to_string().contains("field `y`") && e.to_string().contains("float64"),
        "{e}"
    );
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Renamed {
        position: Point,
        rotation: Quaternion,
    }
    let e = Plan::new(&mut library, "geometry_msgs/msg/Pose", &Renamed::schema()).unwrap_err();
    assert!(
        e.to_string().contains("field `orientation`") && e.to_string().contains("rotation"),
        "{e}"
    );
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct ShortCovariance {
        pose: Pose,
        covariance: [f64; 9],
    }
    let e = Plan::new(
        &mut library,
        "geometry_msgs/msg/PoseWithCovariance",
        &ShortCovariance::schema(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("field `covariance`") && e.to_string().contains("float64[36]"),
        "{e}"
    );
    // A string is not fixed-size: the error says to carry the message as CDR bytes.
    let e = Plan::new(&mut library, "std_msgs/msg/String", &UInt8::schema()).unwrap_err();
    assert!(
        e.to_string().contains("not fixed-size") && e.to_string().contains("CDR bytes"),
        "{e}"
    );
    let e = Plan::new(&mut library, "sensor_msgs/msg/NoSuchThing", &UInt8::schema()).unwrap_err();
    assert!(
        e.to_string().contains("not installed") && e.to_string().contains(&venv.display().to_string()),
        "{e}"
    );
}

/// The definitions iox writes for its header + slice types without an install are the
/// install's, as `Library::definition_text` reads them.
#[test]
fn built_in_definitions_are_the_installs() {
    let Some(venv) = venv() else {
        iox_testkit::skip(
            "built_in_definitions_are_the_installs",
            "IOX_REQUIRE_ROS",
            "IOX_ROS_VENV is not set (scripts/ros-venv.sh DIR makes one)",
        );
        return;
    };
    use iox_ros2::framed::Framed;
    let mut lib = Library::with_prefixes(vec![venv]);
    for (ty, text) in [
        (
            iox_ros2::image::ImageHeader::ROS_TYPE,
            iox_ros2::image::ImageHeader::DEFINITION,
        ),
        (
            iox_ros2::pointcloud::PointCloud2Header::ROS_TYPE,
            iox_ros2::pointcloud::PointCloud2Header::DEFINITION,
        ),
    ] {
        assert_eq!(lib.definition_text(ty).unwrap(), text, "{ty}");
    }
}
