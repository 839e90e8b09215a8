//! Side-by-side IPC benchmark: iox vs iceoryx2 vs a Unix socket, in one run.
//!
//! Latency: a ping-pong between two processes (this program started again as the
//! follower), busy-polling, for payloads 8 B .. 16 MiB; one-way latency = round trip
//! / 2, median / p99 / p99.9 from an HdrHistogram after a warm-up; each size in
//! `--rounds` rounds (five; one in `--quick`) alternating the transports, merged per
//! transport. At 8 B the rotation also holds the floor (two processes bouncing one
//! shared word, see `floor_transport`) and the typed path (`u64` loans written and
//! sent, iox's and iceoryx2's, see `typed_transport`), and the summary gives every
//! transport's median and p99 as a multiple of the floor's median from the same run. Throughput: one
//! publisher process streaming to one subscriber for a fixed time. Pinning: the cost
//! of a pinned `create()` per MiB, and the first sample after it vs the median.
//! `--sizes` restricts the payload sizes (latency and throughput).
//!
//! `cargo run --release -p iox_benches --bin pingpong -- [--quick] [--sizes 8,64]
//! [--rounds N] [--only latency,throughput,pinning] [--csv PATH] [--header] [--guarded]`

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use header_transport::{Iceoryx2HeaderEndpoint, IoxHeaderEndpoint};
use iox_benches::cpp_transport;
use iox_benches::endpoint::{self, Endpoint, STOP};
use iox_benches::floor_transport::{self, FloorEndpoint};
use iox_benches::iceoryx2_transport::Iceoryx2Endpoint;
use iox_benches::iox_transport::IoxEndpoint;
use iox_benches::report::{self, Row, size_name};
use iox_benches::socket_transport::SocketEndpoint;
use iox_service::{MemoryType, Service};
use typed_transport::{Iceoryx2TypedEndpoint, IoxTypedEndpoint, TYPED_LEN};

mod header_transport;
mod typed_transport;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    Iox,
    IoxLocked,
    Iceoryx2,
    Socket,
    Floor,
    /// Both sides C++ programs (`cpp_transport`); run by the leader itself.
    IoxCpp,
    /// iox with a 64-byte user header per sample (`--header`).
    IoxHeader,
    /// iceoryx2 with a 64-byte user header per sample (`--header`).
    Iceoryx2Header,
    /// iox on services whose access policy names a reader (`--guarded`): every port
    /// locks the chunks it writes or reads.
    IoxGuarded,
    /// iox's typed path: `u64` loans written and sent, read by value (8 B only).
    IoxTyped,
    /// iceoryx2's typed path, the same (8 B only).
    Iceoryx2Typed,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Iox => "iox",
            Transport::IoxLocked => "iox (Locked, pinned)",
            Transport::Iceoryx2 => "iceoryx2",
            Transport::Socket => "unix-socket",
            Transport::Floor => floor_transport::NAME,
            Transport::IoxCpp => cpp_transport::NAME,
            Transport::IoxGuarded => "iox, access roles (chunk guards)",
            Transport::IoxHeader => "iox + 64 B header",
            Transport::Iceoryx2Header => "iceoryx2 + 64 B header",
            Transport::IoxTyped => "iox typed u64",
            Transport::Iceoryx2Typed => "iceoryx2 typed u64",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Echo,
    Sink,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    Latency,
    Throughput,
    Pinning,
}

#[derive(Parser, Debug)]
#[command(about = "iox vs iceoryx2 vs a Unix socket: latency, throughput, pinning")]
struct Args {
    /// A smoke run that finishes in well under a minute.
    #[arg(long)]
    quick: bool,
    /// Run only these parts (default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<Part>,
    /// Where to write the latency results as CSV.
    #[arg(long, default_value = "target/pingpong.csv")]
    csv: PathBuf,
    /// Payload sizes in bytes, comma-separated (default: all of 8, 64, 4096, 65536,
    /// 1048576, 16777216). Throughput runs those of its sizes (8, 65536) listed here.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<usize>,
    /// Latency rounds per size, each alternating the transports (default: 5; 1 with
    /// `--quick`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Also run iox and iceoryx2 with a 64-byte user header (`[u64; 8]`) written and
    /// read per sample (latency only).
    #[arg(long)]
    header: bool,
    /// Also run iox on services with an access policy naming a reader, whose ports
    /// lock each chunk they write or read (latency only).
    #[arg(long)]
    guarded: bool,
    /// Internal: run as the follower of a case.
    #[arg(long, hide = true)]
    follow: Option<Transport>,
    #[arg(long, hide = true, default_value = "echo")]
    mode: Mode,
    #[arg(long, hide = true, default_value_t = 8)]
    len: usize,
    #[arg(long, hide = true, default_value = "")]
    id: String,
}

const SIZES: [usize; 6] = [8, 64, 4 << 10, 64 << 10, 1 << 20, 16 << 20];

/// The only payload size the floor runs at: it moves a tag whatever the size.
const FLOOR_LEN: usize = 8;

fn parse_size(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("a payload needs at least one byte".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?}: {e} (sizes are plain byte counts)")),
    }
}

impl Args {
    /// The payload sizes to run, in the order given (all of `SIZES` by default).
    fn sizes(&self) -> Vec<usize> {
        if self.sizes.is_empty() {
            SIZES.to_vec()
        } else {
            let mut sizes = Vec::new();
            for &s in &self.sizes {
                if !sizes.contains(&s) {
                    sizes.push(s);
                }
            }
            sizes
        }
    }
}

fn socket_path(id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("iox-bench-{id}.sock"))
}

fn connect(t: Transport, id: &str, leader: bool, len: usize) -> Box<dyn Endpoint> {
    match t {
        Transport::Iox => Box::new(IoxEndpoint::connect(id, leader, len, MemoryType::Cpu, false)),
        Transport::IoxLocked => Box::new(IoxEndpoint::connect(id, leader, len, MemoryType::Locked, true)),
        Transport::IoxGuarded => Box::new(IoxEndpoint::connect_with(
            id,
            leader,
            len,
            MemoryType::Cpu,
            false,
            true,
        )),
        Transport::Iceoryx2 => Box::new(Iceoryx2Endpoint::connect(id, leader, len)),
        Transport::IoxHeader => Box::new(IoxHeaderEndpoint::connect(id, leader, len)),
        Transport::Iceoryx2Header => Box::new(Iceoryx2HeaderEndpoint::connect(id, leader, len)),
        Transport::IoxTyped => Box::new(IoxTypedEndpoint::connect(id, leader)),
        Transport::Iceoryx2Typed => Box::new(Iceoryx2TypedEndpoint::connect(id, leader)),
        Transport::Socket => Box::new(SocketEndpoint::connect(&socket_path(id), len)),
        Transport::Floor => Box::new(FloorEndpoint::connect(id, leader)),
        // `follower` refuses it and `latency` runs it through `cpp_transport`.
        Transport::IoxCpp => unreachable!("the C++ ping-pong starts both of its sides itself"),
    }
}

fn follower(args: &Args, t: Transport) {
    if t == Transport::IoxCpp {
        eprintln!("iox-cpp has no Rust follower: its leader starts both C++ sides");
        std::process::exit(2);
    }
    let mut e = connect(t, &args.id, false, args.len);
    match args.mode {
        Mode::Echo => endpoint::follow(&mut e, args.len),
        Mode::Sink => {
            let mut count = 0u64;
            loop {
                let got = e.recv();
                if got == STOP {
                    e.send(args.len, STOP.0, STOP.1);
                    endpoint::linger(&mut e, args.len);
                    break;
                }
                count += 1;
            }
            println!("received {count}");
        }
    }
}

fn spawn_follower(t: Transport, mode: Mode, id: &str, len: usize) -> Child {
    let mode = if mode == Mode::Echo { "echo" } else { "sink" };
    let t = t.to_possible_value().expect("no skipped variants");
    Command::new(std::env::current_exe().expect("own exe"))
        .args([
            "--follow",
            t.get_name(),
            "--mode",
            mode,
            "--len",
            &len.to_string(),
            "--id",
            id,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn follower")
}

/// Runs one case: a follower process plus this process as the leader.
fn with_follower<R>(
    t: Transport,
    mode: Mode,
    len: usize,
    lead: impl FnOnce(&mut Box<dyn Endpoint>) -> R,
) -> (R, String) {
    let id = format!("{}-{:?}-{len}-{mode:?}", std::process::id(), t).to_lowercase();
    let listener = (t == Transport::Socket).then(|| SocketEndpoint::listen(&socket_path(&id)));
    let mut child = spawn_follower(t, mode, &id, len);
    let mut e: Box<dyn Endpoint> = match &listener {
        Some(l) => Box::new(SocketEndpoint::accept(l, len)),
        None => connect(t, &id, true, len),
    };
    let r = lead(&mut e);
    let mut out = String::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        out.push_str(&line.expect("follower output"));
        out.push('\n');
    }
    assert!(child.wait().expect("wait").success(), "follower failed");
    drop(e);
    let _ = std::fs::remove_file(socket_path(&id));
    (r, out)
}

fn latency(args: &Args) -> Vec<Row> {
    // Each size runs in rounds that alternate the transports, so a burst of noise
    // from the machine's neighbours hits all of them alike rather than one case.
    let (rounds, warmup, iters, budget) = if args.quick {
        (1, 200, 2_000, Duration::from_millis(400))
    } else {
        (5, 1_000, 10_000, Duration::from_secs(1))
    };
    let rounds = args.rounds.unwrap_or(rounds);
    let cpp = cpp_transport::build()
        .inspect_err(|why| eprintln!("iox from C++ left out: {why}"))
        .ok();
    let mut rows = Vec::new();
    for len in args.sizes() {
        let mut transports = vec![Transport::Iox, Transport::Iceoryx2, Transport::Socket];
        if cpp.is_some() {
            transports.push(Transport::IoxCpp);
        }
        if args.header {
            transports.extend([Transport::IoxHeader, Transport::Iceoryx2Header]);
        }
        if args.guarded {
            transports.push(Transport::IoxGuarded);
        }
        if len == TYPED_LEN {
            transports.extend([Transport::IoxTyped, Transport::Iceoryx2Typed]);
        }
        if len == FLOOR_LEN {
            transports.push(Transport::Floor);
        }
        let first_row = rows.len();
        for round in 0..rounds {
            for (i, &t) in transports.iter().enumerate() {
                let pp = match (t, &cpp) {
                    (Transport::IoxCpp, Some(exe)) => {
                        let id = format!("{}-cpp-{len}-{round}", std::process::id());
                        cpp_transport::round(exe, &id, len, warmup, iters, budget)
                    }
                    _ => {
                        with_follower(t, Mode::Echo, len, |e| {
                            endpoint::lead(e, len, warmup, iters, budget)
                        })
                        .0
                    }
                };
                if round == 0 {
                    rows.push(Row {
                        transport: t.name(),
                        len,
                        one_way: pp.one_way,
                        first: pp.first,
                    });
                } else {
                    rows[first_row + i].one_way.add(&pp.one_way).expect("same bounds");
                }
            }
        }
        for row in &rows[first_row..] {
            let (m, p99, _) = row.percentiles();
            eprintln!(
                "{:>8} {:<20} median {m:>9} ns  p99 {p99:>9} ns",
                size_name(len),
                row.transport
            );
        }
    }
    rows
}

fn throughput(args: &Args) -> String {
    let run_for = if args.quick {
        Duration::from_millis(300)
    } else {
        Duration::from_secs(2)
    };
    let mut out =
        String::from("| payload | transport | samples/s sent | samples/s received |\n|---|---|---|---|\n");
    let sizes = args.sizes();
    let lens: Vec<usize> = [8, 64 << 10].into_iter().filter(|l| sizes.contains(l)).collect();
    if lens.is_empty() {
        return "not measured: --sizes lists neither 8 nor 65536\n".into();
    }
    for len in lens {
        for t in [Transport::Iox, Transport::Iceoryx2, Transport::Socket] {
            let (sent, text) = with_follower(t, Mode::Sink, len, |e| {
                let start = Instant::now();
                let mut sent = 0u64;
                while start.elapsed() < run_for {
                    for _ in 0..64 {
                        e.send(len, 1, 1);
                    }
                    sent += 64;
                }
                endpoint::stop(e, len);
                sent as f64 / start.elapsed().as_secs_f64()
            });
            let received: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix("received "))
                .and_then(|n| n.parse().ok())
                .expect("follower reports its count");
            let received = received / run_for.as_secs_f64();
            eprintln!(
                "{:>8} {:<12} {sent:>12.0} sent/s {received:>12.0} received/s",
                size_name(len),
                t.name()
            );
            out.push_str(&format!(
                "| {} | {} | {sent:.0} | {received:.0} |\n",
                size_name(len),
                t.name()
            ));
        }
    }
    out
}

fn pinning(args: &Args) -> String {
    let mut out = String::from(
        "| pool | create() unpinned | create() pinned (Locked) | pinned cost per MiB |\n|---|---|---|---|\n",
    );
    let sizes: &[usize] = if args.quick { &[16, 64] } else { &[16, 64, 256] };
    for &mib in sizes {
        let name = format!("bench/pin/{}/{mib}", std::process::id());
        let svc = Service::named(&name)
            .expect("valid name")
            .publish_subscribe::<[u8]>()
            .size_classes(&[(1 << 20, mib)])
            .allow_pool_exhaustion(true)
            .memory_type(MemoryType::Locked)
            .open_or_create()
            .expect("service");
        let t0 = Instant::now();
        let unpinned = svc.publisher_builder().create().expect("publisher");
        let unpinned_t = t0.elapsed();
        drop(unpinned);
        let t0 = Instant::now();
        let pinned = match svc.publisher_builder().pin_memory(true).create() {
            Ok(p) => p,
            Err(e) => return format!("pinning not measured: {e}\n"),
        };
        let pinned_t = t0.elapsed();
        drop(pinned);
        out.push_str(&format!(
            "| {mib} MiB | {:.3} ms | {:.3} ms | {:.3} ms |\n",
            unpinned_t.as_secs_f64() * 1e3,
            pinned_t.as_secs_f64() * 1e3,
            pinned_t.as_secs_f64() * 1e3 / mib as f64
        ));
    }
    // First sample after create() vs the steady state, in one process: loan 1 MiB,
    // write all of it, send, receive, read it. The pool (80 MiB) is larger than what
    // iox pre-faults at map time, so an unpinned pool pays its page faults on first
    // touch; a pinned (mlocked) one paid them in create().
    out.push_str("\n| 80 MiB pool, 1 MiB sample written in full | first sample us | steady median us | first / median |\n|---|---|---|---|\n");
    for (memory_type, pin) in [(MemoryType::Cpu, false), (MemoryType::Locked, true)] {
        let name = format!("bench/first/{}/{memory_type:?}", std::process::id());
        let svc = Service::named(&name)
            .expect("valid name")
            .publish_subscribe::<[u8]>()
            .size_classes(&[(1 << 20, 80)])
            .allow_pool_exhaustion(true)
            .memory_type(memory_type)
            .open_or_create()
            .expect("service");
        let p = svc
            .publisher_builder()
            .pin_memory(pin)
            .create()
            .expect("publisher");
        let s = svc
            .subscriber_builder()
            .pin_memory(pin)
            .create()
            .expect("subscriber");
        let mut one = |i: usize| {
            let t0 = Instant::now();
            let sample = p
                .loan_slice_uninit(1 << 20)
                .expect("loan")
                .write_from_fn(|j| (i ^ j) as u8);
            sample.send().expect("send");
            let got = s.receive().expect("receive").expect("sample");
            assert_eq!(got[got.len() - 1], (i ^ ((1 << 20) - 1)) as u8);
            t0.elapsed()
        };
        let first = one(0);
        let mut rest: Vec<Duration> = (1..=200).map(&mut one).collect();
        rest.sort();
        let median = rest[rest.len() / 2];
        out.push_str(&format!(
            "| {memory_type:?}{} | {:.1} | {:.1} | {:.2} |\n",
            if pin { ", pinned ports" } else { ", unpinned" },
            first.as_secs_f64() * 1e6,
            median.as_secs_f64() * 1e6,
            first.as_secs_f64() / median.as_secs_f64()
        ));
    }
    out
}

fn main() {
    let args = Args::parse();
    if let Some(t) = args.follow {
        return follower(&args, t);
    }
    let start = Instant::now();
    let run = |p: Part| args.only.is_empty() || args.only.contains(&p);
    if run(Part::Latency) {
        let rows = latency(&args);
        if let Some(dir) = args.csv.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(&args.csv, report::csv(&rows)).expect("write CSV");
        println!("## One-way latency (ping-pong / 2, busy-polling, two processes)\n");
        println!("{}", report::table(&rows));
    }
    if run(Part::Throughput) {
        println!("## Throughput (one publisher process -> one subscriber process)\n");
        println!("{}", throughput(&args));
    }
    if run(Part::Pinning) {
        println!("## Pinning (iox)\n");
        println!("{}", pinning(&args));
    }
    println!(
        "machine: {} cores; latency CSV: {}; took {:.0} s",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.csv.display(),
        start.elapsed().as_secs_f64()
    );
}
