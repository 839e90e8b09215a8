//! Recovery of dead writers and readers (run by `crate::recovery` under the service's
//! recovery lock; every step is safe to repeat):
//! - a dead **writer** slot is closed and freed. A key lock it held is taken over by
//!   the next writer (the robust mutex finds its process dead); a buffer it was
//!   writing was never published, so readers keep the last complete value;
//! - a dead **reader** slot is closed, its pin words of every key cleared (so the
//!   buffers it was reading can be written again), and freed.

use std::sync::atomic::Ordering;

use crate::dynamic::{self, Dynamic};
use crate::liveness::Liveness;
use crate::port;
use crate::recovery::CleanupReport;
use crate::shm::blackboard_value as value;

/// Recovers the dead reader and writer slots of the blackboard `d` of `keys` keys.
pub fn recover_ports(d: Dynamic<'_>, keys: usize, live: &mut Liveness, report: &mut CleanupReport) {
    let l = d.layout();
    for s in 0..l.receiving {
        let header = d.receiver(s);
        let node = header.node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
            port::close(header, generation);
            for k in 0..keys {
                value::clear_reader(d.key_words(k).reader(s));
            }
            port::free(header, generation);
            port::announce(d);
            report.ports += 1;
        }
    }
    for p in 0..l.sending {
        let header = d.sender(p);
        let node = header.node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
            port::close(header, generation);
            port::free(header, generation);
            port::announce(d);
            report.ports += 1;
        }
    }
}
