//! Model checks of a blackboard key's value protocol (`src/shm/blackboard_value.rs`) with
//! loom: the production file compiled against loom's atomics. The value buffers are
//! loom cells, so a write of a buffer while a reader reads it is reported as a data
//! race; a buffer holds `10 * generation`, so a reader that pinned generation `g`
//! checks it read exactly that value.
//!
//! Invariants, in every interleaving (one writer per key, as its lock makes it):
//! - a reader reads a whole value, the one of the generation its pin names, while
//!   the writer publishes new ones (no race on the buffer it reads);
//! - the writer always finds a buffer (`2 * readers + 2` buffers, a reader pinning at
//!   most two);
//! - a reader that holds a guard and copies the value meanwhile reads both whole.
//!
//! Variants refuted: a writer that double-buffers without looking at the pins races
//! with a reader; a reader that does not look at `current` again after storing its pin
//! reads a buffer being rewritten; a reader whose pin store is Relaxed lets the writer
//! read its next pin instead of its unpin and rewrite a buffer it just read.
//!
//! Run: `cargo test -p iox_core --test loom_blackboard`.

mod loom_common;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use loom_common::model;

use loom_common::sync;

#[path = "../src/shm/blackboard_value.rs"]
#[allow(dead_code)]
mod value;

use sync::{AtomicU64, Ordering};

struct Key {
    current: AtomicU64,
    /// Per reader slot its `value::READER_WORDS` pin words.
    pins: Vec<AtomicU64>,
    buffers: Vec<UnsafeCell<u64>>,
}

/// A buffer's value. Loom reports the read as a race if a write may run beside it.
fn get(cell: &UnsafeCell<u64>) -> u64 {
    // SAFETY: a plain read; whether it may overlap a write is what the model checks.
    cell.with(|p| unsafe { *p })
}

/// Writes a buffer's value (see [`get`]).
fn set(cell: &UnsafeCell<u64>, v: u64) {
    // SAFETY: a plain write; whether it may overlap a read is what the model checks.
    cell.with_mut(|p| unsafe { *p = v });
}

/// A key for `readers` readers, its initial value (generation 1) in buffer 0.
fn key(readers: usize) -> Arc<Key> {
    let n = 2 * readers + 2;
    Arc::new(Key {
        current: AtomicU64::new(1 << 8),
        pins: (0..readers * value::READER_WORDS)
            .map(|_| AtomicU64::new(0))
            .collect(),
        buffers: (0..n)
            .map(|b| UnsafeCell::new(if b == 0 { 10 } else { 0 }))
            .collect(),
    })
}

/// Reader slot `r`'s pin word `which`.
fn mine(k: &Key, r: usize, which: usize) -> &AtomicU64 {
    &k.pins[r * value::READER_WORDS + which]
}

/// The writer: `updates` updates, picking buffers as production does, or (`checked`
/// false, refuted) the other of two buffers, whatever the pins say.
fn writer(k: &Arc<Key>, updates: u64, checked: bool) -> thread::JoinHandle<()> {
    let k = Arc::clone(k);
    thread::spawn(move || {
        for _ in 0..updates {
            let b = if checked {
                value::pick(&k.current, &k.pins, k.buffers.len()).expect("a free buffer")
            } else {
                // Double buffering: the other of buffers 0 and 1.
                value::buffer_of(k.current.load(Ordering::Relaxed)) ^ 1
            };
            let next = value::generation_of(k.current.load(Ordering::Relaxed)) + 1;
            set(&k.buffers[b], 10 * next);
            value::publish(&k.current, b);
        }
    })
}

/// One copy by reader slot `r`: pin, read, check, unpin.
fn read(k: &Key, r: usize) {
    let word = value::pin(&k.current, mine(k, r, value::COPY));
    let b = value::buffer_of(word);
    let v = get(&k.buffers[b]);
    assert_eq!(v, 10 * value::generation_of(word), "a torn or stale value");
    value::unpin(mine(k, r, value::COPY));
}

#[test]
fn a_reader_reads_the_whole_value_of_its_generation_while_a_writer_updates() {
    model(|| {
        let k = key(1);
        let w = writer(&k, 2, true);
        read(&k, 0);
        read(&k, 0);
        w.join().unwrap();
    });
}

#[test]
fn two_readers_and_a_writer() {
    model(|| {
        let k = key(2);
        let w = writer(&k, 1, true);
        let k2 = Arc::clone(&k);
        let r = thread::spawn(move || read(&k2, 1));
        read(&k, 0);
        r.join().unwrap();
        w.join().unwrap();
    });
}

#[test]
fn a_reader_holding_a_guard_copies_meanwhile() {
    model(|| {
        let k = key(1);
        let guard = value::pin(&k.current, mine(&k, 0, value::GUARD));
        let w = writer(&k, 2, true);
        read(&k, 0);
        let g = get(&k.buffers[value::buffer_of(guard)]);
        assert_eq!(g, 10 * value::generation_of(guard), "the guard's value");
        value::unpin(mine(&k, 0, value::GUARD));
        w.join().unwrap();
    });
}

#[test]
fn a_writer_that_ignores_the_pins_is_refuted() {
    let refuted = std::panic::catch_unwind(|| {
        model(|| {
            let k = key(1);
            let w = writer(&k, 2, false);
            read(&k, 0);
            w.join().unwrap();
        });
    })
    .is_err();
    assert!(refuted, "the model did not find the race");
}

#[test]
fn a_reader_that_does_not_look_again_is_refuted() {
    let refuted = std::panic::catch_unwind(|| {
        model(|| {
            let k = key(1);
            let w = writer(&k, 2, true);
            let word = k.current.load(Ordering::Acquire);
            let b = value::buffer_of(word);
            mine(&k, 0, value::COPY).store(b as u64 + 1, Ordering::Relaxed);
            let v = get(&k.buffers[b]);
            assert_eq!(v, 10 * value::generation_of(word));
            value::unpin(mine(&k, 0, value::COPY));
            w.join().unwrap();
        });
    })
    .is_err();
    assert!(refuted, "the model did not find the race");
}

#[test]
fn a_reader_whose_pin_store_is_relaxed_is_refuted() {
    // Its next pin's store is what the writer may read instead of the unpin: without
    // Release it does not carry the reads made under the pin before.
    let refuted = std::panic::catch_unwind(|| {
        model(|| {
            let k = key(1);
            let w = writer(&k, 2, true);
            for _ in 0..2 {
                let pin = mine(&k, 0, value::COPY);
                let word = loop {
                    let word = k.current.load(Ordering::Acquire);
                    pin.store(value::buffer_of(word) as u64 + 1, Ordering::Relaxed);
                    sync::fence(Ordering::SeqCst);
                    if k.current.load(Ordering::Relaxed) == word {
                        break word;
                    }
                };
                let v = get(&k.buffers[value::buffer_of(word)]);
                assert_eq!(v, 10 * value::generation_of(word));
                value::unpin(pin);
            }
            w.join().unwrap();
        });
    })
    .is_err();
    assert!(refuted, "the model did not find the race");
}
