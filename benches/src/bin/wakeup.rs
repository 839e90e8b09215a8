//! Blocking wake-up latency: a ping-pong between two processes where each side sleeps
//! in a WaitSet until the other's sample arrives (see `waitset_transport`), iox vs
//! iceoryx2 (its WaitSet on the Listener of an event service paired with the pub-sub
//! service, the sender notifying after each send), at 8 B and 1 MiB; one-way = round
//! trip / 2, median / p99 / p99.9 after a warm-up, in `--rounds` rounds alternating
//! the cases, merged per case.
//!
//! Scale: the same iox ping-pong with 999 more subscribers attached to each side's
//! WaitSet (on 25 services of their own that no one publishes to, 1,000 attached in
//! all, one firing), against the single-subscriber case of the same run. Idle: this
//! process's CPU time (getrusage: user + system, all threads) while a WaitSet over
//! 1,000 subscribers waits `--idle-secs` with nothing firing.
//!
//! `cargo run --release -p iox_benches --bin wakeup -- [--quick] [--rounds N]
//! [--sizes 8,1048576] [--cases iox,iceoryx2,iox-scale] [--only latency,idle]
//! [--idle-secs 5]`

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use iox_benches::endpoint::{self, Endpoint};
use iox_benches::report::size_name;
use iox_benches::waitset_transport::{with_iceoryx2, with_iox};
use iox_service::{CallbackProgression, Service, WaitSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Case {
    Iox,
    Iceoryx2,
    IoxScale,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Iox => "iox",
            Case::Iceoryx2 => "iceoryx2",
            Case::IoxScale => "iox, 1000 attached",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    Latency,
    Idle,
}

#[derive(Parser, Debug)]
#[command(about = "Blocking wake-up latency (WaitSet ping-pong), iox vs iceoryx2; scale and idle CPU")]
struct Args {
    /// A smoke run (one round, fewer iterations, 1 s idle).
    #[arg(long)]
    quick: bool,
    /// Rounds per size, each alternating the cases (default 5; 1 with `--quick`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Payload sizes in bytes (default 8 and 1048576).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Latency cases to run (default: all three; the ratio table needs all three).
    #[arg(long, value_delimiter = ',')]
    cases: Vec<Case>,
    /// Run only these parts (default: both).
    #[arg(long, value_delimiter = ',')]
    only: Vec<Part>,
    /// Seconds of idle waiting measured for CPU time (default 5; 1 with `--quick`).
    #[arg(long)]
    idle_secs: Option<u64>,
    /// Internal: run as the follower of a case.
    #[arg(long, hide = true)]
    follow: Option<Case>,
    #[arg(long, hide = true, default_value_t = 8)]
    len: usize,
    #[arg(long, hide = true, default_value = "")]
    id: String,
}

/// Attached besides the live subscriber in the scale case.
const QUIET: usize = 999;

fn with_case<R>(case: Case, id: &str, leader: bool, len: usize, f: impl FnOnce(&mut dyn Endpoint) -> R) -> R {
    match case {
        Case::Iox => with_iox(id, leader, len, 0, f),
        Case::IoxScale => with_iox(id, leader, len, QUIET, f),
        Case::Iceoryx2 => with_iceoryx2(id, leader, len, f),
    }
}

/// Raises the soft limit on open descriptors to the hard one (1,000 subscribers are
/// 1,000 sockets, besides their services' files).
fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
}

/// One case: a follower process echoing, this process leading.
fn run_case(case: Case, len: usize, warmup: u64, iters: u64, budget: Duration) -> endpoint::PingPong {
    let id = format!("{}-{case:?}-{len}", std::process::id()).to_lowercase();
    let value = case.to_possible_value().expect("no skipped variants");
    let mut child = Command::new(std::env::current_exe().expect("own exe"))
        .args([
            "--follow",
            value.get_name(),
            "--len",
            &len.to_string(),
            "--id",
            &id,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    let pp = with_case(case, &id, true, len, |e| {
        endpoint::lead(e, len, warmup, iters, budget)
    });
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let _ = line;
    }
    assert!(child.wait().expect("wait").success(), "follower failed");
    pp
}

fn latency(args: &Args) -> String {
    let (rounds, warmup, iters, budget) = if args.quick {
        (1, 200, 2_000, Duration::from_millis(400))
    } else {
        (5, 1_000, 10_000, Duration::from_secs(2))
    };
    let rounds = args.rounds.unwrap_or(rounds);
    let sizes = if args.sizes.is_empty() {
        vec![8, 1 << 20]
    } else {
        args.sizes.clone()
    };
    let cases = if args.cases.is_empty() {
        vec![Case::Iox, Case::Iceoryx2, Case::IoxScale]
    } else {
        args.cases.clone()
    };
    let mut out = String::from(
        "| payload | case | median ns | p99 ns | p99.9 ns | samples |\n|---|---|---|---|---|---|\n",
    );
    let mut ratios = String::from(
        "\n| payload | iox/iceoryx2 median | iox/iceoryx2 p99 | 1000 attached/1 median | 1000 attached/1 p99 |\n|---|---|---|---|---|\n",
    );
    for &len in &sizes {
        let mut merged: Vec<Option<hdrhistogram::Histogram<u64>>> = vec![None; cases.len()];
        for _ in 0..rounds {
            for (i, &case) in cases.iter().enumerate() {
                let pp = run_case(case, len, warmup, iters, budget);
                match &mut merged[i] {
                    Some(h) => h.add(&pp.one_way).expect("same bounds"),
                    slot => *slot = Some(pp.one_way),
                }
            }
        }
        let stats: Vec<(u64, u64)> = merged
            .iter()
            .zip(&cases)
            .map(|(h, case)| {
                let h = h.as_ref().expect("ran");
                let (m, p99, p999) = (
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.99),
                    h.value_at_quantile(0.999),
                );
                eprintln!(
                    "{:>8} {:<20} median {m:>9} ns  p99 {p99:>9} ns",
                    size_name(len),
                    case.name()
                );
                out.push_str(&format!(
                    "| {} | {} | {m} | {p99} | {p999} | {} |\n",
                    size_name(len),
                    case.name(),
                    h.len()
                ));
                (m, p99)
            })
            .collect();
        let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        if stats.len() != 3 {
            continue;
        }
        ratios.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            size_name(len),
            r(stats[0].0, stats[1].0),
            r(stats[0].1, stats[1].1),
            r(stats[2].0, stats[0].0),
            r(stats[2].1, stats[0].1),
        ));
    }
    out + &ratios
}

/// This process's CPU time so far (user + system, all threads).
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn idle(args: &Args) -> String {
    let secs = args.idle_secs.unwrap_or(if args.quick { 1 } else { 5 });
    let services: Vec<_> = (0..25)
        .map(|k| {
            Service::named(&format!("bench/idle/{}/{k}", std::process::id()))
                .expect("valid name")
                .publish_subscribe::<u64>()
                .max_publishers(1)
                .max_subscribers(40)
                .subscriber_buffer(1)
                .open_or_create()
                .expect("service")
        })
        .collect();
    let subs: Vec<_> = (0..1000)
        .map(|i| {
            services[i / 40]
                .subscriber_builder()
                .create()
                .expect("subscriber")
        })
        .collect();
    let waitset = WaitSet::new().expect("WaitSet");
    let _guards: Vec<_> = subs
        .iter()
        .map(|s| waitset.attach_notification(s).expect("attach"))
        .collect();
    let (cpu0, t0) = (cpu_time(), Instant::now());
    let result = waitset
        .wait_and_process_once_with_timeout(|_| CallbackProgression::Continue, Duration::from_secs(secs))
        .expect("wait");
    let (cpu, wall) = (cpu_time() - cpu0, t0.elapsed());
    eprintln!("idle: {result:?} after {wall:?}, CPU {cpu:?}");
    format!(
        "| WaitSet over 1000 subscribers, nothing firing | wall {:.3} s | CPU {:.3} ms | {:.4} % |\n",
        wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e3,
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
    )
}

fn main() {
    let args = Args::parse();
    raise_fd_limit();
    if let Some(case) = args.follow {
        return with_case(case, &args.id, false, args.len, |e| endpoint::follow(e, args.len));
    }
    let start = Instant::now();
    let run = |p: Part| args.only.is_empty() || args.only.contains(&p);
    if run(Part::Latency) {
        println!("## Blocking wake-up latency (WaitSet ping-pong / 2, two processes)\n");
        println!("{}", latency(&args));
    }
    if run(Part::Idle) {
        println!("## Idle CPU (this process, getrusage)\n");
        println!("{}", idle(&args));
    }
    println!(
        "machine: {} cores; took {:.0} s",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        start.elapsed().as_secs_f64()
    );
}
