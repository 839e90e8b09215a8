//! Bring-up cost: how long a newcomer takes to open a service another process holds
//! and create a subscriber on it (the memfd payload reached through that process),
//! and how long creating a fresh service with a publisher takes, with the root on
//! tmpfs (a directory under /dev/shm). Median and p90 over `--iterations` each, in
//! `--rounds` rounds; the holder is a child process of this binary.
//!
//! `cargo run --release -p iox_benches --bin bringup -- [--rounds 3] [--iterations 300]`

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use iox_service::Service;

#[derive(Parser, Debug)]
#[command(about = "Service bring-up cost: open + subscriber through a holder, create + publisher")]
struct Args {
    /// Rounds (each: both cases).
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Bring-ups per case and round.
    #[arg(long, default_value_t = 300)]
    iterations: u32,
    /// Internal: run as the holder of the service under this root.
    #[arg(long, hide = true)]
    holder: Option<std::path::PathBuf>,
}

const NAME: &str = "bench/bringup";

fn builder(root: &std::path::Path, name: &str) -> iox_service::PubSubBuilder<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .size_classes(&[(4096, 128)])
}

fn main() {
    let args = Args::parse();
    if let Some(root) = args.holder {
        let svc = builder(&root, NAME).open_or_create().unwrap();
        let _p = svc.publisher_builder().create().unwrap();
        println!("ready");
        std::io::stdout().flush().unwrap();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line); // until the parent closes stdin
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("iox-bringup")
        .tempdir_in("/dev/shm")
        .unwrap();
    let root = dir.path();
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .arg("--holder")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    println!(
        "# bring-up, root on tmpfs ({}), {} iterations x {} rounds",
        root.display(),
        args.iterations,
        args.rounds
    );
    for round in 0..args.rounds {
        let mut open = Vec::new();
        let mut create = Vec::new();
        for i in 0..args.iterations {
            let t = Instant::now();
            let svc = builder(root, NAME).open().unwrap();
            let s = svc.subscriber_builder().create().unwrap();
            open.push(t.elapsed());
            drop((s, svc));
            let name = format!("bench/fresh{round}-{i}");
            let t = Instant::now();
            let svc = builder(root, &name).create().unwrap();
            let p = svc.publisher_builder().create().unwrap();
            create.push(t.elapsed());
            drop((p, svc));
        }
        for (case, v) in [
            ("open + subscriber (through a holder)", &mut open),
            ("create + publisher", &mut create),
        ] {
            v.sort();
            let q = |f: f64| v[((v.len() as f64 - 1.0) * f) as usize];
            println!(
                "round {round}: {case:<38} median {:>8.1} us  p90 {:>8.1} us",
                us(q(0.5)),
                us(q(0.9))
            );
        }
    }
    drop(holder.stdin.take());
    let _ = holder.wait();
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
