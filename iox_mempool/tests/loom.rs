//! Model checks of the chunk ownership word (`src/owners.rs`) with loom: every
//! interleaving (up to a preemption bound) of small scenarios, on the production
//! code itself. `owners.rs` takes its atomics from `crate::sync`; here that module
//! holds loom's, and the file is compiled in as a module of this test.
//!
//! Invariants checked in every execution:
//! - a free word (0) is claimed by exactly one of racing loans;
//! - exactly one step reports "now free", and the word ends 0 exactly when nobody
//!   holds the chunk;
//! - what a holder wrote to the chunk happens-before the next holder's use (loom's
//!   `UnsafeCell` fails the model on a data race, i.e. on a missing Release/Acquire);
//! - a duplicate take never lets the word read 0 (the guard bit), so no loan can
//!   slip in while the chunk is held.
//!
//! Every racing party is a spawned thread; the model's main thread only sets up,
//! joins and checks (loom did not explore the main thread's operations against a
//! spawned thread's in our runs).
//!
//! Run: `cargo test -p iox_mempool --test loom` (LOOM_MAX_PREEMPTIONS overrides the
//! bound set here).

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

/// What `owners.rs` sees as `crate::sync`: loom's atomics.
mod sync {
    pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
}

#[path = "../src/owners.rs"]
#[allow(dead_code)]
mod owners;

use owners::{MAX_OWNERS, Owner, OwnerWord, WordError};

fn owner(n: u32) -> Owner {
    Owner::new(n).unwrap()
}

/// Explores `f` with a preemption bound of 3 unless LOOM_MAX_PREEMPTIONS says otherwise.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// A chunk: its ownership word and its payload (one byte, race-checked by loom).
struct Chunk {
    word: OwnerWord,
    payload: UnsafeCell<u8>,
}

impl Chunk {
    fn new(word: u64) -> Arc<Self> {
        Arc::new(Self {
            word: OwnerWord::new(word),
            payload: UnsafeCell::new(0),
        })
    }

    fn write(&self, value: u8) {
        // SAFETY: called only by a holder of the chunk; loom reports it if another
        // access is not ordered with it.
        self.payload.with_mut(|p| unsafe { *p = value });
    }

    fn read(&self) -> u8 {
        // SAFETY: as for `write`.
        self.payload.with(|p| unsafe { *p })
    }
}

#[test]
fn racing_loans_of_a_free_word_have_one_winner() {
    model(|| {
        let chunk = Chunk::new(0);
        let wins = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|n| {
                let (chunk, wins) = (chunk.clone(), wins.clone());
                thread::spawn(move || {
                    if chunk.word.try_loan(owner(n)) {
                        wins.fetch_add(1, Ordering::Relaxed);
                        chunk.write(n as u8 + 1);
                        assert_eq!(chunk.word.load(), owner(n).bit());
                        assert_eq!(chunk.word.release(owner(n)), Ok(true));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Both may win, one after the other; never both at once (the asserts above),
        // and at least the first try of one of them finds the word free.
        assert!((1..=2).contains(&wins.load(Ordering::Relaxed)));
        assert!(chunk.word.is_free());
    });
}

#[test]
fn a_loan_after_a_release_sees_the_previous_holders_writes() {
    model(|| {
        let chunk = Chunk::new(owner(0).bit());
        let holder = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                chunk.write(7);
                assert_eq!(chunk.word.release(owner(0)), Ok(true));
            })
        };
        let loaner = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                if chunk.word.try_loan(owner(1)) {
                    // Only possible after the release; its write must be visible.
                    assert_eq!(chunk.read(), 7);
                    chunk.write(8);
                    chunk.word.release(owner(1)).unwrap();
                    true
                } else {
                    false
                }
            })
        };
        holder.join().unwrap();
        let loaned = loaner.join().unwrap();
        assert!(chunk.word.is_free());
        assert_eq!(chunk.read(), if loaned { 8 } else { 7 });
    });
}

/// A publisher (owner 0) hands a chunk it wrote to two queue entries while two
/// subscribers (1, 2) take an entry each (possibly before the hand-off counted it:
/// the entries were pushed before), read, and release. Exactly one step frees it.
#[test]
fn hand_off_races_takes_and_releases() {
    model(|| {
        let chunk = Chunk::new(owner(0).bit());
        chunk.write(42); // before the entries were pushed
        let freed = Arc::new(AtomicUsize::new(0));
        let subscribers: Vec<_> = [1, 2]
            .into_iter()
            .map(|n| {
                let (chunk, freed) = (chunk.clone(), freed.clone());
                thread::spawn(move || {
                    chunk.word.take_queued(owner(n)).unwrap();
                    // Never free while held: the word is not 0 between take and release.
                    assert!(!chunk.word.is_free());
                    assert_eq!(chunk.read(), 42);
                    if chunk.word.release(owner(n)).unwrap() {
                        freed.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let publisher = {
            let (chunk, freed) = (chunk.clone(), freed.clone());
            thread::spawn(move || {
                if chunk.word.hand_off(owner(0), 2).unwrap() {
                    freed.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        publisher.join().unwrap();
        for s in subscribers {
            s.join().unwrap();
        }
        assert_eq!(
            freed.load(Ordering::Relaxed),
            1,
            "exactly one step frees the chunk"
        );
        assert!(chunk.word.is_free());
    });
}

/// The publisher hands its chunk to one entry, the subscriber takes it, reads and
/// releases, and a loaner races them all: it can only win once the chunk is free,
/// and then its write must not race the subscriber's read (the release sequence
/// through the hand-off and the take carries the ordering).
#[test]
fn a_loan_racing_a_hand_off_and_its_taker_waits_for_the_last_reader() {
    model(|| {
        let chunk = Chunk::new(owner(0).bit());
        // Written before the entry was pushed (the queue's Release/Acquire orders it
        // before the subscriber's read, which may come before the hand-off).
        chunk.write(42);
        let subscriber = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                chunk.word.take_queued(owner(1)).unwrap();
                let _ = chunk.read();
                chunk.word.release(owner(1)).unwrap()
            })
        };
        let loaner = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                let won = chunk.word.try_loan(owner(2));
                if won {
                    chunk.write(1);
                }
                won
            })
        };
        let publisher = {
            let chunk = chunk.clone();
            thread::spawn(move || chunk.word.hand_off(owner(0), 1).unwrap())
        };
        let publisher_freed = publisher.join().unwrap();
        let subscriber_freed = subscriber.join().unwrap();
        let loaned = loaner.join().unwrap();
        assert!(publisher_freed ^ subscriber_freed, "exactly one frees it");
        assert_eq!(chunk.word.load(), if loaned { owner(2).bit() } else { 0 });
    });
}

/// A hand-off to zero entries frees the chunk at once, and a loaner racing it either
/// finds it held or free, never half-way.
#[test]
fn hand_off_to_no_entries_frees_for_a_racing_loan() {
    model(|| {
        let chunk = Chunk::new(owner(0).bit());
        let publisher = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                chunk.write(5);
                assert_eq!(chunk.word.hand_off(owner(0), 0), Ok(true));
            })
        };
        let loaner = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                let loaned = chunk.word.try_loan(owner(1));
                if loaned {
                    assert_eq!(chunk.read(), 5);
                }
                loaned
            })
        };
        publisher.join().unwrap();
        let loaned = loaner.join().unwrap();
        assert_eq!(chunk.word.load(), if loaned { owner(1).bit() } else { 0 });
    });
}

/// Recovery clears a dead owner's bit (twice, as racing recoverers may) while a live
/// owner releases its own bit and a loaner tries to claim the chunk.
#[test]
fn recovery_races_a_live_release_and_a_loan() {
    model(|| {
        let (dead, live, next) = (owner(0), owner(1), owner(2));
        let chunk = Chunk::new(dead.bit() | live.bit());
        let freed = Arc::new(AtomicUsize::new(0));
        let recovery = {
            let (chunk, freed) = (chunk.clone(), freed.clone());
            thread::spawn(move || {
                let first = chunk.word.release_if_held(dead);
                let second = chunk.word.release_if_held(dead);
                assert!(first.is_some(), "the dead owner's bit is found");
                assert_eq!(second, None, "recovery is idempotent");
                if first == Some(true) {
                    freed.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let holder = {
            let (chunk, freed) = (chunk.clone(), freed.clone());
            thread::spawn(move || {
                chunk.write(9);
                if chunk.word.release(live).unwrap() {
                    freed.fetch_add(1, Ordering::Relaxed);
                }
                assert_eq!(chunk.word.release(live), Err(WordError::NotHeld));
            })
        };
        let loaner = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                let loaned = chunk.word.try_loan(next);
                if loaned {
                    // Both holders let go first, and the live one's write is visible.
                    assert_eq!(chunk.read(), 9);
                }
                loaned
            })
        };
        recovery.join().unwrap();
        holder.join().unwrap();
        let loaned = loaner.join().unwrap();
        assert_eq!(freed.load(Ordering::Relaxed), 1);
        assert_eq!(chunk.word.load(), if loaned { next.bit() } else { 0 });
    });
}

/// A duplicate queue entry makes the highest owner take a chunk it holds already:
/// the add carries into the guard bit and is undone. Meanwhile another holder
/// releases and a loaner tries to claim: the word must never read 0 in between.
#[test]
fn a_duplicate_take_by_the_highest_owner_never_frees_the_chunk() {
    model(|| {
        let top = owner(MAX_OWNERS - 1);
        let other = owner(0);
        let chunk = Chunk::new(top.bit() | other.bit());
        let dup = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                assert_eq!(chunk.word.take_queued(top), Err(WordError::AlreadyHeld));
            })
        };
        let releaser = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                assert_eq!(chunk.word.release(other), Ok(false));
            })
        };
        let loaner = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                let loaned = chunk.word.try_loan(owner(1));
                assert!(!loaned, "the chunk is held by `top` throughout");
            })
        };
        dup.join().unwrap();
        releaser.join().unwrap();
        loaner.join().unwrap();
        assert_eq!(chunk.word.load(), top.bit());
        assert_eq!(chunk.word.release(top), Ok(true));
    });
}

/// A take may come before the hand-off that counts its entry (the queue count dips
/// "below zero" for a moment); the holder's bit keeps the word non-zero meanwhile.
#[test]
fn a_take_before_the_hand_off_counts_keeps_the_word_held() {
    model(|| {
        let chunk = Chunk::new(owner(0).bit());
        let taker = {
            let chunk = chunk.clone();
            thread::spawn(move || {
                chunk.word.take_queued(owner(1)).unwrap();
                chunk.word.release(owner(1)).unwrap()
            })
        };
        let publisher = {
            let chunk = chunk.clone();
            thread::spawn(move || chunk.word.hand_off(owner(0), 1).unwrap())
        };
        let publisher_freed = publisher.join().unwrap();
        let taker_freed = taker.join().unwrap();
        assert!(publisher_freed ^ taker_freed, "exactly one frees it");
        assert!(chunk.word.is_free());
    });
}

/// A publisher (owner 0) re-sends a chunk its history entry keeps: it joins the chunk
/// (`hold_queued`), pushes one more entry and hands it off, while a subscriber (1)
/// takes and releases the entry it got earlier and then the re-sent one (only once it
/// was pushed, after the join). The chunk is never free while the history keeps it,
/// the subscriber always sees the original write, and draining the history entry at
/// the end frees it in exactly one step.
#[test]
fn a_join_racing_takes_and_releases_keeps_the_chunk_until_the_history_goes() {
    use loom::sync::atomic::AtomicBool;
    model(|| {
        // One entry kept in the history, one queued for the subscriber.
        let chunk = Chunk::new(2 << owners::QUEUE_SHIFT);
        chunk.write(9); // by the original sender, before its hand-off
        let pushed = Arc::new(AtomicBool::new(false));
        let publisher = {
            let (chunk, pushed) = (chunk.clone(), pushed.clone());
            thread::spawn(move || {
                chunk.word.hold_queued(owner(0)).unwrap();
                pushed.store(true, Ordering::Release); // the re-sent entry is pushed
                assert_eq!(chunk.word.hand_off(owner(0), 1), Ok(false));
            })
        };
        let subscriber = {
            let (chunk, pushed) = (chunk.clone(), pushed.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    chunk.word.take_queued(owner(1)).unwrap();
                    assert_eq!(chunk.read(), 9);
                    assert_eq!(chunk.word.release(owner(1)), Ok(false), "the history keeps it");
                    while !pushed.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                }
            })
        };
        publisher.join().unwrap();
        subscriber.join().unwrap();
        assert_eq!(chunk.word.load(), 1 << owners::QUEUE_SHIFT);
        chunk.word.take_queued(owner(0)).unwrap();
        assert_eq!(chunk.word.release(owner(0)), Ok(true));
        assert_eq!(chunk.word.hold_queued(owner(0)), Err(WordError::Free));
    });
}
