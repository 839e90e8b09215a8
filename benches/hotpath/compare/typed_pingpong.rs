//! The typed ping-pong `scripts/hotpath-compare.sh` builds at each commit it compares
//! (copied into that commit's `iox_service/examples/`, so it uses only the public API
//! every commit has): a `u64` service each way, one publisher, one subscriber, a buffer
//! of 4; `loan_uninit()` -> `write_payload` -> `send()`, a busy `receive()` reading the
//! value. `lead ROOT N` runs N timed round trips after 20,000 of warm-up against a
//! follower it starts on CPU 1 (`taskset`), and prints the one-way median and p99 in
//! ns (round trip / 2).
use iox_service::Service;
use std::time::{Duration, Instant};

fn open(root: &str, name: &str) -> iox_service::PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(4)
        .open_or_create()
        .unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let role = args[1].as_str();
    let root = args[2].clone();
    let n: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(200_000);
    let leader = role == "lead";
    let ping = open(&root, "pp/ping");
    let pong = open(&root, "pp/pong");
    let (out, inp) = if leader { (&ping, &pong) } else { (&pong, &ping) };
    let tx = out.publisher_builder().create().unwrap();
    let rx = inp.subscriber_builder().create().unwrap();
    let mut child = None;
    if leader {
        child = Some(
            std::process::Command::new("taskset")
                .arg("-c")
                .arg("1")
                .arg(std::env::current_exe().unwrap())
                .arg("follow")
                .arg(&root)
                .arg(n.to_string())
                .spawn()
                .unwrap(),
        );
    }
    let start = Instant::now();
    while out.port_counts().1 == 0 || inp.port_counts().0 == 0 {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::yield_now();
    }
    let warm = 20_000;
    if leader {
        let mut rtt = Vec::with_capacity(n);
        for i in 0..(warm + n) as u64 {
            let t = Instant::now();
            tx.loan_uninit().unwrap().write_payload(i).send().unwrap();
            loop {
                if let Some(s) = rx.receive().unwrap() {
                    assert_eq!(*s, i);
                    break;
                }
            }
            let d = t.elapsed().as_nanos() as u32;
            if i as usize >= warm {
                rtt.push(d);
            }
        }
        tx.loan_uninit().unwrap().write_payload(u64::MAX).send().unwrap();
        child.unwrap().wait().unwrap();
        rtt.sort_unstable();
        let med = rtt[rtt.len() / 2] as f64 / 2.0;
        let p99 = rtt[rtt.len() * 99 / 100] as f64 / 2.0;
        println!("{med:.1} {p99:.1}");
    } else {
        loop {
            if let Some(s) = rx.receive().unwrap() {
                let v = *s;
                drop(s);
                if v == u64::MAX {
                    break;
                }
                tx.loan_uninit().unwrap().write_payload(v).send().unwrap();
            }
        }
    }
}
