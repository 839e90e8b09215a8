//! The gateway never lets one service delay the others: another user's iox services,
//! whose only holder is stopped (`SIGSTOP`: it answers no hand-over), sit where the
//! gateway's patterns match them: three it would export (`out/evil*`), and one it would
//! import a ROS topic into (`cam/evil`, while an rclpy node publishes `/cam/evil`). The
//! gateway opens them off its scanning and forwarding threads (each on a thread of its
//! own, with a short timeout, backed off while they keep failing, no lock held), so a
//! 50 Hz `/cam/good` keeps its rate without gaps, and a good service created later is
//! exported at once (an earlier gateway opened them on its import thread, retrying
//! every scan for the open's 10 s timeout, and in its export scanner under the
//! exports' lock: `/cam/good` fell to a few messages with 10 s gaps, and an export
//! waited 10 s per stopped service). Root and the ROS venv (`IOX_ROS_VENV`) needed.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use iox_ros2::library::Library;
use iox_ros2_gateway::qos::Qos;
use iox_testkit::hostile::{StoppedStranger, ready_and_hold};

const RATE_HZ: u64 = 50;
const TYPE: &str = "std_msgs/msg/String";
const MEASURE: Duration = Duration::from_secs(3);

/// The stranger's services, open to anyone: three CDR services the gateway's export
/// pattern matches, and the service the gateway imports `/cam/evil` into, made as the
/// gateway would make it (with the type's `definition`, which the test read: the
/// stranger may not read the ROS install).
fn stranger(root: &Path, definition: &str) -> ! {
    let net = Net {
        root: root.to_owned(),
        dir: root.to_owned(),
        venv: PathBuf::new(),
    };
    let mut held: Vec<_> = ["out/evil1", "out/evil2", "out/evil3"]
        .iter()
        .map(|n| {
            cdr_service(&net, n, "std_msgs/msg/String")
                .permissions(0o666)
                .create()
                .unwrap()
        })
        .collect();
    let builder = bytes(&net, "cam/evil").permissions(0o666);
    held.push(
        iox_ros2_gateway::import::open_service(
            builder,
            "cam/evil",
            TYPE,
            &Qos::DEFAULT,
            &iox_ros2::carried::DEFAULT_CLASSES,
            definition,
        )
        .unwrap(),
    );
    let _keep = held;
    ready_and_hold(&root.join("stranger-ready"))
}

#[test]
fn a_stranger_s_stopped_services_delay_no_import_or_export() {
    const TEST: &str = "a_stranger_s_stopped_services_delay_no_import_or_export";
    if iox_testkit::role().as_deref() == Some("stranger") {
        let root = PathBuf::from(iox_testkit::env::<String>("IOX_ROOT"));
        stranger(&root, &iox_testkit::env::<String>("STRANGER_DEFINITION"));
    }
    in_netns(TEST, |net| {
        for (p, mode) in [(net.dir.as_path(), 0o755), (net.root.as_path(), 0o1777)] {
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
        }
        let definition = Library::with_prefixes(vec![net.venv.clone()])
            .definition_text(TYPE)
            .unwrap();
        let envs = [
            ("IOX_ROOT", net.root.display().to_string()),
            ("STRANGER_DEFINITION", definition),
        ];
        let _stranger =
            StoppedStranger::start(TEST, "stranger", &envs, &net.root.join("stranger-ready"), LIMIT);
        let gw = net.gateway("gw.log", &["--import", "cam/**", "--export", "out/**"]);
        let count = (4 * MEASURE.as_secs() * RATE_HZ).to_string();
        let period = format!("{}", 1.0 / RATE_HZ as f64);
        let talk = |topic: &str| {
            net.peer(&[
                "talk-string",
                "--topic",
                topic,
                "--count",
                &count,
                "--period",
                &period,
                "--until",
                &net.done(),
            ])
        };
        let (evil_talker, good_talker) = (talk("/cam/evil"), talk("/cam/good"));
        let talking = Instant::now();
        let good = opened(net, "cam/good", || {
            bytes(net, "cam/good")
                .require_attribute("ros2/type", "std_msgs/msg/String")
                .open()
        });
        let sub = good.subscriber_builder().create().unwrap();
        receive(&sub);
        let first_after = talking.elapsed();
        let (mut last, start) = (Instant::now(), Instant::now());
        let (mut got, mut gap) = (0u64, Duration::ZERO);
        while start.elapsed() < MEASURE {
            receive(&sub);
            gap = gap.max(last.elapsed());
            last = Instant::now();
            got += 1;
        }
        // Export: a good service created now is exported at once.
        let created = Instant::now();
        let out = cdr_service(net, "out/good", "std_msgs/msg/String")
            .create()
            .unwrap();
        exported(net, "out/good");
        let export_after = created.elapsed();
        drop(out);
        net.finish();
        peer_ok(good_talker);
        peer_ok(evil_talker);
        let log = std::fs::read_to_string(net.dir.join("gw.log")).unwrap();
        eprintln!(
            "/cam/good at {RATE_HZ} Hz beside the stranger's stopped services: first sample {:.0} ms after the talkers started, then {got} in {:.1} s (about {} sent), largest gap {} ms; out/good exported {:.0} ms after it was created",
            first_after.as_secs_f64() * 1000.0,
            MEASURE.as_secs_f64(),
            MEASURE.as_secs() * RATE_HZ,
            gap.as_millis(),
            export_after.as_secs_f64() * 1000.0
        );
        // Each was tried, and its open waited for the stopped holder until its timeout.
        for evil in ["\"cam/evil\"", "\"out/evil1\""] {
            assert!(
                log.lines()
                    .any(|l| l.contains(evil) && l.contains("did not answer")),
                "the gateway tried {evil} and said why it could not:\n{log}"
            );
        }
        assert!(
            gap < Duration::from_millis(500),
            "a gap of {gap:?} on cam/good:\n{log}"
        );
        assert!(
            got >= MEASURE.as_secs() * RATE_HZ * 3 / 4,
            "only {got} samples on cam/good:\n{log}"
        );
        assert!(
            export_after < Duration::from_secs(5),
            "out/good exported after {export_after:?}:\n{log}"
        );
        stop(gw);
    });
}
