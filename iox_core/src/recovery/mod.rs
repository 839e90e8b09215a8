//! Recovery of dead participants: their port slots, every chunk they held or had
//! queued, their user registrations and their files.
//!
//! A participant is dead when its node lock is free ([`crate::node`]). Recovery of one
//! service runs under the service's recovery lock, a [`crate::robust_mutex::RawRobustMutex`]
//! in the dynamic header holding the recovering process's node id. Recovery on open
//! and on port creation only tries it: a live process recovering already is as good
//! ([`recover_in`]); an explicit cleanup waits up to [`CLEANUP_LOCK_TIMEOUT`] for it
//! ([`recover_in_waiting`]), so that what was dead when it was called is recovered when
//! it returns. A holder found dead is taken over, so a recoverer killed midway is
//! replaced by the next one; the mutex reports that the previous holder died, and
//! recovery needs nothing special for it: every step is safe to repeat, so the
//! taker-over simply runs recovery again from the start:
//! - dead **port slots**: each pattern recovers its own (`crate::shm::regions`:
//!   `pubsub::recovery`, `event::recovery`, `reqres::recovery`), with the steps
//!   every pattern shares here: resolving the claims a dead port left on queues
//!   ([`resolve_claims`]: finished if the chunk already carries its owner bit, undone
//!   if not) and finishing the journaled send it died in
//!   ([`finish_journaled_send`]);
//! - a dead **user** (service handle) is unregistered; a service left without users is
//!   then removed by whoever found it so (the lifecycle module).
//!
//! Each dead node's lock file, and temporary files and readiness sockets it left, are
//! removed once it is proven dead. Nothing is recovered for a live node.

pub mod blackboard;
pub mod event;
pub mod pubsub;
pub mod reqres;

use std::sync::atomic::Ordering;
use std::time::Duration;

use iox_mempool::Bookkeeping;

use crate::dynamic::Dynamic;
use crate::liveness::Liveness;
use crate::queue::{self, Queue};
use crate::robust_mutex::RawRobustMutex;
use crate::shared::ServiceShared;
use crate::shm::regions::PatternLayout;

/// What a cleanup found dead and recovered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Services looked at.
    pub services: usize,
    /// Port slots of dead processes freed.
    pub ports: usize,
    /// Chunks that became free again through it.
    pub chunks_freed: u64,
    /// Sends a dead publisher was in the middle of, finished by recovery.
    pub sends_finished: usize,
    /// Queue entries a dead port was in the middle of taking (claims finished or undone).
    pub takes_resolved: usize,
    /// Service handles of dead processes unregistered.
    pub users: usize,
    /// Services removed because no live process used them any more (or their creator
    /// or remover died halfway).
    pub services_removed: usize,
    /// Node lock files and temporary files of dead processes removed.
    pub files_removed: usize,
}

impl CleanupReport {
    /// Adds another report's counts to this one.
    pub fn add(&mut self, other: &CleanupReport) {
        self.services += other.services;
        self.ports += other.ports;
        self.chunks_freed += other.chunks_freed;
        self.sends_finished += other.sends_finished;
        self.takes_resolved += other.takes_resolved;
        self.users += other.users;
        self.services_removed += other.services_removed;
        self.files_removed += other.files_removed;
    }
}

/// How long an explicit cleanup waits for a live process that is recovering the
/// same service (recovering one takes microseconds to milliseconds).
pub const CLEANUP_LOCK_TIMEOUT: Duration = Duration::from_secs(1);

/// The recovery lock of one service, held by this process.
pub struct RecoveryLock<'a> {
    mutex: &'a RawRobustMutex,
}

/// Takes the recovery lock, from a dead holder too (whatever it left half-done is
/// simply recovered again), waiting up to `wait` for a live one. `Err(holder)` if a
/// live process (possibly another thread of this one) kept it.
pub fn lock<'a>(
    mutex: &'a RawRobustMutex,
    wait: Duration,
    live: &mut Liveness,
) -> Result<RecoveryLock<'a>, u64> {
    // The holder is judged by the mutex itself; looking at it through this pass's
    // liveness too makes a dead holder's node file go with the others' when the pass
    // ends (a recoverer killed midway may have had nothing else in the service).
    let seen = mutex.holder();
    if seen != 0 {
        live.alive(seen);
    }
    let got = if wait.is_zero() {
        mutex.try_lock_robust()
    } else {
        mutex.try_lock_for_robust(wait)
    };
    // Clean or PreviousHolderDied alike: recovery is idempotent and runs in full.
    match got {
        Some(_) => Ok(RecoveryLock { mutex }),
        None => Err(mutex.holder()),
    }
}

impl Drop for RecoveryLock<'_> {
    fn drop(&mut self) {
        // SAFETY: taken in `lock`, released once, here.
        unsafe { lock_api::RawMutex::unlock(self.mutex) };
    }
}

/// Recovers the dead participants of an open service (see the module docs).
/// `Err(holder)` if another live node is recovering it right now.
pub fn recover(service: &ServiceShared) -> Result<CleanupReport, u64> {
    recover_service(service, Duration::ZERO)
}

/// [`recover`], waiting up to [`CLEANUP_LOCK_TIMEOUT`] for a live recoverer to finish.
pub fn recover_waiting(service: &ServiceShared) -> Result<CleanupReport, u64> {
    recover_service(service, CLEANUP_LOCK_TIMEOUT)
}

fn recover_service(service: &ServiceShared, wait: Duration) -> Result<CleanupReport, u64> {
    let mut live = Liveness::new(&service.root, service.node_id());
    let report = recover_locked(
        service.dynamic(),
        &service.stem,
        service.pool.book(),
        &mut live,
        wait,
    );
    let files = live.finish();
    report.map(|mut r| {
        r.files_removed += files;
        r
    })
}

/// Whether any port or user of `d` belongs to a node that is not alive.
fn anyone_dead(d: Dynamic<'_>, live: &mut Liveness) -> bool {
    let l = d.layout();
    let ports = (0..l.sending)
        .map(|p| d.sender(p))
        .chain((0..l.receiving).map(|s| d.receiver(s)))
        .map(|h| h.node.load(Ordering::Acquire));
    let users = d.users().iter().map(|u| u.load(Ordering::Acquire));
    let nodes: Vec<u64> = ports.chain(users).filter(|&n| n != 0).collect();
    nodes.into_iter().any(|n| !live.alive(n))
}

/// [`recover`] on a mapped dynamic segment and its pool; `Err(holder)` if another live
/// process (or thread) is recovering it right now.
pub fn recover_in(
    d: Dynamic<'_>,
    stem: &str,
    pool: &Bookkeeping,
    live: &mut Liveness,
) -> Result<CleanupReport, u64> {
    recover_locked(d, stem, pool, live, Duration::ZERO)
}

/// [`recover_in`], waiting up to [`CLEANUP_LOCK_TIMEOUT`] for a live recoverer to
/// finish (for explicit cleanups).
pub fn recover_in_waiting(
    d: Dynamic<'_>,
    stem: &str,
    pool: &Bookkeeping,
    live: &mut Liveness,
) -> Result<CleanupReport, u64> {
    recover_locked(d, stem, pool, live, CLEANUP_LOCK_TIMEOUT)
}

/// `stem`: the service's file stem, for reaching its listeners' doorbells.
fn recover_locked(
    d: Dynamic<'_>,
    stem: &str,
    pool: &Bookkeeping,
    live: &mut Liveness,
    wait: Duration,
) -> Result<CleanupReport, u64> {
    let mut report = CleanupReport::default();
    if !anyone_dead(d, live) {
        return Ok(report);
    }
    let _lock = lock(&d.header().recovery, wait, live)?;
    crate::testing::stall_point(crate::testing::Stall::RecoveryLocked);
    recover_ports(d, stem, pool, live, &mut report);
    report.users += recover_users(d, live);
    Ok(report)
}

/// Recovers the dead port slots of `d` (under the service's recovery lock; every step
/// safe to repeat), each pattern's its own way. `stem` reaches the receivers'
/// doorbells.
fn recover_ports(
    d: Dynamic<'_>,
    stem: &str,
    pool: &Bookkeeping,
    live: &mut Liveness,
    report: &mut CleanupReport,
) {
    match d.layout().pattern {
        // Not attached to a static config: no ports (recovery runs on attached ones).
        PatternLayout::Unattached => {}
        PatternLayout::PublishSubscribe(_) => pubsub::recover_ports(d, stem, pool, live, report),
        PatternLayout::Event(_) => event::recover_ports(d, stem, live, report),
        PatternLayout::RequestResponse(_) => reqres::recover_ports(d, stem, pool, live, report),
        PatternLayout::Blackboard(b) => blackboard::recover_ports(d, b.keys, live, report),
    }
}

/// Unregisters the service handles of dead nodes; returns how many.
pub fn recover_users(d: Dynamic<'_>, live: &mut Liveness) -> usize {
    let mut n = 0;
    for (user, holder) in d.users().iter().zip(d.user_holders()) {
        let node = user.load(Ordering::Acquire);
        if node == 0 || live.alive(node) {
            continue;
        }
        // The holder mark first, as a leaving user does. (Should another recoverer
        // free the entry and a new user take it between this store and our CAS, that
        // user's mark reads 0 and openers ask other holders until the timeout.)
        holder.store(0, Ordering::Release);
        if user
            .compare_exchange(node, 0, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Whether the chunk of `entry` carries `owner`'s bit.
fn held_by(pool: &Bookkeeping, entry: u64, owner: iox_mempool::Owner) -> bool {
    pool.handle_from_raw(queue::entry_chunk(entry))
        .and_then(|h| pool.owners(h).ok())
        .is_some_and(|w| w & owner.bit() != 0)
}

/// Resolves the claims a dead port left as `claimer` on `queues` (see
/// `Queue::resolve_claim`: finished if the chunk already carries the port's bit,
/// undone if not). The one place any pattern's recovery resolves claims.
pub fn resolve_claims<'a>(
    queues: impl Iterator<Item = Queue<'a>>,
    claimer: u64,
    pool: &Bookkeeping,
    owner: iox_mempool::Owner,
    report: &mut CleanupReport,
) {
    for q in queues {
        // A finished take leaves the entry's hold on the dead port's bit, which is
        // cleared with the rest of its holds.
        if q.resolve_claim(claimer, |e| held_by(pool, e, owner)).is_some() {
            report.takes_resolved += 1;
        }
    }
}

/// Finishes the send a dead sender (slot `header`, owner `owner`) was in the middle
/// of, if its journal names one, into the `queues` it sends to, and clears the
/// journal: the queues whose last entry is the journaled one got it, and one hand-off
/// adds their holds and drops the sender's bit, only if that bit is still set (so a
/// send that finished, or a second recoverer, changes nothing). The one place any
/// pattern's recovery finishes a journaled send.
pub fn finish_journaled_send<'a>(
    header: &crate::dynamic::PortHeader,
    queues: impl Iterator<Item = Queue<'a>>,
    pool: &Bookkeeping,
    owner: iox_mempool::Owner,
    report: &mut CleanupReport,
) {
    let journal = header.journal.load(Ordering::Relaxed);
    if journal != 0
        && let Some(chunk) = pool.handle_from_raw(queue::entry_chunk(journal))
        && held_by(pool, journal, owner)
    {
        let delivered = queues.filter(|q| q.last_pushed() == Some(journal)).count();
        // An Err means another recoverer finished it between our looks.
        if let Ok(freed) = pool.hand_off(chunk, owner, delivered as u32) {
            report.sends_finished += 1;
            report.chunks_freed += u64::from(freed);
        }
    }
    header.journal.store(0, Ordering::Relaxed);
}
