//! What the `iox foxglove` tests share (`tests/foxglove.rs`, `tests/foxglove_clients.rs`):
//! the node client (`client.mjs`, beside this file) run to its end or live, `iox
//! foxglove` started on a free port with its standard error collected, and publishers
//! of every kind of service. Not every test file uses every helper.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iox_ros2::carried::ros_service;
use iox_ros2::cdr::Writer;
use iox_ros2::image::{IMAGE_TYPE, ImageHeader};
use iox_ros2::pointcloud::{POINTCLOUD2_TYPE, PointCloud2Header, PointFieldEntry};
use iox_service::tensor::TensorLayout;
use iox_service::{Service, ZeroCopySafe};
use iox_testkit::{Reaped, wait_until};
use serde_json::Value;

pub const LIMIT: Duration = Duration::from_secs(30);

#[derive(ZeroCopySafe, Clone, Copy, Debug)]
#[repr(C)]
#[iox(type_name = "Reading")]
pub struct Reading {
    pub seq: u64,
    pub value: f64,
    pub big: i64,
    pub flags: [u8; 8],
}

#[derive(ZeroCopySafe, Clone, Copy, Debug)]
#[repr(C)]
#[iox(type_name = "Pair")]
pub struct Pair {
    pub a: f32,
    pub b: f32,
}

#[derive(ZeroCopySafe, Clone, Copy, Debug)]
#[repr(C)]
#[iox(type_name = "Wide")]
pub struct Wide {
    pub id: u128,
    pub x: f64,
    pub y: f64,
}

/// The client's directory, if node and its packages are here; else says skipped.
pub fn client_or_skip(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/foxglove");
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        iox_testkit::skip(test, "IOX_REQUIRE_FOXGLOVE", "node is not installed");
        return None;
    }
    if !dir.join("node_modules/@foxglove/ws-protocol").is_dir() {
        iox_testkit::skip(
            test,
            "IOX_REQUIRE_FOXGLOVE",
            "the test client's packages are not installed (npm ci --prefix cli/tests/foxglove)",
        );
        return None;
    }
    Some(dir)
}

/// A running `iox foxglove`: its port, and its standard error as lines so far.
pub struct Bridge {
    pub child: Reaped,
    pub port: u16,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Bridge {
    pub fn start(root: &Path, args: &[&str]) -> Bridge {
        Bridge::spawn(Command::new(env!("CARGO_BIN_EXE_iox")), root, args)
    }

    /// `command` (an `iox`, maybe run as another user) serving on a free port of
    /// 127.0.0.1, or where `args` say (`--listen` first).
    pub fn spawn(mut command: Command, root: &Path, args: &[&str]) -> Bridge {
        let listen: &[&str] = if args.first() == Some(&"--listen") {
            &[]
        } else {
            &["--listen", "127.0.0.1:0"]
        };
        let mut child = command
            .arg("--root")
            .arg(root)
            .arg("foxglove")
            .args(listen)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start iox foxglove");
        let stderr = child.stderr.take().expect("piped");
        let child = Reaped::new(child);
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let mut port = None;
        assert!(
            wait_until(LIMIT, || {
                port = log.lock().unwrap().iter().find_map(|l| {
                    let addr = l.split("ws://").nth(1)?.split_whitespace().next()?;
                    addr.parse::<std::net::SocketAddr>().ok().map(|a| a.port())
                });
                port.is_some()
            }),
            "iox foxglove did not start: {:?}",
            log.lock().unwrap()
        );
        Bridge {
            child,
            port: port.unwrap(),
            log,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    pub fn said(&self, text: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(text))
    }
}

/// The client, run to its end with `args`: its events.
pub fn client(dir: &Path, port: u16, args: &[&str]) -> Vec<Value> {
    let out = Command::new("node")
        .arg(dir.join("client.mjs"))
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("run node");
    let events = events(&out.stdout);
    assert!(
        out.status.success(),
        "client {args:?} failed: {events:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    events
}

pub fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The client started with `args`, its events read as they come.
pub fn client_live(dir: &Path, port: u16, args: &[&str]) -> (Reaped, Arc<Mutex<Vec<Value>>>) {
    let mut child = Command::new("node")
        .arg(dir.join("client.mjs"))
        .arg(port.to_string())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run node");
    let stdout = child.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                s.lock().unwrap().push(v);
            }
        }
    });
    (Reaped::new(child), seen)
}

pub fn message<'a>(events: &'a [Value], topic: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == "message" && e["topic"] == topic)
        .unwrap_or_else(|| panic!("no message of {topic} in {events:?}"))
}

pub fn string_cdr(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.string(text.as_bytes());
    w.finish();
    out
}

/// Publishes a sample of every kind every few milliseconds until `stop`.
pub fn publish_every_kind(root: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let root = root.to_owned();
    let svc = |name: &str| Service::named(name).unwrap().root(&root);
    let readings = svc("robot/reading")
        .publish_subscribe::<Reading>()
        .create()
        .unwrap();
    let pairs = svc("robot/pairs")
        .publish_subscribe::<[Pair]>()
        .max_slice_len(8)
        .create()
        .unwrap();
    let wide = svc("robot/wide").publish_subscribe::<Wide>().create().unwrap();
    let camera = ros_service(
        svc("camera/image")
            .publish_subscribe::<[u8]>()
            .user_header::<ImageHeader>(),
        IMAGE_TYPE,
        "",
    )
    .create()
    .unwrap();
    let lidar = ros_service(
        svc("lidar/points")
            .publish_subscribe::<[u8]>()
            .user_header::<PointCloud2Header>(),
        POINTCLOUD2_TYPE,
        "",
    )
    .create()
    .unwrap();
    let chatter = ros_service(
        svc("chatter").publish_subscribe::<[u8]>(),
        "std_msgs/msg/String",
        "string data\n",
    )
    .create()
    .unwrap();
    let frames = svc("tensor/frame")
        .publish_subscribe::<[u8]>()
        .max_slice_len(4 * 6 * 3)
        .tensors(true)
        .create()
        .unwrap();
    let weights = svc("tensor/weights")
        .publish_subscribe::<[f32]>()
        .max_slice_len(6)
        .tensors(true)
        .create()
        .unwrap();
    let blob = svc("blob")
        .publish_subscribe::<[u8]>()
        .max_slice_len(64)
        .create()
        .unwrap();
    std::thread::spawn(move || {
        let readings = readings.publisher_builder().create().unwrap();
        let pairs = pairs.publisher_builder().create().unwrap();
        let wide = wide.publisher_builder().create().unwrap();
        let camera = camera.publisher_builder().create().unwrap();
        let lidar = lidar.publisher_builder().create().unwrap();
        let chatter = chatter.publisher_builder().create().unwrap();
        let frames = frames.tensor_publisher_builder().create().unwrap();
        let weights = weights.tensor_publisher_builder().create().unwrap();
        let blob = blob.publisher_builder().create().unwrap();
        let pixels: Vec<u8> = (0..4 * 6 * 3).map(|i| i as u8).collect();
        let hello = string_cdr("hello foxglove");
        let point = PointFieldEntry::new("x", 0, 7, 1).unwrap();
        let cloud = PointCloud2Header::new(1, 2, 4, &[point], "lidar").unwrap();
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            seq += 1;
            readings
                .loan_uninit()
                .unwrap()
                .write_payload(Reading {
                    seq,
                    value: 0.25,
                    big: -(1 << 60) - 1,
                    flags: [1, 2, 3, 4, 5, 6, 7, 8],
                })
                .send()
                .unwrap();
            pairs
                .loan_slice_uninit(2)
                .unwrap()
                .write_from_slice(&[Pair { a: 1.5, b: -2.0 }; 2])
                .send()
                .unwrap();
            wide.loan_uninit()
                .unwrap()
                .write_payload(Wide {
                    id: (1 << 100) + 7,
                    x: f64::INFINITY,
                    y: -0.5,
                })
                .send()
                .unwrap();
            camera
                .loan_slice_uninit(pixels.len())
                .unwrap()
                .write_header(ImageHeader::new(4, 6, 18, "rgb8", "cam").unwrap())
                .write_from_slice(&pixels)
                .send()
                .unwrap();
            lidar
                .loan_slice_uninit(8)
                .unwrap()
                .write_header(cloud)
                .write_from_slice(&[0, 0, 128, 63, 0, 0, 0, 64])
                .send()
                .unwrap();
            chatter
                .loan_slice_uninit(hello.len())
                .unwrap()
                .write_from_slice(&hello)
                .send()
                .unwrap();
            let layout = TensorLayout::contiguous(iox_service::tensor::DType::U8, &[4, 6, 3]).unwrap();
            frames.loan_tensor(&layout).unwrap().send_bytes(&pixels).unwrap();
            let layout = TensorLayout::contiguous(iox_service::tensor::DType::F32, &[2, 3]).unwrap();
            let values: Vec<u8> = [0.5f32, 1.0, 1.5, 2.0, 2.5, -3.0]
                .iter()
                .flat_map(|f| f.to_ne_bytes())
                .collect();
            weights.loan_tensor(&layout).unwrap().send_bytes(&values).unwrap();
            blob.loan_slice_uninit(3)
                .unwrap()
                .write_from_slice(&[0xde, 0xad, 0x01])
                .send()
                .unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
    })
}

/// The live subscriber count of service `name`.
pub fn subscribers(root: &Path, name: &str) -> usize {
    iox_service::inspect::inspect_in(root, name)
        .map(|i| i.live_ports().1)
        .unwrap_or(usize::MAX)
}

/// `iox foxglove` started as `uid` (by setpriv) with `args`.
pub fn bridge_as(uid: u32, root: &Path, args: &[&str]) -> Bridge {
    let mut command = Command::new("setpriv");
    command
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
            "--".into(),
        ])
        .arg(env!("CARGO_BIN_EXE_iox"));
    Bridge::spawn(command, root, args)
}

/// The probe's verdict (`open`, or the refusal's status) for a client run as `uid`.
pub fn probe_as(dir: &Path, port: u16, uid: u32) -> Value {
    let out = Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
            "--".into(),
        ])
        .arg("node")
        .arg(dir.join("client.mjs"))
        .args([&port.to_string(), "probe"])
        .output()
        .unwrap();
    events(&out.stdout)
        .pop()
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stderr)))
}
