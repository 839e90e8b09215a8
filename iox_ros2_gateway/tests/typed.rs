//! Derived structs matched field by field against fixed-size ROS messages through the gateway against a real ROS 2 (rclpy on Fast DDS from the test
//! venv), each test in its own loopback-only network namespace (see `common`). Skips
//! without the ROS venv or root unless `IOX_REQUIRE_ROS=1`.

use iox_service::{Service, ZeroCopySafe};

mod common;
use common::*;

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
