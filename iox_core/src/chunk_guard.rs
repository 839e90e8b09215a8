//! Chunk guards: what keeps a reader of a service with an access policy from making a
//! publisher write into a chunk another reader is reading, through the words every
//! participant must be able to write.
//!
//! A reader's payload descriptor is read-only (`crate::access`), but the bookkeeping
//! (each chunk's ownership word) and the queues are in files every participant maps
//! read-write. A hostile reader could clear the ownership word of a chunk a victim
//! holds (a publisher would then loan it and write into it under the victim's eyes),
//! or push an entry naming a chunk a publisher is still writing into a victim's queue.
//! The guards close both without trusting any shared word: they are open file
//! description locks (`F_OFD_SETLK`), which the kernel keeps per port and drops when
//! the port's process dies, and which no other process can take away.
//!
//! Each chunk has two lock bytes in the payload file: `R` (its first byte) and `W` (its
//! second). Each port of a service whose policy names readers opens the payload anew,
//! read-only (its own description, so its locks are its own), and:
//! - a publisher, having claimed a chunk's word for a loan, read-locks `W` and then asks
//!   whether any other description holds a lock on `R` or `W`; if one does (a reader
//!   reading it, or another publisher writing it), it gives the chunk up (unlocks, and
//!   releases its word) and tries the next. It unlocks `W` when the loan is sent,
//!   before the entry is pushed, or when the loan is dropped;
//! - a subscriber, having taken a queue entry's chunk, read-locks `R` and then asks
//!   whether any other description holds `W`; if one does, the entry names a chunk a
//!   publisher is writing (no publisher pushes one: it is forged), and the chunk is
//!   released with an error. It unlocks `R` when the sample is dropped.
//!
//! Why this is enough: every lock operation of the kernel on one file is atomic with
//! respect to the others. A publisher writes a chunk only after its `W` lock was in
//! place and no `R` lock was; a subscriber reads one only after its `R` lock was in
//! place and no `W` lock was. Of a publisher and a subscriber on one chunk, whichever
//! looks second sees the other's lock, so a subscriber never reads while a publisher
//! writes, and a publisher never starts writing while a subscriber reads, whatever the
//! shared words say. Two publishers on one chunk (its word cleared under the first)
//! see each other's `W` the same way.
//!
//! What it costs: two system calls per loan and per receive, one per send and per
//! sample drop, for the ports of such services only (other services' ports carry no
//! guard and take the paths they always took). What a hostile reader can still do with
//! locks: hold `R` or `W` of many chunks, so that publishers find no chunk to loan
//! ([`crate::port::LoanError::HeldByReaders`]) or subscribers refuse what is sent: a
//! denial of service, which ends when its process does (the kernel drops its locks),
//! as a crashed reader's holds end in recovery.

use std::collections::HashSet;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};

/// One port's lock description of a pool's payload (see the module docs).
#[derive(Debug)]
pub struct ChunkGuard {
    fd: OwnedFd,
    /// The payload's address in this process.
    base: usize,
    /// The chunks (payload offsets) this port has locked. A port holds a chunk at
    /// most once (its owner bit); a second take or loan of one it holds comes from a
    /// word someone cleared under it, and is refused without touching the lock the
    /// first holds (one description has one lock per byte, which the first release
    /// would otherwise drop while the second still reads or writes).
    locked: Mutex<HashSet<usize>>,
}

/// `fcntl` lock request on `len` bytes at `start` of `fd`'s file: `kind` is
/// `F_RDLCK`, `F_WRLCK` (a query only) or `F_UNLCK`.
fn flock(kind: libc::c_int, start: usize, len: usize) -> libc::flock {
    // SAFETY: `flock` is a plain C struct for which all-zero bytes are valid.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = start as libc::off_t;
    l.l_len = len as libc::off_t;
    // l_pid must be 0 for open file description locks (zeroed above).
    l
}

impl ChunkGuard {
    /// A guard on the pool whose payload descriptor is `payload` and which is mapped
    /// at `base`: the payload opened anew read-only, for this port's locks alone.
    pub fn new(payload: BorrowedFd<'_>, base: usize) -> std::io::Result<Self> {
        Ok(Self {
            fd: crate::handover::responder::read_only(payload)?,
            base,
            locked: Mutex::new(HashSet::new()),
        })
    }

    fn locked(&self) -> MutexGuard<'_, HashSet<usize>> {
        self.locked.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn offset(&self, addr: *const u8) -> usize {
        (addr as usize).wrapping_sub(self.base)
    }

    /// Sets (`F_RDLCK`) or removes (`F_UNLCK`) this port's lock on one byte, without
    /// waiting; whether it was done.
    fn set(&self, kind: libc::c_int, at: usize) -> bool {
        let l = flock(kind, at, 1);
        // SAFETY: `fd` is our open descriptor; `l` is a valid flock that the kernel
        // only reads for F_OFD_SETLK.
        unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_OFD_SETLK, &raw const l) == 0 }
    }

    /// Whether another description holds a lock on `len` bytes at `at` (one that a
    /// write lock there would conflict with). An error answers yes: no write or read
    /// goes ahead on a lock state the kernel would not tell.
    fn held_by_others(&self, at: usize, len: usize) -> bool {
        let mut l = flock(libc::F_WRLCK, at, len);
        // SAFETY: `fd` is our open descriptor; `l` is a valid flock the kernel reads
        // and overwrites (F_OFD_GETLK writes the conflicting lock, or F_UNLCK).
        let rc = unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_OFD_GETLK, &raw mut l) };
        rc != 0 || l.l_type != libc::F_UNLCK as libc::c_short
    }

    /// A publisher may write the chunk at `addr`, whose word it has claimed: locks its
    /// `W` and finds no other lock on it; if that fails, nothing stays locked (and a
    /// chunk this port has locked already stays as it is).
    pub fn begin_write(&self, addr: *const u8) -> bool {
        let at = self.offset(addr);
        crate::testing::stall_point(crate::testing::Stall::GuardBeforeWriteLock);
        let mut locked = self.locked();
        if locked.contains(&at) || !self.set(libc::F_RDLCK, at + 1) {
            return false;
        }
        if self.held_by_others(at, 2) {
            self.set(libc::F_UNLCK, at + 1);
            return false;
        }
        locked.insert(at);
        true
    }

    /// The publisher is done writing the chunk at `addr` (sent, or given up).
    pub fn end_write(&self, addr: *const u8) {
        let at = self.offset(addr);
        // Under the set's lock: another thread of this port cannot lock the byte anew
        // (a no-op on our own description) between our removal and our unlock.
        let mut locked = self.locked();
        if locked.remove(&at) {
            self.set(libc::F_UNLCK, at + 1);
        }
    }

    /// A subscriber may read the chunk at `addr`, whose entry it has taken: locks its
    /// `R` and finds no publisher writing it; if that fails, nothing stays locked (and
    /// a chunk this port holds already stays as it is).
    pub fn begin_read(&self, addr: *const u8) -> bool {
        let at = self.offset(addr);
        let mut locked = self.locked();
        if locked.contains(&at) || !self.set(libc::F_RDLCK, at) {
            return false;
        }
        crate::testing::stall_point(crate::testing::Stall::GuardBeforeReadCheck);
        if self.held_by_others(at + 1, 1) {
            self.set(libc::F_UNLCK, at);
            return false;
        }
        locked.insert(at);
        true
    }

    /// The subscriber is done reading the chunk at `addr` (its sample dropped).
    pub fn end_read(&self, addr: *const u8) {
        let at = self.offset(addr);
        // Under the set's lock (a sample may be dropped on another thread while the
        // port takes the same chunk again): see `end_write`.
        let mut locked = self.locked();
        if locked.remove(&at) {
            self.set(libc::F_UNLCK, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    use super::*;

    fn payload() -> OwnedFd {
        let fd = rustix::fs::memfd_create("guard", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 4096).unwrap();
        fd
    }

    /// The two sides exclude each other, on one chunk and not on its neighbour.
    #[test]
    fn a_reader_and_a_writer_exclude_each_other() {
        let fd = payload();
        let (reader, writer) = (
            ChunkGuard::new(fd.as_fd(), 0).unwrap(),
            ChunkGuard::new(fd.as_fd(), 0).unwrap(),
        );
        let (chunk, next) = (64 as *const u8, 128 as *const u8);
        assert!(reader.begin_read(chunk));
        assert!(!writer.begin_write(chunk), "read: no write");
        assert!(writer.begin_write(next), "its neighbour is free");
        assert!(!reader.begin_read(next), "written: no read");
        assert!(!reader.begin_read(chunk), "held by this port already: refused");
        reader.end_read(chunk);
        writer.end_write(next);
        assert!(writer.begin_write(chunk) && reader.begin_read(next));
        let other = ChunkGuard::new(fd.as_fd(), 0).unwrap();
        assert!(
            !other.begin_write(chunk),
            "two writers of one chunk: the second refused"
        );
    }

    /// A sample dropped on one thread while the port takes its chunk again on another
    /// (its word cleared and an entry for it forged by a hostile reader): the port never
    /// hands the chunk out without its lock. (Without the set's lock held across the
    /// unlock, this found a writable chunk in about 1 of 1000 rounds.)
    #[test]
    fn a_drop_racing_a_take_of_the_same_chunk_never_loses_the_lock() {
        let fd = payload();
        let reader = Arc::new(ChunkGuard::new(fd.as_fd(), 0).unwrap());
        let writer = ChunkGuard::new(fd.as_fd(), 0).unwrap();
        let chunk = 64usize;
        for _ in 0..2000 {
            assert!(reader.begin_read(chunk as *const u8));
            let barrier = Arc::new(Barrier::new(2));
            let (r, b) = (Arc::clone(&reader), Arc::clone(&barrier));
            let dropper = std::thread::spawn(move || {
                b.wait();
                r.end_read(chunk as *const u8);
            });
            barrier.wait();
            let start = Instant::now();
            let mut taken = false;
            while !taken && start.elapsed() < Duration::from_millis(50) {
                taken = reader.begin_read(chunk as *const u8);
            }
            dropper.join().unwrap();
            if taken {
                assert!(
                    !writer.begin_write(chunk as *const u8),
                    "a held chunk was writable"
                );
                reader.end_read(chunk as *const u8);
            }
        }
    }
}
