//! Writers: update a key's value under the key's lock, by copy or by a loan written in
//! place, then publish it and notify the change listeners.
//!
//! An update takes the key's robust lock if the blackboard allows more than one writer
//! (another writer of the same key waits; a dead holder is taken over), picks a buffer
//! that is neither current nor pinned (`value::pick`), writes it, publishes it
//! (`value::publish`), unlocks, and notifies event id = the key's index on the changes
//! service. A loan dropped without [`EntryLoan::write_and_update`] (or
//! [`EntryLoan::assume_init_update`]) publishes nothing. Readers are never waited for.
//!
//! A `Writer` is `Send` but not `Sync` (one port, one thread at a time, as a
//! publisher), and runs one update per key at a time.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

use lock_api::RawMutex as _;
use thiserror::Error;

use super::layout::ValuePlace;
use super::service::BlackboardService;
use super::{EntryError, entry_index, value};
use crate::ZeroCopySafe;
use crate::event::{EventId, Notifier};
use crate::port::{self, PortCreateError, Side};
use crate::slot_claim::SlotClaim;

/// Builds a [`Writer`].
#[derive(Debug)]
pub struct WriterBuilder<K> {
    service: BlackboardService<K>,
}

/// Why an update failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Every buffer of the key is current or pinned: more readers pin it than the
    /// blackboard was made for (its shared memory was damaged).
    #[error(
        "no free buffer for key {key} of blackboard {name:?}: its readers pin more buffers than they may (damaged shared memory; remove the service)"
    )]
    NoFreeBuffer {
        /// The blackboard.
        name: String,
        /// The key.
        key: String,
    },
    /// This writer has an update of the key under way (a loan not yet published or
    /// dropped).
    #[error("this writer is updating key {key} already; publish or drop that loan first")]
    UpdateInProgress {
        /// The key.
        key: String,
    },
    /// This process is a fork of the one that made the writer.
    #[error(
        "this writer belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
}

impl<K: ZeroCopySafe + std::fmt::Debug> WriterBuilder<K> {
    pub(crate) fn new(service: BlackboardService<K>) -> Self {
        Self { service }
    }

    /// Creates the writer (claims a writer slot; recovers dead participants first).
    pub fn create(self) -> Result<Writer<K>, PortCreateError> {
        // The writer slot first, so that a blackboard at its writers' limit says so;
        // the notifier of the changes service (whose limit is the same) next.
        let claim = SlotClaim::new(&self.service.shared, Side::Sending, "writer")?;
        let notifier = self.service.changes.notifier_builder().create()?;
        let (slot, generation) = claim.activate(None);
        Ok(Writer {
            locks: self.service.blackboard_config().max_writers > 1,
            buffers: self.service.blackboard_config().buffers as usize,
            updating: (0..self.service.blackboard_config().entries.len())
                .map(|_| std::cell::Cell::new(false))
                .collect(),
            listeners: std::cell::Cell::new((None, 0)),
            fork_generation: self.service.shared.fork_generation,
            service: self.service,
            slot,
            generation,
            notifier,
        })
    }
}

/// A writer of a blackboard's keys.
#[derive(Debug)]
pub struct Writer<K> {
    pub(super) service: BlackboardService<K>,
    slot: usize,
    generation: u64,
    fork_generation: u64,
    /// Whether updates take the key's lock: only with more than one writer (one writer
    /// port is used by one thread at a time, and its slot is claimed once).
    locks: bool,
    /// Value buffers per key.
    buffers: usize,
    /// Per key, whether an update of it is under way.
    updating: Vec<std::cell::Cell<bool>>,
    /// The changes service's listener slots found active, and its `ports_changed`
    /// word when they were (looked up again when that word changes).
    listeners: std::cell::Cell<(Option<u32>, u64)>,
    notifier: Notifier,
}

impl<K: ZeroCopySafe + std::fmt::Debug> Writer<K> {
    /// The entry of `key`, whose values are `V`.
    pub fn entry<V: ZeroCopySafe>(&self, key: &K) -> Result<WriterEntry<'_, K, V>, EntryError> {
        let index = entry_index::<K, V>(&self.service, key)?;
        Ok(WriterEntry {
            writer: self,
            index,
            place: self.service.places[index],
            key: format!("{key:?}"),
            _value: PhantomData,
        })
    }
}

impl<K> Writer<K> {
    /// Starts an update of key `k` (named `key` in errors): locks it if there may be
    /// other writers, and picks the buffer to write.
    pub(crate) fn begin(&self, k: usize, key: &str) -> Result<usize, WriteError> {
        if !crate::fork::is_same_process(self.fork_generation) {
            return Err(WriteError::ForkedProcess);
        }
        // One update per key at a time: a second would pick the same buffer (nothing
        // marks it taken before its publish), and the key lock is not reentrant.
        if self.updating[k].replace(true) {
            return Err(WriteError::UpdateInProgress { key: key.to_string() });
        }
        let d = self.service.dynamic();
        let words = d.key_words(k);
        if self.locks {
            // A dead holder's half-written buffer was never published: nothing to
            // repair.
            let _ = words.lock.lock_robust();
        }
        let Some(buffer) = value::pick(words.current, words.pins, self.buffers) else {
            self.unlock(k);
            return Err(WriteError::NoFreeBuffer {
                name: self.service.shared.name.to_string(),
                key: key.to_string(),
            });
        };
        crate::testing::stall_point(crate::testing::Stall::BlackboardLocked);
        Ok(buffer)
    }

    /// Ends the update of key `k` that [`begin`](Self::begin) started, with buffer
    /// `buffer` written: publishes it, unlocks, counts it and notifies the change
    /// listeners; the generation published. A forked child's copy of the update
    /// publishes nothing (the buffer is its parent's).
    pub(crate) fn finish(&self, k: usize, buffer: usize) -> Result<u64, WriteError> {
        if !crate::fork::is_same_process(self.fork_generation) {
            return Err(WriteError::ForkedProcess);
        }
        let d = self.service.dynamic();
        crate::testing::stall_point(crate::testing::Stall::BlackboardBeforePublish);
        let word = value::publish(d.key_words(k).current, buffer);
        self.unlock(k);
        // Only this port writes its header's count: no read-modify-write needed.
        let sent = &d.sender(self.slot).sent;
        sent.store(sent.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        // Listeners of the changes service (their slots looked up again only when its
        // ports changed); an update reaches its readers either way.
        let changed = self.notifier.ports_changed();
        let (seen, mut slots) = self.listeners.get();
        if seen != Some(changed) {
            slots = self.notifier.listener_slots();
            self.listeners.set((Some(changed), slots));
        }
        self.notifier.signal(EventId::new(k as u32), slots);
        Ok(value::generation_of(word))
    }

    /// Unlocks key `k`, which this writer's thread locked in `begin` (nothing to
    /// do for a blackboard of one writer, which takes no locks).
    pub(super) fn unlock(&self, k: usize) {
        self.updating[k].set(false);
        if !crate::fork::is_same_process(self.fork_generation) {
            return; // a forked child's copy: the lock (if any) is the parent's
        }
        if self.locks {
            // SAFETY: locked by this thread in `loan_uninit`, not unlocked since.
            unsafe { self.service.dynamic().key_words(k).lock.unlock() };
        }
    }
}

impl<K> Drop for Writer<K> {
    fn drop(&mut self) {
        if !self.service.shared.is_own_process() {
            return; // a forked child's copy: the port is the parent's
        }
        let d = self.service.dynamic();
        let header = d.sender(self.slot);
        port::close(header, self.generation);
        port::free(header, self.generation);
        port::announce(d);
    }
}

/// One key of a writer, with values of type `V`.
#[derive(Debug)]
pub struct WriterEntry<'w, K, V> {
    writer: &'w Writer<K>,
    index: usize,
    place: ValuePlace,
    key: String,
    _value: PhantomData<fn() -> V>,
}

impl<'w, K: ZeroCopySafe + std::fmt::Debug, V: ZeroCopySafe> WriterEntry<'w, K, V> {
    /// Sets the key's value to `value`; the generation it published.
    pub fn update_with_copy(&self, value: V) -> Result<u64, WriteError> {
        self.loan_uninit()?.write_and_update(value)
    }

    /// A buffer for the key's next value, written in place and published by
    /// [`EntryLoan::write_and_update`] (or [`EntryLoan::assume_init_update`]); with
    /// more than one writer the key stays locked for the others until then (or until
    /// the loan is dropped, which publishes nothing).
    pub fn loan_uninit(&self) -> Result<EntryLoan<'_, K, V>, WriteError> {
        let buffer = self.writer.begin(self.index, &self.key)?;
        Ok(EntryLoan {
            entry: self,
            buffer,
            ptr: self
                .writer
                .service
                .dynamic()
                .value_ptr(self.place, buffer)
                .cast::<MaybeUninit<V>>(),
            done: false,
        })
    }

    /// The generation of the key's value now.
    pub fn generation(&self) -> u64 {
        let d = self.writer.service.dynamic();
        d.key_words(self.index).generation()
    }
}

/// A key's next value, written in place (see [`WriterEntry::loan_uninit`]).
#[derive(Debug)]
pub struct EntryLoan<'e, K, V> {
    entry: &'e WriterEntry<'e, K, V>,
    buffer: usize,
    ptr: *mut MaybeUninit<V>,
    done: bool,
}

impl<K: ZeroCopySafe + std::fmt::Debug, V: ZeroCopySafe> EntryLoan<'_, K, V> {
    /// The value to write (uninitialised: write all of it).
    pub fn payload_mut(&mut self) -> &mut MaybeUninit<V> {
        // SAFETY: the buffer is this loan's: neither current nor pinned when picked
        // (readers pin only the current one), and no other update of the key runs (the
        // writer refuses a second one, and other writers wait for the key's lock while
        // there are several); sized and aligned for V (its recorded type); the borrow
        // of `self` keeps this reference the only one. (A forked child's copy of the
        // loan writes its parent's buffer, as a copy of a publisher's loan does; its
        // publish is refused.)
        unsafe { &mut *self.ptr }
    }

    /// Writes `value` and publishes it; the generation published.
    pub fn write_and_update(mut self, value: V) -> Result<u64, WriteError> {
        self.payload_mut().write(value);
        // SAFETY: just written in full.
        unsafe { self.assume_init_update() }
    }

    /// Publishes the written value; the generation published.
    ///
    /// # Safety
    /// The whole value was written through [`payload_mut`](Self::payload_mut).
    pub unsafe fn assume_init_update(mut self) -> Result<u64, WriteError> {
        self.done = true;
        let published = self.entry.writer.finish(self.entry.index, self.buffer);
        if published.is_err() {
            self.entry.writer.unlock(self.entry.index);
        }
        published
    }
}

impl<K, V> Drop for EntryLoan<'_, K, V> {
    fn drop(&mut self) {
        if !self.done {
            self.entry.writer.unlock(self.entry.index);
        }
    }
}
