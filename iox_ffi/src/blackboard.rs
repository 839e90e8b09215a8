//! Blackboards from C: the latest value of each of a fixed set of integer keys, read
//! and written as bytes through addresses, shared with Rust (`blackboard::<u32>()`) and
//! Python programs of the same key and value types.
//!
//! Keys. The key type is one of Rust's integers (`IOX_KEY_U8` ... `IOX_KEY_I64`); a key
//! travels as a `uint64_t`: its value for the unsigned types, its two's complement
//! (`(uint64_t)(int64_t)k`) for the signed ones. A key outside the key type's range is
//! `IOX_STATUS_INVALID_ARGUMENT`.
//!
//! Values are copied out (`iox_blackboard_reader_get`) and in
//! (`iox_blackboard_writer_update`) through the caller's buffer, whose size must be the
//! key's value size; the protocol, recovery and change events are the Rust blackboard's.
//! A change listener is an `IoxListener` (event id `i` for the `i`-th key of
//! `iox_blackboard_key`), so it works with `iox_listener_wait` and the WaitSet.
//! Readers and writers are ports: used from the thread that created them.

use std::ffi::{c_char, c_void};
use std::time::Duration;

use iox_service::{IntKeyBlackboard, IntKeyBuilder, IntKeyError, IntKeyReader, IntKeyWriter, KeyType};

use crate::args::read_options;
use crate::attributes::{AttributeSettings, CAttributes};
use crate::event::{IoxListener, LISTENER};
use crate::fields::IoxType;
use crate::handle::{drop_handle, hand_out, live, marker, non_null, put};
use crate::service::{by_mode, limit, named, payload_type};
use crate::status::{IoxStatus, fail, guard, refuse};

/// Key type `u8` (`IoxBlackboardOptions::key_type`).
pub const IOX_KEY_U8: u32 = 0;
/// Key type `u16`.
pub const IOX_KEY_U16: u32 = 1;
/// Key type `u32`.
pub const IOX_KEY_U32: u32 = 2;
/// Key type `u64`.
pub const IOX_KEY_U64: u32 = 3;
/// Key type `i8`.
pub const IOX_KEY_I8: u32 = 4;
/// Key type `i16`.
pub const IOX_KEY_I16: u32 = 5;
/// Key type `i32`.
pub const IOX_KEY_I32: u32 = 6;
/// Key type `i64`.
pub const IOX_KEY_I64: u32 = 7;

/// The key types, in the order of their codes.
const KEY_TYPES: [KeyType; 8] = [
    KeyType::U8,
    KeyType::U16,
    KeyType::U32,
    KeyType::U64,
    KeyType::I8,
    KeyType::I16,
    KeyType::I32,
    KeyType::I64,
];

/// One key of a blackboard this call may create: the key, its value type (one value:
/// not a slice) and its initial value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxBlackboardEntry {
    /// The key (signed keys as their two's complement, see the module docs).
    pub key: u64,
    /// The type of its values, named as a Rust program names it (`"f64"`, `"[f32; 3]"`,
    /// a struct's `type_name`).
    pub value: IoxType,
    /// The initial value, `value.size` bytes, written when this call creates the
    /// blackboard; NULL: zero bytes (which must then be a value of the type).
    pub initial: *const c_void,
}

/// The keys and settings of a blackboard. Fill it with
/// [`iox_blackboard_options_init`], then set the key type, the entries and what else
/// differs; zero means the default (on open: whatever the blackboard has).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxBlackboardOptions {
    /// The root directory of the service's files; NULL: `IOX_ROOT`, else `/dev/shm`.
    pub root: *const c_char,
    /// The key type: `IOX_KEY_U8` ... `IOX_KEY_I64`.
    pub key_type: u32,
    /// The keys (`entry_count` of them): required to create; on open, each must be
    /// one of the blackboard's with this value type (NULL with 0: no check).
    pub entries: *const IoxBlackboardEntry,
    /// How many `entries` there are.
    pub entry_count: usize,
    /// Most writers (0: default, 1).
    pub max_writers: u32,
    /// Most readers (0: default).
    pub max_readers: u32,
    /// Most change listeners (0: default).
    pub max_listeners: u32,
    /// How long to wait for a service another process is creating or removing, in
    /// milliseconds (0: default, 10 s).
    pub timeout_ms: u64,
    /// Attributes to record when this call creates the blackboard (`attribute_count`
    /// of them; NULL with 0: none).
    pub attributes: *const crate::IoxAttribute,
    /// How many `attributes` there are.
    pub attribute_count: usize,
    /// Attributes an existing blackboard must have when this call opens it (NULL with
    /// 0: none); an entry whose `value` is NULL requires only the key.
    pub required_attributes: *const crate::IoxAttribute,
    /// How many `required_attributes` there are.
    pub required_attribute_count: usize,
}

/// The default options (key type `u32`, no entries). Does nothing if `options` is NULL.
///
/// # Safety
/// `options` is NULL or points to writable memory for an `IoxBlackboardOptions`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_options_init(options: *mut IoxBlackboardOptions) {
    if options.is_null() {
        return;
    }
    let defaults = IoxBlackboardOptions {
        root: std::ptr::null(),
        key_type: IOX_KEY_U32,
        entries: std::ptr::null(),
        entry_count: 0,
        max_writers: 0,
        max_readers: 0,
        max_listeners: 0,
        timeout_ms: 0,
        attributes: std::ptr::null(),
        attribute_count: 0,
        required_attributes: std::ptr::null(),
        required_attribute_count: 0,
    };
    // SAFETY: the caller's contract; not NULL (checked).
    unsafe { options.write(defaults) };
}

/// An open blackboard (opaque); any thread.
pub struct IoxBlackboard {
    board: IntKeyBlackboard,
    /// Its attributes as C strings (see `attributes`).
    attributes: CAttributes,
}

/// A reader of a blackboard (opaque): used from the thread that created it.
pub struct IoxBlackboardReader {
    reader: IntKeyReader,
}

/// A writer of a blackboard (opaque): used from the thread that created it.
pub struct IoxBlackboardWriter {
    writer: IntKeyWriter,
}

const BLACKBOARD: u64 = marker(b"iox-bbd\0");
const READER: u64 = marker(b"iox-bbr\0");
const WRITER: u64 = marker(b"iox-bbw\0");

crate::service::opening!(IntKeyBuilder => IntKeyBlackboard);

/// A key from C as the key type reads it (see the module docs).
fn key_of(key_type: KeyType, bits: u64) -> i128 {
    match key_type {
        KeyType::I8 | KeyType::I16 | KeyType::I32 | KeyType::I64 => i128::from(bits as i64),
        _ => i128::from(bits),
    }
}

/// A key as C writes it (the inverse of [`key_of`] for keys of the key type).
fn key_bits(key: i128) -> u64 {
    // Signed keys travel as their two's complement; unsigned ones fit.
    key as u64
}

/// A key's refusal as a status: a key or size the caller got wrong is
/// `IOX_STATUS_INVALID_ARGUMENT`, a failed read or write `failed`.
fn key_failure(e: IntKeyError, failed: IoxStatus) -> IoxStatus {
    let status = match e {
        IntKeyError::OutOfRange { .. } | IntKeyError::Entry(_) | IntKeyError::Size { .. } => {
            IoxStatus::InvalidArgument
        }
        _ => failed,
    };
    fail(status, e)
}

/// Opens, creates, or opens-or-creates (`mode` as for `iox_pubsub_open`) the blackboard
/// `name` with `options`; on success `*out` is the blackboard.
///
/// # Safety
/// `name` is a NUL-terminated string; `options` points to an `IoxBlackboardOptions`
/// whose strings are NULL or NUL-terminated, whose `entries` point to `entry_count`
/// entries whose types are as `iox_pubsub_open` reads them and whose `initial` is NULL
/// or points to `value.size` bytes of a valid value of that type; `out` points to
/// writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_open(
    name: *const c_char,
    mode: u32,
    options: *const IoxBlackboardOptions,
    out: *mut *mut IoxBlackboard,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract (readable options, NUL-terminated strings).
        let (o, service) = unsafe {
            let o = read_options(options)?;
            (o, named(name, o.root)?)
        };
        let Some(&key_type) = KEY_TYPES.get(o.key_type as usize) else {
            return refuse(
                IoxStatus::InvalidArgument,
                format!(
                    "key_type {} is none of IOX_KEY_U8 (0) ... IOX_KEY_I64 (7)",
                    o.key_type
                ),
            );
        };
        let mut b = service.int_key_blackboard(key_type);
        if let Some(n) = limit(o.max_writers) {
            b = b.max_writers(n);
        }
        if let Some(n) = limit(o.max_readers) {
            b = b.max_readers(n);
        }
        if let Some(n) = limit(o.max_listeners) {
            b = b.max_listeners(n);
        }
        if o.timeout_ms != 0 {
            b = b.timeout(Duration::from_millis(o.timeout_ms));
        }
        let entries: &[IoxBlackboardEntry] = match o.entry_count {
            0 => &[],
            n => {
                let p = non_null(o.entries.cast_mut(), "options.entries")?;
                // SAFETY: the caller's contract: `entry_count` entries at `entries`.
                unsafe { std::slice::from_raw_parts(p, n) }
            }
        };
        for (i, e) in entries.iter().enumerate() {
            let what = format!("options.entries[{i}].value");
            // SAFETY: the caller's contract (a readable type description).
            let value = unsafe { payload_type(&e.value, &what) }?;
            if e.value.slice {
                return refuse(
                    IoxStatus::InvalidArgument,
                    format!("{what}: a blackboard value is one value, not a slice"),
                );
            }
            let size = e.value.size as usize;
            let initial = if e.initial.is_null() {
                vec![0; size]
            } else {
                // SAFETY: the caller's contract: `initial` holds `value.size` bytes.
                unsafe { std::slice::from_raw_parts(e.initial.cast::<u8>(), size) }.to_vec()
            };
            // SAFETY: the caller's contract: the bytes are a valid value of the type.
            b = unsafe { b.add_raw(key_of(key_type, e.key), value, initial) }
                .map_err(|e| fail(IoxStatus::InvalidArgument, e))?;
        }
        // SAFETY: the caller's contract (arrays of their counts, NUL-terminated strings).
        let settings = unsafe {
            AttributeSettings::read(
                o.attributes,
                o.attribute_count,
                o.required_attributes,
                o.required_attribute_count,
            )
        }?;
        let b = settings.apply(b);
        // SAFETY: the caller's contract.
        unsafe {
            hand_out(out, BLACKBOARD, || {
                by_mode(b, mode).map(|board| IoxBlackboard {
                    attributes: CAttributes::of(board.attributes()),
                    board,
                })
            })
        }
    })
}

/// Closes this handle of the blackboard. Any thread.
///
/// # Safety
/// `board` is NULL or a pointer from [`iox_blackboard_open`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_drop(board: *mut IoxBlackboard) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(board, BLACKBOARD, false) })
}

/// How many attributes the blackboard's creator recorded: `*count`.
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `count` points to writable memory
/// for a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_attribute_count(
    board: *mut IoxBlackboard,
    count: *mut usize,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(board, BLACKBOARD, false)?.attributes.count(count) })
}

/// Attribute `index` (0 to count - 1, sorted by key) of the blackboard: `*key` and
/// `*value` (either out pointer may be NULL), valid until the handle is dropped. An
/// index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `key` and `value` are NULL or
/// point to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_attribute(
    board: *mut IoxBlackboard,
    index: usize,
    key: *mut *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(board, BLACKBOARD, false)?.attributes.at(index, key, value) })
}

/// The value of the blackboard's attribute `key`: `*value`, or NULL if it has none;
/// valid until the handle is dropped.
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `key` is a NUL-terminated string;
/// `value` points to writable memory for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_attribute_get(
    board: *mut IoxBlackboard,
    key: *const c_char,
    value: *mut *const c_char,
) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { live(board, BLACKBOARD, false)?.attributes.get(key, value) })
}

/// How many keys the blackboard has: `*count`.
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `count` points to writable memory
/// for a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_key_count(board: *mut IoxBlackboard, count: *mut usize) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = &unsafe { live(board, BLACKBOARD, false) }?.board;
        let count = non_null(count, "count")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { count.write(b.keys().len()) };
        Ok(())
    })
}

/// Key `index` (0 to count - 1: the order of their change event ids): `*key` (signed
/// keys as their two's complement) and, if `value_size` is not NULL, the size of its
/// values in bytes. An index out of range is `IOX_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `key` points to writable memory
/// for a `uint64_t`; `value_size` is NULL or points to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_key(
    board: *mut IoxBlackboard,
    index: usize,
    key: *mut u64,
    value_size: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = &unsafe { live(board, BLACKBOARD, false) }?.board;
        let key = non_null(key, "key")?;
        let (keys, entries) = (b.keys(), &b.config().entries);
        let (Some(&k), Some(entry)) = (keys.get(index), entries.get(index)) else {
            return refuse(
                IoxStatus::InvalidArgument,
                format!("key index {index}: the blackboard has {} keys", keys.len()),
            );
        };
        // SAFETY: the caller's contract; `key` is not NULL (checked), `value_size` NULL
        // or writable.
        unsafe {
            key.write(key_bits(k));
            put(value_size, entry.value.element_size() as u64);
        }
        Ok(())
    })
}

/// Creates a reader of `board`; `*out` is the reader.
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `out` points to writable memory
/// for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_reader_create(
    board: *mut IoxBlackboard,
    out: *mut *mut IoxBlackboardReader,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = &unsafe { live(board, BLACKBOARD, false) }?.board;
        let make = || {
            let reader = b.reader().map_err(|e| fail(IoxStatus::PortCreateFailed, e))?;
            Ok(IoxBlackboardReader { reader })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, READER, make) }
    })
}

/// Copies `key`'s latest value into `dst`, which holds `size` bytes (the value's size,
/// else `IOX_STATUS_INVALID_ARGUMENT`); `*generation` (if not NULL) is the value's
/// generation (1 for the initial value, one more per update).
///
/// # Safety
/// `reader` is a pointer from [`iox_blackboard_reader_create`]; `dst` points to `size`
/// writable bytes; `generation` is NULL or points to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_reader_get(
    reader: *mut IoxBlackboardReader,
    key: u64,
    dst: *mut c_void,
    size: u64,
    generation: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = &unsafe { live(reader, READER, true) }?.reader;
        let dst = non_null(dst, "dst")?;
        let key = key_of(r.key_type(), key);
        // SAFETY: the caller's contract: `dst` holds `size` writable bytes.
        let got = unsafe { r.get_into(key, dst.cast::<u8>(), size as usize) }
            .map_err(|e| key_failure(e, IoxStatus::ReceiveFailed))?;
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(generation, got) };
        Ok(())
    })
}

/// `key`'s generation now (`*generation`) and whether it changed since this reader last
/// read it (`*changed`, if not NULL), without reading the value.
///
/// # Safety
/// `reader` is a pointer from [`iox_blackboard_reader_create`]; `generation` points to
/// writable memory for a `uint64_t`; `changed` is NULL or points to a writable `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_reader_generation(
    reader: *mut IoxBlackboardReader,
    key: u64,
    generation: *mut u64,
    changed: *mut bool,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = &unsafe { live(reader, READER, true) }?.reader;
        let generation = non_null(generation, "generation")?;
        let (g, c) = r
            .generation(key_of(r.key_type(), key))
            .map_err(|e| key_failure(e, IoxStatus::ReceiveFailed))?;
        // SAFETY: the caller's contract; `generation` is not NULL (checked).
        unsafe {
            generation.write(g);
            put(changed, c);
        }
        Ok(())
    })
}

/// Drops the reader (from its own thread).
///
/// # Safety
/// `reader` is NULL or a pointer from [`iox_blackboard_reader_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_reader_drop(reader: *mut IoxBlackboardReader) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(reader, READER, true) })
}

/// Creates a writer of `board` (at most `max_writers`); `*out` is the writer.
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `out` points to writable memory
/// for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_writer_create(
    board: *mut IoxBlackboard,
    out: *mut *mut IoxBlackboardWriter,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = &unsafe { live(board, BLACKBOARD, false) }?.board;
        let make = || {
            let writer = b.writer().map_err(|e| fail(IoxStatus::PortCreateFailed, e))?;
            Ok(IoxBlackboardWriter { writer })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, WRITER, make) }
    })
}

/// Sets `key`'s value to the `size` bytes at `src` (the value's size, else
/// `IOX_STATUS_INVALID_ARGUMENT`) and notifies its change listeners; `*generation` (if
/// not NULL) is the generation published.
///
/// # Safety
/// `writer` is a pointer from [`iox_blackboard_writer_create`]; `src` points to `size`
/// readable bytes that are a valid value of the key's type; `generation` is NULL or
/// points to writable memory for a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_writer_update(
    writer: *mut IoxBlackboardWriter,
    key: u64,
    src: *const c_void,
    size: u64,
    generation: *mut u64,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let w = &unsafe { live(writer, WRITER, true) }?.writer;
        let src = non_null(src.cast_mut(), "src")?;
        let key = key_of(w.key_type(), key);
        // SAFETY: the caller's contract: `size` readable bytes of a valid value.
        let published = unsafe { w.update_from(key, src.cast::<u8>(), size as usize) }
            .map_err(|e| key_failure(e, IoxStatus::SendFailed))?;
        // SAFETY: the caller's contract: NULL or writable.
        unsafe { put(generation, published) };
        Ok(())
    })
}

/// Drops the writer (from its own thread).
///
/// # Safety
/// `writer` is NULL or a pointer from [`iox_blackboard_writer_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_writer_drop(writer: *mut IoxBlackboardWriter) -> IoxStatus {
    // SAFETY: the caller's contract.
    guard(|| unsafe { drop_handle(writer, WRITER, true) })
}

/// Creates a listener of the blackboard's changes (event id `i` when the `i`-th key of
/// [`iox_blackboard_key`] is updated); `*out` is an `IoxListener` (`iox_listener_wait`,
/// `iox_listener_fd`, the WaitSet; `iox_listener_drop`).
///
/// # Safety
/// `board` is a pointer from [`iox_blackboard_open`]; `out` points to writable memory
/// for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn iox_blackboard_listener_create(
    board: *mut IoxBlackboard,
    out: *mut *mut IoxListener,
) -> IoxStatus {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = &unsafe { live(board, BLACKBOARD, false) }?.board;
        let make = || {
            let listener = b.listener().map_err(|e| fail(IoxStatus::PortCreateFailed, e))?;
            Ok(IoxListener { listener })
        };
        // SAFETY: the caller's contract.
        unsafe { hand_out(out, LISTENER, make) }
    })
}
