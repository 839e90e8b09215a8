//! Writes the fuzz targets' seed corpora (`fuzz/corpus/<target>/seed-*` and the
//! reported crash inputs, `crash-*`): `cargo run -p iox_fuzz --example seeds`. The
//! files are committed; run it again after a format changes.

use std::path::{Path, PathBuf};

use iox_core::handover::wire;
use iox_core::tensor::{DType, TensorLayout};
use iox_ros2::cdr::Writer;
use iox_service::{Service, ZeroCopySafe};

#[derive(ZeroCopySafe, Clone, Copy)]
#[repr(C)]
struct Reading {
    seq: u32,
    valid: bool,
    value: f64,
}

fn corpus(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn put(target: &str, name: &str, bytes: impl AsRef<[u8]>) {
    std::fs::write(corpus(target).join(name), bytes).unwrap();
}

/// A chain of `n` message types, `chain/T0` using `chain/T1` ..., as a definition text.
fn chain(n: usize) -> String {
    let mut text = String::from("chain/T1 next\n");
    for i in 1..n {
        let body = if i + 1 < n {
            format!("chain/T{} next\n", i + 1)
        } else {
            "int32 end\n".to_owned()
        };
        text.push_str(&format!("{}\nMSG: chain/T{i}\n{body}", "=".repeat(80)));
    }
    text
}

const JOINT_STATE: &str = "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n\
================================================================================\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n\
================================================================================\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n";

/// A `sensor_msgs/JointState` with one joint and empty `velocity` and `effort`, as
/// Fast CDR writes it (an empty sequence is its count alone).
fn joint_state_cdr() -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.i32(7);
    w.u32(9);
    w.string(b"base");
    w.u32(1);
    w.string(b"elbow");
    w.u32(1);
    w.u32(0); // padding to 8 for the float64
    w.u32(0);
    w.u32(0x3ff0_0000); // 1.0
    w.u32(0); // velocity: none
    w.u32(0); // effort: none
    w.finish();
    out
}

fn image_cdr() -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.i32(1);
    w.u32(2);
    w.string(b"camera");
    w.u32(2); // height
    w.u32(2); // width
    w.string(b"rgb8");
    w.u8(0);
    w.u32(6); // step
    w.byte_sequence(&[1; 12]);
    w.finish();
    out
}

fn string_cdr(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.string(text);
    w.finish();
    out
}

/// An MCAP file of one channel (schema `schema_name` in `encoding` holding `schema`,
/// messages in `message_encoding`) with `messages`.
fn mcap_file(
    schema_name: &str,
    encoding: &str,
    schema: &[u8],
    message_encoding: &str,
    messages: &[&[u8]],
) -> Vec<u8> {
    let mut file = Vec::new();
    {
        let mut w = mcap::Writer::new(std::io::Cursor::new(&mut file)).unwrap();
        let s = w.add_schema(schema_name, encoding, schema).unwrap();
        let ch = w
            .add_channel(s, "seed/topic", message_encoding, &Default::default())
            .unwrap();
        for (i, m) in messages.iter().enumerate() {
            let header = mcap::records::MessageHeader {
                channel_id: ch,
                sequence: i as u32,
                log_time: i as u64,
                publish_time: i as u64,
            };
            w.write_to_known_channel(&header, m).unwrap();
        }
        w.finish().unwrap();
    }
    file
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    let named = |name: &str| Service::named(name).unwrap().root(root.path());

    // Static configs of every pattern, with a schema, a header, attributes, tensors.
    let typed = named("seed/typed")
        .publish_subscribe::<Reading>()
        .attribute("ros2/type", "demo/msg/Reading")
        .create()
        .unwrap();
    let configs = [
        ("pubsub-typed", typed.static_config().to_ron()),
        (
            "pubsub-slice-header",
            named("seed/slice")
                .publish_subscribe::<[u16]>()
                .user_header::<u64>()
                .max_slice_len(64)
                .create()
                .unwrap()
                .static_config()
                .to_ron(),
        ),
        (
            "pubsub-tensor",
            named("seed/tensor")
                .publish_subscribe::<[f32]>()
                .max_slice_len(64)
                .tensors(true)
                .create()
                .unwrap()
                .static_config()
                .to_ron(),
        ),
        (
            "pubsub-pages",
            named("seed/pages")
                .publish_subscribe::<[u8]>()
                .max_slice_len(4096)
                .page_size(iox_service::PageSize::Transparent)
                .create()
                .unwrap()
                .static_config()
                .to_ron(),
        ),
        (
            "event",
            named("seed/event")
                .event()
                .create()
                .unwrap()
                .static_config()
                .to_ron(),
        ),
        (
            "reqres",
            named("seed/reqres")
                .request_response::<u64, [u8]>()
                .response_slice_len(32)
                .create()
                .unwrap()
                .static_config()
                .to_ron(),
        ),
        (
            "blackboard",
            named("seed/blackboard")
                .blackboard::<u32>()
                .add(1u32, 0.5f64)
                .create()
                .unwrap()
                .static_config()
                .to_ron(),
        ),
    ];
    for (name, text) in &configs {
        put("static_config", &format!("seed-{name}.ron"), text);
    }

    // MCAP: an iox recording, a ROS 2 channel, and the reported crash inputs.
    let reading = [0u8; 16];
    put(
        "mcap",
        "seed-iox.mcap",
        mcap_file(
            "Reading",
            "iox.static_config.ron",
            configs[0].1.as_bytes(),
            "iox.raw",
            &[&reading, &reading],
        ),
    );
    put(
        "mcap",
        "seed-ros2-string.mcap",
        mcap_file(
            "std_msgs/msg/String",
            "ros2msg",
            b"string data\n",
            "cdr",
            &[&string_cdr(b"hello")],
        ),
    );
    put(
        "mcap",
        "seed-ros2-joint-state.mcap",
        mcap_file(
            "sensor_msgs/msg/JointState",
            "ros2msg",
            JOINT_STATE.as_bytes(),
            "cdr",
            &[&joint_state_cdr()],
        ),
    );
    let mut huge = mcap::MAGIC.to_vec();
    huge.push(mcap::records::op::HEADER);
    huge.extend_from_slice(&u64::MAX.to_le_bytes());
    huge.extend_from_slice(&[0; 16]);
    put("mcap", "crash-record-length-u64-max.mcap", huge);
    let cdr8 = [0u8, 1, 0, 0, 0, 0, 0, 0];
    put(
        "mcap",
        "crash-ros2msg-loop.mcap",
        mcap_file("evil/msg/Loop", "ros2msg", b"evil/Loop next\n", "cdr", &[&cdr8]),
    );
    put(
        "mcap",
        "crash-ros2msg-undefined.mcap",
        mcap_file(
            "evil/msg/Gap",
            "ros2msg",
            b"int32 a\nevil/Gone gone\n",
            "cdr",
            &[&cdr8],
        ),
    );

    // ros2msg texts: the name on the first line.
    put(
        "ros2msg",
        "seed-image.txt",
        format!(
            "{}\n{}",
            iox_ros2::image::IMAGE_TYPE,
            iox_ros2::image::IMAGE_DEFINITION
        ),
    );
    put(
        "ros2msg",
        "seed-pointcloud2.txt",
        format!(
            "{}\n{}",
            iox_ros2::pointcloud::POINTCLOUD2_TYPE,
            iox_ros2::pointcloud::POINTCLOUD2_DEFINITION
        ),
    );
    put(
        "ros2msg",
        "seed-joint-state.txt",
        format!("sensor_msgs/msg/JointState\n{JOINT_STATE}"),
    );
    put(
        "ros2msg",
        "seed-bounded.txt",
        "demo/msg/B\nstring<=8 s\nwstring w\nint16[<=3] few\nfloat64[2] pair\nbool ON=true\nuint8 flags 3\n",
    );
    put("ros2msg", "crash-loop.txt", "evil/msg/Loop\nevil/Loop next\n");
    put(
        "ros2msg",
        "crash-undefined.txt",
        "evil/msg/Gap\nint32 a\nevil/Gone gone\n",
    );
    put(
        "ros2msg",
        "crash-chain.txt",
        format!("chain/msg/T0\n{}", chain(200)),
    );

    // CDR: the definition, a 0, the message.
    let with_definition = |text: &str, cdr: &[u8]| [text.as_bytes(), &[0], cdr].concat();
    put(
        "cdr",
        "seed-string.bin",
        with_definition("string data\n", &string_cdr(b"hi")),
    );
    put(
        "cdr",
        "seed-joint-state.bin",
        with_definition(JOINT_STATE, &joint_state_cdr()),
    );
    put(
        "cdr",
        "seed-image.bin",
        with_definition(iox_ros2::image::IMAGE_DEFINITION, &image_cdr()),
    );
    put("cdr", "crash-loop.bin", with_definition("fuzz/T next\n", &cdr8));

    put(
        "attributes",
        "seed-ros.txt",
        "ros2/type=sensor_msgs/msg/Image\nros2/qos=reliable, transient_local, keep_last 10\nros2/definition=uint8 x\n",
    );
    put(
        "attributes",
        "seed-odd.txt",
        "a=\n=b\nros2/qos=best_effort,volatile,keep_all\n",
    );

    put(
        "handover",
        "seed-request.bin",
        wire::request("iox_0123456789abcdef"),
    );
    put(
        "handover",
        "seed-reply-here.bin",
        wire::reply(wire::Status::Here, 2, ""),
    );
    put(
        "handover",
        "seed-reply-refused.bin",
        wire::reply(wire::Status::Refused, 0, "uid 1000 is not admitted"),
    );

    let layouts = [
        TensorLayout::contiguous(DType::F32, &[2, 3]).unwrap(),
        TensorLayout::strided(DType::U8, &[4, 4, 3], &[24, 6, 2]).unwrap(),
        TensorLayout::contiguous(DType::F64, &[]).unwrap(),
    ];
    for (i, l) in layouts.iter().enumerate() {
        let bytes: Vec<u8> = l.to_words().iter().flat_map(|w| w.to_le_bytes()).collect();
        put("tensor_record", &format!("seed-{i}.bin"), bytes);
    }
    // smaps texts: the first line is the name looked for. This process's own, with a
    // pool on transparent huge pages mapped, and one with a hugetlb mapping.
    let pool = named("seed/smaps")
        .publish_subscribe::<[u8]>()
        .max_slice_len(4096)
        .page_size(iox_service::PageSize::Transparent)
        .create()
        .unwrap();
    let iox_service::PayloadBacking::Memfd(id) = pool.static_config().backing else {
        panic!("a memfd pool");
    };
    let own = std::fs::read_to_string("/proc/self/smaps").unwrap();
    put("smaps", "seed-self.txt", format!("{}\n{own}", id.link_suffix()));
    put(
        "smaps",
        "seed-hugetlb.txt",
        ":00000000000000cd (deleted)\n\
7f0000400000-7f0000800000 rw-s 00000000 00:0f 43                         /memfd:iox:y:00000000000000cd (deleted)\n\
Size:               4096 kB\nKernelPageSize:     2048 kB\nRss:                   0 kB\n\
Shared_Hugetlb:     4096 kB\nPrivate_Hugetlb:       0 kB\n",
    );

    // `iox foxglove`'s samples: a config, a NUL, (for tensors, 3 shape bytes,) the
    // sample as copied out: one of each form (iox_cli::foxglove_form).
    let seed = |name: &str, config: &iox_service::StaticConfig, sample: &[u8]| {
        let mut bytes = config.to_ron().into_bytes();
        bytes.push(0);
        bytes.extend_from_slice(sample);
        put("foxglove_sample", &format!("seed-{name}.bin"), bytes);
    };
    seed("typed", typed.static_config(), &[7; 16]);
    let pairs = named("seed/fox/pairs")
        .publish_subscribe::<[Reading]>()
        .max_slice_len(4)
        .create()
        .unwrap();
    seed("slice", pairs.static_config(), &[1; 32]);
    let image = iox_ros2::carried::ros_service(
        named("seed/fox/image")
            .publish_subscribe::<[u8]>()
            .user_header::<iox_ros2::image::ImageHeader>(),
        iox_ros2::image::IMAGE_TYPE,
        "",
    )
    .create()
    .unwrap();
    let header = iox_ros2::image::ImageHeader::new(2, 2, 2, "mono8", "cam").unwrap();
    let mut framed: Vec<u8> = iox_ros2::framed::Framed::to_bytes(&header);
    framed.extend_from_slice(&[1, 2, 3, 4]);
    seed("image", image.static_config(), &framed);
    let chatter = iox_ros2::carried::ros_service(
        named("seed/fox/chatter").publish_subscribe::<[u8]>(),
        "std_msgs/msg/String",
        "string data\n",
    )
    .create()
    .unwrap();
    let mut hello = Vec::new();
    let mut w = Writer::new(&mut hello);
    w.string(b"hello");
    w.finish();
    seed("cdr", chatter.static_config(), &hello);
    let frame = named("seed/fox/frame")
        .publish_subscribe::<[u8]>()
        .max_slice_len(12)
        .tensors(true)
        .create()
        .unwrap();
    seed(
        "tensor-image",
        frame.static_config(),
        &[2, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    );
    let weights = named("seed/fox/weights")
        .publish_subscribe::<[u16]>()
        .max_slice_len(6)
        .tensors(true)
        .create()
        .unwrap();
    seed(
        "tensor-values",
        weights.static_config(),
        &[2, 3, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0],
    );
    let blob = named("seed/fox/blob")
        .publish_subscribe::<[u8]>()
        .max_slice_len(8)
        .create()
        .unwrap();
    seed("raw", blob.static_config(), &[0xde, 0xad]);
    // What Foxglove clients send: subscribing, unsubscribing, and a binary message.
    put(
        "foxglove_client",
        "seed-subscribe.json",
        r#"{"op":"subscribe","subscriptions":[{"id":1,"channelId":0}]}"#,
    );
    put(
        "foxglove_client",
        "seed-unsubscribe.json",
        r#"{"op":"unsubscribe","subscriptionIds":[1]}"#,
    );
    put(
        "foxglove_client",
        "seed-message-data.bin",
        [1u8, 7, 0, 0, 0, 1, 2, 3],
    );
}
