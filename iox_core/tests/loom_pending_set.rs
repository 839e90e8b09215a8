//! Model checks of the listeners' pending sets (`src/shm/pending_set.rs`) with
//! loom: the production file compiled against loom's atomics. A set of two words
//! stands for one listener's ids 0..128; a counter of tokens for the futex wakes a
//! notifier makes when it sees the listener counted in `waiting`.
//!
//! Invariants, in every interleaving:
//! - a listener that counted itself, looked once more and found nothing (so it
//!   sleeps) is woken by every notifier whose mark it did not see;
//! - an id marked once while the listener takes (one at a time or all at once) is
//!   taken exactly once: never lost, never twice; marks of ids in one word by two
//!   notifiers both survive.
//!
//! Variants refuted: a listener that takes a word with a load and a later store of 0
//! (instead of one swap) loses a mark made in between; a listener that looks before
//! it counts itself sleeps through a mark.
//!
//! Run: `cargo test -p iox_core --test loom_pending_set`.

mod loom_common;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::thread;
use loom_common::model;

use loom_common::sync;

#[path = "../src/shm/pending_set.rs"]
#[allow(dead_code)]
mod pending_set;

use sync::{AtomicU32, AtomicU64, Ordering};

const IDS: u32 = 128;

struct Shared {
    set: [AtomicU64; 2],
    waiting: AtomicU32,
    tokens: AtomicUsize,
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared {
        set: [AtomicU64::new(0), AtomicU64::new(0)],
        waiting: AtomicU32::new(0),
        tokens: AtomicUsize::new(0),
    })
}

/// A notifier: marks, fences, wakes the listener if it saw it counted.
fn notify(s: &Shared, id: u32) {
    pending_set::mark(&s.set, id);
    pending_set::after_marks();
    if s.waiting.load(Ordering::Relaxed) != 0 {
        s.tokens.fetch_add(1, Ordering::Relaxed);
    }
}

fn spawn_notifier(s: &Arc<Shared>, ids: &'static [u32]) -> thread::JoinHandle<()> {
    let s = Arc::clone(s);
    thread::spawn(move || {
        for &id in ids {
            notify(&s, id);
        }
    })
}

/// The sleep decision with the listener's look as production makes it, or (refuted)
/// looking first and counting after.
fn sleeps_through_a_mark(counted_first: bool) {
    model(move || {
        let s = shared();
        let t = spawn_notifier(&s, &[70]);
        let slept = if counted_first {
            !pending_set::counted_look(&s.set, IDS, &s.waiting)
        } else {
            let ready = pending_set::any(&s.set, IDS);
            s.waiting.fetch_add(1, Ordering::SeqCst);
            !ready
        };
        t.join().unwrap();
        if slept {
            assert!(
                s.tokens.load(Ordering::Relaxed) > 0,
                "a listener sleeps through a mark it did not see"
            );
        }
    });
}

#[test]
fn a_listener_about_to_sleep_sees_the_mark_or_is_woken() {
    sleeps_through_a_mark(true);
}

#[test]
fn looking_before_counting_is_refuted() {
    let refuted = std::panic::catch_unwind(|| sleeps_through_a_mark(false)).is_err();
    assert!(refuted, "the model did not find the missed wake");
}

/// Every id taken, sorted.
fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

#[test]
fn ids_marked_while_the_listener_takes_one_at_a_time_are_taken_once() {
    model(|| {
        let s = shared();
        let a = spawn_notifier(&s, &[3, 70]);
        let b = spawn_notifier(&s, &[5]);
        let mut taken = Vec::new();
        let mut cursor = 0;
        for _ in 0..2 {
            if let Some((word, id)) = pending_set::take_one(&s.set, IDS, cursor) {
                cursor = word;
                taken.push(id);
            }
        }
        a.join().unwrap();
        b.join().unwrap();
        pending_set::take_all(&s.set, IDS, |id| taken.push(id));
        assert_eq!(sorted(taken), [3, 5, 70], "an id lost or taken twice");
    });
}

#[test]
fn ids_marked_while_the_listener_takes_all_are_taken_once() {
    model(|| {
        let s = shared();
        let a = spawn_notifier(&s, &[3]);
        let b = spawn_notifier(&s, &[5]);
        let mut taken = Vec::new();
        pending_set::take_all(&s.set, IDS, |id| taken.push(id));
        a.join().unwrap();
        b.join().unwrap();
        pending_set::take_all(&s.set, IDS, |id| taken.push(id));
        assert_eq!(sorted(taken), [3, 5], "an id lost or taken twice");
    });
}

/// The refuted take: the word loaded, then cleared with a store.
fn take_all_by_load_then_store(set: &[AtomicU64], taken: &mut Vec<u32>) {
    for (i, word) in set.iter().enumerate() {
        let mut bits = word.load(Ordering::Acquire);
        word.store(0, Ordering::Relaxed);
        while bits != 0 {
            taken.push(i as u32 * 64 + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
}

#[test]
fn taking_with_a_load_and_a_store_is_refuted() {
    let refuted = std::panic::catch_unwind(|| {
        model(|| {
            let s = shared();
            let a = spawn_notifier(&s, &[3]);
            let b = spawn_notifier(&s, &[5]);
            let mut taken = Vec::new();
            take_all_by_load_then_store(&s.set, &mut taken);
            a.join().unwrap();
            b.join().unwrap();
            take_all_by_load_then_store(&s.set, &mut taken);
            assert_eq!(sorted(taken), [3, 5], "an id lost or taken twice");
        })
    })
    .is_err();
    assert!(refuted, "the model did not find the lost mark");
}
