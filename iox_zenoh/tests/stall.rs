//! A stalled network: the importing bridge is stopped (SIGSTOP) while host A's
//! publisher sends; the exporting bridge's put blocks, its queue fills, the publisher
//! never waits, and every sample is accounted for exactly: put on Zenoh or counted as
//! dropped (by the publisher, in shared memory), and everything put arrives at host B
//! in order (received or counted as missed by B's subscriber).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const PROBE: u64 = u64::MAX;
const LEN: usize = 64 << 10;
/// Far more than the socket buffers and Zenoh's queues hold (64 MiB).
const N: u64 = 1000;

fn spawn_importer(root: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_iox-zenoh"))
        .args(["--import", "k/*", "--status-interval", "0", "--listen"])
        .arg(format!("tcp/127.0.0.1:{port}"))
        .arg("--root")
        .arg(root)
        .stdin(Stdio::null())
        .spawn()
        .expect("start iox-zenoh")
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0);
}

/// (sent, dropped) of the export of `k/data`.
fn exported(bridge: &iox_zenoh::Bridge) -> (u64, u64) {
    let status = bridge.status();
    let e = status
        .exported
        .iter()
        .find(|e| e.0 == "k/data")
        .expect("k/data is exported");
    (e.1, e.2)
}

/// The samples the bridge's subscriber of `k/data` missed, read from shared memory
/// as `iox show` reads them.
fn bridge_missed(root: &std::path::Path) -> u64 {
    let info = iox_service::inspect::inspect_in(root, "k/data").unwrap();
    info.ports
        .iter()
        .filter(|p| p.kind == "subscriber")
        .map(|p| p.missed)
        .sum()
}

/// Stops the importer when the test ends, passed or not.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_stalled_network_drops_oldest_and_counts_every_sample() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let port = free_port();
    let svc_a = bytes_service(a.path(), "k/data");
    let svc_b = bytes_service(b.path(), "k/data");
    let importer = Stopped(spawn_importer(b.path(), port));
    let ba = bridge(a.path(), &["k/*"], &[], None, Some(port));
    let sub = svc_b.subscriber_builder().create().unwrap();
    let publisher = svc_a.publisher_builder().create().unwrap();
    let send = |bytes: &[u8]| {
        publisher
            .loan_slice_uninit(LEN)
            .unwrap()
            .write_from_slice(bytes)
            .send()
            .unwrap();
    };
    let probe = payload(PROBE, LEN);
    warm_up(|| send(&probe), &sub);
    // Made before the stall, so that it stays short (see below).
    let payloads: Vec<Vec<u8>> = (0..N).map(|i| payload(i, LEN)).collect();
    let sums: Vec<u64> = payloads.iter().map(|p| checksum(p)).collect();
    let (sent0, dropped0) = exported(&ba);
    let missed0 = sub.missed();

    signal(&importer.0, libc::SIGSTOP);
    let stopped = Instant::now();
    for p in &payloads {
        send(p); // never blocks
    }
    // The bridge's put waits for the stopped peer; its queue overflows. (The bridge's
    // own count is refreshed between puts, so while one is blocked the live count is
    // the one in shared memory, which `iox show` reads.)
    assert!(
        iox_testkit::wait_until(Duration::from_secs(3), || bridge_missed(a.path()) > dropped0),
        "the bridge drops while the network is stalled: {}",
        bridge_missed(a.path())
    );
    // Zenoh closes a link whose sends stay blocked for 5 s (`wait_before_close`),
    // losing what its queue held: the stall must end well before that for the count
    // below to be exact.
    let stall = stopped.elapsed();
    signal(&importer.0, libc::SIGCONT);
    eprintln!("the importer was stopped for {stall:?}");
    assert!(stall < Duration::from_secs(4), "the stall lasted {stall:?}");

    // Every sample is put or counted as dropped, exactly.
    assert!(
        iox_testkit::wait_until(Duration::from_secs(30), || {
            let (s, d) = exported(&ba);
            s - sent0 + d - dropped0 == N
        }),
        "sent + dropped != {N}: {:?} (from {:?})",
        exported(&ba),
        (sent0, dropped0)
    );
    let (sent, dropped) = exported(&ba);
    let (sent, dropped) = (sent - sent0, dropped - dropped0);
    assert!(dropped > 0 && sent > 0, "sent {sent} dropped {dropped}");
    // `iox show` sees the same count on the bridge's subscriber.
    assert_eq!(bridge_missed(a.path()), dropped + dropped0);

    // What was put arrives at B in order: received, or missed by B's subscriber.
    let (mut received, mut last) = (0u64, None);
    let end = Instant::now() + Duration::from_secs(30);
    while received + sub.missed() - missed0 < sent && Instant::now() < end {
        let Some(s) = next(&sub, Duration::from_millis(100)) else {
            continue;
        };
        let seq = seq_of(&s);
        assert!(seq < N, "an unexpected sample {seq}");
        assert!(last.is_none_or(|l| seq > l), "out of order: {seq} after {last:?}");
        assert_eq!(checksum(&s), sums[seq as usize], "sample {seq} is intact");
        last = Some(seq);
        received += 1;
    }
    assert_eq!(
        received + sub.missed() - missed0,
        sent,
        "B accounts for every sample put: received {received}, missed {}",
        sub.missed() - missed0
    );
    assert_eq!(
        quiet_for(&sub, Duration::from_millis(300)),
        0,
        "nothing more, no duplicate"
    );

    ba.stop();
}
