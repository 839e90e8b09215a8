//! A subscriber's view of queues claimed by someone else (a publisher dropping the
//! oldest entry, a port draining): which of its queues were found claimed (the stuck
//! set), whether anything outside them is ready, and running the service's recovery
//! when a claimer may have died (see the module docs of `subscriber`, "Claims held
//! by others"). All of it is off the hot path.

use std::time::Instant;

use super::{STUCK_RECOVERY_PERIOD, Subscriber};
use crate::Payload;

impl<P: ?Sized + Payload, H: crate::UserHeader> Subscriber<P, H> {
    /// A queue from publisher slot `p` was claimed by someone else (see `stuck`).
    #[cold]
    #[inline(never)]
    pub(super) fn note_stuck(&self, p: usize) {
        self.stuck.set(self.stuck.get() | crate::shm::connected::bit(p));
    }

    /// Drops from the stuck set the queues no longer claimed (their claimer finished
    /// since the receive that found them claimed); returns whether any are left. Off
    /// the hot path: `stuck` is only ever set by a receive that found a claim.
    #[cold]
    #[inline(never)]
    pub(super) fn still_stuck(&self) -> bool {
        let mut stuck = self.stuck.get();
        if stuck == 0 {
            return false;
        }
        let d = self.port.service.dynamic();
        let mut left = stuck;
        while left != 0 {
            let p = left.trailing_zeros() as usize;
            left &= left - 1;
            if !d.queue(p, self.port.slot).is_claimed() {
                stuck &= !crate::shm::connected::bit(p);
            }
        }
        self.stuck.set(stuck);
        stuck != 0
    }

    /// Whether a queue outside the stuck set (not claimed by someone else when last
    /// looked at) has an entry: one a receive takes now, whatever the stuck ones hold.
    pub(super) fn ready_outside_stuck(&self) -> bool {
        let d = self.port.service.dynamic();
        let stuck = self.stuck.get();
        (0..d.layout().sending)
            .any(|p| stuck & crate::shm::connected::bit(p) == 0 && !d.queue(p, self.port.slot).is_empty())
    }

    /// Whether anything is queued to this subscriber, entries someone is taking right
    /// now included (unlike [`Subscriber::pending`]): a queue of one whose only entry
    /// a dead publisher claimed still has it, and a receive must look to find the claim.
    pub(super) fn queued_or_claimed(&self) -> bool {
        let d = self.port.service.dynamic();
        (0..d.layout().sending).any(|p| d.queue(p, self.port.slot).queued() > 0)
    }

    /// Queues were found claimed by someone else: a live claimer (a publisher dropping
    /// the oldest entry, a port draining) finishes within instructions, but one that
    /// died holding the claim never does, and what is queued behind it would wait for
    /// some other process's recovery. So, at most once per [`STUCK_RECOVERY_PERIOD`]
    /// (or at once, with `now_anyway`: a receive armed for an event loop, which has no
    /// timer to come back by), this subscriber runs the service's recovery itself (which
    /// resolves a dead claimer's claim, see `crate::recovery`). Returns whether it
    /// resolved anything. The stuck set stays: a claim recovery resolved is pruned
    /// from it by the next look ([`Self::still_stuck`]), and one still held keeps
    /// its queue out of what is ready.
    #[cold]
    #[inline(never)]
    pub(super) fn resolve_stuck(&self, now_anyway: bool) -> bool {
        let now = Instant::now();
        if !now_anyway
            && self
                .last_recovery
                .get()
                .is_some_and(|t| now.duration_since(t) < STUCK_RECOVERY_PERIOD)
        {
            return false;
        }
        self.last_recovery.set(Some(now));
        crate::recovery::recover(&self.port.service).is_ok_and(|r| r.takes_resolved + r.ports > 0)
    }
}
