//! Recovery of dead publishers and subscribers (run by `crate::recovery` under the
//! service's recovery lock; every step is safe to repeat, so a recoverer killed midway
//! is simply followed by the next one running it all again).
//!
//! - A dead **publisher** slot: it is marked closing; a claim it held on one of its
//!   queues (dropping or draining) is finished or undone, depending on whether the
//!   chunk already carries its owner bit (see the queue module); a send it was in the
//!   middle of (its journal names the entry) is finished: the queues whose last entry
//!   is that entry got it, and one atomic hand-off adds their holds and removes the
//!   publisher's bit, only if that bit is still set; its queues to subscribers that are
//!   not active are drained (no consumer will), and so is its history queue (a service
//!   with history: the samples it kept for late subscribers; a send counts it among
//!   the queues, and a re-send of a kept sample is journaled as a send of its own);
//!   then its bit is cleared on every chunk (loans, the spare, entries it had taken,
//!   a kept chunk it had joined to re-send) and the slot is freed. Then every
//!   subscriber that sleeps or armed its descriptor is woken (the dead publisher may
//!   have pushed, or recovery finished its send, without a wake).
//! - A dead **subscriber** slot: its bit in the connected-subscriber set is cleared
//!   and it is marked closing (publishers stop delivering and drain what they pushed
//!   after; see `shm::connected`); its claim is finished or undone; its queues are
//!   drained into its owner bit; its bit is cleared on every chunk (samples it held)
//!   and the slot is freed.
//! - Either, of a device-memory service: its event table is unpublished (generation
//!   0) before the slot is freed, so no peer opens the events of a dead process.

use std::path::Path;
use std::sync::atomic::Ordering;

use iox_mempool::Bookkeeping;

use crate::dynamic::{self, Dynamic};
use crate::liveness::Liveness;
use crate::port;
use crate::queue;
use crate::recovery::{CleanupReport, finish_journaled_send, resolve_claims};
use crate::shm::regions::Side;

/// Recovers the dead publisher and subscriber slots of `d`.
pub fn recover_ports(
    d: Dynamic<'_>,
    stem: &str,
    pool: &Bookkeeping,
    live: &mut Liveness,
    report: &mut CleanupReport,
) {
    let l = d.layout();
    let mut dead_publishers = false;
    for p in 0..l.sending {
        let node = d.sender(p).node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            recover_publisher(d, pool, p, report);
            dead_publishers = true;
            report.ports += 1;
            if report.ports == 1 {
                crate::testing::stall_point(crate::testing::Stall::RecoveryAfterFirstPort);
            }
        }
    }
    if dead_publishers {
        wake_receivers(d, stem, live.root());
    }
    for s in 0..l.receiving {
        let node = d.receiver(s).node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            recover_subscriber(d, pool, s, report);
            report.ports += 1;
            if report.ports == 1 {
                crate::testing::stall_point(crate::testing::Stall::RecoveryAfterFirstPort);
            }
        }
    }
}

/// Wakes every active subscriber slot of `d` that sleeps or armed its descriptor (a
/// spurious wake is harmless: subscribers look and find nothing).
fn wake_receivers(d: Dynamic<'_>, stem: &str, root: &Path) {
    let subscribers = d.layout().receiving;
    let ringer = crate::doorbell::Ringer::new(root, stem, subscribers);
    for s in 0..subscribers {
        let header = d.receiver(s);
        if dynamic::split_state(header.state.load(Ordering::Acquire)).1 != dynamic::ACTIVE {
            continue;
        }
        let seen = header.waiting.load(Ordering::Relaxed);
        if crate::doorbell::wants_wake(seen) {
            port::wake(header, seen, &ringer, s);
        }
    }
}

/// Unpublishes a dead device port's event table (nothing for other services).
fn unpublish_events(d: Dynamic<'_>, side: Side, slot: usize) {
    if let Some((generation, _)) = d.device_events(side, slot) {
        generation.store(0, Ordering::Release);
    }
}

/// Recovers dead publisher slot `p`.
fn recover_publisher(d: Dynamic<'_>, pool: &Bookkeeping, p: usize, report: &mut CleanupReport) {
    let header = d.sender(p);
    let owner = port::publisher_owner(p);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    unpublish_events(d, Side::Sending, p);
    port::close(header, generation);
    let subs = d.layout().receiving;
    // Its history queue, if the service keeps one: one more queue it pushed to.
    let history =
        || (d.regions::<crate::shm::regions::pubsub::PubSubLayout>().history > 0).then(|| d.history_queue(p));
    let queues = || (0..subs).map(|s| d.queue(p, s)).chain(history());
    resolve_claims(queues(), queue::BY_PRODUCER, pool, owner, report);
    finish_journaled_send(header, queues(), pool, owner, report);
    // Queues to subscribers that are not active (they left, or are being set up)
    // have no consumer to drain them: the dead publisher may have pushed after they
    // left, or died in its own post-send drain. Drain them into its bit.
    for s in 0..subs {
        if dynamic::split_state(d.receiver(s).state.load(Ordering::Acquire)).1 == dynamic::ACTIVE {
            continue;
        }
        report.chunks_freed += port::drain_queue(&d.queue(p, s), queue::BY_PRODUCER, pool, owner);
    }
    // Nobody else consumes its history queue.
    if let Some(q) = history() {
        report.chunks_freed += port::drain_queue(&q, queue::BY_PRODUCER, pool, owner);
    }
    report.chunks_freed += pool.release_all(owner).1;
    port::free(header, generation);
    port::announce(d);
}

/// Recovers dead subscriber slot `s`.
fn recover_subscriber(d: Dynamic<'_>, pool: &Bookkeeping, s: usize, report: &mut CleanupReport) {
    let header = d.receiver(s);
    let publishers = d.layout().sending;
    let owner = port::subscriber_owner(publishers, s);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    // Before any chunk it held is freed (a loan of it would look for its events).
    unpublish_events(d, Side::Receiving, s);
    // Publishers stop delivering to it (and drain what they pushed meanwhile).
    d.connected().disconnect(s);
    port::close(header, generation);
    let queues = || (0..publishers).map(|p| d.queue(p, s));
    resolve_claims(queues(), queue::BY_CONSUMER, pool, owner, report);
    for q in queues() {
        report.chunks_freed += port::drain_queue(&q, queue::BY_CONSUMER, pool, owner);
    }
    report.chunks_freed += pool.release_all(owner).1;
    port::free(header, generation);
    port::announce(d);
}
