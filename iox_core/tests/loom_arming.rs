//! Model checks of the readiness descriptors' arming protocol (`src/shm/arming.rs`)
//! with loom: the production file compiled against loom's atomics. A "queue" is one
//! counter of pushed samples; a "ring" adds a token to a counter standing for the
//! receiver's socket.
//!
//! Invariant: a receiver that armed, looked again and found nothing (so it goes to
//! sleep on its descriptor) has a token coming for every push it did not see: after
//! all threads end, if the receiver slept and something was pushed, a token was sent.
//! Checked with one sender, with two racing senders, and with a sender that dies (or
//! fails to ring) after reading the armed word, followed by a live one.
//!
//! Run: `cargo test -p iox_core --test loom_arming`.

mod loom_common;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::thread;
use loom_common::model;

use loom_common::sync;

#[path = "../src/shm/arming.rs"]
#[allow(dead_code)]
mod arming;

use sync::{AtomicU32, Ordering, fence};

struct Shared {
    waiting: AtomicU32,
    pushed: AtomicUsize,
    tokens: AtomicUsize,
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared {
        waiting: AtomicU32::new(0),
        pushed: AtomicUsize::new(0),
        tokens: AtomicUsize::new(0),
    })
}

/// A sender: push, fence, read the word, ring if armed (`rings` says whether its ring
/// goes out: false stands for a sender that dies or fails right there).
fn send(s: &Shared, rings: bool) {
    s.pushed.fetch_add(1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    let seen = s.waiting.load(Ordering::Relaxed);
    arming::ring_armed(&s.waiting, seen, || {
        if rings {
            s.tokens.fetch_add(1, Ordering::Relaxed);
        }
        rings
    });
}

/// The receiver: found nothing, arms, looks once more; whether it then sleeps.
fn arm_and_look(s: &Shared) -> bool {
    arming::arm(&s.waiting);
    s.pushed.load(Ordering::Relaxed) == 0
}

fn check(s: &Shared, slept: bool) {
    if slept && s.pushed.load(Ordering::Relaxed) > 0 {
        assert!(
            s.tokens.load(Ordering::Relaxed) > 0,
            "a push the sleeper never hears of"
        );
    }
}

#[test]
fn one_sender_rings_a_sleeper_or_is_seen() {
    model(|| {
        let s = shared();
        let t = {
            let s = Arc::clone(&s);
            thread::spawn(move || send(&s, true))
        };
        let slept = arm_and_look(&s);
        t.join().unwrap();
        check(&s, slept);
    });
}

#[test]
fn racing_senders_leave_no_sleeper_unrung() {
    model(|| {
        let s = shared();
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let s = Arc::clone(&s);
                thread::spawn(move || send(&s, true))
            })
            .collect();
        let slept = arm_and_look(&s);
        for t in senders {
            t.join().unwrap();
        }
        check(&s, slept);
    });
}

#[test]
fn a_sender_that_dies_before_ringing_leaves_the_arming_for_the_next() {
    model(|| {
        let s = shared();
        let t = {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                send(&s, false); // read the armed word, then died before its ring
                send(&s, true); // the next sender (after it, in another process)
            })
        };
        let slept = arm_and_look(&s);
        t.join().unwrap();
        check(&s, slept);
    });
}

#[test]
fn a_receiver_that_re_arms_keeps_its_new_arming() {
    // Cycle 1: armed, rung. Cycle 2: the receiver drains and arms again while a sender
    // of cycle 1 is still between its read and its clear; a push after that must
    // still be heard.
    model(|| {
        let s = shared();
        arming::arm(&s.waiting);
        let stale = s.waiting.load(Ordering::Relaxed);
        let t = {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                // The stale sender clears (if it can) the arming it read.
                arming::ring_armed(&s.waiting, stale, || {
                    s.tokens.fetch_add(1, Ordering::Relaxed);
                    true
                });
            })
        };
        // The receiver consumed that ring and re-arms for the next cycle.
        arming::arm(&s.waiting);
        let slept = s.pushed.load(Ordering::Relaxed) == 0;
        t.join().unwrap();
        let tokens_before = s.tokens.load(Ordering::Relaxed);
        // A new push after the stale sender finished must ring the new arming.
        send(&s, true);
        assert!(
            !slept || s.tokens.load(Ordering::Relaxed) > tokens_before,
            "the new arming was cleared by a stale sender"
        );
    });
}

#[test]
fn a_new_port_in_the_slot_keeps_its_first_arming() {
    // The slot's port armed and was rung by a sender still between its ring and its
    // clear; the port went (free), a new one claimed the slot (claim) and armed for the
    // first time. The stale clear must not take that arming: a later push rings it.
    model(|| {
        let s = shared();
        arming::arm(&s.waiting);
        let stale = s.waiting.load(Ordering::Relaxed);
        let t = {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                arming::ring_armed(&s.waiting, stale, || {
                    s.tokens.fetch_add(1, Ordering::Relaxed);
                    true
                });
            })
        };
        arming::reset(&s.waiting); // the old port frees the slot
        arming::reset(&s.waiting); // the new port claims it
        arming::arm(&s.waiting);
        let slept = s.pushed.load(Ordering::Relaxed) == 0;
        t.join().unwrap();
        let tokens_before = s.tokens.load(Ordering::Relaxed);
        send(&s, true);
        assert!(
            !slept || s.tokens.load(Ordering::Relaxed) > tokens_before,
            "the new port's arming was cleared by a sender of the old one"
        );
    });
}
