//! `ros2hop`: one hop of a `sensor_msgs/msg/Image` between two processes (a camera node
//! and an inference node), ROS 2 against iox, in one run: rclpy -> rclpy over Fast DDS
//! (ROS 2's default middleware) with its default transports and with
//! `FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA` on both sides; rclpy -> `iox-ros2` -> an iox
//! subscriber (Rust), the rclpy camera with each of those settings (the gateway with its
//! own default, LARGE_DATA); with `--py-venv`: the one-line path (`iox.ros2.Publisher`
//! -> `iox.ros2.Subscription`, the camera publishing an rclpy `Image` object, the
//! inference node taking it in place) and iox -> iox (Python, written in place); and
//! iox -> iox (Rust); at each size (1 MiB and 1080p rgb8 by default), paced (`--rate`,
//! 30 Hz by default) and as fast as they go (`--flat`). One-way latency from the send time each image carries
//! in its header stamp (CLOCK_MONOTONIC, one machine; taken when the image is ready to
//! go: an rclpy message built, an iox loan written in place), median and p99, with each
//! median's ratio to rclpy -> rclpy's; and the floor (one shared word bounced between
//! two processes) from `pingpong` in the same run.
//!
//! ```text
//! cargo build --release -p iox_benches --bins -p iox_ros2_gateway
//! target/release/ros2hop --ros-venv DIR [--py-venv DIR] [--sizes 1048576,8388608]
//! ```
//!
//! DDS discovers by multicast: the benchmark starts itself again inside a network
//! namespace with only loopback up (`unshare --net`, root), so nothing it sends leaves
//! the machine's loopback. `--ros-venv` is a venv from `scripts/ros-venv.sh`;
//! `--py-venv` one with the `iox` Python package (`scripts/python-tests.sh` makes one
//! with `IOX_PY_VENV=DIR`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use iox_ros2::image::ImageHeader;
use iox_service::{OpenError, Service};

#[derive(Parser, Clone)]
#[command(about = "One image hop between two processes: ROS 2 (rclpy, Fast DDS) against iox")]
struct Args {
    /// Venv with ROS 2's rclpy (scripts/ros-venv.sh DIR); default $IOX_ROS_VENV.
    #[arg(long)]
    ros_venv: Option<PathBuf>,
    /// Venv with the iox Python package, for the Python iox hop.
    #[arg(long)]
    py_venv: Option<PathBuf>,
    /// Image sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize << 20, 1920 * 1080 * 3])]
    sizes: Vec<usize>,
    /// Timed images per case.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Images per second in the paced runs.
    #[arg(long, default_value_t = 30.0)]
    rate: f64,
    /// Also run every case as fast as it goes (throughput).
    #[arg(long)]
    flat: bool,
    /// Internal: the role of a child process (iox-pub SIZE COUNT RATE).
    #[arg(long, hide = true, num_args = 4)]
    role: Vec<String>,
}

const INSIDE: &str = "IOX_ROS2HOP_NETNS";

fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Latencies (ns) of one case, and its receive rate.
struct Result {
    lat: Vec<u64>,
    rate: f64,
}

impl Result {
    fn pct(&self, p: f64) -> f64 {
        let mut v = self.lat.clone();
        v.sort_unstable();
        if v.is_empty() {
            return f64::NAN;
        }
        v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
    }
}

fn parse(out: &str) -> Result {
    let mut lat = Vec::new();
    let mut rate = 0.0;
    for line in out.lines() {
        if let Some(v) = line.strip_prefix("lat ") {
            lat.push(v.trim().parse().unwrap_or(0));
        } else if let Some(v) = line.strip_prefix("rate ") {
            rate = v.trim().parse().unwrap_or(0.0);
        }
    }
    Result { lat, rate }
}

fn hop_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ros2/hop.py")
}

/// Fast DDS's setting for large samples (UDP for discovery only, then SHM or TCP).
const LARGE_DATA: (&str, &str) = ("FASTDDS_BUILTIN_TRANSPORTS", "LARGE_DATA");

fn python(venv: &Path, args: &[String], root: &Path) -> Child {
    python_env(venv, args, root, None)
}

fn python_env(venv: &Path, args: &[String], root: &Path, env: Option<(&str, &str)>) -> Child {
    let mut cmd = Command::new(venv.join("bin/python"));
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    cmd.arg(hop_py())
        .args(args)
        .env("IOX_ROOT", root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start python")
}

fn output(child: Child) -> String {
    let out = child.wait_with_output().expect("wait");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn common(size: usize, count: usize, rate: f64) -> Vec<String> {
    [
        "--size",
        &size.to_string(),
        "--count",
        &count.to_string(),
        "--rate",
        &rate.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

fn rclpy_to_rclpy(
    a: &Args,
    venv: &Path,
    size: usize,
    rate: f64,
    root: &Path,
    env: Option<(&str, &str)>,
) -> Result {
    let mut sub_args = vec!["rclpy-sub".to_string()];
    sub_args.extend(common(size, a.count, rate));
    let sub = python_env(venv, &sub_args, root, env);
    let mut pub_args = vec!["rclpy-pub".to_string()];
    pub_args.extend(common(size, a.count, rate));
    let publisher = python_env(venv, &pub_args, root, env);
    let r = parse(&output(sub));
    let _ = output(publisher);
    r
}

/// Receives timed images on iox service `name` (header stamp = send time).
fn iox_receive(
    name: &str,
    size: usize,
    count: usize,
    root: &Path,
    create: bool,
    ready: impl FnOnce(),
) -> Result {
    let builder = || {
        Service::named(name)
            .unwrap()
            .root(root)
            .publish_subscribe::<[u8]>()
            .user_header::<ImageHeader>()
    };
    let service = if create {
        builder()
            .max_slice_len(size)
            .create()
            .expect("create the bench service")
    } else {
        let start = Instant::now();
        loop {
            match builder().open() {
                Ok(s) => break s,
                Err(OpenError::DoesNotExist(_)) if start.elapsed() < Duration::from_secs(60) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(e) => panic!("open {name}: {e}"),
            }
        }
    };
    let sub = service.subscriber_builder().create().expect("subscriber");
    ready();
    let (mut lat, mut times) = (Vec::new(), Vec::new());
    let mut last = Instant::now();
    while lat.len() < count && last.elapsed() < Duration::from_secs(if lat.is_empty() { 60 } else { 3 }) {
        // Blocking, as the other cases' subscribers do: a spinning reader would take a
        // core from the processes it measures.
        if let Some(s) = sub.receive_timeout(Duration::from_millis(100)).expect("receive") {
            let now = now_ns();
            let h = s.user_header();
            if h.sec >= 0 {
                lat.push(now.saturating_sub(h.sec as u64 * 1_000_000_000 + h.nanosec as u64));
                times.push(now);
                last = Instant::now();
            }
        }
    }
    let rate = match (times.first(), times.last()) {
        (Some(f), Some(l)) if l > f => (times.len() - 1) as f64 / ((l - f) as f64 / 1e9),
        _ => 0.0,
    };
    Result { lat, rate }
}

/// The rclpy camera and the gateway, both with `camera_env` (every node of a graph
/// must use the same Fast DDS transports).
fn rclpy_to_gateway_to_iox(
    a: &Args,
    venv: &Path,
    size: usize,
    rate: f64,
    root: &Path,
    camera_env: Option<(&str, &str)>,
) -> Result {
    let exe = std::env::current_exe().unwrap();
    let gateway = exe.parent().unwrap().join("iox-ros2");
    assert!(
        gateway.exists(),
        "{} is not built (cargo build --release -p iox_ros2_gateway)",
        gateway.display()
    );
    let mut gw = Command::new(&gateway);
    if let Some((k, v)) = camera_env {
        gw.env(k, v);
    }
    let mut gw = gw
        .args(["--import", "bench/**", "--status-interval", "0", "--ros-prefix"])
        .arg(venv)
        .arg("--root")
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start iox-ros2");
    let mut pub_args = vec!["rclpy-pub".to_string()];
    pub_args.extend(common(size, a.count, rate));
    let publisher = python_env(venv, &pub_args, root, camera_env);
    let r = iox_receive("bench/img", size, a.count, root, false, || {});
    let _ = output(publisher);
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(gw.id() as libc::pid_t, libc::SIGTERM) };
    let _ = gw.wait();
    r
}

fn iox_to_iox_rust(a: &Args, size: usize, rate: f64, root: &Path) -> Result {
    let mut child = None;
    let r = iox_receive("bench/rust", size, a.count, root, true, || {
        child = Some(
            Command::new(std::env::current_exe().unwrap())
                .arg("--role")
                .args([
                    "iox-pub",
                    &size.to_string(),
                    &a.count.to_string(),
                    &rate.to_string(),
                ])
                .env("IOX_ROOT", root)
                .spawn()
                .expect("start the publisher"),
        );
    });
    let _ = child.unwrap().wait();
    r
}

/// `iox-pub` -> `iox-sub` (written in place), or the one-line ports: `ros2-pub` (an
/// rclpy message published) or `ros2-loan` (written in place) -> `ros2-sub`.
fn iox_to_iox_python(a: &Args, venv: &Path, size: usize, rate: f64, root: &Path, publish: &str) -> Result {
    let (subscribe, topic) = match publish {
        "iox-pub" => ("iox-sub", "bench/py"),
        _ => ("ros2-sub", "bench/ros2"),
    };
    let mut sub_args = vec![subscribe.to_string(), "--topic".into(), topic.into()];
    sub_args.extend(common(size, a.count, rate));
    let mut sub = python(venv, &sub_args, root);
    let mut reader = BufReader::new(sub.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let mut pub_args = vec![publish.to_string(), "--topic".into(), topic.into()];
    pub_args.extend(common(size, a.count, rate));
    let publisher = python(venv, &pub_args, root);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let _ = sub.wait();
    let _ = output(publisher);
    parse(&rest)
}

/// The child publisher of the Rust iox hop.
fn iox_pub(role: &[String]) {
    let size: usize = role[1].parse().unwrap();
    let count: usize = role[2].parse().unwrap();
    let rate: f64 = role[3].parse().unwrap();
    let service = Service::named("bench/rust")
        .unwrap()
        .publish_subscribe::<[u8]>()
        .user_header::<ImageHeader>()
        .open()
        .expect("open the bench service");
    let publisher = service.publisher_builder().create().unwrap();
    let pixels = vec![0u8; size];
    let mut header = ImageHeader::new(1, size as u32, size as u32, "mono8", "").unwrap();
    let start = Instant::now();
    for i in 0..10 + count {
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            while Instant::now() < due {
                std::thread::sleep((due - Instant::now()).min(Duration::from_millis(1)));
            }
        }
        header.sec = -1;
        let loan = loop {
            match publisher.loan_slice_uninit(size) {
                Ok(l) => break l,
                Err(_) => std::thread::yield_now(),
            }
        };
        // Written in place (as a camera driver would), stamped once complete.
        let mut image = loan.write_header(header).write_from_slice(&pixels);
        if i >= 10 {
            let t = now_ns();
            let h = image.user_header_mut();
            (h.sec, h.nanosec) = ((t / 1_000_000_000) as i32, (t % 1_000_000_000) as u32);
        }
        image.send().unwrap();
    }
}

fn floor() -> String {
    let exe = std::env::current_exe().unwrap();
    let pingpong = exe.parent().unwrap().join("pingpong");
    let out = Command::new(pingpong)
        .args([
            "--only",
            "latency",
            "--sizes",
            "8",
            "--rounds",
            "1",
            "--quick",
            "--csv",
            "/dev/null",
        ])
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains("floor"))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("(no floor: pingpong did not run: {e})"),
    }
}

fn main() {
    let a = Args::parse();
    if !a.role.is_empty() {
        iox_pub(&a.role);
        return;
    }
    let venv = a
        .ros_venv
        .clone()
        .or_else(|| std::env::var_os("IOX_ROS_VENV").map(PathBuf::from))
        .expect("give --ros-venv DIR (scripts/ros-venv.sh DIR)");
    if std::env::var_os(INSIDE).is_none() {
        let status = Command::new("unshare")
            .args(["--net", "--"])
            .arg(std::env::current_exe().unwrap())
            .args(std::env::args_os().skip(1))
            .env(INSIDE, "1")
            .status()
            .expect("unshare (util-linux; needs root)");
        std::process::exit(status.code().unwrap_or(1));
    }
    let up = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .expect("ip");
    assert!(up.success(), "ip link set lo up");
    println!("ros2hop: one image hop, one-way latency (us) and receive rate, in a loopback-only namespace");
    println!("floor (pingpong, 8 B, same run): {}", floor());
    let mut modes = vec![a.rate];
    if a.flat {
        modes.push(0.0);
    }
    println!(
        "{:>9} {:>9} {:<28} {:>10} {:>10} {:>12} {:>12}",
        "size", "rate", "case", "median", "p99", "vs rclpy", "received/s"
    );
    for &size in &a.sizes {
        for &rate in &modes {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let base = rclpy_to_rclpy(&a, &venv, size, rate, root, None);
            let mut rows = vec![(
                "rclpy -> rclpy",
                base.pct(0.5),
                base.pct(0.99),
                base.rate,
                base.lat.len(),
            )];
            let large = rclpy_to_rclpy(&a, &venv, size, rate, root, Some(LARGE_DATA));
            rows.push((
                "rclpy -> rclpy (LARGE_DATA)",
                large.pct(0.5),
                large.pct(0.99),
                large.rate,
                large.lat.len(),
            ));
            let g = rclpy_to_gateway_to_iox(&a, &venv, size, rate, root, None);
            rows.push((
                "rclpy -> iox-ros2 -> iox",
                g.pct(0.5),
                g.pct(0.99),
                g.rate,
                g.lat.len(),
            ));
            let g = rclpy_to_gateway_to_iox(&a, &venv, size, rate, root, Some(LARGE_DATA));
            rows.push((
                "rclpy -> iox-ros2 (LARGE_DATA)",
                g.pct(0.5),
                g.pct(0.99),
                g.rate,
                g.lat.len(),
            ));
            let r = iox_to_iox_rust(&a, size, rate, root);
            rows.push(("iox -> iox (Rust)", r.pct(0.5), r.pct(0.99), r.rate, r.lat.len()));
            if let Some(py) = &a.py_venv {
                for (publish, case) in [
                    ("ros2-pub", "iox.ros2 publish(msg) (Py)"),
                    ("ros2-loan", "iox.ros2 loan_image (Py)"),
                ] {
                    let o = iox_to_iox_python(&a, py, size, rate, root, publish);
                    rows.push((case, o.pct(0.5), o.pct(0.99), o.rate, o.lat.len()));
                }
                let p = iox_to_iox_python(&a, py, size, rate, root, "iox-pub");
                rows.push((
                    "iox -> iox (Python)",
                    p.pct(0.5),
                    p.pct(0.99),
                    p.rate,
                    p.lat.len(),
                ));
            }
            let rate_name = if rate > 0.0 {
                format!("{rate} Hz")
            } else {
                "flat".into()
            };
            for (case, median, p99, received, n) in rows {
                println!(
                    "{:>9} {:>9} {:<28} {:>10.1} {:>10.1} {:>11.3}x {:>12.1}   ({n} timed)",
                    iox_benches::report::size_name(size),
                    rate_name,
                    case,
                    median,
                    p99,
                    median / base.pct(0.5),
                    received
                );
            }
        }
    }
}
