//! The robust process-shared mutex across real processes: this test binary
//! re-executes itself as children (see `iox_testkit`), each test with its own temp dir
//! as root, holding a small shared file with the mutex and a plain counter.

use std::cell::UnsafeCell;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use iox_mempool::segment::{Access, Segment};
use iox_service::robust_mutex::{Locked, NodeLiveness, RawRobustMutex};
use iox_testkit::{Reaped, env, role, root_env, spawn_self, wait_ok, wait_until};
use lock_api::RawMutex;

const LIMIT: Duration = Duration::from_secs(120);
const FILE: &str = "robust_mutex_test";

/// What the shared file holds (a fresh file is all zero: unlocked, counter 0).
#[repr(C)]
struct Shared {
    mutex: RawRobustMutex,
    /// Touched only under the mutex, with plain reads and writes.
    counter: UnsafeCell<u64>,
    /// Children that are ready (test 2), or 1 once the child holds the lock (test 1).
    ready: AtomicU32,
}

/// The shared file under `root`, mapped: created (zero-filled) by the parent, opened
/// by children.
struct Mapped {
    seg: Segment,
    _node: iox_service::robust_mutex::NodeMembership,
}

impl Mapped {
    fn create(root: &Path) -> Self {
        let node = NodeLiveness::join(root).unwrap();
        let seg = Segment::create(root, FILE, 4096, 0o600).unwrap();
        Self { seg, _node: node }
    }

    fn open(root: &Path) -> Self {
        // Joined before touching the mutex: holders and waiters have a node in root.
        let node = NodeLiveness::join(root).unwrap();
        let seg = Segment::open(root, FILE, Access::ReadWrite, 4096).unwrap();
        Self { seg, _node: node }
    }

    fn shared(&self) -> &Shared {
        assert!(self.seg.len() >= size_of::<Shared>());
        // SAFETY: the mapping is page-aligned and large enough (checked) and lives as
        // long as `self`; Shared is atomics and a u64, valid for any bytes.
        unsafe { &*self.seg.as_ptr().cast::<Shared>() }
    }
}

fn child_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env::<String>("IOX_ROOT"))
}

#[test]
fn a_holder_killed_while_holding_is_taken_over_and_reported() {
    const TEST: &str = "a_holder_killed_while_holding_is_taken_over_and_reported";
    if let Some(r) = role() {
        assert_eq!(r, "holder");
        let mapped = Mapped::open(&child_root());
        let s = mapped.shared();
        assert_eq!(s.mutex.lock_robust(), Locked::Clean);
        s.ready.store(1, Ordering::Release);
        loop {
            std::thread::park(); // until SIGKILLed, holding the lock
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mapped = Mapped::create(dir.path());
    let s = mapped.shared();
    let child = Reaped::new(spawn_self(TEST, "holder", &[root_env(dir.path())]));
    assert!(wait_until(LIMIT, || s.ready.load(Ordering::Acquire) == 1));
    assert!(s.mutex.is_locked());
    assert_eq!(s.mutex.try_lock_robust(), None, "taken from a live holder");
    std::thread::scope(|scope| {
        // A waiter that may already sleep when the holder dies.
        let mutex = &s.mutex;
        let waiter = scope.spawn(move || mutex.try_lock_for_robust(Duration::from_secs(5)));
        child.kill();
        assert_eq!(waiter.join().unwrap(), Some(Locked::PreviousHolderDied));
    });
    assert_eq!(s.mutex.holder(), NodeLiveness::my_id());
    // Told once: the next round is clean.
    // SAFETY: held by this process (the waiter thread took it).
    unsafe { s.mutex.unlock() };
    assert_eq!(s.mutex.try_lock_robust(), Some(Locked::Clean));
    // SAFETY: held.
    unsafe { s.mutex.unlock() };
}

#[test]
fn four_processes_ten_thousand_rounds_each_count_exactly() {
    const TEST: &str = "four_processes_ten_thousand_rounds_each_count_exactly";
    const CHILDREN: u32 = 4;
    const ROUNDS: u64 = 10_000;
    if let Some(r) = role() {
        assert_eq!(r, "counter");
        let mapped = Mapped::open(&child_root());
        let s = mapped.shared();
        // Start together, so the rounds contend.
        s.ready.fetch_add(1, Ordering::AcqRel);
        assert!(wait_until(LIMIT, || s.ready.load(Ordering::Acquire) == CHILDREN));
        for i in 0..ROUNDS {
            // Both entry points: lock_api's and the robust one.
            if i % 2 == 0 {
                s.mutex.lock();
            } else {
                assert_eq!(s.mutex.lock_robust(), Locked::Clean);
            }
            // SAFETY: the counter is only touched under the mutex; read, then write
            // (not an atomic add), so a broken mutex loses increments.
            unsafe {
                let v = std::ptr::read_volatile(s.counter.get());
                std::ptr::write_volatile(s.counter.get(), v + 1);
            }
            // SAFETY: held by this process, taken just above.
            unsafe { s.mutex.unlock() };
        }
        assert!(!s.mutex.take_owner_died());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mapped = Mapped::create(dir.path());
    let s = mapped.shared();
    let children: Vec<_> = (0..CHILDREN)
        .map(|_| spawn_self(TEST, "counter", &[root_env(dir.path())]))
        .collect();
    children.into_iter().for_each(|c| wait_ok(c, LIMIT));
    assert!(!s.mutex.is_locked());
    s.mutex.lock();
    // SAFETY: under the mutex; the children are gone.
    let count = unsafe { *s.counter.get() };
    // SAFETY: held.
    unsafe { s.mutex.unlock() };
    assert_eq!(count, u64::from(CHILDREN) * ROUNDS);
}
