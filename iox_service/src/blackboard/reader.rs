//! Readers: read a key's latest value as a copy or through a zero-copy guard, and ask
//! whether it changed since they last read it.
//!
//! A read pins the key's current buffer in one of the reader slot's two pin words of
//! the key (`value::pin`), reads, and unpins (a copy at once, through its copy word; a
//! guard when it drops, through its guard word). So a reader holds at most one guard
//! per key (a second `read` of a key whose guard lives is [`ReadError::GuardHeld`]):
//! with a copy in flight, at most two buffers of a key pinned per reader, which the
//! buffer count allows for.
//!
//! A `Reader` is `Send` but not `Sync` (its pin counts are `Cell`s).

use std::cell::Cell;
use std::marker::PhantomData;

use thiserror::Error;

use super::layout::ValuePlace;
use super::service::BlackboardService;
use super::{EntryError, entry_index, value};
use crate::ZeroCopySafe;
use crate::port::{self, PortCreateError, Side};
use crate::slot_claim::SlotClaim;
use crate::valid::check_values;

/// Builds a [`Reader`].
#[derive(Debug)]
pub struct ReaderBuilder<K> {
    service: BlackboardService<K>,
}

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ReadError {
    /// This reader holds a guard of the key already.
    #[error("this reader holds a guard of key {key} already; drop it before reading the key again")]
    GuardHeld {
        /// The key.
        key: String,
    },
    /// The key's current word names a buffer the blackboard does not have: its shared
    /// memory was damaged.
    #[error(
        "key {key}'s current value names buffer {buffer}, which does not exist (damaged shared memory; remove the service)"
    )]
    Damaged {
        /// The key.
        key: String,
        /// The buffer named.
        buffer: usize,
    },
    /// The key's value held bytes that are no value of its type (a `bool` other than
    /// 0 or 1): its writer broke the type's rules; nothing was handed out.
    #[error("key {key}'s value was refused: {source}")]
    InvalidValue {
        /// The key.
        key: String,
        /// What was invalid.
        source: crate::valid::InvalidValue,
    },
    /// This process is a fork of the one that made the reader.
    #[error(
        "this reader belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
}

impl<K: ZeroCopySafe + std::fmt::Debug> ReaderBuilder<K> {
    pub(crate) fn new(service: BlackboardService<K>) -> Self {
        Self { service }
    }

    /// Creates the reader (claims a reader slot; recovers dead participants first).
    pub fn create(self) -> Result<Reader<K>, PortCreateError> {
        let claim = SlotClaim::new(&self.service.shared, Side::Receiving, "reader")?;
        let keys = self.service.blackboard_config().entries.len();
        let buffers = self.service.blackboard_config().buffers as usize;
        // What a dead previous owner of the slot pinned was cleared by recovery,
        // which the claim ran; its pin words are ours from here.
        let (slot, generation) = claim.activate(None);
        Ok(Reader {
            fork_generation: self.service.shared.fork_generation,
            service: self.service,
            slot,
            generation,
            guards: (0..keys).map(|_| Cell::new(false)).collect(),
            seen: (0..keys).map(|_| Cell::new(0)).collect(),
            buffers,
        })
    }
}

/// A reader of a blackboard's keys.
#[derive(Debug)]
pub struct Reader<K> {
    pub(super) service: BlackboardService<K>,
    slot: usize,
    generation: u64,
    fork_generation: u64,
    /// Whether a guard of each key lives.
    guards: Vec<Cell<bool>>,
    /// The generation of each key this reader last read.
    pub(super) seen: Vec<Cell<u64>>,
    /// Value buffers per key.
    buffers: usize,
}

impl<K: ZeroCopySafe + std::fmt::Debug> Reader<K> {
    /// The entry of `key`, whose values are `V`.
    pub fn entry<V: ZeroCopySafe>(&self, key: &K) -> Result<ReaderEntry<'_, K, V>, EntryError> {
        let index = entry_index::<K, V>(&self.service, key)?;
        Ok(ReaderEntry {
            reader: self,
            index,
            place: self.service.places[index],
            key: format!("{key:?}"),
            _value: PhantomData,
        })
    }

    /// Pins key `k`'s current buffer through this reader's pin word `which`
    /// (`value::COPY` or `value::GUARD`); the buffer and its generation.
    pub(super) fn pin(&self, k: usize, which: usize) -> Result<(usize, u64), ReadError> {
        if !crate::fork::is_same_process(self.fork_generation) {
            return Err(ReadError::ForkedProcess);
        }
        let words = self.service.dynamic().key_words(k);
        let mine = &words.reader(self.slot)[which];
        let word = value::pin(words.current, mine);
        let buffer = value::buffer_of(word);
        if buffer >= self.buffers {
            value::unpin(mine);
            return Err(ReadError::Damaged {
                key: super::inspect::show_key(
                    &self.service.blackboard_config().key_type,
                    &self.service.blackboard_config().entries[k].key,
                ),
                buffer,
            });
        }
        crate::testing::stall_point(crate::testing::Stall::BlackboardPinned);
        Ok((buffer, value::generation_of(word)))
    }
}

impl<K> Reader<K> {
    /// Ends the pin of key `k` held by this reader's pin word `which`.
    pub(super) fn unpin(&self, k: usize, which: usize) {
        if !crate::fork::is_same_process(self.fork_generation) {
            return; // a forked child's copy: the pin is its parent's
        }
        value::unpin(&self.service.dynamic().key_words(k).reader(self.slot)[which]);
    }
}

impl<K> Drop for Reader<K> {
    fn drop(&mut self) {
        if !self.service.shared.is_own_process() {
            return; // a forked child's copy: the port is the parent's
        }
        let d = self.service.dynamic();
        let header = d.receiver(self.slot);
        port::close(header, self.generation);
        // Guards borrow the reader, so none lives: every pin is gone. Cleared again all
        // the same, as recovery would.
        for k in 0..self.seen.len() {
            value::clear_reader(d.key_words(k).reader(self.slot));
        }
        port::free(header, self.generation);
        port::announce(d);
    }
}

/// One key of a reader, with values of type `V`.
#[derive(Debug)]
pub struct ReaderEntry<'r, K, V> {
    reader: &'r Reader<K>,
    index: usize,
    place: ValuePlace,
    key: String,
    _value: PhantomData<fn() -> V>,
}

impl<'r, K: ZeroCopySafe + std::fmt::Debug, V: ZeroCopySafe> ReaderEntry<'r, K, V> {
    /// A copy of the key's latest value.
    pub fn get(&self) -> Result<V, ReadError> {
        let r = self.reader;
        let (b, generation) = r.pin(self.index, value::COPY)?;
        let ptr = r.service.dynamic().value_ptr(self.place, b).cast::<V>();
        let mut v = std::mem::MaybeUninit::<V>::uninit();
        // SAFETY: buffer b is pinned and current-at-pin: no writer writes it until the
        // unpin below (`value`); it holds a V written whole by a writer of this key's
        // recorded type (checked when the entry was made), aligned for it; `v` is a
        // V-sized place of our own.
        unsafe { std::ptr::copy_nonoverlapping(ptr, v.as_mut_ptr(), 1) };
        r.unpin(self.index, value::COPY);
        // The copy is checked (it can change no more) before it is a V: a type with
        // bytes that are no value (`zero_copy`: readers never trust writers).
        // SAFETY: `v` holds the V-sized bytes just copied.
        if let Err(source) = unsafe { check_values::<V, ()>(v.as_ptr().cast(), 1) } {
            return Err(ReadError::InvalidValue {
                key: self.key.clone(),
                source,
            });
        }
        r.seen[self.index].set(generation);
        // SAFETY: the bytes of a V written whole by a writer of this key's recorded
        // type, and a value of it (checked just above).
        Ok(unsafe { v.assume_init() })
    }

    /// The key's latest value in place (no copy), until the guard drops; writers go
    /// on meanwhile (into other buffers). One guard per key and reader at a time.
    pub fn read(&self) -> Result<ValueGuard<'r, K, V>, ReadError> {
        let r = self.reader;
        if r.guards[self.index].get() {
            return Err(ReadError::GuardHeld {
                key: self.key.clone(),
            });
        }
        let (buffer, generation) = r.pin(self.index, value::GUARD)?;
        let ptr = r.service.dynamic().value_ptr(self.place, buffer).cast::<V>();
        // SAFETY: the pinned buffer holds a whole V (as for the guard below), which no
        // writer writes while it is pinned.
        if let Err(source) = unsafe { check_values::<V, ()>(ptr.cast(), 1) } {
            r.unpin(self.index, value::GUARD);
            return Err(ReadError::InvalidValue {
                key: self.key.clone(),
                source,
            });
        }
        r.guards[self.index].set(true);
        r.seen[self.index].set(generation);
        Ok(ValueGuard {
            reader: r,
            index: self.index,
            generation,
            ptr,
        })
    }

    /// The generation of the key's value now (1 for the initial value, one more per
    /// update), without reading it.
    pub fn generation(&self) -> u64 {
        let d = self.reader.service.dynamic();
        d.key_words(self.index).generation()
    }

    /// Whether the key was updated since this reader last read it (`get` or `read`);
    /// true before its first read.
    pub fn has_changed(&self) -> bool {
        self.generation() != self.reader.seen[self.index].get()
    }
}

/// A key's value read in place (see [`ReaderEntry::read`]); derefs to the value.
#[derive(Debug)]
pub struct ValueGuard<'r, K, V> {
    reader: &'r Reader<K>,
    index: usize,
    generation: u64,
    ptr: *const V,
}

impl<K, V> ValueGuard<'_, K, V> {
    /// The generation of the value this guard shows.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl<K, V> std::ops::Deref for ValueGuard<'_, K, V> {
    type Target = V;
    fn deref(&self) -> &V {
        // SAFETY: the buffer stays pinned while the guard lives (no writer writes it);
        // it holds a whole V of the key's recorded type, aligned for it.
        unsafe { &*self.ptr }
    }
}

impl<K, V> Drop for ValueGuard<'_, K, V> {
    fn drop(&mut self) {
        self.reader.guards[self.index].set(false);
        self.reader.unpin(self.index, value::GUARD);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::ReadError;
    use iox_service::Service;

    #[test]
    fn a_current_word_naming_no_buffer_is_damage_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let board = Service::named("bb/damaged")
            .unwrap()
            .root(dir.path())
            .blackboard::<u8>()
            .add::<u64>(1, 5)
            .create()
            .unwrap();
        let reader = board.reader_builder().create().unwrap();
        let entry = reader.entry::<u64>(&1).unwrap();
        let current = board.dynamic().key_words(0).current;
        let good = current.load(Ordering::Relaxed);
        current.store((7 << 8) | 200, Ordering::Relaxed); // buffer 200 of 18
        assert!(matches!(entry.get(), Err(ReadError::Damaged { buffer: 200, .. })));
        assert!(matches!(entry.read(), Err(ReadError::Damaged { .. })));
        assert_eq!(board.pins_of(0), Some(vec![]), "no pin left behind");
        current.store(good, Ordering::Relaxed);
        assert_eq!(*entry.read().unwrap(), 5, "no guard was left marked taken");
    }
}
