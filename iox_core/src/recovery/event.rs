//! Recovery of dead notifiers and listeners (run by `crate::recovery` under the
//! service's recovery lock; every step is safe to repeat). No queues, no chunks held:
//! - a dead **notifier** slot is closed and freed, and the service's
//!   `notifier_dead_event`, if it has one, is emitted to the listeners by the process
//!   recovering it; every listener that sleeps or is armed is woken either way (the
//!   dead notifier may have died between setting a bit and waking);
//! - a dead **listener** slot is closed, its pending set cleared, and freed; its
//!   socket goes with the dead node's other files (`Liveness::finish`).
//!
//! Listeners are recovered first, so a dead listener does not get the dead event.

use std::sync::atomic::Ordering;

use crate::doorbell::Ringer;
use crate::dynamic::{self, Dynamic};
use crate::fanout as pending;
use crate::liveness::Liveness;
use crate::port;
use crate::recovery::CleanupReport;
use crate::shm::pending_set;

/// Recovers the dead listener and notifier slots of `d`.
pub fn recover_ports(d: Dynamic<'_>, stem: &str, live: &mut Liveness, report: &mut CleanupReport) {
    let l = d.layout();
    for s in 0..l.receiving {
        let node = d.receiver(s).node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            recover_listener(d, s);
            report.ports += 1;
        }
    }
    let ringer = Ringer::new(live.root(), stem, l.receiving);
    for p in 0..l.sending {
        let node = d.sender(p).node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            recover_notifier(d, p, &ringer);
            report.ports += 1;
        }
    }
}

/// Recovers dead notifier slot `p`.
fn recover_notifier(d: Dynamic<'_>, p: usize, ringer: &Ringer) {
    let header = d.sender(p);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    port::close(header, generation);
    port::free(header, generation);
    port::announce(d);
    let e = d.regions::<crate::shm::regions::event::EventLayout>();
    match e.dead_event {
        Some(id) if id < e.event_ids => {
            pending::signal(d, id, ringer);
        }
        _ => pending::wake(d, (1u64 << d.layout().receiving) - 1, ringer),
    }
}

/// Recovers dead listener slot `s`.
fn recover_listener(d: Dynamic<'_>, s: usize) {
    let header = d.receiver(s);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    port::close(header, generation);
    pending_set::clear(d.pending(s));
    port::free(header, generation);
    port::announce(d);
}
