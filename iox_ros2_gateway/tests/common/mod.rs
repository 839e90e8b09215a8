//! What the gateway's tests share: running a test inside its own network namespace
//! with only loopback up (the test binary started again under `unshare --net`), the
//! gateway and rclpy peers as child processes, and bounded polling of the gateway's
//! status lines. Needs the ROS venv (`IOX_ROS_VENV`) and root; skips without them
//! unless `IOX_REQUIRE_ROS=1`.

#![allow(dead_code)] // each test file uses its part

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use iox_ros2::cdr::{Reader, Writer};
use iox_service::{PubSubService, Service, Subscriber};
use iox_testkit::Reaped;

pub const ROLE: &str = "in-netns";
pub const LIMIT: Duration = Duration::from_secs(60);

/// The venv and root this test needs, or `None` after saying why it skips.
pub fn requirements(test: &str) -> Option<PathBuf> {
    let Some(venv) = std::env::var_os("IOX_ROS_VENV").map(PathBuf::from) else {
        iox_testkit::skip(
            test,
            "IOX_REQUIRE_ROS",
            "IOX_ROS_VENV is not set (scripts/ros-venv.sh DIR)",
        );
        return None;
    };
    if !iox_testkit::is_root() {
        iox_testkit::skip(test, "IOX_REQUIRE_ROS", "a network namespace needs root");
        return None;
    }
    Some(venv)
}

/// Runs `scenario` in a new network namespace with its own `/dev/shm` (this test,
/// started again under `unshare --net --mount`), or is that run. Its own `/dev/shm`:
/// Fast DDS's shared-memory transport names its segments there by port number, and
/// tests running side by side in separate network namespaces use the same ports, so
/// with one `/dev/shm` they would take each other's segments (and messages).
pub fn in_netns(test: &str, scenario: impl FnOnce(&Net)) {
    if iox_testkit::role().as_deref() == Some(ROLE) {
        let up = Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .expect("run ip");
        assert!(up.success(), "ip link set lo up: {up}");
        let shm = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"])
            .status()
            .expect("run mount");
        assert!(shm.success(), "mount a tmpfs on /dev/shm: {shm}");
        let venv = PathBuf::from(std::env::var_os("IOX_ROS_VENV").unwrap());
        let dir = tempfile::tempdir().unwrap();
        let net = Net {
            root: dir.path().join("root"),
            dir: dir.path().to_owned(),
            venv,
        };
        std::fs::create_dir(&net.root).unwrap();
        scenario(&net);
        return;
    }
    if requirements(test).is_none() {
        return;
    }
    let inner = iox_testkit::self_command(test, ROLE, &[]);
    let status = Command::new("unshare")
        .args(["--net", "--mount"])
        .arg("--")
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("run unshare (util-linux)");
    assert!(status.success(), "{test} in its network namespace: {status}");
}

/// One test's namespace: its iox root, a scratch directory, the ROS venv.
pub struct Net {
    pub root: PathBuf,
    pub dir: PathBuf,
    pub venv: PathBuf,
}

impl Net {
    /// Starts `iox-ros2` with `args`; its standard error goes to `<dir>/<log>`.
    pub fn gateway(&self, log: &str, args: &[&str]) -> Reaped {
        let log = std::fs::File::create(self.dir.join(log)).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_iox-ros2"))
            .args(["--status-interval", "1", "--root"])
            .arg(&self.root)
            .args(args)
            .env("AMENT_PREFIX_PATH", &self.venv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start iox-ros2");
        Reaped::new(child)
    }

    /// Starts the rclpy peer (`tests/ros_peer.py`) with `args`, its output piped.
    pub fn peer(&self, args: &[&str]) -> Reaped {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ros_peer.py");
        let child = Command::new(self.venv.join("bin/python"))
            .arg(script)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the rclpy peer");
        Reaped::new(child)
    }

    /// The gateway log `log` once it holds a line for which `pred` holds; panics with
    /// the log after [`LIMIT`].
    pub fn wait_log(&self, log: &str, pred: impl Fn(&str) -> bool) -> String {
        let path = self.dir.join(log);
        let mut found = None;
        let ok = iox_testkit::wait_until(LIMIT, || {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            found = text.lines().find(|l| pred(l)).map(str::to_owned);
            found.is_some()
        });
        assert!(
            ok,
            "the gateway never logged what was expected; its log:\n{}",
            std::fs::read_to_string(&path).unwrap_or_default()
        );
        found.unwrap()
    }

    /// A file the peers' `--until` waits for.
    pub fn done(&self) -> String {
        self.dir.join("done").display().to_string()
    }

    pub fn finish(&self) {
        std::fs::write(self.dir.join("done"), "").unwrap();
    }
}

/// Waits for `peer` to exit successfully; returns its standard output.
pub fn peer_ok(peer: Reaped) -> String {
    let mut child: Child = peer.into_inner();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "the rclpy peer failed ({status}); it printed:\n{out}"
    );
    out
}

/// SIGTERMs the gateway and checks it ends cleanly.
pub fn stop(gateway: Reaped) {
    let mut child = gateway.into_inner();
    // SAFETY: kill(2) on our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "the gateway ends cleanly on SIGTERM: {status}");
}

/// Opens `name` once the gateway has created it.
pub fn opened<H: iox_service::UserHeader>(
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
pub fn exported(net: &Net, name: &str) {
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

pub fn bytes(net: &Net, name: &str) -> iox_service::PubSubBuilder<[u8]> {
    Service::named(name)
        .unwrap()
        .root(&net.root)
        .publish_subscribe::<[u8]>()
}

/// A CDR service the test creates, as a program that records its ROS type does.
pub fn cdr_service(net: &Net, name: &str, type_name: &str) -> iox_service::PubSubBuilder<[u8]> {
    bytes(net, name)
        .chunk_sizes(&[4096])
        .attribute("ros2/type", type_name)
}

/// The text of a `std_msgs/msg/String` CDR message.
pub fn string_of(cdr: &[u8]) -> String {
    let mut r = Reader::new(cdr).unwrap();
    String::from_utf8(r.string("data").unwrap().to_vec()).unwrap()
}

pub fn string_cdr(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.string(text.as_bytes());
    w.finish();
    out
}

pub fn receive<P: iox_service::Payload + ?Sized, H: iox_service::UserHeader>(
    sub: &Subscriber<P, H>,
) -> iox_service::Sample<P, H> {
    sub.receive_timeout(LIMIT)
        .unwrap()
        .expect("a sample within the limit")
}

pub fn pattern(n: usize, seq: u32) -> Vec<u8> {
    (0..n).map(|i| (i as u64 * 7 + seq as u64) as u8).collect()
}
