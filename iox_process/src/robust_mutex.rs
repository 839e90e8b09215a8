//! A robust process-shared mutex on a futex word in shared memory, implementing
//! [`lock_api::RawMutex`] and [`lock_api::RawMutexTimed`].
//!
//! [`RawRobustMutex`] lives in shared memory: `repr(C)`, 16 bytes, 8-aligned, no
//! pointers, and all-zero means unlocked, so a fresh (zero-filled) shared-memory file
//! holds a valid unlocked mutex and [`lock_api::RawMutex::INIT`] is the zeroed value.
//! Its words:
//! - `holder`: the node id of the process holding it (0 = free). Taking it is a CAS
//!   from 0 to our id; releasing it a CAS from our id to 0.
//! - `futex`: 0 = no sleepers, 1 = there may be sleepers. A waiter sets it to 1 before
//!   it sleeps on it; an unlocker that swaps a 1 out wakes one sleeper.
//! - `owner_died`: 1 once a holder was found dead and replaced, until a holder reads
//!   and clears it ([`RawRobustMutex::lock_robust`] and friends, or
//!   [`RawRobustMutex::take_owner_died`]).
//!
//! **Who holds it.** The holder is a *process* (its node id, see
//! `crate::node`), not a thread: another thread of the holding process is
//! a live holder like any other and waits; the same thread locking it twice
//! deadlocks (it is not reentrant). A guard may be sent to and dropped on another
//! thread of the same process (the guard marker is [`lock_api::GuardSend`]).
//!
//! **Dead holders.** A holder that dies never unlocks and never wakes anyone. So no
//! waiter sleeps longer than [`WAKE_INTERVAL`] at a time: each time it has waited that
//! long since it last looked, it asks whether the holder is alive
//! ([`Liveness::is_alive`]; for iox's nodes, whether the holder's node lock is held).
//! [`RawRobustMutex::try_lock_robust`] asks at once, and a timed wait asks once more
//! before giving up. A holder proven dead is replaced by a CAS from its id to ours
//! (so of several waiters that found it dead, one takes over), `owner_died` is set,
//! and the new holder is told: [`Locked::PreviousHolderDied`]. What the dead holder
//! guarded may be half-changed; the new holder repairs it. The `lock_api` methods
//! cannot return this; after them, [`RawRobustMutex::take_owner_died`] tells.
//!
//! The interval is 20 ms: a probe of the holder's node file is a few system calls
//! (open, flock, close: some microseconds), so a waiter spends about 0.05 % of a core
//! on it, and a dead holder delays the next one by at most about 20 ms, well below the
//! restarts and timeouts that follow a crash. It bounds only how late a *death* is
//! noticed: an unlock wakes a sleeper at once. (A waiter does not probe as soon as it
//! finds the lock taken, so contended hand-overs between live processes cost no file
//! system calls.)
//!
//! **No spinning.** Waiters sleep on the futex (a shared futex, not a process-private
//! one: the sleepers are in different processes) with a timeout; they never spin and
//! never poll with `sleep`.
//!
//! **Liveness.** [`lock_api::RawMutex`] methods take only `&self`, so "who am I" and
//! "is holder X alive" come from process-global functions, behind the [`Liveness`]
//! trait; the mutex is generic over it, with [`NodeLiveness`] (iox's nodes) as the
//! default and fakes in tests. With [`NodeLiveness`], a process has one node id while
//! it has a node anywhere (`crate::node::process_node_id`), and "alive" is
//! judged by the holder's node file in each root where this process has a node. The
//! contract: a process that holds or waits for a mutex in shared memory under a root
//! has a node there (iox services and cleanups do; others call
//! [`NodeLiveness::join`]), so the holder's node file is found there, and its id does
//! not change while it holds the mutex. A holder whose node file is missing everywhere
//! is dead (node files exist wherever their ids are recorded).
//!
//! **fork.** A child forked without `exec` has another node id: it does not hold what
//! its parent holds (the parent still does), and a guard it inherited unlocks nothing
//! when dropped there (unlocking only releases our own id). It may lock the mutex like
//! any other process. But it shares its parent's node lock until it execs (see
//! `crate::node`), so a parent killed while holding the mutex looks alive,
//! and waiters wait, until the child exits or execs.
//!
//! Memory orderings: taking the lock is Acquire (the holder sees everything the
//! previous holder wrote before releasing); releasing is a SeqCst CAS followed by a
//! SeqCst swap of the futex word, which pairs with the waiter's SeqCst swap to 1 and
//! SeqCst re-read of the holder (a store-load pattern: either the waiter sees the lock
//! free, or the unlocker sees the sleeper flag and wakes it). A dead holder never
//! releases, so no release-acquire pair covers what it wrote: the taker-over sees it
//! because the holder's process has exited and its death was learnt through system
//! calls (the flock probe of its node file), which order memory across processes
//! beyond the language's model. The takeover CAS is Acquire all the same. What a dead
//! holder left may be half-done: that is why the taker-over is told.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::node::{self, Node};

/// How long a waiter sleeps at most before it checks whether the holder is alive
/// (see the module docs).
pub const WAKE_INTERVAL: Duration = Duration::from_millis(20);

/// Who this process is and whether another is alive, for [`RawRobustMutex`].
///
/// # Safety
/// Mutual exclusion rests on this: [`Liveness::me`] must be non-zero and the same for
/// everything that must not hold the lock twice (a process, for iox's nodes) while it
/// runs, and [`Liveness::is_alive`] must never call a live holder dead. An
/// implementation that breaks either lets two holders in at once (two `&mut` to the
/// guarded data).
pub unsafe trait Liveness {
    /// The id of this process (or of whatever unit holds locks); never 0.
    fn me() -> u64;
    /// Whether the holder `id` is alive. Must be `true` for [`Liveness::me`], and may
    /// say `false` only when the holder is certainly gone: a wrong "dead" breaks mutual
    /// exclusion, a wrong "alive" only delays a takeover.
    fn is_alive(id: u64) -> bool;
}

/// iox's nodes: one id per process (`crate::node::process_node_id`);
/// alive while its node lock is held (probed in every root where this process has a
/// node).
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeLiveness;

// SAFETY: node ids are never 0 and one per process while it has a node anywhere (a
// forked or exec'ed program gets a new one, and an id whose files were all removed is
// never used again: see `node::RETIRED`); a node is called dead only when its lock is
// free or its file is missing under every root where this process has a node, which
// the contract above (a holder has a node under the mutex's root, and so does this
// process) makes mean that it is gone (see `node::is_alive`).
unsafe impl Liveness for NodeLiveness {
    fn me() -> u64 {
        node::process_node_id()
    }

    fn is_alive(id: u64) -> bool {
        node::is_alive_anywhere(id)
    }
}

impl NodeLiveness {
    /// Makes this process a node under `root` (its node file there, locked), for as
    /// long as the returned value (or any iox service of this process under `root`)
    /// lives. Needed before locking or waiting for a [`RawRobustMutex`] in shared
    /// memory under `root` without an iox service there.
    pub fn join(root: &Path) -> std::io::Result<NodeMembership> {
        Node::for_root(&node::absolute_root(root)).map(|node| NodeMembership { _node: node })
    }

    /// This process's node id (what [`RawRobustMutex::holder`] reads while it holds
    /// one).
    pub fn my_id() -> u64 {
        node::process_node_id()
    }
}

/// This process's node under one root; see [`NodeLiveness::join`].
#[derive(Debug)]
pub struct NodeMembership {
    _node: Arc<Node>,
}

/// How a lock was taken.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locked {
    /// From a holder that unlocked it (or it was free).
    Clean,
    /// A holder died holding it (and no holder has been told since): what it guards
    /// may be half-changed and should be repaired.
    PreviousHolderDied,
}

/// A robust process-shared mutex: see the module docs. All-zero = unlocked.
#[repr(C)]
pub struct RawRobustMutex<L: Liveness = NodeLiveness> {
    /// Node id of the holder, 0 = free.
    holder: AtomicU64,
    /// 0 = no sleepers, 1 = maybe sleepers (the futex word).
    futex: AtomicU32,
    /// 1 = a holder died holding it, and no holder has read that yet.
    owner_died: AtomicU32,
    _liveness: PhantomData<fn() -> L>,
}

const _: () = assert!(size_of::<RawRobustMutex>() == 16 && align_of::<RawRobustMutex>() == 8);

impl<L: Liveness> Default for RawRobustMutex<L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<L: Liveness> std::fmt::Debug for RawRobustMutex<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRobustMutex")
            .field("holder", &self.holder())
            .finish_non_exhaustive()
    }
}

impl<L: Liveness> RawRobustMutex<L> {
    /// An unlocked mutex (all zero).
    pub const fn new() -> Self {
        Self {
            holder: AtomicU64::new(0),
            futex: AtomicU32::new(0),
            owner_died: AtomicU32::new(0),
            _liveness: PhantomData,
        }
    }

    /// The id of the holder now (0 = free); may be stale as soon as it is read.
    pub fn holder(&self) -> u64 {
        self.holder.load(Ordering::Relaxed)
    }

    /// Takes the lock if it is free or its holder is dead; does not wait.
    pub fn try_lock_robust(&self) -> Option<Locked> {
        self.acquire(Some(Instant::now())).map(|_| self.report())
    }

    /// Takes the lock, waiting as long as a live holder keeps it.
    pub fn lock_robust(&self) -> Locked {
        self.acquire(None);
        self.report()
    }

    /// Takes the lock, waiting at most `timeout` for a live holder; `None` if it did
    /// not get it.
    pub fn try_lock_for_robust(&self, timeout: Duration) -> Option<Locked> {
        // Too far to represent (e.g. Duration::MAX): no limit.
        self.acquire(Instant::now().checked_add(timeout))
            .map(|_| self.report())
    }

    /// Takes the lock, waiting until `deadline` at most for a live holder; `None` if
    /// it did not get it.
    pub fn try_lock_until_robust(&self, deadline: Instant) -> Option<Locked> {
        self.acquire(Some(deadline)).map(|_| self.report())
    }

    /// Whether a holder died holding the lock and no holder was told so yet; clears
    /// it. Call it while holding the lock (after the `lock_api` methods, which cannot
    /// tell); the `*_robust` methods do it themselves.
    pub fn take_owner_died(&self) -> bool {
        // Relaxed: only the holder touches this word, and holders are ordered by the
        // Acquire/Release of `holder`.
        self.owner_died.swap(0, Ordering::Relaxed) != 0
    }

    fn report(&self) -> Locked {
        if self.take_owner_died() {
            Locked::PreviousHolderDied
        } else {
            Locked::Clean
        }
    }

    /// Takes the lock, waiting until `deadline` (`None`: forever). `Some(true)` if it
    /// was taken over from a dead holder (then `owner_died` is set).
    fn acquire(&self, deadline: Option<Instant>) -> Option<bool> {
        let me = L::me();
        // 0 is "free": a holder with id 0 would not exclude anyone.
        assert_ne!(me, 0, "a Liveness id must not be 0");
        // Fast path: free. Acquire: see what the last holder wrote.
        if self
            .holder
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Some(false);
        }
        self.acquire_slow(me, deadline)
    }

    fn acquire_slow(&self, me: u64, deadline: Option<Instant>) -> Option<bool> {
        let mut next_probe = Instant::now() + WAKE_INTERVAL;
        let mut slept = false;
        loop {
            let now = Instant::now();
            let expired = deadline.is_some_and(|d| now >= d);
            // Liveness every WAKE_INTERVAL, and once more before giving up.
            let probe = expired || now >= next_probe;
            if probe {
                next_probe = now + WAKE_INTERVAL;
            }
            if let Some(took_over) = self.try_take(me, probe) {
                if slept {
                    // Other sleepers may remain, and the unlock that woke us cleared
                    // the flag: set it again so our unlock wakes the next one.
                    // Relaxed: our own unlock, later in this thread, reads it.
                    self.futex.store(1, Ordering::Relaxed);
                }
                return Some(took_over);
            }
            if expired {
                if slept {
                    // We may have consumed a wake-up meant to hand the lock on: pass
                    // it to another sleeper (a spare wake-up is harmless).
                    wake_one(&self.futex);
                }
                return None;
            }
            // Announce a sleeper, then look again (SeqCst both: the store-load pattern
            // with unlock's CAS and swap, see the module docs).
            self.futex.swap(1, Ordering::SeqCst);
            if self.holder.load(Ordering::SeqCst) == 0 {
                continue;
            }
            let until = deadline.map_or(next_probe, |d| d.min(next_probe));
            wait(&self.futex, 1, until.saturating_duration_since(Instant::now()));
            slept = true;
        }
    }

    /// One attempt: takes the lock if free, or (if `probe`) from a dead holder.
    fn try_take(&self, me: u64, probe: bool) -> Option<bool> {
        let mut cur = self.holder.load(Ordering::Relaxed);
        loop {
            if cur == 0 {
                match self
                    .holder
                    .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => return Some(false),
                    Err(now) => cur = now,
                }
                continue;
            }
            if !probe || cur == me || L::is_alive(cur) {
                return None;
            }
            // Dead: replace exactly that id, so one of those that found it dead wins.
            // Acquire: see what it wrote (its death was learnt through a system call).
            match self
                .holder
                .compare_exchange(cur, me, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    // Relaxed: read by holders only (ordered through `holder`).
                    self.owner_died.store(1, Ordering::Relaxed);
                    return Some(true);
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Releases the lock if this process holds it (see the module docs on `fork`).
    fn release(&self) {
        // SeqCst (a Release at least, for the next holder): see the module docs.
        if self
            .holder
            .compare_exchange(L::me(), 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            return; // not ours: a guard inherited through fork
        }
        if self.futex.swap(0, Ordering::SeqCst) != 0 {
            wake_one(&self.futex);
        }
    }
}

/// Sleeps on the shared futex `word` while it is `expected`, at most `timeout`.
fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    if timeout.is_zero() {
        return;
    }
    let ts = rustix::fs::Timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    // Shared (no PRIVATE flag): the sleepers are in different processes.
    match rustix::thread::futex::wait(word, rustix::thread::futex::Flags::empty(), expected, Some(&ts)) {
        Ok(()) | Err(rustix::io::Errno::AGAIN | rustix::io::Errno::TIMEDOUT | rustix::io::Errno::INTR) => {}
        // Cannot happen for an aligned word in mapped memory; should it anyway, do not
        // turn the wait into a busy loop.
        Err(_) => std::thread::sleep(timeout),
    }
}

fn wake_one(word: &AtomicU32) {
    let _ = rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), 1);
}

// SAFETY: the lock is taken only by a CAS of `holder` from 0, or from the id of a
// holder proven dead (the Liveness contract: never "dead" for a live one), to ours, so
// no two live holders ever hold it: a dead process touches nothing any more. Two
// threads of one process share an id, but each takes the lock by its own CAS, so they
// exclude each other too. Acquire on taking and Release (SeqCst) on releasing order
// the critical sections.
unsafe impl<L: Liveness> lock_api::RawMutex for RawRobustMutex<L> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();

    // The holder is the process, so any of its threads may unlock.
    type GuardMarker = lock_api::GuardSend;

    fn lock(&self) {
        // `owner_died` stays set for take_owner_died.
        self.acquire(None);
    }

    fn try_lock(&self) -> bool {
        self.acquire(Some(Instant::now())).is_some()
    }

    unsafe fn unlock(&self) {
        self.release();
    }

    fn is_locked(&self) -> bool {
        self.holder() != 0
    }
}

// SAFETY: as for RawMutex; the timed methods take the lock the same way.
unsafe impl<L: Liveness> lock_api::RawMutexTimed for RawRobustMutex<L> {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> bool {
        self.acquire(Instant::now().checked_add(timeout)).is_some()
    }

    fn try_lock_until(&self, deadline: Instant) -> bool {
        self.acquire(Some(deadline)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::HashSet;
    use std::sync::Mutex;

    use lock_api::{RawMutex, RawMutexTimed};

    use super::*;

    /// Each thread plays a process with the id it sets; ids marked dead are dead.
    struct Fake;

    thread_local! {
        static ME: Cell<u64> = const { Cell::new(0) };
    }
    static DEAD: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

    fn be(id: u64) {
        ME.with(|m| m.set(id));
    }

    fn kill(id: u64) {
        DEAD.lock().unwrap().get_or_insert_default().insert(id);
    }

    // SAFETY: test ids are non-zero per thread, and only ids a test marked dead are.
    unsafe impl Liveness for Fake {
        fn me() -> u64 {
            ME.with(Cell::get)
        }

        fn is_alive(id: u64) -> bool {
            !DEAD.lock().unwrap().as_ref().is_some_and(|d| d.contains(&id))
        }
    }

    type M = RawRobustMutex<Fake>;

    #[test]
    fn zero_is_unlocked() {
        let m = M::INIT;
        assert!(!m.is_locked());
        be(1);
        assert_eq!(m.try_lock_robust(), Some(Locked::Clean));
        assert_eq!(m.holder(), 1);
        // SAFETY: held.
        unsafe { m.unlock() };
        assert_eq!(m.holder(), 0);
    }

    #[test]
    fn try_lock_fails_while_a_live_other_holds_it() {
        let m = M::new();
        be(11);
        assert!(m.try_lock());
        be(12);
        assert!(!m.try_lock());
        assert_eq!(m.try_lock_robust(), None);
        // The same process's other thread holding it is a live holder too.
        be(11);
        assert_eq!(m.try_lock_robust(), None);
        // SAFETY: held by 11.
        unsafe { m.unlock() };
        be(12);
        assert_eq!(m.try_lock_robust(), Some(Locked::Clean));
    }

    #[test]
    fn a_timed_lock_times_out_while_a_live_holder_keeps_it() {
        let m = M::new();
        be(21);
        m.lock();
        be(22);
        assert_eq!(m.try_lock_for_robust(Duration::from_millis(60)), None);
        assert!(!m.try_lock_for(Duration::from_millis(5)));
        assert!(!m.try_lock_until(Instant::now() + Duration::from_millis(5)));
        assert_eq!(m.holder(), 21);
    }

    #[test]
    fn a_dead_holder_is_taken_over_and_reported_once() {
        let m = M::new();
        be(31);
        m.lock();
        kill(31);
        be(32);
        assert_eq!(m.try_lock_robust(), Some(Locked::PreviousHolderDied));
        assert_eq!(m.holder(), 32);
        // SAFETY: held by 32.
        unsafe { m.unlock() };
        assert_eq!(m.try_lock_robust(), Some(Locked::Clean));
        // SAFETY: held by 32.
        unsafe { m.unlock() };
    }

    #[test]
    fn lock_api_takeover_leaves_the_flag_for_take_owner_died() {
        let m = M::new();
        be(41);
        m.lock();
        kill(41);
        be(42);
        assert!(m.try_lock_for(Duration::from_secs(5)));
        assert!(m.take_owner_died());
        assert!(!m.take_owner_died());
        // SAFETY: held by 42.
        unsafe { m.unlock() };
    }

    #[test]
    fn a_sleeping_waiter_takes_over_from_a_holder_that_dies() {
        let m = M::new();
        be(51);
        m.lock();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                be(52);
                m.lock_robust()
            });
            // Let it sleep on the futex (or not: either way it must get the lock).
            assert!(iox_testkit::wait_until(Duration::from_secs(5), || m
                .futex
                .load(Ordering::Relaxed)
                == 1));
            kill(51);
            assert_eq!(waiter.join().unwrap(), Locked::PreviousHolderDied);
        });
        assert_eq!(m.holder(), 52);
    }

    #[test]
    fn an_unlock_wakes_a_sleeping_waiter() {
        let m = M::new();
        be(61);
        m.lock();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                be(62);
                m.try_lock_for_robust(Duration::from_secs(30))
            });
            assert!(iox_testkit::wait_until(Duration::from_secs(5), || m
                .futex
                .load(Ordering::Relaxed)
                == 1));
            // SAFETY: held by 61 (this thread).
            unsafe { m.unlock() };
            assert_eq!(waiter.join().unwrap(), Some(Locked::Clean));
        });
        assert_eq!(m.holder(), 62);
    }

    #[test]
    fn unlock_by_another_id_does_nothing() {
        // As a guard inherited by a forked child: the parent keeps the lock.
        let m = M::new();
        be(71);
        m.lock();
        be(72);
        // SAFETY: deliberately not the holder; release checks and does nothing.
        unsafe { m.unlock() };
        assert_eq!(m.holder(), 71);
    }

    #[test]
    fn threads_as_processes_exclude_each_other() {
        let m = lock_api::Mutex::<M, u64>::new(0);
        std::thread::scope(|s| {
            for t in 0..4 {
                let m = &m;
                s.spawn(move || {
                    be(100 + t);
                    for _ in 0..10_000 {
                        let mut g = m.lock();
                        let v = *g;
                        *g = v + 1;
                    }
                });
            }
        });
        assert_eq!(m.into_inner(), 40_000);
    }
}
