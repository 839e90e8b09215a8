//! Event wake-up latency: iox vs iceoryx2, against the floor, in one run.
//!
//! Two processes (this program started again as the follower) ping-pong an event:
//! each notifies the other and then sleeps in a blocking wait on its own listener
//! (no busy-polling), so a round trip is two notify -> wake-up hops; one-way latency
//! = round trip / 2, median and p99 from an HdrHistogram after a warm-up. Each run
//! has `--rounds` rounds (five; one with `--quick`) that alternate the transports, so
//! noise from the machine's neighbours hits all alike; rounds are merged per
//! transport. The floor is two processes bouncing a shared word with futex wake and
//! futex wait (see `event_transport`); the summary gives iox/iceoryx2 and every
//! transport over the floor's median, all from the same run.
//!
//! `cargo run --release -p iox_benches --bin eventpingpong -- [--quick] [--rounds N]`

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use iox_benches::event_transport::{FutexFloor, Iceoryx2Event, IoxEvent, PING, STOP, Wake};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    Iox,
    Iceoryx2,
    Floor,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Iox => "iox",
            Transport::Iceoryx2 => "iceoryx2",
            Transport::Floor => "floor (futex word)",
        }
    }
}

#[derive(Parser, Debug)]
#[command(about = "event notify -> listener wake-up latency: iox vs iceoryx2 vs a futex floor")]
struct Args {
    /// A smoke run that finishes in a few seconds.
    #[arg(long)]
    quick: bool,
    /// Rounds, each alternating the transports (default: 5; 1 with `--quick`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Internal: run as the follower of a case.
    #[arg(long, hide = true)]
    follow: Option<Transport>,
    #[arg(long, hide = true, default_value = "")]
    id: String,
}

fn connect(t: Transport, id: &str, leader: bool) -> Box<dyn Wake> {
    match t {
        Transport::Iox => Box::new(IoxEvent::connect(id, leader)),
        Transport::Iceoryx2 => Box::new(Iceoryx2Event::connect(id, leader)),
        Transport::Floor => Box::new(FutexFloor::connect(id, leader)),
    }
}

/// Follower: echoes every id until `STOP` (which it echoes too).
fn follow(t: Transport, id: &str) {
    let mut w = connect(t, id, false);
    println!("ready");
    loop {
        let got = w.wait();
        w.notify(got);
        if got == STOP {
            return;
        }
    }
}

/// Leader: `warmup` untimed round trips, then up to `iters` timed ones (stopping
/// after `budget`), then `STOP`.
fn lead(w: &mut dyn Wake, warmup: u64, iters: u64, budget: Duration) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let round = |w: &mut dyn Wake| {
        let start = Instant::now();
        w.notify(PING);
        assert_eq!(w.wait(), PING, "the echo carried another id");
        start.elapsed().as_nanos() as u64
    };
    for _ in 0..warmup {
        round(w);
    }
    let start = Instant::now();
    for i in 0..iters {
        h.record((round(w) / 2).max(1)).expect("within bounds");
        if i % 64 == 0 && start.elapsed() > budget {
            break;
        }
    }
    w.notify(STOP);
    while w.wait() != STOP {}
    h
}

fn run_case(t: Transport, warmup: u64, iters: u64, budget: Duration) -> Histogram<u64> {
    let id = format!("{}-{t:?}-{}", std::process::id(), rand_suffix()).to_lowercase();
    let name = t.to_possible_value().expect("no skipped variants");
    let mut child = Command::new(std::env::current_exe().expect("own exe"))
        .args(["--follow", name.get_name(), "--id", &id])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    let mut w = connect(t, &id, true);
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    assert_eq!(lines.next().expect("follower line").expect("read"), "ready");
    let h = lead(w.as_mut(), warmup, iters, budget);
    assert!(child.wait().expect("wait").success(), "follower failed");
    drop(w);
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
        return follow(t, &args.id);
    }
    let started = Instant::now();
    let (rounds, warmup, iters, budget) = if args.quick {
        (1, 200, 2_000, Duration::from_millis(500))
    } else {
        (5, 1_000, 20_000, Duration::from_secs(2))
    };
    let rounds = args.rounds.unwrap_or(rounds);
    let transports = [Transport::Iox, Transport::Iceoryx2, Transport::Floor];
    let mut merged: Vec<Option<Histogram<u64>>> = vec![None, None, None];
    for _ in 0..rounds {
        for (i, &t) in transports.iter().enumerate() {
            let h = run_case(t, warmup, iters, budget);
            match &mut merged[i] {
                Some(m) => m.add(&h).expect("same bounds"),
                slot => *slot = Some(h),
            }
        }
    }
    let stats: Vec<(u64, u64, u64)> = merged
        .iter()
        .map(|h| {
            let h = h.as_ref().expect("measured");
            (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.len())
        })
        .collect();
    println!("## Event wake-up latency (notify -> blocked listener wakes; ping-pong / 2, two processes)\n");
    println!("| transport | median ns | p99 ns | samples |\n|---|---|---|---|");
    for (t, (m, p99, n)) in transports.iter().zip(&stats) {
        println!("| {} | {m} | {p99} | {n} |", t.name());
    }
    let (im, ip, _) = stats[0];
    let (cm, cp, _) = stats[1];
    let (fm, _, _) = stats[2];
    println!(
        "\niox/iceoryx2 = {:.2}x median, {:.2}x p99 (same run)",
        im as f64 / cm.max(1) as f64,
        ip as f64 / cp.max(1) as f64
    );
    println!(
        "against the floor (futex word, median {fm} ns, same run); median and p99 over the floor's median:"
    );
    for (t, (m, p99, _)) in transports.iter().zip(&stats) {
        println!(
            "{} / floor = {:.2}x median, {:.2}x p99",
            t.name(),
            *m as f64 / fm.max(1) as f64,
            *p99 as f64 / fm.max(1) as f64
        );
    }
    println!(
        "\nmachine: {} cores; {rounds} round(s); took {:.0} s",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        started.elapsed().as_secs_f64()
    );
}
