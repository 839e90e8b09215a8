//! Model checks of the request-slot word (`src/shm/request_word.rs`) with loom:
//! the production file compiled against loom's atomics. One word stands for one
//! request slot of a client; a second atomic for the state word of the server slot
//! the request went to.
//!
//! Invariants, in every interleaving:
//! - a client dropping its pending response while the server ends the stream leaves
//!   the slot free;
//! - a client dropping it while the server leaves (its slot's state stored FREE, then
//!   the words ABANDONED for it freed) leaves the slot free: never ABANDONED for a
//!   server that is gone, so never lost to the client;
//! - a word the client reused for a new request is never changed by the server of the
//!   old one;
//! - a server leaving never frees a word ABANDONED for the next server of its slot
//!   (that server still holds the request's entry and frees the word itself).
//!
//! Variant refuted: a server that frees the ABANDONED words before it stores its
//! slot's state (the order before the fix) loses the slot in some interleaving, which
//! the model must find.
//!
//! Run: `cargo test -p iox_core --test loom_request_word`.

mod loom_common;
use loom::sync::Arc;
use loom::thread;
use loom_common::model;

use loom_common::sync;

#[path = "../src/shm/request_word.rs"]
#[allow(dead_code)]
mod request_word;

use sync::{AtomicU64, Ordering};

const SERVER: usize = 3;
/// The generation of the server slot the request went to.
const GENERATION: u64 = 7;
const SEQ: u32 = 0x0123_4500;
const ACTIVE: u64 = 1;
const FREE: u64 = 0;

struct Shared {
    word: AtomicU64,
    /// The server slot's state (ACTIVE or FREE), as the client's `gone` reads it.
    server_state: AtomicU64,
}

fn token() -> u64 {
    request_word::word(SERVER, GENERATION, SEQ)
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared {
        word: AtomicU64::new(token()),
        server_state: AtomicU64::new(ACTIVE),
    })
}

/// Runs `server` on its own thread, on the shared state.
fn spawn_server(s: &Arc<Shared>, server: impl FnOnce(&Shared) + Send + 'static) -> thread::JoinHandle<()> {
    let s = Arc::clone(s);
    thread::spawn(move || server(&s))
}

fn abandon(s: &Shared) {
    request_word::abandon(&s.word, SEQ, (SERVER, GENERATION), || {
        s.server_state.load(Ordering::Acquire) == FREE
    });
}

#[test]
fn abandoning_while_the_server_ends_the_stream_frees_the_slot() {
    model(|| {
        let s = shared();
        let server = spawn_server(&s, |s| {
            request_word::end(&s.word, token());
        });
        abandon(&s);
        server.join().unwrap();
        assert_eq!(s.word.load(Ordering::Relaxed), 0, "the request slot stayed taken");
    });
}

/// The server drained the request (never handled it) and leaves: as `ServerPort`'s
/// drop and the recovery of a dead server do, or in the refuted order.
fn leaving_server(fixed: bool) {
    model(move || {
        let s = shared();
        let server = spawn_server(&s, move |s| {
            if fixed {
                s.server_state.store(FREE, Ordering::Relaxed);
                request_word::server_left([&s.word], SERVER, GENERATION);
            } else {
                request_word::free_abandoned(&s.word, SERVER, GENERATION);
                s.server_state.store(FREE, Ordering::Relaxed);
            }
        });
        abandon(&s);
        server.join().unwrap();
        assert_eq!(
            s.word.load(Ordering::Relaxed),
            0,
            "a request slot left ABANDONED for a server that is gone"
        );
    });
}

#[test]
fn abandoning_while_the_server_leaves_frees_the_slot() {
    leaving_server(true);
}

#[test]
fn freeing_before_the_state_says_free_is_refuted() {
    let refuted = std::panic::catch_unwind(|| leaving_server(false)).is_err();
    assert!(refuted, "the model did not find the lost request slot");
}

#[test]
fn a_reused_word_is_left_alone_by_the_old_requests_server() {
    const NEW_SEQ: u32 = 0x0123_4600;
    model(|| {
        let s = shared();
        let server = spawn_server(&s, |s| {
            request_word::end(&s.word, token());
            // And then leaves, freeing what is ABANDONED for it.
            s.server_state.store(FREE, Ordering::Relaxed);
            request_word::server_left([&s.word], SERVER, GENERATION);
        });
        abandon(&s);
        let new = request_word::word(SERVER, GENERATION, NEW_SEQ);
        let reopened = s.word.load(Ordering::Acquire) == 0;
        if reopened {
            request_word::open(&s.word, new);
        }
        server.join().unwrap();
        let end = s.word.load(Ordering::Relaxed);
        if reopened {
            assert_eq!(end, new, "the old request's server changed the new request");
        } else {
            assert_eq!(end, 0, "the request slot stayed taken");
        }
    });
}

/// The old server of slot `SERVER` is leaving (its state already FREE) while the
/// slot's next server is ACTIVE and the client sends it a request and abandons it:
/// the old server's scan leaves that word to the new server, which holds its entry.
#[test]
fn a_leaving_server_leaves_the_next_servers_abandoned_words_alone() {
    const NEXT: u64 = GENERATION + 1;
    const NEW_SEQ: u32 = 0x0123_4600;
    model(|| {
        let s = Arc::new(Shared {
            word: AtomicU64::new(0),
            // The slot's state: the next server's, ACTIVE.
            server_state: AtomicU64::new(ACTIVE),
        });
        let old = spawn_server(&s, |s| {
            request_word::server_left([&s.word], SERVER, GENERATION);
        });
        let new = request_word::word(SERVER, NEXT, NEW_SEQ);
        request_word::open(&s.word, new);
        request_word::abandon(&s.word, NEW_SEQ, (SERVER, NEXT), || {
            s.server_state.load(Ordering::Acquire) == FREE
        });
        old.join().unwrap();
        assert_eq!(
            s.word.load(Ordering::Relaxed),
            new | request_word::ABANDONED,
            "the old server freed a word it does not hold"
        );
        // The next server takes the entry, finds it abandoned, and frees the word.
        request_word::free_abandoned(&s.word, SERVER, NEXT);
        assert_eq!(s.word.load(Ordering::Relaxed), 0);
    });
}
