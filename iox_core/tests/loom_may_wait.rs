//! Model checks of the may-wait set (`src/shm/may_wait.rs`) with loom, on the
//! production files (`may_wait.rs` and `arming.rs`, compiled against loom's atomics):
//! a publisher that finds a subscriber's bit clear after its push and fence skips the
//! subscriber's `waiting` word; that must never strand a subscriber that is about to
//! sleep. A "queue" is one counter of pushed samples, a "ring" a token counter.
//!
//! Invariant: a subscriber that announced itself, armed (or counted itself a futex
//! sleeper), looked again and found nothing has a wake-up coming for every push it
//! did not see. Checked with a fresh bit, a sticky one (set by an earlier wait), a
//! futex sleeper, and two racing publishers; the last test removes the announcement
//! and expects the model to find the missed wake-up, so the checks can fail.
//!
//! Run: `cargo test -p iox_core --test loom_may_wait`.

mod loom_common;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::thread;
use loom_common::model;

use loom_common::sync;

#[path = "../src/shm/arming.rs"]
#[allow(dead_code)]
mod arming;
#[path = "../src/shm/may_wait.rs"]
#[allow(dead_code)]
mod may_wait;

use may_wait::MayWait;
use sync::{AtomicU32, AtomicU64, Ordering, fence};

/// The subscriber's slot (any bit of the word).
const SLOT: usize = 5;

struct Shared {
    may_wait: AtomicU64,
    waiting: AtomicU32,
    pushed: AtomicUsize,
    wakes: AtomicUsize,
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared {
        may_wait: AtomicU64::new(0),
        waiting: AtomicU32::new(0),
        pushed: AtomicUsize::new(0),
        wakes: AtomicUsize::new(0),
    })
}

/// A publisher: push, fence, read the may-wait word; only for a set bit, read the
/// subscriber's `waiting` word and wake it if it wants (a ring for an armed
/// descriptor, a futex wake for a sleeper: both counted as a wake).
fn publish(s: &Shared) {
    s.pushed.fetch_add(1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    let pushed_to = 1u64 << SLOT;
    if MayWait::new(&s.may_wait).among(pushed_to) == 0 {
        return;
    }
    let seen = s.waiting.load(Ordering::Relaxed);
    if arming::wants_wake(seen) {
        s.wakes.fetch_add(1, Ordering::Relaxed);
        arming::ring_armed(&s.waiting, seen, || true);
    }
}

/// How the subscriber gets ready to wait.
#[derive(Clone, Copy)]
enum Wait {
    /// Arms its descriptor.
    Arm,
    /// Counts itself as a futex sleeper (`receive_timeout`), with the fence after.
    Sleep,
}

/// The subscriber: found nothing, announces itself (unless `announce` is false: the
/// broken variant), gets ready to wait, looks once more; whether it then sleeps.
fn wait_and_look(s: &Shared, how: Wait, announce: bool) -> bool {
    if announce {
        MayWait::new(&s.may_wait).announce(SLOT);
    }
    match how {
        Wait::Arm => arming::arm(&s.waiting),
        Wait::Sleep => {
            s.waiting.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
        }
    }
    s.pushed.load(Ordering::Relaxed) == 0
}

fn check(s: &Shared, slept: bool) {
    if slept && s.pushed.load(Ordering::Relaxed) > 0 {
        assert!(
            s.wakes.load(Ordering::Relaxed) > 0,
            "a push the sleeper never hears of"
        );
    }
}

/// One publisher against a subscriber that waits as `how`, its bit set beforehand
/// when `sticky` (an earlier wait), with or without the announcement.
fn one_publisher(how: Wait, sticky: bool, announce: bool) {
    model(move || {
        let s = shared();
        if sticky {
            MayWait::new(&s.may_wait).announce(SLOT);
        }
        let t = {
            let s = Arc::clone(&s);
            thread::spawn(move || publish(&s))
        };
        let slept = wait_and_look(&s, how, announce);
        t.join().unwrap();
        check(&s, slept);
    });
}

#[test]
fn a_fresh_announcement_is_seen_or_the_push_is() {
    one_publisher(Wait::Arm, false, true);
}

#[test]
fn a_sticky_bit_is_seen_or_the_push_is() {
    one_publisher(Wait::Arm, true, true);
}

#[test]
fn a_futex_sleeper_is_woken_or_sees_the_push() {
    one_publisher(Wait::Sleep, false, true);
}

#[test]
fn racing_publishers_leave_no_sleeper_unwoken() {
    model(|| {
        let s = shared();
        let publishers: Vec<_> = (0..2)
            .map(|_| {
                let s = Arc::clone(&s);
                thread::spawn(move || publish(&s))
            })
            .collect();
        let slept = wait_and_look(&s, Wait::Arm, true);
        for t in publishers {
            t.join().unwrap();
        }
        check(&s, slept);
    });
}

#[test]
#[should_panic(expected = "a push the sleeper never hears of")]
fn without_the_announcement_a_wake_up_is_lost() {
    // The broken variant: the subscriber arms without setting its bit, so a publisher
    // skips its `waiting` word and the model finds the sleeper nobody wakes.
    one_publisher(Wait::Arm, false, false);
}
