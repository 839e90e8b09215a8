//! The WaitSet's timers: when intervals and deadlines fall due.
//!
//! One min-heap of `(due, key)` entries on the monotonic clock (`Instant`); the
//! earliest entry bounds the epoll wait. The attachment itself holds its real due
//! time, and the heap is lazy about it:
//!
//! **Invariant:** every timed attachment has exactly one heap entry, due no later than
//! the attachment's own due time. A deadline that is reset (its descriptor became
//! readable) only moves the attachment's due time later, with no heap operation: a
//! busy descriptor costs nothing here. When its entry comes up early, it goes back in
//! at the real due time (one early wake at most per deadline period). A detached
//! attachment's entry is dropped when it comes up (its key no longer resolves).
//!
//! So each wake costs O(expired · log n), never a scan of the attachments.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Pending due times, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
}

/// What the owner says about a key whose entry came up at `now`.
pub(crate) enum Lookup {
    /// No such attachment any more: drop the entry.
    Gone,
    /// Not due yet: its real due time (after `now`).
    NotYet(Instant),
    /// It fires now; its next due time.
    Fired(Instant),
}

impl Timers {
    /// Adds the one entry of a new timed attachment.
    pub(crate) fn insert(&mut self, due: Instant, key: u64) {
        self.heap.push(Reverse((due, key)));
    }

    /// The earliest entry's time (possibly early; see the module docs).
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((due, _))| *due)
    }

    /// The next attachment that fires at `now`, if any: `decide` is asked about each
    /// entry that came up (and fires the attachment if it is really due).
    pub(crate) fn pop_due(&mut self, now: Instant, mut decide: impl FnMut(u64) -> Lookup) -> Option<u64> {
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if at > now {
                return None;
            }
            self.heap.pop();
            match decide(key) {
                Lookup::Gone => {}
                Lookup::NotYet(due) => self.heap.push(Reverse((due, key))),
                Lookup::Fired(next) => {
                    self.heap.push(Reverse((next, key)));
                    return Some(key);
                }
            }
        }
        None
    }
}

/// An interval's next due time after firing at `due` (observed at `now`): one period
/// on, without drift; ticks missed while the program was busy collapse into the one
/// that fires now.
pub(crate) fn next_tick(due: Instant, period: Duration, now: Instant) -> Instant {
    let next = due + period;
    if next > now {
        return next;
    }
    let behind = now.duration_since(due).as_nanos() / period.as_nanos();
    // Whole periods since `due`, plus one: the first tick after `now`.
    let periods = u32::try_from(behind + 1).unwrap_or(u32::MAX);
    due.checked_add(period.saturating_mul(periods))
        .unwrap_or(now + period)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The owner's side, as the WaitSet does it: real due times in a map, each
    /// firing moves the key's due time `period` on.
    fn decide(due: &mut HashMap<u64, Instant>, now: Instant, period: Duration) -> impl FnMut(u64) -> Lookup {
        move |k| match due.get_mut(&k) {
            None => Lookup::Gone,
            Some(at) if *at > now => Lookup::NotYet(*at),
            Some(at) => {
                *at += period;
                Lookup::Fired(*at)
            }
        }
    }

    #[test]
    fn fires_in_due_order_and_requeues() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut timers = Timers::default();
        let mut due = HashMap::from([(1, t0 + ms(30)), (2, t0 + ms(10))]);
        timers.insert(due[&1], 1);
        timers.insert(due[&2], 2);
        assert_eq!(timers.next(), Some(t0 + ms(10)));
        let now = t0 + ms(5);
        assert_eq!(timers.pop_due(now, decide(&mut due, now, ms(100))), None);
        let now = t0 + ms(40);
        assert_eq!(timers.pop_due(now, decide(&mut due, now, ms(100))), Some(2));
        assert_eq!(timers.pop_due(now, decide(&mut due, now, ms(100))), Some(1));
        assert_eq!(timers.pop_due(now, decide(&mut due, now, ms(100))), None);
        assert_eq!(timers.next(), Some(t0 + ms(110)));
    }

    #[test]
    fn a_reset_deadline_goes_back_at_its_real_time_and_gone_keys_drop() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut timers = Timers::default();
        timers.insert(t0 + ms(10), 7);
        timers.insert(t0 + ms(20), 8);
        // 7 was reset to 50 ms; 8 was detached.
        let mut due = HashMap::from([(7, t0 + ms(50))]);
        let now = t0 + ms(25);
        assert_eq!(timers.pop_due(now, decide(&mut due, now, ms(100))), None);
        assert_eq!(timers.next(), Some(t0 + ms(50)));
        assert_eq!(timers.heap.len(), 1);
        let now = t0 + ms(50);
        assert_eq!(timers.pop_due(now, decide(&mut due, now, ms(100))), Some(7));
    }

    #[test]
    fn missed_ticks_collapse() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(next_tick(t0, ms(10), t0 + ms(3)), t0 + ms(10));
        assert_eq!(next_tick(t0, ms(10), t0 + ms(10)), t0 + ms(20));
        assert_eq!(next_tick(t0, ms(10), t0 + ms(35)), t0 + ms(40));
    }
}
