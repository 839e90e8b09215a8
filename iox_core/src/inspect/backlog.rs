//! What a port has waiting for it or in flight, as tools show it: each pattern's own
//! reading of its regions (loads only; tools may map the segment read-only).

use std::sync::atomic::Ordering;

use crate::dynamic::Dynamic;
use crate::shm::pending_set;
use crate::shm::regions::{PatternLayout, Side};

/// What a port has waiting for it or in flight, for tools.
#[derive(Debug, Default)]
pub struct Backlog {
    /// Samples queued for it, ids pending, or requests in flight.
    pub pending: u64,
    /// Event ids pending (listeners only).
    pub pending_ids: Vec<u32>,
    /// Samples its senders could not deliver to it (subscribers only).
    pub missed: u64,
}

/// What port slot `slot` on `side` of the attached segment `d` has waiting.
pub fn backlog(d: Dynamic<'_>, side: Side, slot: usize) -> Backlog {
    match (d.layout().pattern, side) {
        (PatternLayout::PublishSubscribe(_), Side::Receiving) => Backlog {
            pending: (0..d.layout().sending).map(|p| d.queue(p, slot).len()).sum(),
            pending_ids: Vec::new(),
            missed: d.receiver(slot).missed.load(Ordering::Relaxed),
        },
        (PatternLayout::Event(e), Side::Receiving) => {
            let ids = pending_set::snapshot(d.pending(slot), e.event_ids);
            Backlog {
                pending: ids.len() as u64,
                pending_ids: ids,
                missed: 0,
            }
        }
        (PatternLayout::RequestResponse(_), Side::Sending) => Backlog {
            pending: crate::recovery::reqres::client_in_flight(d, slot) as u64,
            ..Backlog::default()
        },
        (PatternLayout::RequestResponse(r), Side::Receiving) => Backlog {
            pending: (0..r.max_clients).map(|c| d.queue(c, slot).len()).sum(),
            ..Backlog::default()
        },
        // Publishers and notifiers have nothing waiting; a blackboard's ports neither
        // (its state is its keys); an unattached segment has no ports.
        (PatternLayout::PublishSubscribe(_) | PatternLayout::Event(_), Side::Sending)
        | (PatternLayout::Blackboard(_) | PatternLayout::Unattached, _) => Backlog::default(),
    }
}
