//! ROS 2 services and iox request-response services, both ways, through the gateway against a real ROS 2 (rclpy on Fast DDS from the test
//! venv), each test in its own loopback-only network namespace (see `common`). Skips
//! without the ROS venv or root unless `IOX_REQUIRE_ROS=1`.

use iox_ros2::cdr::{Reader, Writer};
use iox_service::Service;

mod common;
use common::*;

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
        // The gateway makes the service, then its server: a client waits for the
        // server as an rclpy client calls `wait_for_service` (a request sent before
        // it is refused with `NoServer`).
        assert!(
            iox_testkit::wait_until(LIMIT, || service.port_counts().1 == 1),
            "the gateway's server connects to reset"
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
