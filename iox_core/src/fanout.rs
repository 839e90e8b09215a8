//! The fan-out of a notification to the listeners' pending sets (the sets themselves
//! and their protocol: [`crate::shm::pending_set`]), and the wake of those that sleep.

use std::sync::atomic::Ordering;

use crate::doorbell::Ringer;
use crate::dynamic::{self, Dynamic};
use crate::port;
use crate::shm::pending_set;

/// Sets `id` pending for every active listener of the event service `d`, then wakes
/// those that sleep on their futex or armed their descriptor. Returns how many
/// listeners it reached. `id` must be at most `event_id_max` (callers check).
pub fn signal(d: Dynamic<'_>, id: u32, ringer: &Ringer) -> usize {
    signal_to(d, id, active(d), ringer)
}

/// The listener slots of `d` that are active now, a bit each (at most 46).
pub fn active(d: Dynamic<'_>) -> u64 {
    let mut slots = 0u64;
    for s in 0..d.layout().receiving {
        let header = d.receiver(s);
        if dynamic::split_state(header.state.load(Ordering::Acquire)).1 == dynamic::ACTIVE {
            slots |= 1 << s;
        }
    }
    slots
}

/// [`signal`] to the listener slots in `slots` (found active by [`active`], now or
/// since the service's ports last changed); how many it reached. A slot freed since is
/// marked all the same: its next owner clears its set when it claims it, or sees one
/// spurious event (as `pending_set` allows). With no slot there is nothing to mark and
/// nothing to order against a listener's look, so nothing more is done.
pub fn signal_to(d: Dynamic<'_>, id: u32, slots: u64, ringer: &Ringer) -> usize {
    debug_assert!(id < d.regions::<crate::shm::regions::event::EventLayout>().event_ids);
    if slots == 0 {
        return 0;
    }
    let mut rest = slots;
    while rest != 0 {
        let s = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        pending_set::mark(d.pending(s), id);
    }
    // Either we see a listener counted in `waiting` (or armed), or its look after
    // counting sees our bit (`pending_set`).
    pending_set::after_marks();
    wake(d, slots, ringer);
    slots.count_ones() as usize
}

/// Wakes the listeners in the bit mask `slots` that sleep or are armed.
pub fn wake(d: Dynamic<'_>, mut slots: u64, ringer: &Ringer) {
    while slots != 0 {
        let s = slots.trailing_zeros() as usize;
        slots &= slots - 1;
        let header = d.receiver(s);
        let seen = header.waiting.load(Ordering::Relaxed);
        if crate::doorbell::wants_wake(seen) {
            port::wake(header, seen, ringer, s);
        }
    }
}
