//! Model checks of the publisher -> subscriber queue (`src/shm/queue.rs`) with loom:
//! every interleaving (up to a preemption bound) of small scenarios, on the
//! production code itself. `queue.rs` takes its atomics from `crate::sync`; here that
//! module holds loom's, and the file is compiled in as a module of this test.
//!
//! Invariants checked in every execution: each entry is taken exactly once (by the
//! consumer, by the producer dropping the oldest, by recovery finishing a dead
//! taker's claim, or by the final drain) and none is lost; entries leave in the order
//! they were pushed; what the producer wrote before a push is visible to the taker
//! (loom's `UnsafeCell` fails the model on a data race).
//!
//! Every racing party is a spawned thread; the model's main thread only sets up,
//! joins and checks (loom did not explore the main thread's operations against a
//! spawned thread's in our runs).
//!
//! Run: `cargo test -p iox_core --test loom_queue` (LOOM_MAX_PREEMPTIONS overrides
//! the bound set here).

mod loom_common;
use loom::cell::UnsafeCell;
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

/// Values pushed are 1..=MAX_VALUE.
const MAX_VALUE: usize = 3;

/// A queue of two slots in "shared memory", with per-value bookkeeping of the model:
/// how often each value was taken, and a payload the producer writes before pushing.
struct Shared {
    write: AtomicU64,
    read: AtomicU64,
    slots: [AtomicU64; 2],
    taken: [AtomicUsize; MAX_VALUE + 1],
    payload: [UnsafeCell<u8>; MAX_VALUE + 1],
}

impl Shared {
    /// A queue holding `queued` (pushed before the model's threads start).
    fn new(queued: &[u64]) -> Arc<Self> {
        let shared = Arc::new(Self {
            write: AtomicU64::new(0),
            read: AtomicU64::new(0),
            slots: [AtomicU64::new(0), AtomicU64::new(0)],
            taken: std::array::from_fn(|_| AtomicUsize::new(0)),
            payload: std::array::from_fn(|_| UnsafeCell::new(0)),
        });
        for &v in queued {
            shared.write_payload(v);
            assert!(matches!(shared.push(v, false), Pushed::Stored));
        }
        shared
    }

    fn queue(&self) -> Queue<'_> {
        Queue::new(&self.write, &self.read, &self.slots)
    }

    fn write_payload(&self, v: u64) {
        // SAFETY: the producer writes a value's payload before pushing it; loom
        // reports any access not ordered with it.
        self.payload[v as usize].with_mut(|p| unsafe { *p = v as u8 });
    }

    /// What a taker does with an entry: counts it, and reads its payload.
    fn take(&self, v: u64) {
        assert!(
            (1..=MAX_VALUE as u64).contains(&v),
            "a taker read a bad entry {v}"
        );
        self.taken[v as usize].fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `write_payload`.
        let seen = self.payload[v as usize].with(|p| unsafe { *p });
        assert_eq!(seen, v as u8, "the taker sees what the producer wrote");
    }

    /// The producer's push (its read cache starts at 0 in each model).
    fn push(&self, v: u64, drop_oldest: bool) -> Pushed {
        let mut read_cache = 0;
        self.queue()
            .push(v, drop_oldest, &mut read_cache, |old| self.take(old))
    }

    fn pop(&self, claim_as: u64) -> Option<u64> {
        match self.queue().pop(claim_as, |v| self.take(v)) {
            Popped::Took(v) => Some(v),
            Popped::Empty | Popped::Busy => None,
        }
    }

    /// After the threads: takes what is left, in order, and checks every value in
    /// `stored` was taken exactly once and nothing else was.
    fn drain_and_check(&self, stored: &[u64]) -> Vec<u64> {
        let mut rest = Vec::new();
        while let Some(v) = self.pop(BY_CONSUMER) {
            rest.push(v);
        }
        assert_eq!(self.queue().len(), 0);
        for v in 1..=MAX_VALUE as u64 {
            let expected = usize::from(stored.contains(&v));
            let got = self.taken[v as usize].load(Ordering::Relaxed);
            assert_eq!(got, expected, "value {v} taken {got} times, stored: {stored:?}");
        }
        rest
    }
}

/// Explores `f` with a preemption bound of 3 unless LOOM_MAX_PREEMPTIONS says otherwise.
/// The producer pushes two entries while the consumer pops twice: FIFO, each taken
/// once, payloads visible.
#[test]
fn push_races_pop() {
    model(|| {
        let shared = Shared::new(&[]);
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || {
                for v in [1, 2] {
                    shared.write_payload(v);
                    assert!(matches!(shared.push(v, false), Pushed::Stored));
                }
            })
        };
        let consumer = {
            let shared = shared.clone();
            thread::spawn(move || {
                (0..2)
                    .filter_map(|_| shared.pop(BY_CONSUMER))
                    .collect::<Vec<u64>>()
            })
        };
        producer.join().unwrap();
        let popped = consumer.join().unwrap();
        let rest = shared.drain_and_check(&[1, 2]);
        let order: Vec<u64> = popped.iter().chain(&rest).copied().collect();
        assert_eq!(order, [1, 2], "entries leave in push order");
    });
}

/// The queue is full; the producer pushes with drop-oldest while the consumer pops:
/// whoever claims the oldest entry takes it, the other goes on; nothing is taken
/// twice or lost.
#[test]
fn drop_oldest_races_pop() {
    model(|| {
        let shared = Shared::new(&[1, 2]);
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.write_payload(3);
                shared.push(3, true)
            })
        };
        let consumer = {
            let shared = shared.clone();
            thread::spawn(move || shared.pop(BY_CONSUMER))
        };
        let pushed = producer.join().unwrap();
        let popped = consumer.join().unwrap();
        let stored: &[u64] = match pushed {
            Pushed::Stored | Pushed::DroppedOldest => &[1, 2, 3],
            // The consumer held its claim for all the producer's spins: not stored.
            Pushed::Busy => &[1, 2],
            Pushed::Full => panic!("drop-oldest never reports full"),
        };
        let rest = shared.drain_and_check(stored);
        // The consumer got the oldest entry, unless the producer dropped it first.
        match popped {
            Some(1) => {}
            Some(2) => assert!(matches!(pushed, Pushed::DroppedOldest)),
            // Gave up on the producer's claim (Busy): possible, if unlikely.
            None => {}
            Some(v) => panic!("the consumer took {v}, not the oldest entry"),
        }
        assert!(
            rest.windows(2).all(|w| w[0] < w[1]),
            "the rest stays in order: {rest:?}"
        );
    });
}

/// The consumer and a draining producer pop the same queue at once: each entry goes
/// to exactly one of them.
#[test]
fn consumer_and_draining_producer_pop_together() {
    model(|| {
        let shared = Shared::new(&[1, 2]);
        let drainer = {
            let shared = shared.clone();
            thread::spawn(move || shared.pop(BY_PRODUCER))
        };
        let consumer = {
            let shared = shared.clone();
            thread::spawn(move || shared.pop(BY_CONSUMER))
        };
        let theirs = drainer.join().unwrap();
        let mine = consumer.join().unwrap();
        if let (Some(a), Some(b)) = (mine, theirs) {
            assert_ne!(a, b);
        }
        shared.drain_and_check(&[1, 2]);
    });
}

/// A consumer claims the oldest entry and dies, before or after moving the entry's
/// hold to itself. Recovery (after the death) resolves the claim while the producer
/// pushes with drop-oldest: the entry is the dead taker's if it had moved the hold,
/// else it is taken again later; exactly once either way.
fn dead_taker_then_recovery(moved_hold: bool) {
    model(move || {
        let shared = Shared::new(&[1, 2]);
        // The dead consumer's hold on an entry, as the chunk word would show it.
        let held = Arc::new(AtomicUsize::new(0));
        let dead = {
            let (shared, held) = (shared.clone(), held.clone());
            thread::spawn(move || {
                // Step 1 of `pop`: the claim.
                let word = shared.read.load(Ordering::Acquire);
                let claimed = shared
                    .read
                    .compare_exchange(word, word | BY_CONSUMER, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok();
                assert!(claimed, "nobody else claims before the producer starts");
                if moved_hold {
                    // Step 2: the hold moves to the taker; then it dies before step 3.
                    let v = shared.slots[0].load(Ordering::Relaxed);
                    shared.take(v);
                    held.store(v as usize, Ordering::Relaxed);
                }
            })
        };
        // The producer starts once the claim is there (it sees a full queue).
        dead.join().unwrap();
        let producer = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.write_payload(3);
                shared.push(3, true)
            })
        };
        let recovery = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared
                    .queue()
                    .resolve_claim(BY_CONSUMER, |e| held.load(Ordering::Relaxed) == e as usize)
            })
        };
        let pushed = producer.join().unwrap();
        let resolved = recovery.join().unwrap();
        assert_eq!(
            resolved,
            Some((1, moved_hold)),
            "recovery finds and resolves the claim"
        );
        let stored: &[u64] = match pushed {
            Pushed::Stored | Pushed::DroppedOldest => &[1, 2, 3],
            Pushed::Busy => &[1, 2],
            Pushed::Full => panic!("drop-oldest never reports full"),
        };
        shared.drain_and_check(stored);
    });
}

#[test]
fn a_dead_takers_claim_is_finished_by_recovery() {
    dead_taker_then_recovery(true);
}

#[test]
fn a_dead_takers_claim_is_undone_by_recovery() {
    dead_taker_then_recovery(false);
}
