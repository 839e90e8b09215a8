//! The request-slot word: the state of one active request, shared by the client that
//! sent it and the server handling it, and every change made to it.
//!
//! One word per request slot of a client (in the dynamic segment): 0 when free, else
//! `epoch << 48 | server << 40 | flags << 32 | seq`:
//! - `server` (8 bits): the server slot the request went to, and `epoch` (16 bits)
//!   the low bits of that slot's generation when it was sent: a server leaving frees
//!   only words of its own generation, never one ABANDONED for the next server of its
//!   slot (ABA needs 2^16 servers through one slot while one leaving server scans);
//! - `seq` (32 bits, never 0): `rid << 8 | k`, where `k` is the slot's index and `rid`
//!   a 23-bit per-client counter started at random, so a stale entry of an earlier
//!   request of the same slot never matches (ABA needs 2^23 requests through one slot
//!   while one entry waits);
//! - [`FIN`]: the server ended the stream ([`end`], when the `ActiveRequest` drops);
//! - [`ABANDONED`]: the client dropped its pending response before the end
//!   ([`abandon`]); whoever finishes with the request last stores 0.
//!
//! Who writes: the client ([`open`]: 0 -> request; [`abandon`]: request -> ABANDONED,
//! or -> 0 once ended or its server is gone), the server handling it ([`end`]:
//! request -> FIN, ABANDONED -> 0), a server leaving and recovery of a dead one
//! ([`server_left`]: ABANDONED -> 0). Every change after the first is a CAS from the
//! exact word seen, so a word reused for a new request is never changed by someone
//! acting on the old one; freeing an ABANDONED word early is harmless for the same
//! reason (a server that later takes the request's entry finds the word changed and
//! skips it).
//!
//! Invariant: a word ABANDONED for server slot `s` is freed by someone. The client
//! leaves it to the server only while the server slot is still the one it sent to;
//! a server leaving stores its slot's new state first and then frees the ABANDONED
//! words naming it; each side fences (SeqCst) between its write and its look, so at
//! least one of them sees the other's (store buffering: the client sees the server
//! gone, or the server sees the word ABANDONED). Scanning before the slot's state was
//! stored lost the word when a client abandoned in between.
//!
//! A client's look and its CAS are one loop: a CAS that fails because the server
//! ended the stream meanwhile looks at the new word (giving up left an ended word
//! taken for good when the server also left between the look and the CAS).
//!
//! Atomics come through `super::sync` so that the loom model
//! (`tests/loom_request_word.rs`) compiles this file against loom's.

use crate::sync::{AtomicU64, Ordering, fence};

/// The server ended the stream.
pub const FIN: u64 = 1 << 32;
/// The client dropped its pending response before the end.
pub const ABANDONED: u64 = 1 << 33;

/// The word of a request with `seq` sent to the server in slot `s`, generation
/// `generation`.
pub fn word(s: usize, generation: u64, seq: u32) -> u64 {
    ((generation & 0xffff) << 48) | ((s as u64 & 0xff) << 40) | u64::from(seq)
}

/// Whether word `seen` was sent to the server in slot `s`, generation `generation`.
pub fn sent_to(seen: u64, s: usize, generation: u64) -> bool {
    seen >> 40 == word(s, generation, 0) >> 40
}

/// The client opens request `word` in free slot `w` (0): before the request's entry
/// is pushed, so a server that takes the entry (Acquire) finds the word.
pub fn open(w: &AtomicU64, word: u64) {
    w.store(word, Ordering::Release);
}

/// What the server's end of a request found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The stream ended (FIN): the client is to be woken.
    Fin,
    /// The client had abandoned it: the slot is free now.
    Freed,
    /// The word no longer names the request (the client is gone, or recovered it).
    NotOurs,
}

/// The server handling request `token` ends its stream. Release: every response
/// pushed before is visible to a client that sees FIN.
pub fn end(w: &AtomicU64, token: u64) -> Ended {
    match w.compare_exchange(token, token | FIN, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ended::Fin,
        Err(seen) if seen == token | ABANDONED => {
            let _ = w.compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Relaxed);
            Ended::Freed
        }
        Err(_) => Ended::NotOurs,
    }
}

/// The client drops its pending response to request `seq`, sent to the server in
/// slot `server`, generation `generation`; `server_gone` says whether that server slot is no longer the one it
/// sent to (freed, or taken by another server). Frees the word if the request ended
/// or its server is gone, and otherwise marks it ABANDONED for the server to free.
pub fn abandon(w: &AtomicU64, seq: u32, (server, generation): (usize, u64), server_gone: impl Fn() -> bool) {
    let mut seen = w.load(Ordering::Acquire);
    loop {
        if seen & 0xffff_ffff != u64::from(seq) || seen & ABANDONED != 0 {
            return; // not ours any more (recovered), or abandoned already
        }
        // Ended, or its server is gone: free. Else the server still has it (queued
        // or active) and frees the slot when done.
        let next = if seen & FIN != 0 || server_gone() {
            0
        } else {
            seen | ABANDONED
        };
        // A word that changed meanwhile (the server ended the stream) is looked at
        // again: giving up on a failed CAS would leave an ended word taken for good.
        match w.compare_exchange(seen, next, Ordering::SeqCst, Ordering::Acquire) {
            Ok(_) if next == 0 => return,
            Ok(_) => break,
            Err(now) => seen = now,
        }
    }
    // Pairs with the fence in `server_left`: the server, leaving, sees ABANDONED, or
    // we see it gone here (see the module docs).
    fence(Ordering::SeqCst);
    if server_gone() {
        free_abandoned(w, server, generation);
    }
}

/// Frees a request slot left ABANDONED for the server in slot `s`, generation
/// `generation` (the server is gone or dropped the request): CAS from the exact
/// word, so a reused slot is left alone.
pub fn free_abandoned(w: &AtomicU64, s: usize, generation: u64) {
    let seen = w.load(Ordering::Acquire);
    if seen & ABANDONED != 0 && sent_to(seen, s, generation) {
        let _ = w.compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The server in slot `s`, generation `generation`, left (its port freed, by itself
/// or by recovery: the slot's state says so already): frees every word in `words`
/// ABANDONED for it. Words of a later server in the same slot are left to that one.
pub fn server_left<'a>(words: impl IntoIterator<Item = &'a AtomicU64>, s: usize, generation: u64) {
    // Pairs with the fence in `abandon` (see the module docs).
    fence(Ordering::SeqCst);
    for w in words {
        free_abandoned(w, s, generation);
    }
}
