//! One side of a ping-pong, whatever carries it, and the loops both sides run.
//!
//! The sender writes only the first and last byte of each payload (a tag), the
//! receiver reads them back: what the numbers compare is moving a payload of that size
//! between processes, not filling it. Tags cycle through 1..=254; `STOP` (first byte 0,
//! last 255) ends the follower.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// First and last byte of the message that stops a follower.
pub const STOP: (u8, u8) = (0, 255);

/// A connected endpoint: sends to, and busy-polls from, the other process.
pub trait Endpoint {
    /// Sends `len` bytes whose first byte is `first` and last byte is `last`.
    fn send(&mut self, len: usize, first: u8, last: u8);
    /// A payload's first and last byte, if one has arrived.
    fn try_recv(&mut self) -> Option<(u8, u8)>;
    /// Whether a payload can be lost (dropped when a buffer overflows, or dropped with
    /// its sender when the sending process exits).
    fn lossy(&self) -> bool {
        true
    }
    /// Busy-polls until a payload arrives; returns its first and last byte.
    fn recv(&mut self) -> (u8, u8) {
        loop {
            if let Some(got) = self.try_recv() {
                return got;
            }
            std::hint::spin_loop();
        }
    }
}

/// Sends `STOP` until it comes back: a transport that drops samples under load may
/// drop one `STOP`, never all of them.
pub fn stop(e: &mut (impl Endpoint + ?Sized), len: usize) {
    let mut last = None::<Instant>;
    loop {
        if last.is_none_or(|t| t.elapsed() > Duration::from_millis(1)) {
            e.send(len, STOP.0, STOP.1);
            last = Some(Instant::now());
        }
        if e.try_recv() == Some(STOP) {
            return;
        }
    }
}

impl Endpoint for Box<dyn Endpoint> {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        (**self).send(len, first, last)
    }
    fn try_recv(&mut self) -> Option<(u8, u8)> {
        (**self).try_recv()
    }
    fn recv(&mut self) -> (u8, u8) {
        (**self).recv()
    }
    fn lossy(&self) -> bool {
        (**self).lossy()
    }
}

/// Follower, after the first `STOP`: echoes further `STOP`s until none has come for
/// 200 ms, so the leader's copy of our answer is not lost with our process (some
/// transports drop what an exited sender sent).
pub fn linger(e: &mut (impl Endpoint + ?Sized), len: usize) {
    if !e.lossy() {
        return;
    }
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_millis(200) {
        if e.try_recv() == Some(STOP) {
            e.send(len, STOP.0, STOP.1);
            last = Instant::now();
        }
    }
}

/// Follower: echoes every payload until `STOP` (which it echoes too).
pub fn follow(e: &mut (impl Endpoint + ?Sized), len: usize) {
    loop {
        let (first, last) = e.recv();
        e.send(len, first, last);
        if (first, last) == STOP {
            return linger(e, len);
        }
    }
}

/// What a leader measured.
pub struct PingPong {
    /// One-way latency (round trip / 2) in ns, after warm-up.
    pub one_way: Histogram<u64>,
    /// The very first round trip / 2, in ns (before warm-up).
    pub first: u64,
}

/// Leader: one timed first round trip, `warmup` untimed, then up to `iters` timed
/// round trips (stopping early after `budget`), then `STOP`.
pub fn lead(
    e: &mut (impl Endpoint + ?Sized),
    len: usize,
    warmup: u64,
    iters: u64,
    budget: Duration,
) -> PingPong {
    let mut one_way = Histogram::<u64>::new_with_bounds(1, 120_000_000_000, 3).expect("valid bounds");
    let mut tag = 0u8;
    let mut round = |e: &mut dyn FnMut(usize, u8, u8) -> (u8, u8)| {
        tag = tag % 254 + 1;
        let t = tag.wrapping_mul(7) | 1;
        let start = Instant::now();
        let got = e(len, tag, t);
        let ns = start.elapsed().as_nanos() as u64;
        assert_eq!(got, (tag, t), "echo carried the wrong bytes");
        ns
    };
    let mut io = |len: usize, first: u8, last: u8| {
        e.send(len, first, last);
        e.recv()
    };
    let first = round(&mut io) / 2;
    for _ in 0..warmup {
        round(&mut io);
    }
    let start = Instant::now();
    for i in 0..iters {
        let ns = round(&mut io);
        one_way.record((ns / 2).max(1)).expect("within bounds");
        if i % 64 == 0 && start.elapsed() > budget {
            break;
        }
    }
    stop(e, len);
    PingPong { one_way, first }
}
