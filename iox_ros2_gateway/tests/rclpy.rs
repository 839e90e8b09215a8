//! The gateway against a real ROS 2: rclpy nodes from the test venv (Fast DDS) on one
//! side, iox ports in this process on the other, `iox-ros2` between them, each in its
//! own process.
//!
//! Every test runs inside its own network namespace with only loopback up (the test
//! binary starts itself again under `unshare --net`): DDS discovers peers by
//! multicast, and nothing it sends may leave the namespace. Tests synchronise through
//! the IPC itself (transient-local DDS history and iox history deliver what was sent
//! before a late reader joined) and bounded polling of the gateway's status lines.
//!
//! Needs the ROS venv (`scripts/ros-venv.sh DIR`; `IOX_ROS_VENV=DIR`) and root (for
//! the namespace). Without either, a test says so and skips, unless `IOX_REQUIRE_ROS=1`
//! (CI) makes that a failure.

use iox_ros2::cdr::{Reader, Writer};
use iox_ros2::image::ImageHeader;
use iox_ros2::pointcloud::PointCloud2Header;
use iox_service::{PubSubService, Service, Subscriber, ZeroCopySafe};

mod common;
use common::{LIMIT, Net, in_netns, peer_ok, stop};

/// Opens `name` once the gateway has created it.
fn opened<H: iox_service::UserHeader>(
    net: &Net,
    name: &str,
    open: impl Fn() -> Result<PubSubService<[u8], H>, iox_service::OpenError>,
) -> PubSubService<[u8], H> {
    let mut service = None;
    let ok = iox_testkit::wait_until(LIMIT, || {
        service = open().ok();
        service.is_some()
    });
    let log = std::fs::read_to_string(net.dir.join("gw.log")).unwrap_or_default();
    assert!(
        ok,
        "the gateway never created {name:?} under {}; its log:\n{log}",
        net.root.display()
    );
    service.unwrap()
}

/// Waits until the gateway's export subscriber of `name` is there: samples sent
/// before would reach it only from the history at the publisher's next send.
fn exported(net: &Net, name: &str) {
    let subscribers = || {
        iox_service::inspect::inspect_in(&net.root, name)
            .unwrap()
            .subscribers
            .live
    };
    assert!(
        iox_testkit::wait_until(LIMIT, || subscribers() == 1),
        "the gateway exports {name}"
    );
}

fn bytes(net: &Net, name: &str) -> iox_service::PubSubBuilder<[u8]> {
    Service::named(name)
        .unwrap()
        .root(&net.root)
        .publish_subscribe::<[u8]>()
}

/// A CDR service the test creates, as a program that records its ROS type does.
fn cdr_service(net: &Net, name: &str, type_name: &str) -> iox_service::PubSubBuilder<[u8]> {
    bytes(net, name)
        .chunk_sizes(&[4096])
        .attribute("ros2/type", type_name)
}

/// The text of a `std_msgs/msg/String` CDR message.
fn string_of(cdr: &[u8]) -> String {
    let mut r = Reader::new(cdr).unwrap();
    String::from_utf8(r.string("data").unwrap().to_vec()).unwrap()
}

fn string_cdr(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.string(text.as_bytes());
    w.finish();
    out
}

fn receive<P: iox_service::Payload + ?Sized, H: iox_service::UserHeader>(
    sub: &Subscriber<P, H>,
) -> iox_service::Sample<P, H> {
    sub.receive_timeout(LIMIT)
        .unwrap()
        .expect("a sample within the limit")
}

fn pattern(n: usize, seq: u32) -> Vec<u8> {
    (0..n).map(|i| (i as u64 * 7 + seq as u64) as u8).collect()
}

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

/// `geometry_msgs/msg/Point`, as an iox program declares it.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Point {
    x: f64,
    y: f64,
    z: f64,
}

/// Not a `Point`: its third field has another name.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct NotPoint {
    x: f64,
    y: f64,
    w: f64,
}

#[test]
fn derived_structs_both_ways_field_by_field() {
    in_netns("derived_structs_both_ways_field_by_field", |net| {
        let typed = |name: &str| {
            Service::named(name)
                .unwrap()
                .root(&net.root)
                .publish_subscribe::<Point>()
                .attribute("ros2/type", "geometry_msgs/msg/Point")
                .history(5)
                .subscriber_buffer(5)
                .create()
                .unwrap()
        };
        // The program made its services first, recording the ROS type.
        let (input, output) = (typed("point/in"), typed("point/out"));
        let sub = input.subscriber_builder().create().unwrap();
        let gw = net.gateway("gw.log", &["--import", "point/in", "--export", "point/out"]);
        let talker = net.peer(&[
            "talk-point",
            "--topic",
            "/point/in",
            "--transient",
            "--count",
            "5",
            "--until",
            &net.done(),
        ]);
        let forward = output.publisher_builder().create().unwrap();
        exported(net, "point/out");
        for i in 0..5 {
            let p = *receive(&sub);
            let i = i as f64;
            assert_eq!(
                p,
                Point {
                    x: i,
                    y: 2.0 * i,
                    z: -0.5 * i
                }
            );
            forward.loan_uninit().unwrap().write_payload(p).send().unwrap();
        }
        net.wait_log("gw.log", |l| {
            l.contains("point/in (geometry_msgs/msg/Point, typed)") && l.contains("published 5")
        });
        let listener = net.peer(&[
            "listen-point",
            "--topic",
            "/point/out",
            "--transient",
            "--depth",
            "5",
            "--count",
            "5",
        ]);
        assert_eq!(peer_ok(listener).lines().count(), 5);
        net.finish();
        peer_ok(talker);
        stop(gw);
    });
}

#[test]
fn a_struct_that_does_not_match_is_named_field_by_field() {
    in_netns("a_struct_that_does_not_match_is_named_field_by_field", |net| {
        let wrong = |name: &str| {
            Service::named(name)
                .unwrap()
                .root(&net.root)
                .publish_subscribe::<NotPoint>()
                .attribute("ros2/type", "geometry_msgs/msg/Point")
                .create()
                .unwrap()
        };
        let (_out, _in) = (wrong("wrong_out"), wrong("wrong_in"));
        let gw = net.gateway("gw.log", &["--import", "wrong_in", "--export", "wrong_out"]);
        let talker = net.peer(&[
            "talk-point",
            "--topic",
            "/wrong_in",
            "--count",
            "1",
            "--until",
            &net.done(),
        ]);
        for name in ["not exporting \"wrong_out\"", "not importing \"wrong_in\""] {
            let line = net.wait_log("gw.log", |l| l.contains(name));
            // Names the field and both sides of it.
            assert!(line.contains("field `z`") && line.contains("`w: f64`"), "{line}");
        }
        net.finish();
        peer_ok(talker);
        stop(gw);
    });
}

#[test]
fn an_rclpy_client_calls_an_iox_server() {
    in_netns("an_rclpy_client_calls_an_iox_server", |net| {
        let service = Service::named("set_led")
            .unwrap()
            .root(&net.root)
            .request_response::<[u8], [u8]>()
            .request_slice_len(4096)
            .response_slice_len(4096)
            .attribute("ros2/type", "std_srvs/srv/SetBool")
            .create()
            .unwrap();
        let server = service.server_builder().create().unwrap();
        let gw = net.gateway("gw.log", &["--export-service", "**"]);
        let caller = net.peer(&["call-setbool", "--service", "/set_led"]);
        // SetBool: the request is one bool; the response a bool and a string.
        for expected in [true, false] {
            let request = server
                .receive_timeout(LIMIT)
                .unwrap()
                .expect("a request from rclpy");
            let mut r = Reader::new(&request).unwrap();
            let on = r.u8("data").unwrap() == 1;
            assert_eq!(on, expected);
            let mut cdr = Vec::new();
            let mut w = Writer::new(&mut cdr);
            w.u8(on as u8);
            w.string(if on { b"led on" } else { b"led off" });
            w.finish();
            request
                .loan_slice_uninit(cdr.len())
                .unwrap()
                .write_from_slice(&cdr)
                .send()
                .unwrap();
        }
        assert_eq!(
            peer_ok(caller).lines().collect::<Vec<_>>(),
            ["True led on", "False led off"]
        );
        net.wait_log("gw.log", |l| {
            l.contains("set_led -> /set_led (std_srvs/srv/SetBool): calls 2 answered 2 failed 0")
        });
        stop(gw);
    });
}

#[test]
fn an_iox_client_calls_an_rclpy_service() {
    in_netns("an_iox_client_calls_an_rclpy_service", |net| {
        let ros_server = net.peer(&["serve-trigger", "--service", "/reset", "--until", &net.done()]);
        let gw = net.gateway("gw.log", &["--import-service", "**"]);
        let mut service = None;
        let created = iox_testkit::wait_until(LIMIT, || {
            service = Service::named("reset")
                .unwrap()
                .root(&net.root)
                .request_response::<[u8], [u8]>()
                .open()
                .ok();
            service.is_some()
        });
        assert!(created, "the gateway imports /reset");
        let service = service.unwrap();
        assert_eq!(
            service.attributes().get("ros2/type"),
            Some("std_srvs/srv/Trigger")
        );
        let client = service.client_builder().create().unwrap();
        // Trigger's request is empty: one byte on the wire.
        let request = [0u8, 1, 0, 0, 0, 0, 0, 0];
        for n in 1..=3 {
            let pending = client
                .loan_slice_uninit(request.len())
                .unwrap()
                .write_from_slice(&request)
                .send()
                .unwrap();
            let response = pending
                .receive_timeout(LIMIT)
                .unwrap()
                .expect("the rclpy service answers");
            let mut r = Reader::new(&response).unwrap();
            assert_eq!(r.u8("success").unwrap(), 1);
            assert_eq!(r.string("message").unwrap(), format!("reset {n}").as_bytes());
        }
        // A request that is not a Trigger request is refused, not sent to ROS.
        let pending = client
            .loan_slice_uninit(2)
            .unwrap()
            .write_from_slice(&[7, 7])
            .send()
            .unwrap();
        assert!(pending.receive_timeout(LIMIT).unwrap().is_none() && pending.is_finished());
        net.wait_log("gw.log", |l| {
            l.contains("/reset -> reset (std_srvs/srv/Trigger): calls 4 answered 3 failed 0 malformed 1")
        });
        net.finish();
        peer_ok(ros_server);
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
