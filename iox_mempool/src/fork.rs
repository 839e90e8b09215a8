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
//! interrupted iox; the prepare step skips the locks the forking thread is known to
//! hold, but another thread may hold a lower-ranked one while it waits for them. A
//! thread that forks from a thread-local destructor takes nothing (its thread-locals
//! are gone). Code inside a lock must not wait for a fork made by another thread.
//!
//! **Which process am I.** [`generation`] is a process-global number that the child
//! step bumps: a value taken in a process differs from the one its forked child reads.
//! Comparing them ([`is_same_process`]) is one relaxed load, cheap enough for every
//! port operation. [`on_fork_child`] adds a step of the caller's own to the child's
//! (async-signal-safe work only: atomic stores).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

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
    /// `iox_service`: the stall point armed by a test (taken inside others).
    TestStall = 62,
    /// Tests of this module.
    #[doc(hidden)]
    Test0 = 60,
    /// Tests of this module.
    #[doc(hidden)]
    Test1 = 61,
}

const RANKS: usize = 64;
const _: () = assert!((Rank::TestStall as usize) < RANKS);

/// A process-global mutex that no `fork` copies held (see the module docs). Poisoning
/// is ignored: every user keeps its data consistent across a panic of a holder.
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
    mutex: Mutex<T>,
}

impl<T> ForkLock<T> {
    /// A lock of rank `rank` holding `value`.
    pub const fn new(rank: Rank, value: T) -> Self {
        Self {
            rank,
            known: AtomicBool::new(false),
            mutex: Mutex::new(value),
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
        let guard = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
        let _ = HELD.try_with(|h| h.set(h.get() | bit));
        ForkLockGuard { guard, bit }
    }

    /// Records this lock in its rank's slot and makes sure the handlers are registered
    /// (see "First use" in the module docs).
    #[cold]
    fn make_known(&'static self) {
        ensure_registered();
        let _gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &SLOTS[self.rank as usize];
        let me: &'static dyn Hold = self;
        let mine = Box::into_raw(Box::new(me));
        match slot.compare_exchange(std::ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            Err(there) => {
                // SAFETY: `mine` came from `Box::into_raw` above and was not published.
                drop(unsafe { Box::from_raw(mine) });
                // SAFETY: a slot holds only leaked boxes of `&'static dyn Hold`, never freed.
                let there: &'static dyn Hold = unsafe { *there };
                assert!(
                    std::ptr::addr_eq(there as *const dyn Hold, self as *const Self),
                    "two ForkLocks share rank {:?}",
                    self.rank
                );
            }
        }
        self.known.store(true, Ordering::Release);
    }
}

/// Holds a [`ForkLock`]; releases it when dropped.
pub struct ForkLockGuard<T: 'static> {
    guard: MutexGuard<'static, T>,
    bit: u64,
}

impl<T: 'static> std::ops::Deref for ForkLockGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T: 'static> std::ops::DerefMut for ForkLockGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T: 'static> Drop for ForkLockGuard<T> {
    fn drop(&mut self) {
        let _ = HELD.try_with(|h| h.set(h.get() & !self.bit));
    }
}

impl<T: 'static> std::fmt::Debug for ForkLockGuard<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForkLockGuard")
    }
}

/// What the prepare step does with a lock, whatever it holds.
trait Hold: Sync {
    fn hold(&'static self) -> Box<dyn Any>;
}

impl<T: Send + 'static> Hold for ForkLock<T> {
    fn hold(&'static self) -> Box<dyn Any> {
        Box::new(self.mutex.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Held around recording a lock in [`SLOTS`], and by the prepare step from its last
/// look at them across the fork (see "First use" in the module docs).
static GATE: Mutex<()> = Mutex::new(());

/// Per rank, the lock of that rank, once used (a leaked box, never freed).
static SLOTS: [AtomicPtr<&'static dyn Hold>; RANKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; RANKS];

thread_local! {
    /// The ranks of the locks this thread holds (bit per rank).
    static HELD: Cell<u64> = const { Cell::new(0) };
    /// The guards the prepare step took, released by the parent and child steps.
    static PREPARED: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
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
        // step takes process-local locks; the parent and child steps release them and
        // do atomic stores, which a child may do right after `fork`. A child forked
        // while a parent thread was here may register them a second time: the steps
        // are idempotent (the second prepare finds its thread's guards taken already).
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        // It fails only with ENOMEM: then forks copy whatever is held, as without this
        // module, which is no reason to refuse to work.
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
        REGISTRATION.store(REGISTERED, Ordering::Release);
        return;
    }
}

extern "C" fn prepare() {
    let _ = PREPARED.try_with(|prepared| {
        let Ok(mut prepared) = prepared.try_borrow_mut() else {
            return;
        };
        if !prepared.is_empty() {
            return; // registered twice: taken already
        }
        let held = HELD.try_with(Cell::get).unwrap_or(0);
        loop {
            let mut taken = 0u64;
            for (rank, slot) in SLOTS.iter().enumerate() {
                let lock = slot.load(Ordering::Acquire);
                if lock.is_null() || held & (1 << rank) != 0 {
                    continue;
                }
                // SAFETY: a slot holds only leaked boxes of `&'static dyn Hold`, never freed.
                let lock: &'static dyn Hold = unsafe { *lock };
                prepared.push(lock.hold());
                taken |= 1 << rank;
            }
            // The last look, with the gate: a lock recorded behind us (first used
            // meanwhile) may be held now; start over in rank order (see "First use"
            // in the module docs). Else the gate stays taken across the fork.
            let gate = GATE.lock().unwrap_or_else(|e| e.into_inner());
            let missed = SLOTS.iter().enumerate().any(|(rank, slot)| {
                !slot.load(Ordering::Acquire).is_null() && (taken | held) & (1 << rank) == 0
            });
            if !missed {
                prepared.push(Box::new(gate));
                return;
            }
            drop(gate);
            while let Some(guard) = prepared.pop() {
                drop(guard);
            }
        }
    });
}

extern "C" fn parent() {
    release_prepared();
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
    release_prepared();
}

/// The parent and child steps: the guards go (in the child: the copies, one atomic
/// swap each, and a futex wake if a parent thread waited, harmless there).
fn release_prepared() {
    let _ = PREPARED.try_with(|prepared| {
        if let Ok(mut prepared) = prepared.try_borrow_mut() {
            // In reverse: the highest rank first.
            while let Some(guard) = prepared.pop() {
                drop(guard);
            }
        }
    });
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
        .filter(|&r| !SLOTS[r].load(Ordering::Acquire).is_null())
        .map(|r| r as u8)
        .collect()
}

/// Takes the lock of rank `rank`, if one was used in this process, and keeps it until
/// the returned guard is dropped (test hook: a thread holds each lock in turn while
/// another forks).
#[cfg(feature = "testing")]
pub fn hold_rank(rank: u8) -> Option<Box<dyn Any>> {
    let lock = SLOTS.get(rank as usize)?.load(Ordering::Acquire);
    if lock.is_null() {
        return None;
    }
    // SAFETY: a slot holds only leaked boxes of `&'static dyn Hold`, never freed.
    let lock: &'static dyn Hold = unsafe { *lock };
    Some(lock.hold())
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
