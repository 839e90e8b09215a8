//! Model check of the history-given protocol (`src/pubsub/publisher/history.rs`) with
//! loom, on the production queue (`src/shm/queue.rs` compiled against loom's atomics).
//!
//! Scenario: the queue from a publisher to a subscriber slot holds a stray (an entry
//! the publisher pushed for the slot's previous subscriber, after that one drained).
//! The slot's new subscriber (generation 2) takes entries, and under its claim on
//! each compares the history-given word with its generation; the publisher, giving it
//! the history, drains the queue as producer until it is empty (retrying while the
//! subscriber holds a claim), stores generation 2, and pushes the history entry.
//!
//! Invariant, in every interleaving: the subscriber never takes the stray as its own,
//! takes the history entry as its own whenever it takes it, and every entry is taken
//! exactly once (by the subscriber, or by the publisher's drain).
//!
//! Variant refuted: the subscriber comparing the word after its claim ended (outside
//! the pop) accepts the stray in some interleaving, which the model must find.
//!
//! Run: `cargo test -p iox_core --test loom_history_given`.

mod loom_common;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::thread;
use loom_common::model;

use loom_common::sync;

#[path = "../src/shm/queue.rs"]
#[allow(dead_code)]
mod queue;

use queue::{BY_CONSUMER, BY_PRODUCER, Popped, Pushed, Queue};
use sync::{AtomicU64, Ordering};

const STRAY: u64 = 1;
const HISTORY: u64 = 2;
const NEW_GENERATION: u64 = 2;

struct Shared {
    write: AtomicU64,
    read: AtomicU64,
    slots: [AtomicU64; 2],
    /// The publisher's history-given word for the slot (the old subscriber's: 1).
    given: AtomicU64,
    /// Per entry: taken by the subscriber as its own, dropped by it as a stray, taken
    /// back by the publisher.
    accepted: [AtomicUsize; 3],
    dropped: [AtomicUsize; 3],
    drained: [AtomicUsize; 3],
}

impl Shared {
    fn new() -> Arc<Self> {
        let s = Arc::new(Self {
            write: AtomicU64::new(0),
            read: AtomicU64::new(0),
            slots: [AtomicU64::new(0), AtomicU64::new(0)],
            given: AtomicU64::new(1),
            accepted: std::array::from_fn(|_| AtomicUsize::new(0)),
            dropped: std::array::from_fn(|_| AtomicUsize::new(0)),
            drained: std::array::from_fn(|_| AtomicUsize::new(0)),
        });
        let mut cache = 0;
        assert!(matches!(
            s.queue().push(STRAY, false, &mut cache, |_| {}),
            Pushed::Stored
        ));
        s
    }

    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.write, &self.read, &self.slots)
    }
}

/// The publisher giving the history: drain (as producer) until empty, store the new
/// generation, push the history entry.
fn publisher(s: &Shared) {
    let mut cache = 0;
    loop {
        let mut took = None;
        match s.queue().pop(BY_PRODUCER, |e| took = Some(e)) {
            Popped::Took(_) => {
                s.drained[took.unwrap() as usize].fetch_add(1, Ordering::Relaxed);
            }
            Popped::Empty => break,
            Popped::Busy => thread::yield_now(),
        }
    }
    s.given.store(NEW_GENERATION, Ordering::Release);
    assert!(matches!(
        s.queue().push(HISTORY, false, &mut cache, |_| {}),
        Pushed::Stored
    ));
}

/// The new subscriber: two takes; `under_claim` says where it compares the word.
fn subscriber(s: &Shared, under_claim: bool) {
    for _ in 0..2 {
        let mut ours = false;
        let popped = s.queue().pop(BY_CONSUMER, |_| {
            if under_claim {
                ours = s.given.load(Ordering::Relaxed) == NEW_GENERATION;
            }
        });
        if let Popped::Took(e) = popped {
            if !under_claim {
                ours = s.given.load(Ordering::Relaxed) == NEW_GENERATION;
            }
            let counter = if ours { &s.accepted } else { &s.dropped };
            counter[e as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn run(under_claim: bool) {
    model(move || {
        let s = Shared::new();
        let p = {
            let s = Arc::clone(&s);
            thread::spawn(move || publisher(&s))
        };
        let c = {
            let s = Arc::clone(&s);
            thread::spawn(move || subscriber(&s, under_claim))
        };
        p.join().unwrap();
        c.join().unwrap();
        // What neither took is still queued: the subscriber's next receive gets it.
        let mut rest = Vec::new();
        while let Popped::Took(e) = s.queue().pop(BY_CONSUMER, |_| {}) {
            rest.push(e);
        }
        let count = |a: &[AtomicUsize; 3], e: u64| a[e as usize].load(Ordering::Relaxed);
        assert_eq!(
            count(&s.accepted, STRAY),
            0,
            "the stray was taken as the new subscriber's"
        );
        assert_eq!(
            count(&s.dropped, HISTORY),
            0,
            "the history was dropped as a stray"
        );
        for e in [STRAY, HISTORY] {
            let n = count(&s.accepted, e)
                + count(&s.dropped, e)
                + count(&s.drained, e)
                + rest.iter().filter(|&&r| r == e).count();
            assert_eq!(n, 1, "entry {e} taken {n} times");
        }
        assert!(!rest.contains(&STRAY), "the stray outlived the drain");
    });
}

#[test]
fn a_stray_is_never_taken_as_the_new_subscribers_own() {
    run(true);
}

#[test]
fn looking_after_the_claim_is_refuted() {
    let refuted = std::panic::catch_unwind(|| run(false)).is_err();
    assert!(
        refuted,
        "the model should find the stray accepted when the look is outside the claim"
    );
}
