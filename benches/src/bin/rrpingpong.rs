//! Request -> response round trip: iox vs iceoryx2's request-response, in one run.
//!
//! Two processes (this program started again as the server): the client sends a
//! request (loan, write the first and last byte, send) and takes the one response the
//! server sends back; the round trip is timed from the loan to the response in hand
//! (median and p99 from an HdrHistogram after a warm-up). Payloads 8 B and 1 MiB (both
//! ways), busy-polling and blocking (see `reqres_transport` for what blocking means on
//! each side). Each run has `--rounds` rounds (five; one with `--quick`) alternating
//! the transports, merged per case, so neighbours' noise hits both alike. The summary
//! gives iox/iceoryx2 per case, from the same run.
//!
//! `cargo run --release -p iox_benches --bin rrpingpong -- [--quick] [--rounds N]`

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use iox_benches::report::size_name;
use iox_benches::reqres_transport::{Iceoryx2Rr, IoxRr, RrClient, RrServer, STOP};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    Iox,
    Iceoryx2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Poll,
    Block,
}

#[derive(Parser, Debug)]
#[command(about = "request -> response round trip: iox vs iceoryx2, busy-polling and blocking")]
struct Args {
    /// A smoke run that finishes in a few seconds.
    #[arg(long)]
    quick: bool,
    /// Rounds, each alternating the transports (default: 5; 1 with `--quick`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Internal: run as the server of a case.
    #[arg(long, hide = true)]
    follow: Option<Transport>,
    #[arg(long, hide = true, default_value = "poll")]
    mode: Mode,
    #[arg(long, hide = true, default_value_t = 8)]
    len: usize,
    #[arg(long, hide = true, default_value = "")]
    id: String,
}

const SIZES: [usize; 2] = [8, 1 << 20];

trait Side: RrClient + RrServer {}
impl<T: RrClient + RrServer> Side for T {}

fn connect(t: Transport, id: &str, leader: bool, len: usize, mode: Mode) -> Box<dyn Side> {
    let block = mode == Mode::Block;
    match t {
        Transport::Iox => Box::new(IoxRr::connect(id, leader, len, block)),
        Transport::Iceoryx2 => Box::new(Iceoryx2Rr::connect(id, leader, len, block)),
    }
}

/// Client: `warmup` untimed round trips, then up to `iters` timed ones (stopping
/// after `budget`), then `STOP`.
fn lead(s: &mut dyn Side, len: usize, warmup: u64, iters: u64, budget: Duration) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let mut tag = 0u8;
    let mut round = |s: &mut dyn Side| {
        tag = tag % 254 + 1;
        let t = tag.wrapping_mul(7) | 1;
        let start = Instant::now();
        let got = s.request(len, tag, t);
        let ns = start.elapsed().as_nanos() as u64;
        assert_eq!(got, (tag, t), "the response carried the wrong bytes");
        s.finish();
        ns
    };
    for _ in 0..warmup {
        round(s);
    }
    let start = Instant::now();
    for i in 0..iters {
        h.record(round(s).max(1)).expect("within bounds");
        if i % 64 == 0 && start.elapsed() > budget {
            break;
        }
    }
    assert_eq!(s.request(len, STOP.0, STOP.1), STOP);
    s.finish();
    h
}

fn run_case(
    t: Transport,
    len: usize,
    mode: Mode,
    warmup: u64,
    iters: u64,
    budget: Duration,
) -> Histogram<u64> {
    let id = format!("{}-{t:?}-{mode:?}-{len}-{}", std::process::id(), rand_suffix()).to_lowercase();
    let name = t.to_possible_value().expect("no skipped variants");
    let mode_name = mode.to_possible_value().expect("no skipped variants");
    let mut child = Command::new(std::env::current_exe().expect("own exe"))
        .args([
            "--follow",
            name.get_name(),
            "--mode",
            mode_name.get_name(),
            "--len",
            &len.to_string(),
            "--id",
            &id,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut s = connect(t, &id, true, len, mode);
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    assert_eq!(lines.next().expect("server line").expect("read"), "ready");
    let h = lead(s.as_mut(), len, warmup, iters, budget);
    drop(s);
    assert!(child.wait().expect("wait").success(), "server failed");
    h
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64)
}

fn main() {
    let args = Args::parse();
    if let Some(t) = args.follow {
        let mut s = connect(t, &args.id, false, args.len, args.mode);
        println!("ready");
        while s.serve_one(args.len) {}
        return;
    }
    let started = Instant::now();
    let (rounds, warmup, iters, budget) = if args.quick {
        (1, 200, 2_000, Duration::from_millis(300))
    } else {
        (5, 1_000, 20_000, Duration::from_secs(1))
    };
    let rounds = args.rounds.unwrap_or(rounds);
    let transports = [Transport::Iox, Transport::Iceoryx2];
    let mut cases = Vec::new();
    for mode in [Mode::Poll, Mode::Block] {
        for len in SIZES {
            cases.push((mode, len));
        }
    }
    let mut merged: Vec<[Option<Histogram<u64>>; 2]> = cases.iter().map(|_| [None, None]).collect();
    for _ in 0..rounds {
        for (c, &(mode, len)) in cases.iter().enumerate() {
            for (i, &t) in transports.iter().enumerate() {
                let h = run_case(t, len, mode, warmup, iters, budget);
                match &mut merged[c][i] {
                    Some(m) => m.add(&h).expect("same bounds"),
                    slot => *slot = Some(h),
                }
            }
        }
    }
    println!("## Request -> response round trip (two processes, one response per request)\n");
    println!("| mode | payload | transport | median ns | p99 ns | samples |\n|---|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for (c, &(mode, len)) in cases.iter().enumerate() {
        let stats: Vec<(u64, u64, u64)> = merged[c]
            .iter()
            .map(|h| {
                let h = h.as_ref().expect("measured");
                (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.len())
            })
            .collect();
        for (t, (m, p99, n)) in transports.iter().zip(&stats) {
            println!("| {mode:?} | {} | {t:?} | {m} | {p99} | {n} |", size_name(len));
        }
        ratios.push((
            mode,
            len,
            stats[0].0 as f64 / stats[1].0.max(1) as f64,
            stats[0].1 as f64 / stats[1].1.max(1) as f64,
        ));
    }
    println!();
    for (mode, len, m, p) in ratios {
        println!(
            "{mode:?} {}: iox/iceoryx2 = {m:.2}x median, {p:.2}x p99 (same run)",
            size_name(len)
        );
    }
    println!(
        "\nmachine: {} cores; {rounds} round(s); took {:.0} s",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        started.elapsed().as_secs_f64()
    );
}
