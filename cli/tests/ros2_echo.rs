//! `iox echo` of a service carrying CDR messages of a ROS type prints their fields (by
//! the definition the service records), not bytes; a message that is not one of its
//! type is printed as such, with its bytes. Needs no ROS install.

mod common;

use std::time::Duration;

use iox_ros2::carried::ros_service;
use iox_ros2::library::Library;
use iox_ros2::value::{Value, encode};
use iox_service::Service;
use iox_testkit::wait_until;

use common::{code, spawn, text};

const DEFINITION: &str = "string[] name\nfloat64[] position\nfloat64[] velocity\nuint8 mode\n";

#[test]
fn echo_prints_the_fields_of_cdr_messages() {
    let root = tempfile::tempdir().unwrap();
    let builder = Service::named("joints")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u8]>();
    let service = ros_service(builder, "demo/msg/Joints", DEFINITION)
        .create()
        .unwrap();
    let echo = spawn(
        root.path(),
        &["echo", "joints", "--json", "--count", "2", "--timeout", "60s"],
    );
    assert!(wait_until(Duration::from_secs(60), || service.port_counts().1 == 1));
    let publisher = service.publisher_builder().create().unwrap();
    let mut library = Library::from_definition_text("demo/msg/Joints", DEFINITION).unwrap();
    let joint = Value::Message(vec![
        ("name".into(), Value::Array(vec![Value::Text("elbow".into())])),
        ("position".into(), Value::Array(vec![Value::Float(0.5)])),
        ("mode".into(), Value::UInt(3)),
    ]);
    let mut cdr = Vec::new();
    encode(&mut library, "demo/msg/Joints", &joint, &mut cdr).unwrap();
    // The message, then one whose count runs past its end.
    let mut bad = cdr.clone();
    bad[4] = 200;
    for message in [&cdr, &bad] {
        publisher
            .loan_slice_uninit(message.len())
            .unwrap()
            .write_from_slice(message)
            .send()
            .unwrap();
    }
    let out = echo.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({"name": ["elbow"], "position": [0.5], "velocity": [], "mode": 3}),
        "{}",
        text(&out)
    );
    let malformed = lines[1]["malformed"].as_str().unwrap();
    assert!(
        malformed.contains("not a demo/msg/Joints") && malformed.contains("name"),
        "{malformed}"
    );
    assert!(
        text(&out).contains("CDR messages of demo/msg/Joints"),
        "{}",
        text(&out)
    );
}
