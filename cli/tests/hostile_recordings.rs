//! Recordings made to hurt: `iox replay` refuses each with its documented error and
//! exit code, never a crash (a stack overflow was exit 134, a panic exit 101), an
//! endless walk or an allocation the file asks for. And `iox record` of a service whose
//! `ros2/definition` attribute (text another user wrote) describes a type that contains
//! itself records it as bytes, without following the definition.

mod common;

use std::path::Path;

use common::{code, iox, spawn, text};
use iox_service::Service;
use iox_testkit::wait_until;

/// A recording of one ROS 2 channel (`ros2msg` schema `definition` of type `name`, as
/// rosbag2 writes it) holding one CDR message.
fn ros_recording(path: &Path, name: &str, definition: &str) {
    let mut w = mcap::Writer::new(std::fs::File::create(path).unwrap()).unwrap();
    let schema = w.add_schema(name, "ros2msg", definition.as_bytes()).unwrap();
    let ch = w
        .add_channel(schema, "/evil", "cdr", &Default::default())
        .unwrap();
    let header = mcap::records::MessageHeader {
        channel_id: ch,
        sequence: 0,
        log_time: 1,
        publish_time: 1,
    };
    w.write_to_known_channel(&header, &[0, 1, 0, 0, 0, 0, 0, 0])
        .unwrap();
    w.finish().unwrap();
}

/// Runs `iox replay FILE` in a fresh root; asserts it ended with `expected` and said
/// `said`.
fn replay_refuses(file: &Path, expected: i32, said: &str) {
    let fresh = tempfile::tempdir().unwrap();
    let out = iox(fresh.path(), &["replay", file.to_str().unwrap()]);
    let told = text(&out);
    assert_eq!(code(&out), expected, "{told}");
    assert!(told.contains(said), "expected {said:?} in: {told}");
    assert!(!told.contains("panicked"), "{told}");
}

#[test]
fn a_record_length_of_u64_max_is_damage_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.mcap");
    let mut bytes = mcap::MAGIC.to_vec();
    bytes.push(mcap::records::op::HEADER);
    bytes.extend_from_slice(&u64::MAX.to_le_bytes());
    bytes.extend_from_slice(&[0; 16]);
    std::fs::write(&file, &bytes).unwrap();
    replay_refuses(&file, 3, "no message could be read");
}

/// A chunk whose record claims more bytes than the chunk holds (found by the fuzzer:
/// MCAP's own chunk walk subtracted past zero and panicked).
#[test]
fn a_chunk_record_longer_than_its_chunk_is_damage_not_a_crash() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus/mcap/crash-chunk-record-past-its-chunk.mcap");
    replay_refuses(&file, 3, "a chunk whose CRC does not match");
}

#[test]
fn ros_definitions_that_never_end_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("loop.mcap");
    ros_recording(&file, "evil/msg/Loop", "evil/Loop next\n");
    replay_refuses(&file, 3, "contains itself");
    ros_recording(&file, "evil/msg/Gap", "int32 a\nevil/Gone gone\n");
    replay_refuses(&file, 3, "does not define");
    let mut chain = String::from("chain/T1 next\n");
    for i in 1..100_000 {
        chain.push_str(&format!(
            "{}\nMSG: chain/T{i}\nchain/T{} next\n",
            "=".repeat(80),
            i + 1
        ));
    }
    chain.push_str(&format!("{}\nMSG: chain/T100000\nint32 end\n", "=".repeat(80)));
    ros_recording(&file, "chain/msg/T0", &chain);
    replay_refuses(&file, 3, "deep");
}

/// `iox record` of a CDR service whose definition attribute loops: recorded as iox's
/// own bytes (no ROS form), and the recording replays.
#[test]
fn a_service_whose_definition_loops_is_recorded_as_bytes() {
    let root = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("evil.mcap");
    let svc = Service::named("evil/topic")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u8]>()
        .max_slice_len(64)
        .attribute("ros2/type", "evil/msg/Loop")
        .attribute("ros2/definition", "evil/Loop next\n")
        .create()
        .unwrap();
    let recorder = spawn(
        root.path(),
        &["record", "-o", file.to_str().unwrap(), "evil/*", "--count", "1"],
    );
    assert!(
        wait_until(std::time::Duration::from_secs(60), || svc.port_counts().1 == 1),
        "iox record never subscribed"
    );
    let publisher = svc.publisher_builder().create().unwrap();
    let cdr = [0, 1, 0, 0, 9, 9, 9, 9];
    let loan = publisher.loan_slice_uninit(cdr.len()).unwrap();
    loan.write_from_slice(&cdr).send().unwrap();
    let out = recorder.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let fresh = tempfile::tempdir().unwrap();
    let out = iox(fresh.path(), &["replay", file.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", text(&out));
}
