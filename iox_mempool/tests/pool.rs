//! The pool under contention: threads and processes loaning and releasing at random,
//! with an owner stamp in every chunk to catch a chunk handed out twice at once; and
//! bad bookkeeping files, each refused with its own error.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use iox_mempool::segment::Access;
use iox_mempool::{ChunkError, ChunkHandle, LoanError, MemoryType, OpenPoolError, Owner, Pool, PoolLayout};
use iox_testkit::{Rng, role, spawn_self, wait_ok};

fn layout() -> PoolLayout {
    PoolLayout::new(&[(64, 64), (256, 32), (4096, 16), (65536, 4)]).unwrap()
}

/// Loans and releases `ops` times at random, holding up to 6 chunks at once. Writes
/// `owner:op` into the first and last 8 bytes of each chunk on loan and checks they are
/// unchanged on release; panics if another owner wrote them meanwhile.
fn churn(pool: &Pool, owner: u64, ops: u64) {
    let mut rng = Rng::new(owner.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xDEAD_BEEF);
    let mut held: Vec<(ChunkHandle, u64)> = Vec::with_capacity(8);
    let mut hint = 0;
    let me = Owner::new(owner as u32).unwrap();
    let max = pool.layout().max_chunk_size() as u64;
    for op in 0..ops {
        if held.len() < 6 && (held.is_empty() || rng.below(2) == 0) {
            let size = 1 + rng.below(max) as usize;
            match pool.loan(size, &mut hint, me) {
                Ok(h) => {
                    let (ptr, len) = pool.chunk(h).unwrap();
                    assert!(len >= size);
                    let stamp = (owner << 40) | op;
                    // SAFETY: the chunk is ours until released; it is len >= 16 bytes.
                    unsafe {
                        ptr.cast::<u64>().write_volatile(stamp);
                        ptr.add(len - 8).cast::<u64>().write_volatile(stamp);
                    }
                    held.push((h, stamp));
                }
                Err(LoanError::Exhausted { .. }) => {}
                Err(e) => panic!("loan failed: {e}"),
            }
        } else {
            let (h, stamp) = held.swap_remove(rng.below(held.len() as u64) as usize);
            let (ptr, len) = pool.chunk(h).unwrap();
            // SAFETY: as above; still ours.
            let (a, b) = unsafe {
                (
                    ptr.cast::<u64>().read_volatile(),
                    ptr.add(len - 8).cast::<u64>().read_volatile(),
                )
            };
            assert_eq!(
                (a, b),
                (stamp, stamp),
                "chunk {h:?} was handed to someone else while held"
            );
            assert_eq!(pool.book().owners(h).unwrap(), me.bit());
            assert!(pool.book().release(h, me).unwrap());
        }
    }
    for (h, _) in held {
        pool.book().release(h, me).unwrap();
    }
}

fn assert_full(pool: &Pool) {
    let info = pool.info();
    for (c, l) in info.classes.iter().zip(pool.layout().classes()) {
        assert_eq!(c.free, l.count, "class of {} bytes not full again", c.chunk_size);
    }
}

#[test]
fn threads_churn_a_million_ops_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(Pool::create(dir.path(), "threads", &layout(), MemoryType::Cpu, 0o600).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || churn(&pool, t + 1, 250_000))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_full(&pool);
}

#[test]
fn processes_churn_one_pool_and_lose_nothing() {
    if role().as_deref() == Some("churn") {
        let dir = std::env::var("POOL_DIR").unwrap();
        let owner: u64 = std::env::var("OWNER").unwrap().parse().unwrap();
        let pool = Pool::open(
            Path::new(&dir),
            "procs",
            &layout(),
            Some(MemoryType::Cpu),
            Access::ReadWrite,
        )
        .unwrap();
        churn(&pool, owner, 1_000_000);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::create(dir.path(), "procs", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let children: Vec<_> = (1..=4)
        .map(|owner| {
            spawn_self(
                "processes_churn_one_pool_and_lose_nothing",
                "churn",
                &[
                    ("POOL_DIR", dir.path().display().to_string()),
                    ("OWNER", owner.to_string()),
                ],
            )
        })
        .collect();
    for c in children {
        wait_ok(c, Duration::from_secs(300));
    }
    assert_full(&pool);
}

#[test]
fn read_only_payload_refuses_loans_but_reads() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::create(dir.path(), "ro", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let mut hint = 0;
    let me = Owner::new(0).unwrap();
    let h = pool.loan(10, &mut hint, me).unwrap();
    // SAFETY: loaned chunk of 64 bytes.
    unsafe { pool.chunk(h).unwrap().0.write(42) };
    let ro = Pool::open(dir.path(), "ro", &layout(), None, Access::ReadOnly).unwrap();
    assert_eq!(ro.loan(10, &mut hint, me), Err(LoanError::ReadOnly));
    // SAFETY: reading the chunk the writer filled; nobody writes it concurrently.
    assert_eq!(unsafe { ro.chunk(h).unwrap().0.read() }, 42);
    assert!(ro.payload_region().read_only());
    ro.book().release(h, me).unwrap();
    assert_full(&pool);
}

#[test]
fn loan_errors_are_specific() {
    let dir = tempfile::tempdir().unwrap();
    let l = PoolLayout::new(&[(64, 1)]).unwrap();
    let pool = Pool::create(dir.path(), "small", &l, MemoryType::Cpu, 0o600).unwrap();
    let mut hint = 0;
    let me = Owner::new(3).unwrap();
    assert_eq!(
        pool.loan(65, &mut hint, me),
        Err(LoanError::TooLarge { size: 65, max: 64 })
    );
    let h = pool.loan(1, &mut hint, me).unwrap();
    assert!(matches!(
        pool.loan(1, &mut hint, me),
        Err(LoanError::Exhausted {
            chunk_size: 64,
            count: 1
        })
    ));
    pool.book().release(h, me).unwrap();
    assert_eq!(
        pool.book().release(h, me),
        Err(ChunkError::NotOwned {
            class: 0,
            index: 0,
            owner: 3
        }),
        "double release must be refused"
    );
    assert!(Owner::new(iox_mempool::owners::MAX_OWNERS).is_none());
    assert!(pool.book().handle_from_raw(1 << 24).is_none());
    assert!(pool.book().handle_from_raw(u32::MAX).is_none());
    assert!(pool.book().handle_from_raw(1).is_none());
    assert_eq!(pool.book().handle_from_raw(0), Some(h));
}

/// Hand-offs to queue entries and takes by other owners, as a service does them:
/// one writer thread loans, hands each chunk to a random number of reader queues in
/// one step, readers take entries (sometimes before the writer counted them) and
/// release. Nothing may be freed early (stamps) or lost (full at the end).
#[test]
fn hand_off_and_take_keep_chunks_alive_exactly_as_long_as_needed() {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(Pool::create(dir.path(), "handoff", &layout(), MemoryType::Cpu, 0o600).unwrap());
    let readers = 3;
    type Queue = Mutex<VecDeque<(ChunkHandle, u64)>>;
    let queues: Arc<Vec<Queue>> = Arc::new((0..readers).map(|_| Mutex::new(VecDeque::new())).collect());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader_threads: Vec<_> = (0..readers)
        .map(|r| {
            let (pool, queues, done) = (pool.clone(), queues.clone(), done.clone());
            std::thread::spawn(move || {
                let me = Owner::new(10 + r as u32).unwrap();
                loop {
                    let item = queues[r].lock().unwrap().pop_front();
                    match item {
                        Some((h, stamp)) => {
                            pool.book().take_queued(h, me).unwrap();
                            // SAFETY: we hold the chunk; the writer wrote the stamp
                            // before queueing it and nobody writes it while held.
                            let seen = unsafe { pool.chunk(h).unwrap().0.cast::<u64>().read_volatile() };
                            assert_eq!(seen, stamp, "chunk reused while a reader held it");
                            pool.book().release(h, me).unwrap();
                        }
                        None if done.load(std::sync::atomic::Ordering::Acquire) => return,
                        None => std::thread::yield_now(),
                    }
                }
            })
        })
        .collect();
    let me = Owner::new(0).unwrap();
    let mut rng = Rng::new(7);
    let mut hint = 0;
    for op in 0..200_000u64 {
        let h = match pool.loan(64, &mut hint, me) {
            Ok(h) => h,
            Err(LoanError::Exhausted { .. }) => {
                std::thread::yield_now();
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        // SAFETY: the chunk is ours until handed off; 64 bytes.
        unsafe { pool.chunk(h).unwrap().0.cast::<u64>().write_volatile(op) };
        let n = rng.below(readers as u64 + 1) as usize;
        for q in queues.iter().take(n) {
            q.lock().unwrap().push_back((h, op));
        }
        pool.book().hand_off(h, me, n as u32).unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    for t in reader_threads {
        t.join().unwrap();
    }
    assert_full(&pool);
}

#[test]
fn release_all_frees_exactly_what_an_owner_held() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::create(dir.path(), "all", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let (a, b) = (Owner::new(1).unwrap(), Owner::new(2).unwrap());
    let mut hint = 0;
    let only_a: Vec<_> = (0..5).map(|_| pool.loan(64, &mut hint, a).unwrap()).collect();
    let shared = pool.loan(64, &mut hint, a).unwrap();
    pool.book().hand_off(shared, a, 1).unwrap();
    pool.book().take_queued(shared, b).unwrap();
    let again = pool.loan(64, &mut hint, a).unwrap();
    pool.book().hand_off(again, a, 1).unwrap(); // queued, taken by nobody yet
    let before = pool.info().free_chunks();
    assert_eq!(pool.book().held_by(b), vec![shared]);
    assert_eq!(pool.book().release_all(a), (5, 5));
    assert_eq!(
        pool.book().release_all(a),
        (0, 0),
        "a second pass changes nothing"
    );
    assert_eq!(pool.info().free_chunks(), before + 5);
    assert_eq!(pool.book().release_all(b), (1, 1));
    assert_eq!(
        pool.book()
            .take_queued(again, b)
            .and_then(|()| pool.book().take_queued(again, b)),
        Err(ChunkError::AlreadyOwned {
            class: 0,
            index: again.index(),
            owner: 2
        })
    );
    assert!(pool.book().release(again, b).unwrap());
    assert!(only_a.iter().all(|h| pool.book().owners(*h).unwrap() == 0));
    assert_full(&pool);
}

// ---- bad bookkeeping files -------------------------------------------------------

fn create_then(dir: &Path, stem: &str, f: impl FnOnce(&Path)) {
    drop(Pool::create(dir, stem, &layout(), MemoryType::Cpu, 0o600).unwrap());
    f(&dir.join(format!("{stem}.chunks")));
}

fn open(dir: &Path, stem: &str) -> OpenPoolError {
    Pool::open(dir, stem, &layout(), Some(MemoryType::Cpu), Access::ReadWrite).unwrap_err()
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(bytes, offset)
        .unwrap();
}

#[test]
fn short_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "p", |f| {
        std::fs::File::options()
            .write(true)
            .open(f)
            .unwrap()
            .set_len(100)
            .unwrap()
    });
    let e = open(dir.path(), "p");
    assert!(
        matches!(
            e,
            OpenPoolError::Segment(iox_mempool::segment::OpenSegmentError::WrongLength { len: 100, .. })
        ),
        "{e}"
    );
    // Shorter than the header itself.
    create_then(dir.path(), "q", |f| {
        std::fs::File::options()
            .write(true)
            .open(f)
            .unwrap()
            .set_len(8)
            .unwrap()
    });
    assert!(matches!(open(dir.path(), "q"), OpenPoolError::Segment(_)));
}

#[test]
fn grown_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (stem, file) in [("a", "a.chunks"), ("b", "b.pool")] {
        create_then(dir.path(), stem, |_| {});
        let f = std::fs::File::options()
            .write(true)
            .open(dir.path().join(file))
            .unwrap();
        let len = f.metadata().unwrap().len();
        f.set_len(len + 4096).unwrap();
        let e = open(dir.path(), stem);
        assert!(
            matches!(
                e,
                OpenPoolError::Segment(iox_mempool::segment::OpenSegmentError::WrongLength { .. })
            ),
            "{file}: {e}"
        );
    }
}

#[test]
fn short_payload_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "p", |_| {});
    std::fs::File::options()
        .write(true)
        .open(dir.path().join("p.pool"))
        .unwrap()
        .set_len(4096)
        .unwrap();
    let e = open(dir.path(), "p");
    assert!(
        matches!(
            e,
            OpenPoolError::Segment(iox_mempool::segment::OpenSegmentError::TooShort { .. })
        ),
        "{e}"
    );
}

#[test]
fn wrong_magic_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "p", |f| write_at(f, 0, b"IOXDYN\x00\x01"));
    assert!(matches!(open(dir.path(), "p"), OpenPoolError::WrongMagic { .. }));
}

#[test]
fn foreign_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "p", |f| write_at(f, 0, b"\x7fELF\x02\x01\x01\x00"));
    let e = open(dir.path(), "p");
    assert!(matches!(e, OpenPoolError::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("p.chunks"), "error names the file: {e}");
}

#[test]
fn uninitialised_file_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "p", |f| write_at(f, 0, &[0; 8]));
    assert!(matches!(open(dir.path(), "p"), OpenPoolError::NotReady { .. }));
}

#[test]
fn layout_mismatch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "p", |_| {});
    let other = PoolLayout::new(&[(64, 65), (256, 32), (4096, 16), (65536, 4)]).unwrap();
    let e = Pool::open(dir.path(), "p", &other, None, Access::ReadWrite).unwrap_err();
    assert!(matches!(e, OpenPoolError::LayoutMismatch { .. }), "{e}");
}

#[test]
fn unsupported_version_and_memory_type_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "p", |f| write_at(f, 24, &99u32.to_le_bytes()));
    assert!(matches!(
        open(dir.path(), "p"),
        OpenPoolError::UnsupportedVersion { found: 99, .. }
    ));
    create_then(dir.path(), "q", |_| {});
    let e = Pool::open(
        dir.path(),
        "q",
        &layout(),
        Some(MemoryType::Locked),
        Access::ReadWrite,
    )
    .unwrap_err();
    assert!(matches!(e, OpenPoolError::MemoryTypeMismatch { .. }), "{e}");
}

#[test]
fn symlink_and_missing_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    create_then(dir.path(), "real", |_| {});
    std::os::unix::fs::symlink(dir.path().join("real.chunks"), dir.path().join("link.chunks")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real.pool"), dir.path().join("link.pool")).unwrap();
    let e = open(dir.path(), "link");
    assert!(
        matches!(
            e,
            OpenPoolError::Segment(iox_mempool::segment::OpenSegmentError::NotRegularFile { .. })
        ),
        "{e}"
    );
    assert!(matches!(
        open(dir.path(), "absent"),
        OpenPoolError::Segment(iox_mempool::segment::OpenSegmentError::NotFound { .. })
    ));
}

#[test]
fn create_is_exclusive_and_remove_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let _p = Pool::create(dir.path(), "x", &layout(), MemoryType::Cpu, 0o600).unwrap();
    assert!(Pool::create(dir.path(), "x", &layout(), MemoryType::Cpu, 0o600).is_err());
    assert!(Pool::remove(dir.path(), "x").unwrap());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(!Pool::remove(dir.path(), "x").unwrap());
}

/// A publisher's history: a chunk handed to one kept entry (the history) and to a
/// reader; the publisher joins it again (`hold_queued`) to re-send it to a late
/// reader, and it stays allocated until the history entry goes too.
#[test]
fn hold_queued_joins_a_kept_chunk_and_frees_it_only_with_the_last_hold() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::create(dir.path(), "join", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let (publisher, early, late) = (
        Owner::new(0).unwrap(),
        Owner::new(1).unwrap(),
        Owner::new(2).unwrap(),
    );
    let total = pool.info().free_chunks();
    let h = pool.loan(64, &mut 0, publisher).unwrap();
    // Sent: one entry to the early reader, one kept in the history.
    assert_eq!(pool.book().hand_off(h, publisher, 2), Ok(false));
    pool.book().take_queued(h, early).unwrap();
    assert_eq!(pool.book().release(h, early), Ok(false), "the history keeps it");
    // Re-sent to the late reader.
    pool.book().hold_queued(h, publisher).unwrap();
    assert_eq!(
        pool.book().hold_queued(h, publisher),
        Err(ChunkError::AlreadyOwned {
            class: 0,
            index: h.index(),
            owner: 0
        }),
        "a second join changes nothing"
    );
    assert_eq!(pool.book().hand_off(h, publisher, 1), Ok(false));
    pool.book().take_queued(h, late).unwrap();
    assert_eq!(
        pool.book().release(h, late),
        Ok(false),
        "the history still keeps it"
    );
    // The history entry leaves (dropped as the oldest): taken into the publisher's
    // bit and released, which frees it.
    pool.book().take_queued(h, publisher).unwrap();
    assert_eq!(pool.book().release(h, publisher), Ok(true));
    assert_eq!(pool.info().free_chunks(), total);
    assert_eq!(
        pool.book().hold_queued(h, publisher),
        Err(ChunkError::Free {
            class: 0,
            index: h.index()
        }),
        "a free chunk cannot be joined (that would be a loan)"
    );
    assert_eq!(pool.info().free_chunks(), total, "and the refusal wrote nothing");
}

/// A joined chunk is released with its owner's other chunks by `release_all` (what
/// recovery of a dead publisher does), leaving the kept entry's hold alone.
#[test]
fn release_all_clears_a_join_and_keeps_the_queued_hold() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::create(dir.path(), "joinall", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let (publisher, recoverer) = (Owner::new(0).unwrap(), Owner::new(0).unwrap());
    let total = pool.info().free_chunks();
    let h = pool.loan(64, &mut 0, publisher).unwrap();
    pool.book().hand_off(h, publisher, 1).unwrap();
    pool.book().hold_queued(h, publisher).unwrap();
    assert_eq!(
        pool.book().release_all(publisher),
        (1, 0),
        "held, not freed: the entry keeps it"
    );
    // Recovery drains the dead publisher's history entry into its bit and releases it.
    pool.book().take_queued(h, recoverer).unwrap();
    assert_eq!(pool.book().release(h, recoverer), Ok(true));
    assert_eq!(pool.info().free_chunks(), total);
}
