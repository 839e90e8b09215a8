//! Blackboards whose integer key type is known only at run time, for language bindings
//! (Python, the C ABI): one builder, service, reader and writer over the eight Rust
//! integer key types ([`KeyType`]), keys given as `i128` (every key of every type fits),
//! values as bytes through addresses (`raw.rs`). A Rust program of the same key type
//! (`blackboard::<u32>()`) and value types shares the blackboard.
//!
//! Each type is a monomorphisation of the typed blackboard behind an enum: the value
//! protocol, the files and the recovery are the typed ones; only the dispatch is here.

use std::time::Duration;

use thiserror::Error;

use super::{BlackboardBuilder, BlackboardService, EntryError, ReadError, Reader, WriteError, Writer};
use crate::{Attributes, BlackboardConfig, Listener, PayloadType, PortCreateError};
use iox_core::service::{CreateError, OpenError, OpenOrCreateError};

/// Why a key of an [`IntKeyBlackboard`] could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum IntKeyError {
    /// The key is not a value of the blackboard's key type.
    #[error("key {key} is not a {key_type} (the blackboard's key type)")]
    OutOfRange {
        /// The key given.
        key: i128,
        /// The key type's Rust name.
        key_type: &'static str,
    },
    /// The blackboard has no such key.
    #[error(transparent)]
    Entry(#[from] EntryError),
    /// The bytes given are not the key's value size.
    #[error("key {key} holds {size}-byte values, not {given} bytes")]
    Size {
        /// The key.
        key: i128,
        /// The value's size.
        size: usize,
        /// The bytes given.
        given: usize,
    },
    /// Reading failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

macro_rules! int_keys {
    ($($variant:ident => $k:ty, $name:literal;)*) => {
        /// A Rust integer key type, by its Rust name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum KeyType { $(#[doc = $name] $variant,)* }

        impl KeyType {
            /// The key type named `name` (`"u32"`, ...), if it is one of Rust's integers
            /// of at most 64 bits.
            pub fn from_name(name: &str) -> Option<Self> {
                match name { $($name => Some(Self::$variant),)* _ => None }
            }
            /// Its Rust name.
            pub fn name(self) -> &'static str {
                match self { $(Self::$variant => $name,)* }
            }
        }

        /// A blackboard builder of a [`KeyType`] ([`Service::int_key_blackboard`](crate::Service::int_key_blackboard)).
        ///
        /// ```
        /// use iox_service::{KeyType, PayloadType, Service};
        /// # let dir = tempfile::tempdir().unwrap();
        /// let f64_type = PayloadType::Typed {
        ///     type_name: "f64".into(), size: 8, alignment: 8, invalid_bit_patterns: false,
        /// };
        /// let service = Service::named("doc/int_key")?.root(dir.path());
        /// // SAFETY: the initial bytes are an f64 (1.5).
        /// let board = unsafe { service.int_key_blackboard(KeyType::I16).add_raw(-3, f64_type, 1.5f64.to_ne_bytes().to_vec()) }?
        ///     .open_or_create()?;
        /// assert_eq!(board.keys(), [-3]);
        /// let reader = board.reader()?;
        /// let mut value = [0u8; 8];
        /// // SAFETY: `value` holds 8 writable bytes.
        /// assert_eq!(unsafe { reader.get_into(-3, value.as_mut_ptr(), 8) }?, 1); // the generation
        /// assert_eq!(f64::from_ne_bytes(value), 1.5);
        /// // A key outside i16's range:
        /// assert!(reader.generation(40_000).is_err());
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        #[derive(Debug)]
        pub enum IntKeyBuilder { $(#[doc = $name] $variant(BlackboardBuilder<$k>),)* }
        /// An open blackboard of a [`KeyType`].
        #[derive(Debug)]
        pub enum IntKeyBlackboard { $(#[doc = $name] $variant(BlackboardService<$k>),)* }
        /// A reader of an [`IntKeyBlackboard`].
        #[derive(Debug)]
        pub enum IntKeyReader { $(#[doc = $name] $variant(Reader<$k>),)* }
        /// A writer of an [`IntKeyBlackboard`].
        #[derive(Debug)]
        pub enum IntKeyWriter { $(#[doc = $name] $variant(Writer<$k>),)* }

        impl IntKeyBuilder {
            /// Adds `key` with values of `value`, starting at `initial` when creating
            /// ([`BlackboardBuilder::add_raw`]).
            ///
            /// # Safety
            /// As for [`BlackboardBuilder::add_raw`]: `initial` is a valid value of `value`.
            pub unsafe fn add_raw(self, key: i128, value: PayloadType, initial: Vec<u8>) -> Result<Self, IntKeyError> {
                Ok(match self { $(Self::$variant(b) => {
                    let k = <$k>::try_from(key)
                        .map_err(|_| IntKeyError::OutOfRange { key, key_type: $name })?;
                    // SAFETY: this function's contract.
                    Self::$variant(unsafe { b.add_raw(k, value, initial) })
                })* })
            }

            /// Opens an existing blackboard.
            pub fn open(self) -> Result<IntKeyBlackboard, OpenError> {
                Ok(match self { $(Self::$variant(b) => IntKeyBlackboard::$variant(b.open()?),)* })
            }
            /// Creates a new blackboard.
            pub fn create(self) -> Result<IntKeyBlackboard, CreateError> {
                Ok(match self { $(Self::$variant(b) => IntKeyBlackboard::$variant(b.create()?),)* })
            }
            /// Opens the blackboard, or creates it.
            pub fn open_or_create(self) -> Result<IntKeyBlackboard, OpenOrCreateError> {
                Ok(match self { $(Self::$variant(b) => IntKeyBlackboard::$variant(b.open_or_create()?),)* })
            }
        }

        $(impl From<BlackboardBuilder<$k>> for IntKeyBuilder {
            fn from(b: BlackboardBuilder<$k>) -> Self { Self::$variant(b) }
        })*

        impl IntKeyReader {
            /// Its blackboard's key type.
            pub fn key_type(&self) -> KeyType {
                match self { $(Self::$variant(_) => KeyType::$variant,)* }
            }
        }

        impl IntKeyWriter {
            /// Its blackboard's key type.
            pub fn key_type(&self) -> KeyType {
                match self { $(Self::$variant(_) => KeyType::$variant,)* }
            }
        }

        impl IntKeyBlackboard {
            /// Its key type.
            pub fn key_type(&self) -> KeyType {
                match self { $(Self::$variant(_) => KeyType::$variant,)* }
            }
            /// Its keys, in the order of their event ids.
            pub fn keys(&self) -> Vec<i128> {
                match self { $(Self::$variant(b) => b.keys().into_iter().map(i128::from).collect(),)* }
            }
        }
    };
}

int_keys! {
    U8 => u8, "u8";
    U16 => u16, "u16";
    U32 => u32, "u32";
    U64 => u64, "u64";
    I8 => i8, "i8";
    I16 => i16, "i16";
    I32 => i32, "i32";
    I64 => i64, "i64";
}

/// `$body` with `$x` bound to the value inside `$v` (an `$enum` of the key types).
macro_rules! each {
    ($enum:ident, $v:expr, |$x:ident| $body:expr) => {
        match $v {
            $enum::U8($x) => $body,
            $enum::U16($x) => $body,
            $enum::U32($x) => $body,
            $enum::U64($x) => $body,
            $enum::I8($x) => $body,
            $enum::I16($x) => $body,
            $enum::I32($x) => $body,
            $enum::I64($x) => $body,
        }
    };
}

/// The builder inside `$v` replaced by `$body` (with `$x` bound to it).
macro_rules! each_builder {
    ($v:expr, |$x:ident| $body:expr) => {
        match $v {
            IntKeyBuilder::U8($x) => IntKeyBuilder::U8($body),
            IntKeyBuilder::U16($x) => IntKeyBuilder::U16($body),
            IntKeyBuilder::U32($x) => IntKeyBuilder::U32($body),
            IntKeyBuilder::U64($x) => IntKeyBuilder::U64($body),
            IntKeyBuilder::I8($x) => IntKeyBuilder::I8($body),
            IntKeyBuilder::I16($x) => IntKeyBuilder::I16($body),
            IntKeyBuilder::I32($x) => IntKeyBuilder::I32($body),
            IntKeyBuilder::I64($x) => IntKeyBuilder::I64($body),
        }
    };
}

/// `$body` with `$x` bound to the port inside `$v` and `$kk` to `$key` as its key type
/// (a key out of its range returns [`IntKeyError::OutOfRange`]).
macro_rules! with_key {
    ($enum:ident, $v:expr, $key:expr, |$x:ident, $kk:ident| $body:expr) => {
        with_key!(@arms $enum, $v, $key, $x, $kk, $body;
            U8 u8, "u8", U16 u16, "u16", U32 u32, "u32", U64 u64, "u64",
            I8 i8, "i8", I16 i16, "i16", I32 i32, "i32", I64 i64, "i64")
    };
    (@arms $enum:ident, $v:expr, $key:expr, $x:ident, $kk:ident, $body:expr;
     $($variant:ident $k:ty, $name:literal),*) => {
        match $v {
            $($enum::$variant($x) => {
                let $kk = <$k>::try_from($key)
                    .map_err(|_| IntKeyError::OutOfRange { key: $key, key_type: $name })?;
                $body
            })*
        }
    };
}

impl IntKeyBuilder {
    /// [`BlackboardBuilder::max_writers`].
    pub fn max_writers(self, n: u32) -> Self {
        each_builder!(self, |b| b.max_writers(n))
    }
    /// [`BlackboardBuilder::max_readers`].
    pub fn max_readers(self, n: u32) -> Self {
        each_builder!(self, |b| b.max_readers(n))
    }
    /// [`BlackboardBuilder::max_listeners`].
    pub fn max_listeners(self, n: u32) -> Self {
        each_builder!(self, |b| b.max_listeners(n))
    }
    /// [`BlackboardBuilder::permissions`].
    pub fn permissions(self, mode: u32) -> Self {
        each_builder!(self, |b| b.permissions(mode))
    }
    /// [`BlackboardBuilder::timeout`].
    pub fn timeout(self, d: Duration) -> Self {
        each_builder!(self, |b| b.timeout(d))
    }
    /// [`BlackboardBuilder::attribute`].
    pub fn attribute(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value) = (key.into(), value.into());
        each_builder!(self, |b| b.attribute(key, value))
    }
    /// [`BlackboardBuilder::require_attribute`].
    pub fn require_attribute(self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value) = (key.into(), value.into());
        each_builder!(self, |b| b.require_attribute(key, value))
    }
    /// [`BlackboardBuilder::require_attribute_key`].
    pub fn require_attribute_key(self, key: impl Into<String>) -> Self {
        let key = key.into();
        each_builder!(self, |b| b.require_attribute_key(key))
    }
}

impl IntKeyBlackboard {
    /// A reader.
    pub fn reader(&self) -> Result<IntKeyReader, PortCreateError> {
        Ok(each!(IntKeyBlackboard, self, |b| {
            IntKeyReader::from(b.reader_builder().create()?)
        }))
    }
    /// A writer.
    pub fn writer(&self) -> Result<IntKeyWriter, PortCreateError> {
        Ok(each!(IntKeyBlackboard, self, |b| {
            IntKeyWriter::from(b.writer_builder().create()?)
        }))
    }
    /// A listener of changes ([`BlackboardService::listener_builder`]).
    pub fn listener(&self) -> Result<Listener, PortCreateError> {
        each!(IntKeyBlackboard, self, |b| b.listener_builder().create())
    }
    /// Its section of the static config (keys and value types).
    pub fn config(&self) -> &BlackboardConfig {
        each!(IntKeyBlackboard, self, |b| b.blackboard_config())
    }
    /// The service name.
    pub fn name(&self) -> &str {
        each!(IntKeyBlackboard, self, |b| b.name())
    }
    /// The attributes its creator recorded.
    pub fn attributes(&self) -> &Attributes {
        each!(IntKeyBlackboard, self, |b| b.attributes())
    }
}

impl IntKeyReader {
    /// `key`'s value type, as recorded.
    pub fn value_type(&self, key: i128) -> Result<PayloadType, IntKeyError> {
        with_key!(IntKeyReader, self, key, |r, k| Ok(r
            .entry_raw(&k)?
            .value_type()
            .clone()))
    }

    /// Copies `key`'s latest value to `dst` (of `len` bytes, which must be the value's
    /// size); the generation copied.
    ///
    /// # Safety
    /// `dst` is valid for writes of `len` bytes.
    pub unsafe fn get_into(&self, key: i128, dst: *mut u8, len: usize) -> Result<u64, IntKeyError> {
        with_key!(IntKeyReader, self, key, |r, k| {
            let e = r.entry_raw(&k)?;
            if e.size() != len {
                return Err(IntKeyError::Size {
                    key,
                    size: e.size(),
                    given: len,
                });
            }
            // SAFETY: `dst` holds `len` bytes (the caller's contract), the value's size.
            Ok(unsafe { e.get_into(dst) }?)
        })
    }

    /// (The generation of `key`'s value now, whether it changed since this reader last
    /// read it).
    pub fn generation(&self, key: i128) -> Result<(u64, bool), IntKeyError> {
        with_key!(IntKeyReader, self, key, |r, k| {
            let e = r.entry_raw(&k)?;
            Ok((e.generation(), e.has_changed()))
        })
    }
}

impl IntKeyWriter {
    /// `key`'s value type, as recorded.
    pub fn value_type(&self, key: i128) -> Result<PayloadType, IntKeyError> {
        with_key!(IntKeyWriter, self, key, |w, k| Ok(w
            .entry_raw(&k)?
            .value_type()
            .clone()))
    }

    /// Sets `key`'s value to the `len` bytes at `src` (the value's size); the generation
    /// published.
    ///
    /// # Safety
    /// `src` is valid for reads of `len` bytes, and they are a valid value of the key's
    /// value type.
    pub unsafe fn update_from(&self, key: i128, src: *const u8, len: usize) -> Result<u64, IntKeyError> {
        with_key!(IntKeyWriter, self, key, |w, k| {
            let e = w.entry_raw(&k)?;
            if e.size() != len {
                return Err(IntKeyError::Size {
                    key,
                    size: e.size(),
                    given: len,
                });
            }
            // SAFETY: the caller's contract; `len` is the value's size.
            Ok(unsafe { e.update_from(src) }?)
        })
    }
}

macro_rules! from_port {
    ($($variant:ident => $k:ty;)*) => {$(
        impl From<Reader<$k>> for IntKeyReader {
            fn from(r: Reader<$k>) -> Self { Self::$variant(r) }
        }
        impl From<Writer<$k>> for IntKeyWriter {
            fn from(w: Writer<$k>) -> Self { Self::$variant(w) }
        }
    )*};
}
from_port! {
    U8 => u8; U16 => u16; U32 => u32; U64 => u64; I8 => i8; I16 => i16; I32 => i32; I64 => i64;
}
