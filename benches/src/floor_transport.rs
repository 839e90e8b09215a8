//! The physical floor: two processes bouncing one shared word, the lower bound of any
//! shared-memory ping-pong on this machine.
//!
//! A small file, mapped shared by both sides, holds two `AtomicU64` words, one per
//! direction, each on its own cache line (128 bytes apart, so that not even the
//! adjacent-line prefetcher pairs them). `send` stores `seq << 16 | first << 8 | last`
//! (Release) into the word of its direction, with a per-direction increasing `seq`;
//! `try_recv` loads (Acquire) the other direction's word and returns the tag when its
//! `seq` is new.
//!
//! The payload size is ignored: only the two-byte tag moves, whatever `len` says. What
//! this measures is the floor for "one cache line moves one way" (a store on one core
//! seen by a load on another), independent of payload size; every real transport pays
//! at least this, plus its own bookkeeping, plus moving its payload.
//!
//! A word holds one message: a sender that ran ahead of its receiver would overwrite
//! an unread one. A ping-pong has one message in flight per direction, so it loses
//! nothing (a resent `STOP` replaces an identical one); this transport is for the
//! latency part only, not for streaming.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

use crate::endpoint::Endpoint;

/// The transport's name in tables and CSV.
pub const NAME: &str = "floor (shared word)";

/// Bytes between the two words: two 64-byte lines.
const STRIDE: usize = 128;
/// Bytes of the file: the two words' strides.
const FILE_LEN: usize = 2 * STRIDE;

/// The file of the ping-pong `id`.
pub fn path(id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("iox-bench-floor-{id}"))
}

/// One side of a shared-word ping-pong.
pub struct FloorEndpoint {
    map: MmapRaw,
    /// Index of the word this side stores into (0: leader -> follower).
    out: usize,
    /// Sequence number of the last message sent.
    sent: u64,
    /// Sequence number of the last message received.
    seen: u64,
    /// The leader's file, removed when it drops; `None` on the follower.
    owned: Option<PathBuf>,
}

impl FloorEndpoint {
    /// Connects side `leader` of the ping-pong `id`. The leader creates and sizes the
    /// file (under a temporary name, then renamed, so the follower never maps a short
    /// one); the follower waits (bounded) until it exists.
    pub fn connect(id: &str, leader: bool) -> Self {
        let path = path(id);
        let file = if leader {
            let tmp = path.with_extension("tmp");
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .expect("create floor file");
            file.set_len(FILE_LEN as u64).expect("size floor file");
            std::fs::rename(&tmp, &path).expect("publish floor file");
            file
        } else {
            open_when_there(&path)
        };
        let map = MmapOptions::new()
            .len(FILE_LEN)
            .map_raw(&file)
            .expect("map floor file");
        Self {
            map,
            out: if leader { 0 } else { 1 },
            sent: 0,
            seen: 0,
            owned: leader.then_some(path),
        }
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < 2);
        // SAFETY: `i * STRIDE + 8 <= FILE_LEN`, inside the mapping, which is
        // page-aligned, so the word is 8-byte aligned; it lives as long as `self`, and
        // the file is never truncated while mapped (the leader sized it before renaming
        // it into place and only removes it on drop, after the follower is done). The
        // bytes are only ever accessed atomically, by both processes, and `AtomicU64`
        // has the size and alignment of `u64`, so a shared reference to it is sound.
        unsafe { &*self.map.as_ptr().add(i * STRIDE).cast::<AtomicU64>() }
    }
}

fn open_when_there(path: &Path) -> File {
    let start = Instant::now();
    loop {
        match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => return f,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "the leader never created {}",
                    path.display()
                );
                std::thread::yield_now();
            }
            Err(e) => panic!("open floor file {}: {e}", path.display()),
        }
    }
}

impl Endpoint for FloorEndpoint {
    fn send(&mut self, _len: usize, first: u8, last: u8) {
        self.sent += 1;
        let v = (self.sent << 16) | (u64::from(first) << 8) | u64::from(last);
        self.word(self.out).store(v, Ordering::Release);
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        let v = self.word(1 - self.out).load(Ordering::Acquire);
        let seq = v >> 16;
        if seq == self.seen {
            return None;
        }
        self.seen = seq;
        Some(((v >> 8) as u8, v as u8))
    }

    /// The word outlives a sender that exits (the file stays mapped by the other side).
    fn lossy(&self) -> bool {
        false
    }
}

impl Drop for FloorEndpoint {
    fn drop(&mut self) {
        if let Some(path) = &self.owned {
            let _ = std::fs::remove_file(path);
        }
    }
}
