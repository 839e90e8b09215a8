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
//! Each chunk has one lock byte: at [`LOCKS_AT`] plus the chunk's offset in the payload,
//! in the service's dynamic segment (far past its end: a lock needs no byte to exist
//! there). Every participant may open that file for writing (the files' mode admits
//! it), so each port of a service whose policy names readers opens it anew (its own
//! description, so its locks are its own), and:
//! - a publisher, having claimed a chunk's word for a loan, write-locks its byte; if
//!   that fails (a reader reading it, or another publisher writing it), it gives the
//!   chunk up (releases its word) and tries the next. It unlocks when the loan is sent,
//!   before the entry is pushed, or when the loan is dropped;
//! - a subscriber, having taken a queue entry's chunk, read-locks its byte; if that
//!   fails, a publisher is writing it (no publisher pushes such an entry: it is forged),
//!   and the chunk is released with an error. It unlocks when the sample is dropped.
//!
//! Why this is enough: the kernel grants a write lock only where no other description
//! holds any lock, and a read lock only where none holds a write lock, each atomically.
//! So a publisher writes a chunk only while no subscriber has it locked, and a
//! subscriber reads one only while no publisher has it locked, whatever the shared
//! words say; two publishers on one chunk (its word cleared under the first) exclude
//! each other the same way.
//!
//! What it costs: one system call per loan, send, receive and sample drop, for the
//! ports of such services only (other services' ports carry no guard and take the
//! paths they always took). What a hostile reader can still do with locks: hold many
//! chunks' bytes (it may open the dynamic segment for writing, so write locks too),
//! so that publishers find no chunk to loan ([`crate::port::LoanError::HeldByReaders`])
//! or subscribers refuse what is sent: a denial of service, which ends when its
//! process does (the kernel drops its locks), as a crashed reader's holds end in
//! recovery.

use std::collections::HashSet;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};

/// Where the chunks' lock bytes start in the lock file: past the end of any dynamic
/// segment (which iox bounds far below this).
pub const LOCKS_AT: usize = 1 << 40;

/// One port's lock description (see the module docs).
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

/// A one-byte lock request at `at` of the lock file: `kind` is `F_RDLCK`, `F_WRLCK`
/// or `F_UNLCK`.
fn flock(kind: libc::c_int, at: usize) -> libc::flock {
    // SAFETY: `flock` is a plain C struct for which all-zero bytes are valid.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = (LOCKS_AT + at) as libc::off_t;
    l.l_len = 1;
    // l_pid must be 0 for open file description locks (zeroed above).
    l
}

impl ChunkGuard {
    /// A guard whose locks are on `lock_file` (the service's dynamic segment, open for
    /// writing), for the pool mapped at `base`: the file opened anew, for this port's
    /// locks alone.
    pub fn new(lock_file: BorrowedFd<'_>, base: usize) -> std::io::Result<Self> {
        Ok(Self {
            fd: crate::handover::responder::reopen(lock_file, rustix::fs::OFlags::RDWR)?,
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

    /// Sets (`F_RDLCK`, `F_WRLCK`) or removes (`F_UNLCK`) this port's lock on the byte
    /// of the chunk at payload offset `at`, without waiting; whether it was done.
    fn set(&self, kind: libc::c_int, at: usize) -> bool {
        let l = flock(kind, at);
        // SAFETY: `fd` is our open descriptor; `l` is a valid flock that the kernel
        // only reads for F_OFD_SETLK.
        unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_OFD_SETLK, &raw const l) == 0 }
    }

    /// Locks the chunk at `addr` with `kind` unless this port holds it already.
    fn begin(&self, kind: libc::c_int, addr: *const u8) -> bool {
        let at = self.offset(addr);
        let mut locked = self.locked();
        if locked.contains(&at) || !self.set(kind, at) {
            return false;
        }
        locked.insert(at);
        true
    }

    /// Unlocks the chunk at `addr` if this port holds it. Under the set's lock: another
    /// thread of this port cannot lock the byte anew (a no-op on our own description)
    /// between our removal and our unlock.
    fn end(&self, addr: *const u8) {
        let at = self.offset(addr);
        let mut locked = self.locked();
        if locked.remove(&at) {
            self.set(libc::F_UNLCK, at);
        }
    }

    /// A publisher may write the chunk at `addr`, whose word it has claimed: no other
    /// port has it locked, and now this one has (for writing). If not, nothing changed.
    pub fn begin_write(&self, addr: *const u8) -> bool {
        crate::testing::stall_point(crate::testing::Stall::GuardBeforeWriteLock);
        self.begin(libc::F_WRLCK, addr)
    }

    /// The publisher is done writing the chunk at `addr` (sent, or given up).
    pub fn end_write(&self, addr: *const u8) {
        self.end(addr);
    }

    /// A subscriber may read the chunk at `addr`, whose entry it has taken: no
    /// publisher has it locked, and now this port has (for reading). If not, nothing
    /// changed.
    pub fn begin_read(&self, addr: *const u8) -> bool {
        let read = self.begin(libc::F_RDLCK, addr);
        if read {
            crate::testing::stall_point(crate::testing::Stall::GuardBeforeReadCheck);
        }
        read
    }

    /// The subscriber is done reading the chunk at `addr` (its sample dropped).
    pub fn end_read(&self, addr: *const u8) {
        self.end(addr);
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
