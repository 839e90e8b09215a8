//! Process-global locks that a `fork` never copies held, and telling a forked child
//! from the process it was forked from.
//!
//! A child made by `fork` (without `exec`) has one thread, the one that forked. A lock
//! that another thread of the parent held at that moment is held in the child for
//! good: the child's first use of it blocks forever (a Python program with the `fork`
//! start method and a background iox thread meets exactly this). So every
//! process-global lock of iox is a [`ForkLock`], and this module's `pthread_atfork`
//! handlers hold all of them across every fork: the prepare step, in the forking
//! thread, takes each lock that has been used in this process, in rank order; the
//! parent and child steps release them. No thread is inside any of them when the
//! process is copied, so the child finds each one free and its data consistent.
//!
//! **Ranks.** Each lock has a rank ([`Rank`]), unique in the process: the prepare step
//! takes them in increasing rank, so code that nests them must too (a thread that
//! holds a lock of rank 40 never waits for one of rank 20). Debug builds assert it.
//!
//! **First use.** A lock is known to the handlers from its first use on: its first
//! `lock` registers the handlers (once per process) and records the lock in its rank's
//! slot (a compare-and-swap under a short gate) before it takes the lock. The prepare
//! step takes every recorded lock in rank order, then the gate, and looks again: a
//! lock recorded behind it (a first use racing the fork, perhaps held by now) makes it
//! let go of everything and start over in rank order, so no lock is ever taken against
//! the order (a few rounds at most: each lock is new once per process). Otherwise it
//! keeps the gate across the fork, so nothing is recorded between its last look and
//! the fork. The gate is held only around a compare-and-swap, and the prepare step
//! never waits while it holds it.
//!
//! **Costs and limits.** A fork waits while another thread holds any of them: the
//! longest is the pin registry while a pinner works (an `mlock` of a large pool, a
//! driver registration, which may load a library: glibc 2.36 and later run prepare
//! handlers without their own handler lock, so a library that registers fork handlers
//! as it loads does not deadlock with a waiting prepare step; older glibc and musl hold
//! it, and there that one case can deadlock). Not supported: forking from code that
//! runs under one of these locks (a pinner callback) or from a signal handler that
//! interrupted iox; the prepare step skips the locks the forking thread holds itself,
//! but another thread may hold a lower-ranked one while it waits for them. Code inside
//! a lock must not wait for a fork made by another thread.
//!
//! **Which process am I.** [`generation`] is a process-global number that the child
//! step bumps: a value taken in a process differs from the one its forked child reads.
//! Comparing them ([`is_same_process`]) is one relaxed load, cheap enough for every
//! port operation. [`on_fork_child`] adds a step of the caller's own to the child's
//! (async-signal-safe work only: atomic stores).
//!
//! **What the handlers touch.** They run in whatever thread forks, at any moment: maybe
//! while another thread of the process holds the dynamic loader's lock inside `dlopen`
//! and waits for this very fork (a library constructor that forks from a thread of its
//! own and joins it, as lttng-ust's does when rclpy loads). So the prepare, parent and
//! child steps touch nothing but their ranked locks and atomics: no thread-local (the
//! first use of one with a destructor registers it under the loader's lock, and a
//! loaded library's thread-locals are allocated on a thread's first use), no
//! allocation, no other lock. A [`ForkLock`] is a
//! futex word of its own for that reason: 0 when free, else the holder's thread id (so
//! the prepare step can tell a lock its own thread holds, read from the word, not from a
//! thread-local), with a bit set once a thread sleeps on it; what the prepare step took
//! is one process-global bit set ([`PREPARED`]), which the parent and child steps clear.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use rustix::thread::futex;

/// The rank of a [`ForkLock`]: where the prepare step takes it, and the order in
/// which code nests them (lower first). One lock per rank in a process. Gaps leave
/// room for locks to come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
#[non_exhaustive]
pub enum Rank {
    /// `iox_service`: the node registry (nodes by root).
    Nodes = 4,
    /// `iox_service`: node files kept for roots no longer used.
    RetiredNodes = 5,
    /// `iox_service`: the descriptor hand-over's offers.
    Responder = 8,
    /// `iox_service`: the WaitSet's termination-signal registrations.
    WaitSetSignals = 12,
    /// `iox_cuda`: the process's CUDA pinner.
    CudaPinnerRegistration = 16,
    /// `iox_mempool`: the pin registry (held while a pinner pins or unpins).
    PinRegistry = 20,
    /// `iox_cuda`: one device-memory import at a time.
    CudaImport = 24,
    /// `iox_cuda`: device-memory mappings by allocation.
    CudaDeviceMemory = 25,
    /// `iox_cuda`: this process's inter-process events.
    CudaEvents = 26,
    /// `iox_cuda`: primary contexts by device.
    CudaContexts = 27,
    /// `iox_cuda`: loading the driver.
    CudaDriver = 32,
    /// `iox_python`: values dropped on another thread than their owner's, kept for it
    /// (taken alone: what it holds is dropped after it is released).
    PythonDeferredDrops = 40,
    /// `iox_service`: the stall point armed by a test (taken inside others).
    TestStall = 62,
    /// Tests of this module.
    #[doc(hidden)]
    Test0 = 60,
    /// Tests of this module.
    #[doc(hidden)]
    Test1 = 61,
}

/// Ranks 0..RANKS name locks; bit [`GATE_BIT`] of a rank set is the gate's.
const RANKS: usize = 63;
const GATE_BIT: u64 = 1 << RANKS;
const _: () = assert!((Rank::TestStall as usize) < RANKS);

/// A process-global mutex that no `fork` copies held (see the module docs). A holder
/// that panics releases it (the guard's drop); every user keeps its data consistent
/// across such a panic.
///
/// ```
/// use iox_mempool::fork::{ForkLock, Rank};
/// static COUNT: ForkLock<u64> = ForkLock::new(Rank::Test0, 0);
/// *COUNT.lock() += 1;
/// assert_eq!(*COUNT.lock(), 1);
/// ```
pub struct ForkLock<T> {
    rank: Rank,
    known: AtomicBool,
    raw: RawLock,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which holds the lock: one thread
// at a time, as for `std::sync::Mutex<T>`, which is `Sync` for `T: Send`.
unsafe impl<T: Send> Sync for ForkLock<T> {}

impl<T> ForkLock<T> {
    /// A lock of rank `rank` holding `value`.
    pub const fn new(rank: Rank, value: T) -> Self {
        Self {
            rank,
            known: AtomicBool::new(false),
            raw: RawLock::new(),
            data: UnsafeCell::new(value),
        }
    }
}

impl<T: Send + 'static> ForkLock<T> {
    /// Takes the lock (recording it for the fork handlers on first use).
    pub fn lock(&'static self) -> ForkLockGuard<T> {
        if !self.known.load(Ordering::Acquire) {
            self.make_known();
        }
        let bit = 1u64 << self.rank as u8;
        #[cfg(debug_assertions)]
        {
            let held = HELD.try_with(Cell::get).unwrap_or(0);
            assert!(
                held & !(bit - 1) == 0,
                "ForkLock rank {:?} taken while holding one of equal or higher rank (mask {held:#x})",
                self.rank
            );
        }
        self.raw.lock(thread_id());
        let _ = HELD.try_with(|h| h.set(h.get() | bit));
        ForkLockGuard {
            lock: self,
            bit,
            _not_send: PhantomData,
        }
    }

    /// Records this lock in its rank's slot and makes sure the handlers are registered
    /// (see "First use" in the module docs).
    #[cold]
    fn make_known(&'static self) {
        ensure_registered();
        let mine = (&self.raw as *const RawLock).cast_mut();
        GATE.lock(thread_id());
        let there = SLOTS[self.rank as usize].compare_exchange(
            std::ptr::null_mut(),
            mine,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        GATE.unlock();
        if let Err(there) = there {
            assert!(
                std::ptr::eq(there, mine),
                "two ForkLocks share rank {:?}",
                self.rank
            );
        }
        self.known.store(true, Ordering::Release);
    }
}

/// Holds a [`ForkLock`]; releases it when dropped. Stays on the thread that took it.
pub struct ForkLockGuard<T: 'static> {
    lock: &'static ForkLock<T>,
    bit: u64,
    _not_send: PhantomData<*const ()>,
}

impl<T: 'static> std::ops::Deref for ForkLockGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock: no other thread reaches the data now.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: 'static> std::ops::DerefMut for ForkLockGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` keeps this guard's other borrows out.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: 'static> Drop for ForkLockGuard<T> {
    fn drop(&mut self) {
        let _ = HELD.try_with(|h| h.set(h.get() & !self.bit));
        self.lock.raw.unlock();
    }
}

impl<T: 'static> std::fmt::Debug for ForkLockGuard<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForkLockGuard")
    }
}

/// A futex lock word: 0 when free, else the holder's thread id, with [`WAITERS`] set
/// once a thread sleeps on it (the unlock then wakes one). Taking and releasing it
/// allocate nothing and touch no thread-local, so the fork handlers may.
struct RawLock {
    word: AtomicU32,
}

/// Set in a [`RawLock`]'s word while a thread may sleep on it (thread ids are below
/// 2^22 on Linux).
const WAITERS: u32 = 1 << 31;

impl RawLock {
    const fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
        }
    }

    /// Takes the lock for thread `me`, sleeping while another thread holds it.
    fn lock(&self, me: u32) {
        // Acquire: what the last holder wrote under the lock is seen.
        if self
            .word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended(me);
        }
    }

    #[cold]
    fn lock_contended(&self, me: u32) {
        loop {
            let seen = self.word.load(Ordering::Relaxed);
            if seen == 0 {
                // Taken with the bit set: other sleepers may remain, so our unlock
                // wakes one (at worst a wake-up too many).
                if self
                    .word
                    .compare_exchange(0, me | WAITERS, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            if seen & WAITERS == 0
                && self
                    .word
                    .compare_exchange(seen, seen | WAITERS, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            // Returns at once if the word changed meanwhile (then we look again).
            let _ = futex::wait(&self.word, futex::Flags::PRIVATE, seen | WAITERS, None);
        }
    }

    /// The thread holding it (0: none).
    fn holder(&self) -> u32 {
        self.word.load(Ordering::Relaxed) & !WAITERS
    }

    /// Releases it (whoever holds it: in a forked child, the forking thread's copy
    /// carries the parent's thread id).
    fn unlock(&self) {
        // Release: what the holder wrote under the lock is seen by the next one.
        if self.word.swap(0, Ordering::Release) & WAITERS != 0 {
            let _ = futex::wake(&self.word, futex::Flags::PRIVATE, 1);
        }
    }
}

/// The calling thread's id (one system call; no thread-local).
fn thread_id() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// Held around recording a lock in [`SLOTS`], and by the prepare step from its last
/// look at them across the fork (see "First use" in the module docs); above every
/// rank.
static GATE: RawLock = RawLock::new();

/// Per rank, the lock word of that rank's lock, once used (a `static`'s, never freed).
static SLOTS: [AtomicPtr<RawLock>; RANKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; RANKS];

/// The lock of rank `rank`, if one was used in this process.
fn slot(rank: usize) -> Option<&'static RawLock> {
    let lock = SLOTS[rank].load(Ordering::Acquire);
    // SAFETY: a slot holds null or the address of a `static` ForkLock's lock word.
    (!lock.is_null()).then(|| unsafe { &*lock })
}

/// What the prepare step took (a bit per rank, [`GATE_BIT`] for the gate), released by
/// the parent and child steps.
static PREPARED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The ranks of the locks this thread holds (bit per rank): checked in debug builds
    /// when a lock is taken, never by the fork handlers.
    static HELD: Cell<u64> = const { Cell::new(0) };
}

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Steps of other modules for the child ([`on_fork_child`]): function pointers, null =
/// none. (A step stays for the life of the process: iox's libraries are never unloaded.)
static CHILD_STEPS: [AtomicPtr<()>; 8] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 8];

/// The handlers' registration: 0 = not yet, [`REGISTERED`] = done, else the pid of the
/// process one of whose threads is registering them.
static REGISTRATION: AtomicU32 = AtomicU32::new(0);
const REGISTERED: u32 = u32::MAX;

fn ensure_registered() {
    loop {
        let seen = REGISTRATION.load(Ordering::Acquire);
        if seen == REGISTERED {
            return;
        }
        let me = rustix::process::getpid().as_raw_nonzero().get() as u32;
        if seen != 0 && seen == me {
            // Another thread of this process is registering: a moment.
            std::thread::yield_now();
            continue;
        }
        // Free, or taken by a thread of the process this one was forked from (it
        // never finishes here): ours.
        if REGISTRATION
            .compare_exchange(seen, me, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue;
        }
        // SAFETY: registers plain `extern "C" fn`s without captured state. The prepare
        // step takes this module's lock words; the parent and child steps release them
        // and do atomic stores, which a child may do right after `fork` (module docs,
        // "What the handlers touch"). A child forked while a parent thread was here may
        // register them a second time: the steps are idempotent (the second prepare
        // finds every lock held by its own thread, the second release nothing left).
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        // It fails only with ENOMEM: then forks copy whatever is held, as without this
        // module, which is no reason to refuse to work.
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
        REGISTRATION.store(REGISTERED, Ordering::Release);
        return;
    }
}

/// Takes every lock used in this process in rank order, then the gate, skipping those
/// the forking thread holds itself (read from their words); starts over if a lock was
/// recorded behind it (module docs, "First use").
extern "C" fn prepare() {
    let me = thread_id();
    loop {
        let mut taken = 0u64;
        for rank in 0..RANKS {
            if let Some(lock) = slot(rank)
                && lock.holder() != me
            {
                lock.lock(me);
                taken |= 1 << rank;
            }
        }
        if GATE.holder() != me {
            GATE.lock(me);
            taken |= GATE_BIT;
        }
        // The last look, with the gate: a lock recorded behind us (first used
        // meanwhile) may be held now; start over in rank order. Else the gate stays
        // taken across the fork.
        let missed =
            (0..RANKS).any(|rank| taken & (1 << rank) == 0 && slot(rank).is_some_and(|l| l.holder() != me));
        if !missed {
            PREPARED.fetch_or(taken, Ordering::Relaxed);
            return;
        }
        release(taken);
    }
}

extern "C" fn parent() {
    release(PREPARED.swap(0, Ordering::Relaxed));
}

extern "C" fn child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    for step in &CHILD_STEPS {
        let f = step.load(Ordering::Acquire);
        if !f.is_null() {
            // SAFETY: only `on_fork_child` stores here, and only `fn()` pointers, which
            // have the size and representation of a data pointer on Linux.
            let f: fn() = unsafe { std::mem::transmute::<*mut (), fn()>(f) };
            f();
        }
    }
    release(PREPARED.swap(0, Ordering::Relaxed));
}

/// Releases the locks in `taken` (a bit per rank, [`GATE_BIT`]), the gate first, then
/// the highest rank first (in a child: the copies, which carry the parent's thread id;
/// a wake-up there finds no sleeper).
fn release(taken: u64) {
    if taken & GATE_BIT != 0 {
        GATE.unlock();
    }
    for rank in (0..RANKS).rev() {
        if taken & (1 << rank) != 0
            && let Some(lock) = slot(rank)
        {
            lock.unlock();
        }
    }
}

/// The fork generation of this process: different in a forked child from its
/// parent's. The first call registers the fork handlers.
pub fn generation() -> u64 {
    if REGISTRATION.load(Ordering::Acquire) != REGISTERED {
        ensure_registered();
    }
    GENERATION.load(Ordering::Relaxed)
}

/// Whether this is still the process (fork generation) `generation` was taken in.
#[inline]
pub fn is_same_process(generation: u64) -> bool {
    GENERATION.load(Ordering::Relaxed) == generation
}

/// Runs `step` in every child forked from now on, right after the fork, before any of
/// the locks is released (so `step` must only do what a child may do then: atomic
/// stores). Idempotent for the same function; at most eight in a process.
pub fn on_fork_child(step: fn()) {
    ensure_registered();
    let f = step as *mut ();
    for slot in &CHILD_STEPS {
        match slot.compare_exchange(std::ptr::null_mut(), f, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(there) if there == f => return,
            Err(_) => {}
        }
    }
    panic!("more than eight fork child steps");
}

/// The ranks of the locks used in this process so far (test hook).
#[cfg(feature = "testing")]
pub fn ranks_in_use() -> Vec<u8> {
    (0..RANKS)
        .filter(|&r| slot(r).is_some())
        .map(|r| r as u8)
        .collect()
}

/// Takes the lock of rank `rank`, if one was used in this process, and keeps it until
/// the returned guard is dropped (test hook: a thread holds each lock in turn while
/// another forks).
#[cfg(feature = "testing")]
pub fn hold_rank(rank: u8) -> Option<RankHeld> {
    if rank as usize >= RANKS {
        return None;
    }
    let lock = slot(rank as usize)?;
    lock.lock(thread_id());
    Some(RankHeld(lock))
}

/// A lock held by [`hold_rank`]; released when dropped.
#[cfg(feature = "testing")]
#[derive(Debug)]
pub struct RankHeld(&'static RawLock);

#[cfg(feature = "testing")]
impl Drop for RankHeld {
    fn drop(&mut self) {
        self.0.unlock();
    }
}

impl std::fmt::Debug for RawLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawLock(held by {})", self.holder())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static A: ForkLock<u32> = ForkLock::new(Rank::Test0, 0);
    static B: ForkLock<u32> = ForkLock::new(Rank::Test1, 0);

    #[test]
    fn nested_in_rank_order_and_counted_per_thread() {
        let a = A.lock();
        let b = B.lock();
        let held = HELD.with(Cell::get);
        assert_eq!(held, (1 << Rank::Test0 as u8) | (1 << Rank::Test1 as u8));
        drop(b);
        drop(a);
        assert_eq!(HELD.with(Cell::get), 0);
    }

    #[test]
    #[cfg(debug_assertions)]
    fn nesting_against_the_ranks_is_caught() {
        let got = std::thread::spawn(|| {
            let _b = B.lock();
            let _a = A.lock();
        })
        .join();
        assert!(
            got.is_err(),
            "taking rank Test0 under Test1 must panic in debug builds"
        );
    }
}
