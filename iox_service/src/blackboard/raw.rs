//! Blackboard values as bytes, for language bindings (the Python package): keys whose
//! value types are known only at run time (a numpy dtype), added with
//! [`BlackboardBuilder::add_raw`], and entries that copy a value's bytes out to, or in
//! from, an address ([`RawReaderEntry::get_into`], [`RawWriterEntry::update_from`]).
//!
//! The value protocol is the typed entries' (`value.rs`); only the copy differs. The
//! copies go through addresses, never through `&[u8]`: a value may hold padding bytes,
//! which Rust may not read as initialised `u8`s.

use super::layout::ValuePlace;
use super::service::{BlackboardBuilder, Initial};
use super::{EntryError, ReadError, Reader, WriteError, Writer, key_bytes, key_index, value};
use crate::{PayloadType, ZeroCopySafe};

impl<K: ZeroCopySafe + std::fmt::Debug> BlackboardBuilder<K> {
    /// Adds key `key` with values of `value` (a [`PayloadType::Typed`] known at run
    /// time), starting at the bytes `initial` (when creating; when opening, the service
    /// must have this key with this value type).
    ///
    /// # Safety
    /// `initial` holds `value`'s size in bytes and they are a valid value of the type
    /// it names (the Rust type of that name, if any program uses one): readers of that
    /// type read them as such. (Fewer bytes are zero-filled, more are cut.)
    pub unsafe fn add_raw(self, key: K, value: PayloadType, initial: Vec<u8>) -> Self {
        let size = match &value {
            PayloadType::Typed { size, .. } => *size as usize,
            PayloadType::Slice { .. } => 0,
        };
        let write: Initial = Box::new(move |dst| {
            let n = initial.len().min(size);
            // SAFETY: `dst` is the key's first buffer, `size` bytes long (the place
            // computed from `value`); `n` bytes of `initial` fit, the rest is zeroed.
            unsafe {
                std::ptr::copy_nonoverlapping(initial.as_ptr(), dst, n);
                std::ptr::write_bytes(dst.add(n), 0, size - n);
            }
        });
        self.add_entry(key_bytes(&key).to_vec(), value, write)
    }
}

impl<K: ZeroCopySafe + std::fmt::Debug> Reader<K> {
    /// The entry of `key`, whatever its value type (see [`RawReaderEntry`]).
    pub fn entry_raw(&self, key: &K) -> Result<RawReaderEntry<'_, K>, EntryError> {
        let index = key_index(&self.service, key)?;
        Ok(RawReaderEntry {
            reader: self,
            index,
            place: self.service.places[index],
            value: self.service.blackboard_config().entries[index].value.clone(),
        })
    }
}

/// One key of a reader, its values as bytes.
#[derive(Debug)]
pub struct RawReaderEntry<'r, K> {
    reader: &'r Reader<K>,
    index: usize,
    place: ValuePlace,
    value: PayloadType,
}

impl<K: ZeroCopySafe + std::fmt::Debug> RawReaderEntry<'_, K> {
    /// The key's value type, as recorded.
    pub fn value_type(&self) -> &PayloadType {
        &self.value
    }

    /// The value's size in bytes.
    pub fn size(&self) -> usize {
        self.place.size
    }

    /// Copies the key's latest value to `dst`; the generation copied.
    ///
    /// # Safety
    /// `dst` is valid for writes of [`size`](Self::size) bytes.
    pub unsafe fn get_into(&self, dst: *mut u8) -> Result<u64, ReadError> {
        let r = self.reader;
        let (b, generation) = r.pin(self.index, value::COPY)?;
        let src = r.service.dynamic().value_ptr(self.place, b);
        // SAFETY: buffer b is pinned (no writer writes it until the unpin below) and
        // holds `size` bytes; `dst` is valid for them (the caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, self.place.size) };
        r.unpin(self.index, value::COPY);
        r.seen[self.index].set(generation);
        Ok(generation)
    }

    /// The generation of the key's value now, without reading it.
    pub fn generation(&self) -> u64 {
        let d = self.reader.service.dynamic();
        d.key_words(self.index).generation()
    }

    /// Whether the key was updated since this reader last read it.
    pub fn has_changed(&self) -> bool {
        self.generation() != self.reader.seen[self.index].get()
    }
}

impl<K: ZeroCopySafe + std::fmt::Debug> Writer<K> {
    /// The entry of `key`, whatever its value type (see [`RawWriterEntry`]).
    pub fn entry_raw(&self, key: &K) -> Result<RawWriterEntry<'_, K>, EntryError> {
        let index = key_index(&self.service, key)?;
        Ok(RawWriterEntry {
            writer: self,
            index,
            place: self.service.places[index],
            value: self.service.blackboard_config().entries[index].value.clone(),
            key: format!("{key:?}"),
        })
    }
}

/// One key of a writer, its values as bytes.
#[derive(Debug)]
pub struct RawWriterEntry<'w, K> {
    writer: &'w Writer<K>,
    index: usize,
    place: ValuePlace,
    value: PayloadType,
    key: String,
}

impl<K> RawWriterEntry<'_, K> {
    /// The key's value type, as recorded.
    pub fn value_type(&self) -> &PayloadType {
        &self.value
    }

    /// The value's size in bytes.
    pub fn size(&self) -> usize {
        self.place.size
    }

    /// Sets the key's value to the [`size`](Self::size) bytes at `src`; the generation
    /// published.
    ///
    /// # Safety
    /// `src` is valid for reads of `size` bytes, and they are a valid value of the
    /// key's value type.
    pub unsafe fn update_from(&self, src: *const u8) -> Result<u64, WriteError> {
        let w = self.writer;
        let buffer = w.begin(self.index, &self.key)?;
        let dst = w.service.dynamic().value_ptr(self.place, buffer);
        // SAFETY: the buffer is this writer's (neither current nor pinned when picked),
        // `size` bytes long; `src` is valid for them (the caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, self.place.size) };
        let published = w.finish(self.index, buffer);
        if published.is_err() {
            w.unlock(self.index);
        }
        published
    }
}
