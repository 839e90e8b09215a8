//! A publisher's history: its last `n` samples, kept for subscribers that connect
//! later (`.history(n)` on the service), who get them first, oldest first, then live
//! samples.
//!
//! Where the history lives: in shared memory. Each publisher slot of a service with
//! history has a history queue of `n` slots in the dynamic segment (`shm::dynamic`),
//! produced and consumed by that publisher alone. A kept sample is an entry of it and
//! holds its chunk like any queue entry (one count in the chunk's ownership word). So
//! a publisher killed with SIGKILL loses nothing and leaks nothing: recovery finds its
//! history queue and drains it, as it drains a queue no subscriber will read.
//!
//! Decision: why not a ring in the process, its chunks under the publisher's owner
//! bit? Then a send would add the queue holds and keep the bit, and the chunk's word
//! would not show whether the holds were added: recovery of a publisher killed after
//! adding them but before clearing its journal would add them again, and the chunk
//! would never be free. With a hand-off, the cleared bit is that proof; here every step
//! that adds holds is a hand-off.
//!
//! A send with history:
//! 1. subscribers that connected since we last looked get the history (below):
//!    `ACTIVE` ones whose bit is in the connected set (`shm::connected`), which is
//!    what `after_push` checks afterwards; one that is `ACTIVE` but not in the set
//!    yet gets it at a later send, not now (else its bit, still clear after the
//!    fence, would make `after_push` drain what it was just given);
//! 2. the sample is journaled and pushed to each subscriber we gave the history to:
//!    its slot's state word (generation and `ACTIVE`) is the one we recorded then. One
//!    that connected after step 1 is skipped: it gets this sample with the history at
//!    the next send (or `update_connections`), so it sees every sample once, in order;
//! 3. it is pushed into the history queue, which drops its oldest entry when full (the
//!    dropped entry's hold moves into our bit and is released, as a subscriber queue's
//!    `DropOldest` does);
//! 4. one hand-off adds a hold per entry pushed, the history's included, and drops our
//!    bit; the journal is cleared. A publisher killed in between is recovered as for
//!    any send: the queues whose last entry is the journaled one got it, the history
//!    queue among them (`recovery`).
//!
//! Giving the history to a subscriber: each kept entry, oldest first, is a send of its
//! own: journal a fresh entry (a new send sequence number, the same chunk); join the
//! chunk under our bit (`Bookkeeping::hold_queued`, possible because our history entry
//! keeps it meanwhile); push it; hand it off to the one entry pushed (or none); clear
//! the journal. Killed anywhere in there, the publisher is recovered as in a send. The
//! subscriber's queue is fresh (drained when it was created) and `n` is at most the
//! buffer, so the history fits; a replay never drops an entry, and one that finds the
//! queue full is skipped (only if the subscriber's slot changed hands between our look
//! and our push, as a send can also race), not reported.
//!
//! Which subscriber an entry is for. A publisher looks at a slot's state word and then
//! pushes; the slot can change hands in between (its subscriber goes, a new one
//! claims the slot, drains its queues and connects), and the push then lands in the
//! new subscriber's queue although it was meant for the old one: a *stray*. Given the
//! history later, the new subscriber would see that sample twice and out of order. So
//! per (publisher slot, subscriber slot) there is one more word in shared memory, the
//! *history-given* word (`Dynamic::history_given`): the generation of the subscriber
//! this publisher last gave its history to, written by the publisher alone.
//! - Giving the history to a subscriber of a new generation, the publisher first takes
//!   back everything still queued from it to that slot (strays; as producer, claim by
//!   claim), then stores the generation (Release), then pushes the history. If someone
//!   holds a claim on the queue meanwhile, it leaves that subscriber for a later send.
//! - A subscriber of a service with history, taking an entry from publisher `p`,
//!   compares `p`'s history-given word for its slot with its own generation *while it
//!   holds the claim on the entry*; if they differ, the entry is a stray: it releases
//!   the chunk and looks again.
//!
//! Why no stray is ever taken as one's own: a stray was pushed before the publisher's
//! store of the new generation. Either the subscriber's claim on it ended before the
//! publisher's drain claimed (then the subscriber's look, before its claim ended,
//! happens-before the store, and sees the old value), or the drain took it first. An
//! entry pushed after the store is found with the store visible (the pop's Acquire of
//! the write index). A publisher SIGKILLed anywhere in this leaves nothing new to
//! recover: the drain is claims and releases like any drain, the store is one word,
//! and the next publisher of the slot keeps the word as it is (its first history,
//! empty, goes to the same generation; a subscriber whose generation is already there
//! keeps what the dead publisher queued for it).
//!
//! Dropping the publisher drains its history queue: each kept chunk returns to the pool
//! once no subscriber holds it; samples already queued for subscribers stay theirs.
//!
//! Cost: a service without history pays one test of a local flag per send. With
//! history, a send also loads each subscriber's state word once more and pushes one
//! more entry; giving the history costs two RMWs on the chunk's word per entry.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use iox_mempool::ChunkHandle;

use super::{PublisherPort, SendError};
use crate::dynamic::{self, Dynamic};
use crate::port;
use crate::queue::{self, Popped, Pushed};
use crate::shm::connected;

/// The recorded state word of a subscriber slot we never gave the history to: no
/// state word is this (the generation has 56 bits, the phase is at most 3).
const NEVER: u64 = u64::MAX;

/// The `send_generation` of a publisher with history: no fork generation is this
/// (the process-global generation counts forks from 0).
pub(crate) const NOT_A_GENERATION: u64 = u64::MAX;

/// What a publisher of a service with history keeps in its process (boxed, so that
/// a publisher without history carries one word for it).
#[derive(Debug)]
pub(super) struct State {
    /// Per subscriber slot: the state word (generation and `ACTIVE`) of the
    /// subscriber we gave the history to.
    connected: Box<[Cell<u64>]>,
    /// Our lower bound of the history queue's read index.
    read: Cell<u64>,
}

impl State {
    pub(super) fn new(max_subscribers: usize) -> Self {
        Self {
            connected: (0..max_subscribers).map(|_| Cell::new(NEVER)).collect(),
            read: Cell::new(0),
        }
    }
}

impl PublisherPort {
    /// Where `send_chunk` goes when its first test fails: a forked child's send, or a
    /// send with history.
    #[cold]
    #[inline(never)]
    pub(super) fn send_other(&self, handle: ChunkHandle, len: usize) -> Result<usize, SendError> {
        if !self.is_own_process() {
            return Err(SendError::ForkedProcess);
        }
        // Written: a guarded port unlocks before the entry can reach anyone.
        self.end_write(handle);
        match (&self.history, self.pool.locate(handle)) {
            (Some(history), _) => self.send_with_history(history, handle, len),
            (None, Some(chunk)) => self.send_now::<false>(chunk, len),
            // A handle our loan holds is in range.
            (None, None) => unreachable!("a loaned chunk is in its pool"),
        }
    }

    /// `send_chunk` for a service with history (see the module docs).
    fn send_with_history(
        &self,
        history: &State,
        handle: ChunkHandle,
        len: usize,
    ) -> Result<usize, SendError> {
        // The spare, loaned first as in `send_chunk` (through `loan`: `loan_near` keeps
        // its single call site, inlined into `send_chunk`).
        if self.spare.is_empty()
            && let Some(class) = self.pool.layout().classes().get(handle.class())
            && let Ok(spare) = self.loan_chunk(class.chunk_size)
        {
            match self.pool.locate(spare) {
                Some(located) => self.spare.put(located),
                // A handle just loaned is in range; never leave one held unused.
                None => {
                    let _ = self.pool.book().release(spare, self.owner);
                }
            }
        }
        let d = self.service.dynamic();
        let _ = self.pool.book().set_user_word(handle, len as u64);
        // Only subscribers in the connected set (as for `send_chunk`): one that is
        // `ACTIVE` but has not joined the set yet gets the history once it has.
        let set = d.connected().snapshot();
        let (given, mut pushed_to) = self.give_history(history, d, set);
        let header = self.header();
        header.sent.store(
            header.sent.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        let entry = queue::entry(self.next_seq(), handle);
        header.journal.store(entry, Ordering::Relaxed);
        // To the subscribers we gave the history to (their state word is the one we
        // recorded); the slot may change hands from the look to the push: then the
        // entry is a stray, which the new subscriber drops (see the module docs).
        let sent = self.push_all(d, entry, set, |s| {
            let admitted = d.receiver(s).state.load(Ordering::Acquire) == history.connected[s].get();
            if admitted {
                crate::testing::stall_point(crate::testing::Stall::HistorySendBeforePush);
            }
            admitted
        });
        let (delivered, rejected) = (sent.delivered, sent.rejected);
        pushed_to |= sent.pushed_to;
        let kept = self.keep(history, d, entry);
        crate::testing::stall_point(crate::testing::Stall::HistorySendBeforeHandOff);
        let _ = self
            .pool
            .book()
            .hand_off(handle, self.owner, (delivered + kept) as u32);
        header.journal.store(0, Ordering::Relaxed);
        if delivered + given > 0 {
            self.after_push(d, pushed_to);
        }
        if delivered == 0 && self.service.is_removed() {
            return Err(SendError::ServiceRemoved);
        }
        if rejected > 0 {
            return Err(SendError::QueueFull { delivered, rejected });
        }
        Ok(delivered)
    }

    /// `Publisher::update_connections`: gives the history to new subscribers, wakes
    /// them; returns how many entries it pushed.
    pub(super) fn update_connections(&self) -> usize {
        let Some(history) = &self.history else {
            return 0;
        };
        let d = self.service.dynamic();
        let (given, pushed_to) = self.give_history(history, d, d.connected().snapshot());
        if given > 0 {
            self.after_push(d, pushed_to);
        }
        given
    }

    /// Gives the history to each active subscriber of the connected set `set` whose
    /// state word is not the one we recorded (it connected since we last looked), and
    /// records it. Returns how many entries it pushed, and the subscribers it pushed
    /// to (a bit each). A subscriber that is `ACTIVE` but not in the set yet is left
    /// for a later send: were it given the history now, `after_push` would find its
    /// bit clear and drain what it was given, and it would never get it again.
    fn give_history(&self, history: &State, d: Dynamic<'_>, set: u64) -> (usize, u64) {
        let (mut given, mut pushed_to) = (0, 0);
        for (s, connected) in history.connected.iter().enumerate() {
            let state = d.receiver(s).state.load(Ordering::Acquire);
            if set & connected::bit(s) == 0
                || dynamic::split_state(state).1 != dynamic::ACTIVE
                || state == connected.get()
            {
                continue;
            }
            let generation = dynamic::split_state(state).0;
            let given_to = d.history_given(self.slot, s);
            if given_to.load(Ordering::Relaxed) != generation {
                // Strays we pushed while the slot changed hands: gone before the new
                // subscriber can take any of them as ours. Someone mid-take: later.
                if !self.drain_strays(d, s) {
                    continue;
                }
                // Release, and before the pushes below: a take that finds this
                // generation here finds only entries for it.
                given_to.store(generation, Ordering::Release);
            }
            connected.set(state);
            for kept in d.history_queue(self.slot).entries() {
                if self.resend(d, s, kept) {
                    given += 1;
                    pushed_to |= connected::bit(s);
                }
            }
        }
        (given, pushed_to)
    }

    /// Takes back everything queued from us to subscriber slot `s` (entries pushed to
    /// an earlier subscriber of the slot, which it did not take), before the slot's
    /// new subscriber is given our history. Whether the queue is empty now (false if
    /// someone holds a claim on it: a take in progress, or a dead taker's claim that
    /// recovery resolves).
    fn drain_strays(&self, d: Dynamic<'_>, s: usize) -> bool {
        let q = d.queue(self.slot, s);
        loop {
            let mut taken = None;
            match q.pop(queue::BY_PRODUCER, |e| {
                taken = port::take_entry(self.pool.book(), e, self.owner)
            }) {
                Popped::Took(_) => self.release_taken(taken),
                Popped::Empty => return true,
                Popped::Busy => return false,
            }
        }
    }

    /// Sends the chunk of history entry `kept` once more, to subscriber `s` alone, as
    /// a journaled send of its own. Whether it was pushed.
    fn resend(&self, d: Dynamic<'_>, s: usize, kept: u64) -> bool {
        let Some(chunk) = self.pool.chunk_ref_from_raw(queue::entry_chunk(kept)) else {
            return false;
        };
        // Join the chunk our history entry keeps, so it can be handed off once more
        // (killed before the send, our bit is cleared by recovery like any other).
        if chunk.hold_queued(self.owner).is_err() {
            // Not a chunk our history keeps (corrupt memory): leave it alone.
            return false;
        }
        let entry = queue::entry_of_raw(self.next_seq(), chunk.located().raw());
        // SAFETY: located in `self.pool`, which this port keeps mapped.
        let pushed = unsafe {
            port::send_one(
                &self.header().journal,
                &d.queue(self.slot, s),
                &self.read_cache[s % 64],
                chunk.located(),
                self.owner,
                entry,
            )
        };
        if !pushed {
            // Only if the slot changed hands since our look (its queue is fresh
            // otherwise): counted as missed, and our joined hold goes.
            super::missed(d, s);
            let _ = chunk.release(self.owner);
        }
        pushed
    }

    /// Pushes `entry` into our history queue, dropping (and releasing) the oldest when
    /// it is full. 1 if it was kept, 0 if not (only for corrupt indices).
    fn keep(&self, history: &State, d: Dynamic<'_>, entry: u64) -> usize {
        let mut cached = history.read.get();
        let mut taken = None;
        let pushed = d.history_queue(self.slot).push(entry, true, &mut cached, |old| {
            taken = port::take_entry(self.pool.book(), old, self.owner)
        });
        history.read.set(cached);
        match pushed {
            Pushed::Stored => 1,
            Pushed::DroppedOldest => {
                self.release_taken(taken);
                1
            }
            Pushed::Full | Pushed::Busy => 0,
        }
    }

    /// Releases every kept sample (when the publisher goes).
    pub(super) fn drop_history(&self) {
        let d = self.service.dynamic();
        port::drain_queue(
            &d.history_queue(self.slot),
            queue::BY_PRODUCER,
            self.pool.book(),
            self.owner,
        );
    }
}
