//! A small program for the two-host check (`scripts/zenoh_netns.sh`): publishes or
//! receives numbered `[u8]` samples with checksums on one service.
//!
//! `probe publish NAME SECONDS LEN`: sends sample 0, 1, 2, ... every 20 ms for SECONDS.
//! `probe receive NAME COUNT LEN SECONDS`: exits 0 once COUNT samples of LEN bytes with
//! correct contents arrived in increasing order, 1 if SECONDS pass first.

use std::time::{Duration, Instant};

use iox_service::Service;

fn payload(seq: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i * 7) as u8)
        .collect();
    let n = len.min(8);
    v[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    v
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: probe publish NAME SECONDS LEN | probe receive NAME COUNT LEN SECONDS";
    let [_, mode, name, n, len, rest @ ..] = &args[..] else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (n, len): (u64, usize) = (n.parse().expect(usage), len.parse().expect(usage));
    let service = Service::named(name)
        .unwrap()
        .publish_subscribe::<[u8]>()
        .max_publishers(2)
        .max_subscribers(3)
        .subscriber_buffer(4)
        .max_loans(1)
        .max_held(2)
        .chunk_sizes(&[64, 65536, 16 << 20])
        .open_or_create()
        .unwrap_or_else(|e| panic!("probe: {e}"));
    match mode.as_str() {
        "publish" => {
            let publisher = service.publisher_builder().create().unwrap();
            let end = Instant::now() + Duration::from_secs(n);
            let mut seq = 0;
            while Instant::now() < end {
                let data = payload(seq, len);
                publisher
                    .loan_slice_uninit(len)
                    .unwrap()
                    .write_from_slice(&data)
                    .send()
                    .unwrap();
                seq += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        "receive" => {
            let secs: u64 = rest.first().and_then(|s| s.parse().ok()).expect(usage);
            let subscriber = service.subscriber_builder().create().unwrap();
            let end = Instant::now() + Duration::from_secs(secs);
            let (mut got, mut last) = (0, None);
            while Instant::now() < end {
                let Some(s) = subscriber.receive_timeout(Duration::from_millis(100)).unwrap() else {
                    continue;
                };
                let mut b = [0u8; 8];
                b.copy_from_slice(&s[..8]);
                let seq = u64::from_le_bytes(b);
                assert_eq!(&*s, &payload(seq, len)[..], "probe: sample {seq} damaged");
                assert!(last.is_none_or(|l| seq > l), "probe: sample {seq} after {last:?}");
                last = Some(seq);
                got += 1;
                if got == n {
                    println!("probe: received {got} samples of {len} bytes, in order, intact");
                    return;
                }
            }
            eprintln!("probe: only {got} of {n} samples within {secs} s");
            std::process::exit(1);
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
