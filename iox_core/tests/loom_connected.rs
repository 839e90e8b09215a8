//! Model checks of the connected-subscriber set (`src/shm/connected.rs`) with loom,
//! together with the queue (`src/shm/queue.rs`), both compiled against loom's
//! atomics: the publisher reads the set, pushes, fences and looks again; a subscriber
//! leaves the set, fences and drains; a sleeper announces itself in its `waiting`
//! word and fences before its last look.
//!
//! Invariants: no entry is stranded in the queue of a subscriber that closed (the
//! publisher or the subscriber drains it, each entry taken once); a sleeping
//! subscriber either sees the push or is seen by the publisher (no lost wake-up);
//! after a slot is reused, an entry left in its queue belongs to the new subscriber
//! (its bit is set).
//!
//! Run: `cargo test -p iox_core --test loom_connected` (LOOM_MAX_PREEMPTIONS
//! overrides the bound set here).

mod loom_common;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, AtomicUsize};
use loom::thread;
use loom_common::model;

use loom_common::sync;

#[path = "../src/shm/queue.rs"]
#[allow(dead_code)]
mod queue;

#[path = "../src/shm/connected.rs"]
#[allow(dead_code)]
mod connected;

use connected::Connected;
use queue::{BY_CONSUMER, BY_PRODUCER, Popped, Pushed, Queue};
use sync::{AtomicU64, Ordering, fence};

/// One subscriber slot (0) of a service with one subscriber slot: the set, the
/// publisher's queue to it, its `waiting` word, and how often entry 1 was taken.
struct Shared {
    set: AtomicU64,
    write: AtomicU64,
    read: AtomicU64,
    slots: [AtomicU64; 2],
    waiting: AtomicU32,
    taken: AtomicUsize,
}

impl Shared {
    fn new(connected: bool) -> Arc<Self> {
        Arc::new(Self {
            set: AtomicU64::new(u64::from(connected)),
            write: AtomicU64::new(0),
            read: AtomicU64::new(0),
            slots: [AtomicU64::new(0), AtomicU64::new(0)],
            waiting: AtomicU32::new(0),
            taken: AtomicUsize::new(0),
        })
    }

    fn connected(&self) -> Connected<'_> {
        Connected::with_mask(&self.set, connected::all(1))
    }

    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.write, &self.read, &self.slots)
    }

    fn drain(&self, claim_as: u64) {
        while let Popped::Took(_) = self.queue().pop(claim_as, |_| {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }) {}
    }

    /// The publisher's send of entry 1 as `send_chunk` does it: read the set, push
    /// to the connected, fence and look again, drain what went to a closed one.
    /// Returns the set it pushed to and the slots still connected after the fence.
    fn send(&self) -> (u64, u64) {
        let set = self.connected();
        let mut pushed = 0;
        for s in connected::slots(set.snapshot()) {
            let mut cache = 0;
            if let Pushed::Stored = self.queue().push(1, false, &mut cache, |_| {}) {
                pushed |= connected::bit(s);
            }
        }
        let still = set.still_connected(pushed);
        if pushed & !still != 0 {
            self.drain(BY_PRODUCER);
        }
        (pushed, still)
    }
}

/// A subscriber closes while the publisher sends: whatever the interleaving, the
/// entry is taken exactly once if it was pushed, and the queue ends empty.
#[test]
fn a_closing_subscriber_strands_nothing() {
    model(|| {
        let shared = Shared::new(true);
        let publisher = {
            let shared = shared.clone();
            thread::spawn(move || shared.send())
        };
        let subscriber = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.connected().disconnect(0);
                shared.drain(BY_CONSUMER);
            })
        };
        let (pushed, _) = publisher.join().unwrap();
        subscriber.join().unwrap();
        assert_eq!(shared.queue().len(), 0, "an entry was stranded");
        let taken = shared.taken.load(Ordering::Relaxed);
        assert_eq!(
            taken,
            usize::from(pushed != 0),
            "pushed {pushed:#x}, taken {taken}"
        );
    });
}

/// A subscriber about to sleep (its `waiting` RMW, a fence, one more look) while the
/// publisher sends: either its look finds the entry or the publisher, after the fence
/// of `still_connected`, sees it waiting and wakes it.
#[test]
fn a_sleeper_is_never_missed() {
    model(|| {
        let shared = Shared::new(true);
        let publisher = {
            let shared = shared.clone();
            thread::spawn(move || {
                let (_, still) = shared.send();
                still != 0 && shared.waiting.load(Ordering::Relaxed) != 0
            })
        };
        let sleeper = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.waiting.fetch_add(1, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                !shared.queue().is_empty()
            })
        };
        let woke = publisher.join().unwrap();
        let saw = sleeper.join().unwrap();
        assert!(woke || saw, "lost wake-up");
    });
}

/// Subscriber A closes and drains, then B takes the slot (its creation drain, then
/// it connects), while the publisher sends: an entry left in the queue has B's bit
/// set, so it is B's to receive (or drain when it closes), never stranded.
#[test]
fn a_reused_slot_gets_what_is_left() {
    model(|| {
        let shared = Shared::new(true);
        let publisher = {
            let shared = shared.clone();
            thread::spawn(move || shared.send())
        };
        let ports = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.connected().disconnect(0);
                shared.drain(BY_CONSUMER);
                // B: drains what A's slot holds, then connects.
                shared.drain(BY_CONSUMER);
                shared.connected().connect(0);
            })
        };
        let (pushed, _) = publisher.join().unwrap();
        ports.join().unwrap();
        if !shared.queue().is_empty() {
            assert_eq!(shared.connected().snapshot(), 1, "left in a slot no one holds");
        }
        // B closes.
        shared.connected().disconnect(0);
        shared.drain(BY_CONSUMER);
        let taken = shared.taken.load(Ordering::Relaxed);
        assert_eq!(taken, usize::from(pushed != 0));
    });
}
