//! The bridge against plain Zenoh, side by side, one run:
//!
//! `cargo run --release -p iox_zenoh --example bridge_bench`
//!
//! - Latency: ping-pong, reported as one-way (round trip / 2), median and p99.
//!   Plain: Zenoh session A puts `ping`, session B's subscriber puts the payload back on
//!   `pong` (zero-copy, the received `ZBytes`; `--plain-echo copy` writes it into a new
//!   buffer instead, the same work as the bridge side's echo, which writes it into a new
//!   loan: on this VM both measure the same at 64 KiB). Bridge: an iox publisher on host A
//!   (root A) -> bridge A -> Zenoh -> bridge B -> iox subscriber on host B, which
//!   publishes the same bytes on `pong` (one copy into a loan, as an iox program
//!   would) -> bridge B -> bridge A -> the subscriber on host A.
//! - Throughput: payload bytes received per second at B, after 1.5 s of the same
//!   traffic unmeasured (steady state: every pool chunk and Zenoh buffer touched once).
//!   Plain: A puts with `CongestionControl::Block` as fast as Zenoh takes it, two
//!   producers: one writes each payload into a fresh buffer (as the iox publisher
//!   writes each loan, and as the latency runs do), one puts the same prebuilt buffer
//!   again (a reference count per put, no payload written). Bridge: an iox publisher
//!   never blocks, so A keeps at most [`window`] samples (16384 up to 4 KiB, 8 above) between its send and B's
//!   reader (a window, as any loss-free sender over a non-blocking hop needs); without
//!   it the publisher would spend a core writing samples the bridge can only drop.
//!   `cargo run --release -p iox_zenoh --example bridge_bench -- --only throughput
//!   --sizes 16777216` runs a part; `--only latency --repeat 7` alternates plain and
//!   bridge seven times per size and reports the median of the pairs' ratios.
//!
//! Everything on 127.0.0.1 TCP, explicit endpoints, no scouting; sizes 8 B, 64 KiB,
//! 16 MiB. Copies per sample on the bridge path, beside Zenoh's own: 0 on export (the
//! put's buffer is the sample), 1 on import (Zenoh's buffer into a loaned chunk).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use iox_service::{PubSubService, Service};
use iox_zenoh::{Bridge, Options};
use zenoh::Wait;
use zenoh::qos::CongestionControl;

const SIZES: [usize; 3] = [8, 64 << 10, 16 << 20];
/// Samples in flight at most in the bridge throughput run, per payload size: the
/// subscriber buffer of its service ([`throughput_service`]), so no queue on the way
/// overflows. Small samples need a deep window to fill the path: a window of 8 capped
/// 8 B at 8 samples per round trip (0.6 MB/s), whatever the bridge can do; on this
/// 2-vCPU VM 8 B measured 4.2 MB/s with 1024, 6.4 with 4096, 6.7-8.7 with 16384
/// (the stages then run in longer bursts, fewer wake-ups per sample). Large samples
/// fill the path with a few.
fn window(len: usize) -> u64 {
    if len <= 4096 { 16384 } else { 8 }
}
/// Sending before the throughput is measured.
const WARM_UP: Duration = Duration::from_millis(1500);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn zconfig(listen: Option<u16>, connect: Option<u16>) -> zenoh::Config {
    let mut c = zenoh::Config::default();
    c.insert_json5("scouting/multicast/enabled", "false").unwrap();
    if let Some(p) = listen {
        c.insert_json5("listen/endpoints", &format!("[\"tcp/127.0.0.1:{p}\"]"))
            .unwrap();
    }
    if let Some(p) = connect {
        c.insert_json5("connect/endpoints", &format!("[\"tcp/127.0.0.1:{p}\"]"))
            .unwrap();
    }
    c
}

fn rounds(len: usize) -> usize {
    match len {
        8 => 5000,
        l if l <= 64 << 10 => 2000,
        _ => 50,
    }
}

fn report(hist: &Histogram<u64>) -> (f64, f64) {
    (
        hist.value_at_quantile(0.5) as f64 / 1000.0,
        hist.value_at_quantile(0.99) as f64 / 1000.0,
    )
}

/// How the plain Zenoh echo makes its reply.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Echo {
    /// Writes the received bytes into a new buffer and puts that: the same work as
    /// the bridge's echo program, which writes them into a new loan.
    Copy,
    /// Puts the received buffer itself back (no copy; no iox program can do this
    /// across two services, so the two echoes then do different work).
    Forward,
}

/// Plain Zenoh ping-pong: one-way latencies in ns.
fn plain_latency(len: usize, echo: Echo) -> Histogram<u64> {
    let port = free_port();
    let a = zenoh::open(zconfig(Some(port), None)).wait().unwrap();
    let b = zenoh::open(zconfig(None, Some(port))).wait().unwrap();
    let b2 = b.clone();
    let _echo = b
        .declare_subscriber("bench/ping")
        .callback(move |s| {
            let reply = match echo {
                Echo::Copy => zenoh::bytes::ZBytes::from(s.payload().to_bytes().into_owned()),
                Echo::Forward => s.payload().clone(),
            };
            b2.put("bench/pong", reply)
                .congestion_control(CongestionControl::Block)
                .wait()
                .unwrap();
        })
        .wait()
        .unwrap();
    let pong = a.declare_subscriber("bench/pong").wait().unwrap();
    let data = vec![7u8; len];
    // Warm up until the route exists.
    loop {
        a.put("bench/ping", data.clone()).wait().unwrap();
        if pong.recv_timeout(Duration::from_millis(100)).unwrap().is_some() {
            break;
        }
    }
    while pong.try_recv().unwrap().is_some() {}
    let mut hist = Histogram::<u64>::new(3).unwrap();
    for _ in 0..rounds(len) {
        let t = Instant::now();
        a.put("bench/ping", data.clone())
            .congestion_control(CongestionControl::Block)
            .wait()
            .unwrap();
        let s = pong.recv().unwrap();
        assert_eq!(s.payload().len(), len);
        hist.record(t.elapsed().as_nanos() as u64 / 2).unwrap();
    }
    let _ = a.close().wait();
    let _ = b.close().wait();
    hist
}

/// How the plain Zenoh publisher makes each payload.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Producer {
    /// Puts one prebuilt buffer again and again (a reference count per put).
    Resent,
    /// Writes each payload into a fresh buffer, as the iox publisher writes each loan.
    Written,
}

/// Plain Zenoh throughput, bytes per second at the receiver.
fn plain_throughput(len: usize, secs: f64, producer: Producer) -> f64 {
    let port = free_port();
    let a = zenoh::open(zconfig(Some(port), None)).wait().unwrap();
    let b = zenoh::open(zconfig(None, Some(port))).wait().unwrap();
    let bytes = Arc::new(AtomicU64::new(0));
    let counter = bytes.clone();
    let _sub = b
        .declare_subscriber("bench/tp")
        .callback(move |s| {
            counter.fetch_add(s.payload().len() as u64, Ordering::Relaxed);
        })
        .wait()
        .unwrap();
    let data = zenoh::bytes::ZBytes::from(vec![7u8; len]);
    while bytes.load(Ordering::Relaxed) == 0 {
        a.put("bench/tp", data.clone()).wait().unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    let fresh = vec![7u8; len];
    let run_for = |d: Duration| {
        let t = Instant::now();
        while t.elapsed() < d {
            let payload = match producer {
                Producer::Resent => data.clone(),
                Producer::Written => zenoh::bytes::ZBytes::from(fresh.clone()),
            };
            a.put("bench/tp", payload)
                .congestion_control(CongestionControl::Block)
                .wait()
                .unwrap();
        }
    };
    run_for(WARM_UP);
    let (start_bytes, t) = (bytes.load(Ordering::Relaxed), Instant::now());
    run_for(Duration::from_secs_f64(secs));
    let rate = (bytes.load(Ordering::Relaxed) - start_bytes) as f64 / t.elapsed().as_secs_f64();
    let _ = a.close().wait();
    let _ = b.close().wait();
    rate
}

fn service(root: &std::path::Path, name: &str) -> PubSubService<[u8]> {
    service_with(root, name, 8, &[64, 64 << 10, 16 << 20])
}

/// The throughput run's service for payloads of `len` bytes: a buffer as deep as the
/// run's [`window`], and one chunk class that fits `len` (so a deep buffer of small
/// samples costs small chunks).
fn throughput_service(root: &std::path::Path, name: &str, len: usize) -> PubSubService<[u8]> {
    service_with(root, name, window(len) as u32, &[len.next_power_of_two().max(64)])
}

fn service_with(root: &std::path::Path, name: &str, buffer: u32, chunks: &[usize]) -> PubSubService<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .max_publishers(2)
        .max_subscribers(3)
        .subscriber_buffer(buffer)
        .max_loans(2)
        .max_held(4)
        .chunk_sizes(chunks)
        .open_or_create()
        .unwrap()
}

fn bridges(
    a: &std::path::Path,
    b: &std::path::Path,
    a_ex: &str,
    a_im: &str,
    b_ex: &str,
    b_im: &str,
) -> (Bridge, Bridge) {
    let port = free_port();
    let mk = |root: &std::path::Path, ex: &str, im: &str, listen: bool| {
        let mut o = Options::new();
        o.root = root.to_path_buf();
        o.export = [ex]
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.to_string())
            .collect();
        o.import = [im]
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.to_string())
            .collect();
        let ep = vec![format!("tcp/127.0.0.1:{port}")];
        if listen {
            o.listen = ep
        } else {
            o.connect = ep
        }
        Bridge::start(o).unwrap()
    };
    let ba = mk(a, a_ex, a_im, true);
    let bb = mk(b, b_ex, b_im, false);
    (ba, bb)
}

/// Ping-pong over two bridges: one-way latencies in ns.
fn bridge_latency(len: usize) -> Histogram<u64> {
    let (ra, rb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (ping_a, pong_a) = (service(ra.path(), "bench/ping"), service(ra.path(), "bench/pong"));
    let (ping_b, pong_b) = (service(rb.path(), "bench/ping"), service(rb.path(), "bench/pong"));
    let (ba, bb) = bridges(
        ra.path(),
        rb.path(),
        "bench/ping",
        "bench/pong",
        "bench/pong",
        "bench/ping",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let sub = ping_b.subscriber_builder().create().unwrap();
            let publisher = pong_b.publisher_builder().create().unwrap();
            while !stop.load(Ordering::Relaxed) {
                if let Some(s) = sub.receive_timeout(Duration::from_millis(50)).unwrap() {
                    publisher
                        .loan_slice_uninit(s.len())
                        .unwrap()
                        .write_from_slice(&s)
                        .send()
                        .unwrap();
                }
            }
        })
    };
    let publisher = ping_a.publisher_builder().create().unwrap();
    let pong = pong_a.subscriber_builder().create().unwrap();
    let data = vec![7u8; len];
    let send = || {
        publisher
            .loan_slice_uninit(len)
            .unwrap()
            .write_from_slice(&data)
            .send()
            .unwrap()
    };
    loop {
        send();
        if pong
            .receive_timeout(Duration::from_millis(100))
            .unwrap()
            .is_some()
        {
            break;
        }
    }
    while pong
        .receive_timeout(Duration::from_millis(300))
        .unwrap()
        .is_some()
    {}
    let mut hist = Histogram::<u64>::new(3).unwrap();
    for _ in 0..rounds(len) {
        let t = Instant::now();
        send();
        let s = pong
            .receive_timeout(Duration::from_secs(5))
            .unwrap()
            .expect("a pong was lost");
        assert_eq!(s.len(), len);
        hist.record(t.elapsed().as_nanos() as u64 / 2).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().unwrap();
    ba.stop();
    bb.stop();
    hist
}

/// Samples the throughput run's reader got, and the sender's wait for the window to
/// open. The reader wakes the sender only when it waits (a flag), so a run whose
/// window never fills costs the reader one atomic add per sample, as plain Zenoh's
/// counting callback does.
#[derive(Default)]
struct Got {
    count: AtomicU64,
    waiting: AtomicBool,
    lock: std::sync::Mutex<()>,
    changed: std::sync::Condvar,
}

impl Got {
    fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// The reader got one more sample.
    fn arrived(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        // Either the sender sees the new count, or we see it waiting (both SeqCst).
        if self.waiting.load(Ordering::SeqCst) {
            let _held = self.lock.lock().unwrap();
            self.changed.notify_one();
        }
    }

    /// Waits until fewer than `window` of `sent` samples are still on their way;
    /// false if none arrived within `limit`.
    fn wait_below(&self, sent: u64, window: u64, limit: Duration) -> bool {
        if sent - self.count() < window {
            return true;
        }
        let mut held = self.lock.lock().unwrap();
        self.waiting.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + limit;
        let open = loop {
            if sent - self.count() < window {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            held = self.changed.wait_timeout(held, left).unwrap().0;
        };
        self.waiting.store(false, Ordering::SeqCst);
        open
    }
}

/// Throughput over two bridges, bytes per second at host B.
fn bridge_throughput(len: usize, secs: f64) -> (f64, u64) {
    let (ra, rb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (tp_a, tp_b) = (
        throughput_service(ra.path(), "bench/tp", len),
        throughput_service(rb.path(), "bench/tp", len),
    );
    let (ba, bb) = bridges(ra.path(), rb.path(), "bench/tp", "", "", "bench/tp");
    let bytes = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(Got::default());
    let reader = {
        let (bytes, stop, got) = (bytes.clone(), stop.clone(), got.clone());
        std::thread::spawn(move || {
            let sub = tp_b.subscriber_builder().create().unwrap();
            while !stop.load(Ordering::Relaxed) {
                if let Some(s) = sub.receive_timeout(Duration::from_millis(50)).unwrap() {
                    bytes.fetch_add(s.len() as u64, Ordering::Relaxed);
                    got.arrived();
                }
            }
        })
    };
    let publisher = tp_a.publisher_builder().create().unwrap();
    let data = vec![7u8; len];
    let send = || {
        publisher
            .loan_slice_uninit(len)
            .unwrap()
            .write_from_slice(&data)
            .send()
            .unwrap()
    };
    while bytes.load(Ordering::Relaxed) == 0 {
        send();
        std::thread::sleep(Duration::from_millis(10));
    }
    // At most `window(len)` samples between the publisher and the reader at B (the
    // publisher never blocks; without a window it would spend a core writing samples
    // the bridge can only drop).
    let window = window(len);
    let mut sent = got.count();
    let mut run_for = |d: Duration| {
        let t = Instant::now();
        while t.elapsed() < d {
            // Far longer than a window takes to arrive (8 x 16 MiB at 1 GB/s is
            // 130 ms): a timeout here means a sample was really lost.
            if !got.wait_below(sent, window, Duration::from_secs(2)) {
                sent = got.count(); // a sample was lost: counted in the drops
            }
            send();
            sent += 1;
        }
    };
    // Steady state first: every chunk of both pools touched (page faults), as in a
    // program that has been running.
    run_for(WARM_UP);
    // Drops while measuring only (the set-up above sends before the route exists).
    let drops = || -> u64 { ba.status().exported.iter().map(|e| e.2).sum() };
    let (start_bytes, start_drops, t) = (bytes.load(Ordering::Relaxed), drops(), Instant::now());
    run_for(Duration::from_secs_f64(secs));
    let rate = (bytes.load(Ordering::Relaxed) - start_bytes) as f64 / t.elapsed().as_secs_f64();
    let dropped = drops() - start_drops;
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    ba.stop();
    bb.stop();
    (rate, dropped)
}

fn size_name(len: usize) -> String {
    match len {
        l if l >= 1 << 20 => format!("{} MiB", l >> 20),
        l if l >= 1 << 10 => format!("{} KiB", l >> 10),
        l => format!("{l} B"),
    }
}

/// The bridge against plain Zenoh, side by side.
#[derive(clap::Parser)]
struct Args {
    /// Only this part: latency or throughput.
    #[arg(long, value_parser = ["latency", "throughput"])]
    only: Option<String>,
    /// Payload sizes in bytes (default 8, 64 KiB, 16 MiB).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Seconds each throughput run is measured.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// How the plain Zenoh echo replies: `forward` (default) puts the received buffer
    /// back; `copy` writes a new buffer, as the bridge side's echo program does.
    #[arg(long, value_enum, default_value_t = Echo::Forward)]
    plain_echo: Echo,
    /// Runs per size, plain and bridge alternated; with more than one, the median of
    /// the ratios within each run is reported too.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    let sizes = if args.sizes.is_empty() {
        SIZES.to_vec()
    } else {
        args.sizes.clone()
    };
    if args.only.as_deref() != Some("throughput") {
        println!(
            "| payload | plain Zenoh one-way median / p99 (us) | bridge one-way median / p99 (us) | bridge / plain median |"
        );
        println!("|---|---|---|---|");
        let mut summary = Vec::new();
        for &len in &sizes {
            // Plain and bridge alternate, `--repeat` times: this VM's wake-up and
            // placement costs drift between runs, so a ratio is taken within a pair.
            let mut ratios = Vec::new();
            for _ in 0..args.repeat {
                let (pm, p99) = report(&plain_latency(len, args.plain_echo));
                let (bm, b99) = report(&bridge_latency(len));
                ratios.push(bm / pm);
                println!(
                    "| {} | {pm:.1} / {p99:.1} | {bm:.1} / {b99:.1} | {:.0}% |",
                    size_name(len),
                    100.0 * bm / pm
                );
            }
            ratios.sort_by(f64::total_cmp);
            summary.push((len, ratios));
        }
        println!();
        if args.repeat > 1 {
            println!("| payload | bridge / plain median, per pair: median (min - max) |");
            println!("|---|---|");
            for (len, r) in &summary {
                println!(
                    "| {} | {:.0}% ({:.0}% - {:.0}%) |",
                    size_name(*len),
                    100.0 * r[r.len() / 2],
                    100.0 * r[0],
                    100.0 * r[r.len() - 1]
                );
            }
            println!();
        }
    }
    if args.only.as_deref() != Some("latency") {
        println!(
            "| payload | plain Zenoh, written per put (MB/s) | plain Zenoh, one buffer re-sent (MB/s) | bridge (MB/s) | bridge / written | bridge / re-sent | bridge drops |"
        );
        println!("|---|---|---|---|---|---|---|");
        let mut summary = Vec::new();
        for &len in &sizes {
            let (mut by_written, mut by_resent) = (Vec::new(), Vec::new());
            for _ in 0..args.repeat {
                let w = plain_throughput(len, args.secs, Producer::Written) / 1e6;
                let r = plain_throughput(len, args.secs, Producer::Resent) / 1e6;
                let (b, dropped) = bridge_throughput(len, args.secs);
                let b = b / 1e6;
                by_written.push(b / w);
                by_resent.push(b / r);
                println!(
                    "| {} | {w:.1} | {r:.1} | {b:.1} | {:.0}% | {:.0}% | {dropped} |",
                    size_name(len),
                    100.0 * b / w,
                    100.0 * b / r
                );
            }
            by_written.sort_by(f64::total_cmp);
            by_resent.sort_by(f64::total_cmp);
            summary.push((len, by_written, by_resent));
        }
        println!();
        if args.repeat > 1 {
            println!(
                "| payload | bridge / written, per run: median (min - max) | bridge / re-sent: median (min - max) |"
            );
            println!("|---|---|---|");
            let cell = |r: &[f64]| {
                format!(
                    "{:.0}% ({:.0}% - {:.0}%)",
                    100.0 * r[r.len() / 2],
                    100.0 * r[0],
                    100.0 * r[r.len() - 1]
                )
            };
            for (len, w, r) in &summary {
                println!("| {} | {} | {} |", size_name(*len), cell(w), cell(r));
            }
            println!();
        }
    }
    println!("copies per sample on the bridge path (beside Zenoh's own serialisation): export 0, import 1");
}
