//! A live Foxglove view must not slow the robot: the publisher's rate with `iox
//! foxglove` serving a reading client, a stalled client (subscribed, then reading
//! nothing), and both, against the publisher with no viewer; side by side with the
//! nearest peer, the Foxglove SDK's own WebSocket server logging the same frames from
//! the publishing process (how a program shows its data in Foxglove without iox).
//!
//! Each case runs `--seconds` per round, cases alternated within each round (drift
//! hits all alike); the table gives medians over rounds, each rate's ratio to the same
//! side's rate with no viewer, what the reading client got per second, and what the
//! stalled client lost. The iox publisher sends `--size`-byte frames through the typed
//! loan/write/send path (`loan_slice_uninit`, `write_from_slice`, `send`) as fast as it
//! can; the SDK side calls `RawChannel::log` with the same frame. Clients are Rust
//! WebSocket clients (tungstenite) in this process: the reading one reads and drops
//! every message, the stalled one stops reading after its first sample, so the
//! server's writes to it fill the TCP window and then its queue.
//!
//! Placement: on a machine of two or more CPUs the publishing thread runs on CPU 0 and
//! everything that views (the `iox foxglove` process, the clients' threads) on CPU 1,
//! so the rates show what a viewer costs the publisher beyond sharing a core; the SDK's
//! server threads, part of the publishing process, are left to the scheduler.
//!
//! No latency floor (two processes bouncing one shared word) is given: this measures a
//! publisher's throughput, not a hop.
//!
//! `cargo build --release -p iox_cli && cargo run --release -p iox_benches --bin foxglove
//! -- [--rounds 5] [--seconds 2] [--size 1048576]` (the `iox` binary is looked for next
//! to this one; `--iox PATH` names another).

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use iox_service::{Publisher, Service};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

#[derive(Parser, Debug)]
#[command(
    about = "Publisher rate with iox foxglove serving reading and stalled clients, vs the Foxglove SDK server"
)]
struct Args {
    /// Rounds (each: every case on both sides).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Seconds each case publishes for.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Bytes per frame.
    #[arg(long, default_value_t = 1 << 20)]
    size: usize,
    /// Frames per second to publish at (0: as fast as the publisher can); the table
    /// then also shows how long each publish took (loan, write, send).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// The `iox` binary (default: next to this program).
    #[arg(long)]
    iox: Option<PathBuf>,
}

/// Who looks at the frames while they are published.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Viewer {
    None,
    Reading,
    Stalled,
    Both,
}

const VIEWERS: [Viewer; 4] = [Viewer::None, Viewer::Reading, Viewer::Stalled, Viewer::Both];
const TOPIC: &str = "/bench/frames";
const LIMIT: Duration = Duration::from_secs(30);

impl Viewer {
    fn label(self) -> &'static str {
        match self {
            Viewer::None => "no viewer",
            Viewer::Reading => "a reading client",
            Viewer::Stalled => "a stalled client",
            Viewer::Both => "a reading and a stalled client",
        }
    }
    fn reading(self) -> bool {
        matches!(self, Viewer::Reading | Viewer::Both)
    }
    fn stalled(self) -> bool {
        matches!(self, Viewer::Stalled | Viewer::Both)
    }
}

/// Runs the calling thread (`None`) or process `pid` on `cpu` only, where the machine
/// has it (module docs).
fn pin(pid: Option<u32>, cpu: usize) {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return;
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let pid = pid.and_then(|p| rustix::thread::Pid::from_raw(p as i32));
    if let Err(e) = rustix::thread::sched_setaffinity(pid, &set) {
        eprintln!("cannot pin to CPU {cpu}: {e}");
    }
}

/// A WebSocket client of a Foxglove server, subscribed to [`TOPIC`].
struct Client {
    ws: WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
}

impl Client {
    /// Connects to `port` offering `subprotocol` and subscribes; returns once the
    /// first sample arrived.
    fn subscribe(port: u16, subprotocol: &str) -> Client {
        let mut request = format!("ws://127.0.0.1:{port}").into_client_request().unwrap();
        request
            .headers_mut()
            .insert("sec-websocket-protocol", subprotocol.parse().unwrap());
        let (mut ws, _) = tungstenite::connect(request).expect("connect to the server");
        let deadline = Instant::now() + LIMIT;
        loop {
            assert!(Instant::now() < deadline, "no sample of {TOPIC} arrived");
            match ws.read().expect("read from the server") {
                Message::Text(t) => {
                    let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
                    if v["op"] == "advertise" {
                        for ch in v["channels"].as_array().unwrap() {
                            if ch["topic"] == TOPIC {
                                let sub = serde_json::json!({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": ch["id"]}]});
                                ws.send(Message::text(sub.to_string())).unwrap();
                            }
                        }
                    }
                }
                Message::Binary(_) => return Client { ws },
                _ => {}
            }
        }
    }

    /// The client's own address (as the server names it).
    fn addr(&self) -> std::net::SocketAddr {
        match self.ws.get_ref() {
            tungstenite::stream::MaybeTlsStream::Plain(s) => s.local_addr().unwrap(),
            _ => unreachable!("plain TCP"),
        }
    }

    /// Reads and drops messages until `stop`, counting them in `got`.
    fn read_until(mut self, stop: Arc<AtomicBool>, got: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = self.ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        }
        std::thread::spawn(move || {
            pin(None, 1);
            while !stop.load(Ordering::Relaxed) {
                if let Ok(Message::Binary(_)) = self.ws.read() {
                    got.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    }
}

/// `iox foxglove` on a free port: the process, its port, and its standard error.
struct Bridge {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Bridge {
    fn start(iox: &Path, root: &Path) -> Bridge {
        let mut child = Command::new(iox)
            .arg("--root")
            .arg(root)
            .args(["foxglove", "bench/*", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {}: {e} (cargo build --release -p iox_cli)",
                    iox.display()
                )
            });
        pin(Some(child.id()), 1);
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let deadline = Instant::now() + LIMIT;
        let port = loop {
            let found = log.lock().unwrap().iter().find_map(|l| {
                l.split("ws://127.0.0.1:")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            });
            if let Some(p) = found {
                break p;
            }
            assert!(Instant::now() < deadline, "iox foxglove did not start");
            std::thread::sleep(Duration::from_millis(10));
        };
        Bridge { child, port, log }
    }

    /// Samples the bridge reported dropped for the client at `addr` so far (its
    /// reports are once a second, each the client's total).
    fn dropped(&self, addr: std::net::SocketAddr) -> Option<u64> {
        let client = format!("client {addr} (");
        self.log
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|l| l.contains(&client) && l.contains("read too slowly"))
            .and_then(|l| {
                l.split(&format!("({TOPIC}: "))
                    .nth(1)?
                    .split(')')
                    .next()?
                    .parse()
                    .ok()
            })
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One case's result.
#[derive(Default, Clone, Copy)]
struct Run {
    rate: f64,
    delivered: f64,
    dropped: f64,
    /// How long one publish took: median and 99th percentile, in microseconds.
    p50: f64,
    p99: f64,
}

/// Publishes for `seconds` with `publish` while `viewer` looks through the server on
/// `port`; `dropped` says what the server reported dropped for a client, where it
/// counts drops (iox); without it, the stalled client's queue is given a second to fill.
fn run_case(
    viewer: Viewer,
    port: u16,
    subprotocol: &str,
    seconds: f64,
    rate: f64,
    mut publish: impl FnMut(),
    dropped: Option<&dyn Fn(std::net::SocketAddr) -> Option<u64>>,
) -> Run {
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicU64::new(0));
    // Before the measured run, frames go at the same rate.
    let pause = Duration::from_secs_f64(if rate > 0.0 { 1.0 / rate } else { 0.0 });
    let paced = |publish: &mut dyn FnMut()| {
        publish();
        std::thread::sleep(pause);
    };
    // The clients subscribe while frames flow (a sample must arrive to confirm).
    let warm = AtomicBool::new(true);
    let (stalled, reading) = std::thread::scope(|s| {
        let opening = s.spawn(|| {
            pin(None, 1);
            let stalled = viewer.stalled().then(|| Client::subscribe(port, subprotocol));
            let reading = viewer.reading().then(|| Client::subscribe(port, subprotocol));
            warm.store(false, Ordering::Relaxed);
            (stalled, reading)
        });
        while warm.load(Ordering::Relaxed) {
            paced(&mut publish);
        }
        opening.join().unwrap()
    });
    let reader = reading.map(|c| c.read_until(stop.clone(), got.clone()));
    // A stalled client's window and queue fill first, so the run measures the steady
    // state: the server dropping its oldest samples.
    let mut before = 0;
    if let Some(client) = &stalled {
        let deadline = Instant::now()
            + match dropped {
                Some(_) => LIMIT,
                None => Duration::from_secs(1),
            };
        loop {
            if let Some(n) = dropped.and_then(|d| d(client.addr())) {
                before = n;
                break;
            }
            if Instant::now() >= deadline {
                assert!(dropped.is_none(), "the stalled client's queue never filled");
                break;
            }
            paced(&mut publish);
        }
    }
    let start = Instant::now();
    got.store(0, Ordering::Relaxed);
    let mut sent = 0u64;
    let mut took = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    while start.elapsed().as_secs_f64() < seconds {
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64(sent as f64 / rate);
            while Instant::now() < due {
                std::hint::spin_loop();
            }
        }
        let t = Instant::now();
        publish();
        took.saturating_record((t.elapsed().as_nanos() as u64).max(1));
        sent += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let got = got.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    if let Some(r) = reader {
        r.join().unwrap();
    }
    // The server reports drops once a second: wait for this run's last report.
    let lost = match (&stalled, dropped) {
        (Some(client), Some(d)) => {
            std::thread::sleep(Duration::from_millis(1100));
            d(client.addr()).unwrap_or(before).saturating_sub(before)
        }
        _ => 0,
    };
    drop(stalled);
    Run {
        rate: sent as f64 / elapsed,
        delivered: got as f64 / elapsed,
        dropped: lost as f64 / elapsed,
        p50: took.value_at_quantile(0.5) as f64 / 1e3,
        p99: took.value_at_quantile(0.99) as f64 / 1e3,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    let iox = args
        .iox
        .clone()
        .unwrap_or_else(|| std::env::current_exe().unwrap().parent().unwrap().join("iox"));
    let root = tempfile::tempdir().unwrap();
    let service = Service::named("bench/frames")
        .unwrap()
        .root(root.path())
        .publish_subscribe::<[u8]>()
        .max_slice_len(args.size)
        .subscriber_buffer(4)
        .create()
        .unwrap();
    let publisher: Publisher<[u8]> = service.publisher_builder().create().unwrap();
    let frame = vec![0x5au8; args.size];
    let mut publish_iox = || {
        publisher
            .loan_slice_uninit(frame.len())
            .expect("a loan: the viewer holds no chunk")
            .write_from_slice(&frame)
            .send()
            .unwrap();
    };
    let bridge = Bridge::start(&iox, root.path());

    // The peer: the SDK's server in this process, logging the same frame.
    let ctx = foxglove::Context::new();
    let sdk = ctx
        .websocket_server()
        .bind("127.0.0.1", 0)
        .start_blocking()
        .expect("start the SDK's server");
    let channel = ctx
        .channel_builder(TOPIC)
        .message_encoding("iox.raw")
        .schema(foxglove::Schema::new("bytes", "none", Vec::new()))
        .build_raw()
        .unwrap();
    let mut publish_sdk = || channel.log(&frame);
    pin(None, 0);

    let mut iox_runs: Vec<Vec<Run>> = vec![Vec::new(); VIEWERS.len()];
    let mut sdk_runs: Vec<Vec<Run>> = vec![Vec::new(); VIEWERS.len()];
    for round in 0..args.rounds {
        for (i, &viewer) in VIEWERS.iter().enumerate() {
            iox_runs[i].push(run_case(
                viewer,
                bridge.port,
                "foxglove.websocket.v1",
                args.seconds,
                args.rate,
                &mut publish_iox,
                Some(&|addr| bridge.dropped(addr)),
            ));
            // The SDK counts no drops (its per-client queue is private).
            sdk_runs[i].push(run_case(
                viewer,
                sdk.port(),
                "foxglove.sdk.v1",
                args.seconds,
                args.rate,
                &mut publish_sdk,
                None,
            ));
        }
        eprintln!("round {} of {} done", round + 1, args.rounds);
    }
    let _ = sdk.stop();

    println!(
        "publisher, {} KiB frames, {}, medians of {} rounds of {} s (in brackets: times the value with no viewer)",
        args.size / 1024,
        if args.rate > 0.0 {
            format!("at {} frames/s", args.rate)
        } else {
            "as fast as it can".into()
        },
        args.rounds,
        args.seconds
    );
    println!(
        "| viewer | iox: frames/s | iox: publish p50 / p99 us | iox: reading client got /s | iox: stalled client lost /s | SDK server in the publisher: frames/s | SDK: publish p50 / p99 us | SDK: reading client got /s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let m = |runs: &[Run], f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
    let base_iox = m(&iox_runs[0], |r| r.rate);
    let base_sdk = m(&sdk_runs[0], |r| r.rate);
    for (i, viewer) in VIEWERS.iter().enumerate() {
        let (ir, sr) = (m(&iox_runs[i], |r| r.rate), m(&sdk_runs[i], |r| r.rate));
        let opt = |on: bool, v: f64| if on { format!("{v:.0}") } else { "-".into() };
        println!(
            "| {} | {:.0} ({:.2}x) | {:.1} / {:.1} | {} | {} | {:.0} ({:.2}x) | {:.1} / {:.1} | {} |",
            viewer.label(),
            ir,
            ir / base_iox,
            m(&iox_runs[i], |r| r.p50),
            m(&iox_runs[i], |r| r.p99),
            opt(viewer.reading(), m(&iox_runs[i], |r| r.delivered)),
            opt(viewer.stalled(), m(&iox_runs[i], |r| r.dropped)),
            sr,
            sr / base_sdk,
            m(&sdk_runs[i], |r| r.p50),
            m(&sdk_runs[i], |r| r.p99),
            opt(viewer.reading(), m(&sdk_runs[i], |r| r.delivered)),
        );
    }
}
