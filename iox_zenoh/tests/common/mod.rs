//! Shared helpers of the bridge tests: two "hosts" (two IOX_ROOTs), bridges over Zenoh
//! on 127.0.0.1 with explicit endpoints (no multicast scouting), payload patterns with
//! checksums.

#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::{PubSubService, Service, Subscriber};
use iox_zenoh::{Bridge, Options};

/// A port free right now on 127.0.0.1 (the OS picks it; a tiny race until Zenoh binds).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a bridge on `root`.
pub fn bridge(
    root: &Path,
    export: &[&str],
    import: &[&str],
    listen: Option<u16>,
    connect: Option<u16>,
) -> Bridge {
    let mut o = Options::new();
    o.root = root.to_path_buf();
    o.export = export.iter().map(|s| s.to_string()).collect();
    o.import = import.iter().map(|s| s.to_string()).collect();
    o.listen = listen.map(|p| format!("tcp/127.0.0.1:{p}")).into_iter().collect();
    o.connect = connect
        .map(|p| format!("tcp/127.0.0.1:{p}"))
        .into_iter()
        .collect();
    Bridge::start(o).expect("bridge starts")
}

/// Host A's bridge listens, host B's connects to it.
pub fn pair(
    a: &Path,
    a_export: &[&str],
    a_import: &[&str],
    b: &Path,
    b_export: &[&str],
    b_import: &[&str],
) -> (Bridge, Bridge) {
    let port = free_port();
    let ba = bridge(a, a_export, a_import, Some(port), None);
    let bb = bridge(b, b_export, b_import, None, Some(port));
    (ba, bb)
}

/// The slice service every test uses: small limits, classes up to 16 MiB.
pub fn bytes_service(root: &Path, name: &str) -> PubSubService<[u8]> {
    bytes_builder(root, name).open_or_create().unwrap()
}

/// [`bytes_service`]'s builder.
pub fn bytes_builder(root: &Path, name: &str) -> iox_service::PubSubBuilder<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .max_publishers(2)
        .max_subscribers(3)
        .subscriber_buffer(4)
        .max_loans(1)
        .max_held(2)
        .chunk_sizes(&[64, 65536, 16 << 20])
}

/// The payload of sample `seq` of `len` bytes: the sequence number first, then a
/// pattern derived from both.
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|i| (seq as usize).wrapping_mul(31).wrapping_add(i * 7) as u8)
        .collect();
    let n = len.min(8);
    v[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    v
}

/// FNV-1a, the checksum the tests compare.
pub fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The sequence number a payload carries (its first 8 bytes).
pub fn seq_of(b: &[u8]) -> u64 {
    let mut s = [0u8; 8];
    let n = b.len().min(8);
    s[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(s)
}

/// Receives the next sample within `limit`.
pub fn next<P: ?Sized + iox_service::Payload>(
    sub: &Subscriber<P>,
    limit: Duration,
) -> Option<iox_service::Sample<P>> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(s) = sub.receive_timeout(Duration::from_millis(50)).unwrap() {
            return Some(s);
        }
    }
    None
}

/// Sends `probe()` every 100 ms until `sub` receives something (the path through both
/// bridges is up), then drains what else arrives for 300 ms. Panics after 30 s.
pub fn warm_up<P: ?Sized + iox_service::Payload>(mut probe: impl FnMut(), sub: &Subscriber<P>) {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < end, "no sample crossed the bridges within 30 s");
        probe();
        if next(sub, Duration::from_millis(100)).is_some() {
            break;
        }
    }
    while next(sub, Duration::from_millis(300)).is_some() {}
}

/// Sleeps `d` (only where a test must show that nothing more arrives).
pub fn quiet_for<P: ?Sized + iox_service::Payload>(sub: &Subscriber<P>, d: Duration) -> usize {
    let mut n = 0;
    while next(sub, d).is_some() {
        n += 1;
    }
    n
}
