//! Topics through the gateway against a real ROS 2: rclpy nodes from the test venv
//! (Fast DDS) on one side, iox ports in this process on the other, `iox-ros2` between
//! them, each in its own process (derived structs: `typed.rs`; services:
//! `services.rs`; what they share: `common`).
//!
//! Every test runs inside its own network namespace with only loopback up, and its own
//! `/dev/shm` (the test binary starts itself again under `unshare --net --mount`): DDS
//! discovers peers by multicast, and nothing it sends may leave the namespace; Fast
//! DDS's shared-memory segments are named by port, the same in every namespace. Tests synchronise through
//! the IPC itself (transient-local DDS history and iox history deliver what was sent
//! before a late reader joined) and bounded polling of the gateway's status lines.
//!
//! Needs the ROS venv (`scripts/ros-venv.sh DIR`; `IOX_ROS_VENV=DIR`) and root (for
//! the namespace). Without either, a test says so and skips, unless `IOX_REQUIRE_ROS=1`
//! (CI) makes that a failure.

use iox_ros2::image::ImageHeader;
use iox_ros2::pointcloud::PointCloud2Header;

mod common;
use common::*;

#[test]
fn rclpy_talker_to_iox_subscriber_as_cdr() {
    in_netns("rclpy_talker_to_iox_subscriber_as_cdr", |net| {
        let gw = net.gateway("gw.log", &["--import", "**"]);
        let talker = net.peer(&[
            "talk-string",
            "--transient",
            "--count",
            "10",
            "--until",
            &net.done(),
        ]);
        let service = opened(net, "chatter", || {
            bytes(net, "chatter")
                .require_attribute("ros2/type", "std_msgs/msg/String")
                .open()
        });
        let qos = service.attributes().get("ros2/qos").unwrap().to_owned();
        assert_eq!(qos, "reliable, transient_local, keep_last 10");
        assert!(
            service
                .attributes()
                .get("ros2/definition")
                .unwrap()
                .contains("string data")
        );
        // The service keeps 10 (transient local): a late subscriber still gets all.
        let sub = service.subscriber_builder().create().unwrap();
        for i in 0..10 {
            assert_eq!(string_of(&receive(&sub)), format!("hello {i}"));
        }
        net.finish();
        peer_ok(talker);
        net.wait_log("gw.log", |l| {
            l.contains("received 10 published 10 malformed 0 dropped 0")
        });
        stop(gw);
    });
}

#[test]
fn iox_publisher_to_rclpy_listener_as_cdr() {
    in_netns("iox_publisher_to_rclpy_listener_as_cdr", |net| {
        let service = cdr_service(net, "chatter", "std_msgs/msg/String")
            .history(10)
            .subscriber_buffer(10)
            .create()
            .unwrap();
        let publisher = service.publisher_builder().create().unwrap();
        let gw = net.gateway("gw.log", &["--export", "**"]);
        let subscribers = || {
            iox_service::inspect::inspect_in(&net.root, "chatter")
                .unwrap()
                .subscribers
                .live
        };
        assert!(
            iox_testkit::wait_until(LIMIT, || subscribers() == 1),
            "the gateway subscribes"
        );
        // The gateway publishes transient local (the service keeps 10): the listener
        // gets all ten whenever it joins.
        for i in 0..10 {
            let cdr = string_cdr(&format!("hello {i}"));
            publisher
                .loan_slice_uninit(cdr.len())
                .unwrap()
                .write_from_slice(&cdr)
                .send()
                .unwrap();
        }
        let listener = net.peer(&["listen-string", "--transient", "--count", "10"]);
        let out = peer_ok(listener);
        let expected: Vec<String> = (0..10).map(|i| format!("hello {i}")).collect();
        assert_eq!(out.lines().collect::<Vec<_>>(), expected);
        net.wait_log("gw.log", |l| {
            l.contains("sent 10 echo-skipped 0 malformed 0 failed 0")
        });
        stop(gw);
    });
}

/// ROS arguments as any ROS 2 node takes them, parsed by rcl: the node renamed and
/// put in a namespace, a topic remapped (the exported `chatter` is published on
/// `/talk`), a parameter given.
#[test]
fn ros_arguments_rename_the_node_and_remap_topics() {
    in_netns("ros_arguments_rename_the_node_and_remap_topics", |net| {
        let service = cdr_service(net, "chatter", "std_msgs/msg/String")
            .history(10)
            .subscriber_buffer(10)
            .create()
            .unwrap();
        let publisher = service.publisher_builder().create().unwrap();
        let gw = net.gateway(
            "gw.log",
            &[
                "--export",
                "**",
                "--ros-args",
                "-r",
                "__node:=camera_gateway",
                "-r",
                "__ns:=/robot",
                "-r",
                "/chatter:=/talk",
                "-p",
                "use_sim_time:=false",
            ],
        );
        let subscribers = || {
            iox_service::inspect::inspect_in(&net.root, "chatter")
                .unwrap()
                .subscribers
                .live
        };
        assert!(iox_testkit::wait_until(LIMIT, || subscribers() == 1));
        for i in 0..10 {
            let cdr = string_cdr(&format!("hello {i}"));
            publisher
                .loan_slice_uninit(cdr.len())
                .unwrap()
                .write_from_slice(&cdr)
                .send()
                .unwrap();
        }
        let node = peer_ok(net.peer(&["wait-node", "--node", "/robot/camera_gateway"]));
        assert_eq!(node.trim(), "/robot/camera_gateway");
        let out = peer_ok(net.peer(&[
            "listen-string",
            "--topic",
            "/talk",
            "--transient",
            "--count",
            "10",
        ]));
        assert_eq!(out.lines().count(), 10, "{out}");
        net.wait_log("gw.log", |l| {
            l.contains("running (ROS node camera_gateway, Fast DDS transports DEFAULT)")
        });
        stop(gw);
    });
}

/// A depth-100 transient-local publisher: discovery does not carry the depth, so the
/// gateway is told it (`--qos`) and keeps all 100 for a late iox subscriber; the pool
/// is sized as `--pool` says; a topic not named keeps the defaults (depth 10, each
/// class holding a full buffer and two in flight).
#[test]
fn the_gateway_is_told_what_discovery_does_not_say() {
    in_netns("the_gateway_is_told_what_discovery_does_not_say", |net| {
        let gw = net.gateway(
            "gw.log",
            &[
                "--import",
                "**",
                "--qos",
                "chatter=reliable, transient_local, keep_last 100",
                "--pool",
                "chatter=4Kx204,64Kx4",
            ],
        );
        let deep = net.peer(&[
            "talk-string",
            "--transient",
            "--depth",
            "100",
            "--count",
            "100",
            "--period",
            "0",
            "--until",
            &net.done(),
        ]);
        let other = net.peer(&[
            "talk-string",
            "--topic",
            "/other",
            "--transient",
            "--count",
            "1",
            "--until",
            &net.done(),
        ]);
        let service = opened(net, "chatter", || {
            bytes(net, "chatter")
                .require_attribute("ros2/type", "std_msgs/msg/String")
                .open()
        });
        assert_eq!(
            service.attributes().get("ros2/qos").unwrap(),
            "reliable, transient_local, keep_last 100"
        );
        // All 100 reach the service's history; a late subscriber gets every one.
        net.wait_log("gw.log", |l| l.contains("received 100 published 100"));
        let sub = service.subscriber_builder().create().unwrap();
        for i in 0..100 {
            assert_eq!(string_of(&receive(&sub)), format!("hello {i}"));
        }
        let classes = |name: &str| -> Vec<(usize, u32)> {
            iox_service::inspect::inspect_in(&net.root, name)
                .unwrap()
                .classes
                .iter()
                .map(|c| (c.chunk_size, c.count))
                .collect()
        };
        let told = classes("chatter");
        assert_eq!(told.iter().map(|c| c.1).collect::<Vec<_>>(), [204, 4], "{told:?}");
        opened(net, "other", || bytes(net, "other").open());
        let defaults = classes("other");
        assert_eq!(
            defaults.iter().map(|c| c.1).collect::<Vec<_>>(),
            [64, 32, 22, 16],
            "depth 10 transient local: 10 + 10 + 2 of each class, at most 256 MiB a class"
        );
        net.finish();
        peer_ok(deep);
        peer_ok(other);
        stop(gw);
    });
}

#[test]
fn images_of_1_and_8_mib_both_ways() {
    in_netns("images_of_1_and_8_mib_both_ways", |net| {
        let gw = net.gateway("gw.log", &["--import", "camera/in", "--export", "camera/out"]);
        let sizes = [1usize << 20, 8 << 20];
        let talker = net.peer(&[
            "talk-image",
            "--topic",
            "/camera/in",
            "--transient",
            "--depth",
            "2",
            "--sizes",
            &sizes[0].to_string(),
            &sizes[1].to_string(),
            "--until",
            &net.done(),
        ]);
        let camera = opened(net, "camera/in", || {
            bytes(net, "camera/in").user_header::<ImageHeader>().open()
        });
        assert_eq!(
            camera.attributes().get("ros2/type"),
            Some("sensor_msgs/msg/Image")
        );
        let sub = camera.subscriber_builder().create().unwrap();
        let out = bytes(net, "camera/out")
            .user_header::<ImageHeader>()
            .size_classes(&[((9 << 20) + 4096, 8)])
            .allow_pool_exhaustion(true)
            .history(2)
            .create()
            .unwrap();
        let forward = out.publisher_builder().create().unwrap();
        exported(net, "camera/out");
        for (seq, &size) in sizes.iter().enumerate() {
            let image = receive(&sub);
            let h = *image.user_header();
            assert_eq!(
                (h.sec, h.height, h.width, h.step),
                (seq as i32, 1024, (size / 1024) as u32, (size / 1024) as u32)
            );
            assert_eq!((h.encoding(), h.frame_id()), (&b"mono8"[..], &b"camera"[..]));
            assert!(
                *image == pattern(size, seq as u32)[..],
                "image {seq}'s pixels arrived byte for byte"
            );
            // Back to ROS through the gateway, in place: header and pixels as received.
            forward
                .loan_slice_uninit(image.len())
                .unwrap()
                .write_header(h)
                .write_from_slice(&image)
                .send()
                .unwrap();
        }
        let listener = net.peer(&[
            "listen-image",
            "--topic",
            "/camera/out",
            "--transient",
            "--depth",
            "2",
            "--count",
            "2",
        ]);
        let got = peer_ok(listener);
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            ["image 0 1048576", "image 1 8388608"]
        );
        net.finish();
        peer_ok(talker);
        stop(gw);
    });
}

#[test]
fn malformed_cdr_is_counted_and_dropped() {
    in_netns("malformed_cdr_is_counted_and_dropped", |net| {
        let gw = net.gateway("gw.log", &["--import", "**"]);
        let talker = net.peer(&["talk-raw", "--transient", "--until", &net.done()]);
        let service = opened(net, "chatter", || bytes(net, "chatter").open());
        let sub = service.subscriber_builder().create().unwrap();
        assert_eq!(string_of(&receive(&sub)), "good");
        net.wait_log("gw.log", |l| {
            l.contains("received 4 published 1 malformed 3 dropped 0")
        });
        assert!(sub.receive().unwrap().is_none(), "nothing malformed reached iox");
        net.finish();
        peer_ok(talker);
        stop(gw);
    });
}

#[test]
fn both_directions_never_echo() {
    in_netns("both_directions_never_echo", |net| {
        let gw = net.gateway("gw.log", &["--import", "**", "--export", "**"]);
        let talker = net.peer(&[
            "talk-string",
            "--transient",
            "--count",
            "10",
            "--until",
            &net.done(),
        ]);
        let listener = net.peer(&["listen-string", "--transient", "--count", "10"]);
        peer_ok(listener);
        // The import is exported back as a topic, but what the gateway imported is
        // never published again.
        net.wait_log("gw.log", |l| {
            l.contains("chatter -> /chatter") && l.contains("sent 0 echo-skipped 10")
        });
        net.finish();
        peer_ok(talker);
        stop(gw);
    });
}

#[test]
fn gateway_sigkill_and_restart_resumes() {
    in_netns("gateway_sigkill_and_restart_resumes", |net| {
        // Both directions: /chatter imported, and `state` (which keeps its last
        // sample) exported as /state.
        let state = cdr_service(net, "state", "std_msgs/msg/String")
            .history(1)
            .create()
            .unwrap();
        let state_pub = state.publisher_builder().create().unwrap();
        let cdr = string_cdr("hello 0");
        state_pub
            .loan_slice_uninit(cdr.len())
            .unwrap()
            .write_from_slice(&cdr)
            .send()
            .unwrap();
        let args = ["--import", "**", "--export", "state"];
        let gw = net.gateway("gw1.log", &args);
        // A ROS listener joining late gets the kept sample: the publisher hands its
        // history to a subscriber that connects later (the gateway's) at its next
        // send or `update_connections`, which it calls while the listener waits.
        let listen = || {
            let mut listener = net.peer(&[
                "listen-string",
                "--topic",
                "/state",
                "--transient",
                "--depth",
                "1",
                "--count",
                "1",
            ]);
            iox_testkit::wait_until(LIMIT, || {
                state_pub.update_connections().unwrap();
                listener.try_wait().is_some()
            });
            peer_ok(listener)
        };
        assert_eq!(listen().trim(), "hello 0");
        let talker = net.peer(&[
            "talk-string",
            "--transient",
            "--count",
            "5",
            "--until",
            &net.done(),
        ]);
        let service = opened(net, "chatter", || bytes(net, "chatter").open());
        let sub = service.subscriber_builder().create().unwrap();
        for i in 0..5 {
            assert_eq!(string_of(&receive(&sub)), format!("hello {i}"));
        }
        gw.kill();
        // The new gateway imports the topic again; DDS gives it the history again.
        let gw = net.gateway("gw2.log", &args);
        // And ROS nodes see the exported topic come back.
        assert_eq!(listen().trim(), "hello 0");
        for i in 0..5 {
            assert_eq!(string_of(&receive(&sub)), format!("hello {i}"));
        }
        let dead = || {
            let info = iox_service::inspect::inspect_in(&net.root, "chatter").unwrap();
            info.publishers.dead + info.subscribers.dead
        };
        assert!(
            iox_testkit::wait_until(LIMIT, || dead() == 0),
            "the killed gateway's port was recovered"
        );
        net.finish();
        peer_ok(talker);
        stop(gw);
        drop((sub, service, state_pub, state));
        let left: Vec<_> = std::fs::read_dir(&net.root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "nothing is left under the root: {left:?}");
    });
}

#[test]
fn qos_a_subscription_cannot_get_is_reported() {
    in_netns("qos_a_subscription_cannot_get_is_reported", |net| {
        let service = cdr_service(net, "state", "std_msgs/msg/String").create().unwrap();
        let gw = net.gateway("gw.log", &["--export", "**"]);
        // Transient local from a service that keeps no history: DDS matches nothing.
        let listener = net.peer(&[
            "listen-string",
            "--topic",
            "/state",
            "--transient",
            "--count",
            "1",
        ]);
        let line = net.wait_log("gw.log", |l| l.contains("QoS incompatible: node /peer on /state"));
        assert!(
            line.contains("transient_local") && line.contains(".history(N)"),
            "{line}"
        );
        drop(listener);
        drop(service);
        stop(gw);
    });
}

#[test]
fn an_unknown_ros_type_is_named() {
    in_netns("an_unknown_ros_type_is_named", |net| {
        let _service = cdr_service(net, "odd", "nonexistent_msgs/msg/Thing")
            .create()
            .unwrap();
        let gw = net.gateway("gw.log", &["--export", "**"]);
        let line = net.wait_log("gw.log", |l| l.contains("not exporting \"odd\""));
        assert!(
            line.contains("nonexistent_msgs/msg/Thing") && line.contains("not installed"),
            "{line}"
        );
        assert!(
            line.contains(&net.venv.display().to_string()),
            "it says where it looked: {line}"
        );
        stop(gw);
    });
}

#[test]
fn point_clouds_both_ways_as_header_and_points() {
    in_netns("point_clouds_both_ways_as_header_and_points", |net| {
        let gw = net.gateway("gw.log", &["--import", "lidar/in", "--export", "lidar/out"]);
        let talker = net.peer(&[
            "talk-cloud",
            "--topic",
            "/lidar/in",
            "--transient",
            "--depth",
            "3",
            "--count",
            "3",
            "--until",
            &net.done(),
        ]);
        let clouds = opened(net, "lidar/in", || {
            bytes(net, "lidar/in").user_header::<PointCloud2Header>().open()
        });
        assert_eq!(
            clouds.attributes().get("ros2/type"),
            Some("sensor_msgs/msg/PointCloud2")
        );
        let sub = clouds.subscriber_builder().create().unwrap();
        let out = bytes(net, "lidar/out")
            .user_header::<PointCloud2Header>()
            .max_slice_len(1 << 16)
            .history(3)
            .create()
            .unwrap();
        let forward = out.publisher_builder().create().unwrap();
        exported(net, "lidar/out");
        for seq in 0..3u32 {
            let cloud = receive(&sub);
            let h = *cloud.user_header();
            let names: Vec<&[u8]> = h.fields().iter().map(|f| f.name()).collect();
            assert_eq!(names, [&b"x"[..], b"y", b"z", b"intensity"]);
            assert_eq!(
                (h.sec, h.width, h.point_step, h.is_dense, h.frame_id()),
                (seq as i32, 4096, 16, 1, &b"lidar"[..])
            );
            // Point 7, in place: x = 7, y = seq, z = -7, intensity 0.5.
            let p: Vec<f32> = cloud[7 * 16..8 * 16]
                .chunks(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(p, [7.0, seq as f32, -7.0, 0.5]);
            forward
                .loan_slice_uninit(cloud.len())
                .unwrap()
                .write_header(h)
                .write_from_slice(&cloud)
                .send()
                .unwrap();
        }
        let listener = net.peer(&[
            "listen-cloud",
            "--topic",
            "/lidar/out",
            "--transient",
            "--depth",
            "3",
            "--count",
            "3",
        ]);
        assert_eq!(peer_ok(listener).lines().count(), 3);
        net.finish();
        peer_ok(talker);
        stop(gw);
    });
}
