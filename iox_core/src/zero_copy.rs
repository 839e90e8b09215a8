//! Payload types: what may travel through shared memory, and how a service records it.
//!
//! [`ZeroCopySafe`] marks types that can be shared by bytes between processes: no
//! pointers or references, no drop glue, a layout both sides agree on. It is `unsafe`
//! to implement by hand because iox cannot check that; `#[derive(ZeroCopySafe)]` checks
//! it for `#[repr(C)]` structs whose fields are all `ZeroCopySafe`. Implemented here for
//! integers, floats, `bool`, arrays and tuples (up to 4) of such types. Tuples have no
//! `repr(C)`: their layout is only stable between processes built by the same
//! compiler, which is the case iox supports.
//!
//! # Readers never trust writers
//!
//! A writer is any process: another language, a bridge, a replayed file, a program
//! that is simply hostile. So a type with bytes that are no value (a `bool` other than
//! 0 or 1, or a type holding one: `ZeroCopySafe`'s hidden `CHECK_ON_READ`) is checked
//! by its reader before a reference to it is handed out (`check_values`, which every
//! typed reader of iox calls once per sample: subscribers, request-response clients and
//! servers, blackboard readers; in [`crate::valid`]); a sample that fails is released
//! and reported as an invalid value, never read. Types valid for every bit pattern (numbers, and arrays
//! and structs of them) pay nothing: `CHECK_ON_READ` is a constant `false` and the
//! check compiles away. What is checked is the bytes as they are when the sample is
//! taken: writers give a chunk up at `send` (a loan's views are refused after that in
//! every binding), and a process that writes into a sample it sent anyway races its
//! readers, which no check at the reader can close (only a read-only payload for
//! writers that must not write can, a kernel matter).
//!
//! [`Payload`] is implemented for every `T: ZeroCopySafe` (a typed service) and for
//! `[T]` (a slice service); it gives the [`PayloadType`] stored in the static config.
//! It is sealed: no other type can be a payload.
//!
//! # Type identity
//!
//! A service records what it carries: a type name, the size and the alignment (of the
//! element, for slices). Opening a service with a payload whose record differs fails
//! with [`OpenError::IncompatiblePayload`](crate::OpenError::IncompatiblePayload).
//!
//! - The name is [`ZeroCopySafe::type_name`]. By default it is Rust's
//!   [`std::any::type_name`], which includes the module path: `posepub::Pose` and
//!   `posesub::Pose` are different payloads even with identical fields. Readers and
//!   writers of such a service use one type, compiled into each program from the same
//!   source (the trust model iox has always had: a program built from other source
//!   that defines a type at the same path, such as another version of the crate, is
//!   not told apart). That type's reader only sees values its writers stored, so it may
//!   hold a `bool`, an enum-like newtype or padding.
//! - `#[iox(type_name = "Pose")]` next to `#[derive(ZeroCopySafe)]` sets a stable name
//!   of your choosing, so two programs (or two crates) that each define their own
//!   `Pose` can share one service. Arrays and tuples compose the names of their
//!   elements (`[Pose; 4]`), slices record the element's name.
//! - Size and alignment are always recorded and checked, whatever the name.
//! - Fields are compared through the [`Schema`] a publish-subscribe service records
//!   ([`crate::schema`]): an opener whose type has the same name and other fields is
//!   refused with [`OpenError::IncompatibleSchema`](crate::OpenError::IncompatibleSchema).
//!   A service recorded without a schema (an older iox, a binding that knows no
//!   layout, a hand-written impl's opaque bytes) is not compared field by field.
//!
//! Because a service without a schema does not compare fields, a stable name lets one
//! program's `Pose` read bytes another program wrote as a different `Pose`. Getting the fields wrong must give
//! wrong values, not undefined behaviour, so the derive accepts the attribute only on
//! a type that is *valid for every bit pattern and has no padding*:
//!
//! - every field is valid for every bit pattern: integers, floats, and arrays, tuples
//!   and structs made of them. A `bool` is not (a 2 in it is undefined behaviour),
//!   neither is an enum: use a `u8` for a flag and an integer for a mode;
//! - the fields' sizes add up to the struct's size: padding bytes are uninitialised,
//!   and another program's type might have a field where this one has padding. Add
//!   the padding as explicit fields (`_pad: [u8; 4]`), or order the fields largest
//!   first.
//!
//! The derive checks both at compile time (a hidden associated constant of the trait
//! that it computes from the fields and the size), and refuses names that iox gives
//! other types (`bool`, `u8`, names starting with `[` or `(`). A path (`pkg::Pose`) is
//! allowed, even one Rust gives an unnamed type: the identity records whether every
//! bit pattern is a value, so a named type only meets another named type, or a type
//! (built-in or unnamed) that also accepts every bit pattern, with the same size,
//! alignment and fields. The derive's docs show the errors.
//!
//! ```
//! use iox_service::{Service, ZeroCopySafe};
//! # let dir = tempfile::tempdir().unwrap();
//!
//! #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
//! #[repr(C)]
//! #[iox(type_name = "Pose")]
//! struct Pose {
//!     x: f64,
//!     y: f64,
//!     yaw: f32,
//!     valid: u8,     // a flag: 0 or 1 (a `bool` is refused in a named type)
//!     _pad: [u8; 3], // explicit padding: the struct is 24 bytes, the fields add up to 24
//! }
//!
//! let service = Service::named("robot/pose").unwrap()
//! #   .root(dir.path())
//!     .publish_subscribe::<Pose>()
//!     .open_or_create()
//!     .unwrap();
//! assert_eq!(
//!     service.static_config().payload,
//!     iox_service::PayloadType::Typed {
//!         type_name: "Pose".into(),
//!         size: 24,
//!         alignment: 8,
//!         invalid_bit_patterns: false,
//!     }
//! );
//! let publisher = service.publisher_builder().create().unwrap();
//! let subscriber = service.subscriber_builder().create().unwrap();
//! let pose = Pose { x: 1.0, y: 2.0, yaw: 0.5, valid: 1, _pad: [0; 3] };
//! publisher.loan_uninit().unwrap().write_payload(pose).send().unwrap();
//! assert_eq!(*subscriber.receive().unwrap().unwrap(), pose);
//! ```
//!
//! Only `T: ZeroCopySafe` and `[T]` are payloads; a crate cannot add its own:
//!
//! ```compile_fail,E0277
//! struct Foreign(Vec<u8>);
//! impl iox_service::Payload for Foreign {
//!     type Element = u8;
//!     const IS_SLICE: bool = false;
//!     fn payload_type() -> iox_service::PayloadType {
//!         <[u8] as iox_service::Payload>::payload_type()
//!     }
//!     fn payload_ptr(ptr: *mut u8, _len: usize) -> *mut Self {
//!         ptr.cast()
//!     }
//! }
//! ```
//!
//! The former `PayloadPtr` trait is gone (its method is a hidden part of `Payload`):
//!
//! ```compile_fail,E0432
//! use iox_service::PayloadPtr;
//! ```

use std::borrow::Cow;

use crate::schema::Schema;

/// `#[derive(ZeroCopySafe)]` (from `iox_derive`; the trait's name in the macro namespace,
/// so `use iox_service::ZeroCopySafe` brings both).
pub use iox_derive::ZeroCopySafe;
use serde::{Deserialize, Serialize};

/// Types whose values may be shared between processes as raw bytes.
///
/// Derive it for your `#[repr(C)]` structs ([`#[derive(ZeroCopySafe)]`](macro@crate::ZeroCopySafe)),
/// which checks every field; the
/// `#[iox(type_name = "...")]` attribute sets the name recorded in the static config
/// (module docs, "Type identity").
///
/// ```
/// use iox_service::ZeroCopySafe;
///
/// #[derive(ZeroCopySafe, Clone, Copy)]
/// #[repr(C)]
/// #[iox(type_name = "Pose")]
/// struct Pose { x: f64, y: f64, yaw: f32, seq: u32 }
///
/// assert_eq!(Pose::type_name(), "Pose");
/// assert_eq!(<[Pose; 2]>::type_name(), "[Pose; 2]");
/// ```
///
/// # Safety
/// The type must contain no pointers, references or handles valid only in one process,
/// must have no drop glue, must be valid for the bit patterns writers put in it, and
/// must have the same layout in every process (use `#[repr(C)]` for your structs).
/// A hand-written [`type_name`](Self::type_name) must name one layout, since iox
/// checks size and alignment only: the types behind a name must have the same fields
/// in the same order, or (what the derive's attribute requires) each must accept
/// every bit pattern and have no padding. The hidden `ANY_BIT_PATTERN` constant
/// defaults to `false`; an impl that sets it to `true` promises exactly that: no
/// padding, and every bit pattern a valid value. It is part of the recorded identity,
/// so a hand-written impl of a plain-numbers struct does not open a service created by
/// the derived impl or by Python's matching dtype (both say "every bit pattern"):
/// prefer `#[derive(ZeroCopySafe)]`, which works it out.
///
/// ```
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Pose { x: f64, y: f64, yaw: f32 }
/// // SAFETY: repr(C), plain numbers only.
/// unsafe impl iox_service::ZeroCopySafe for Pose {}
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be shared between processes as bytes (it is not `ZeroCopySafe`)",
    label = "not `ZeroCopySafe`",
    note = "payloads are numbers, `bool`, arrays and tuples of them, and `#[repr(C)]` structs \
            with `#[derive(ZeroCopySafe)]`; pointers, references, `Vec`, `String` and `Box` \
            are only valid in the process that made them"
)]
pub unsafe trait ZeroCopySafe: Copy + Send + Sync + 'static {
    /// Whether every byte of a value is field data (no padding, so no uninitialised
    /// bytes) and every bit pattern of those bytes is a valid value. True for integers
    /// and floats, false for `bool`; arrays and tuples take it from their elements
    /// (tuples also require no padding); the derive computes it from the fields and the
    /// size. `#[iox(type_name = "...")]` requires it (module docs, "Type identity").
    ///
    /// Defaults to `false`. Setting it to `true` in a hand-written impl is part of the
    /// impl's unsafe promise.
    #[doc(hidden)]
    const ANY_BIT_PATTERN: bool = false;

    /// Whether some bit pattern of the type's field bytes is no value (a `bool`, or a
    /// type holding one): a reader then checks each value with
    /// [`is_valid`](Self::is_valid) before handing it out (module docs, "Readers never
    /// trust writers"). Padding does not count: its bytes are no part of a value.
    /// `false` for numbers; arrays, tuples and derived structs take it from their
    /// fields.
    ///
    /// Defaults to `false`: a hand-written impl promises that every bit pattern of its
    /// fields' bytes is a value, or sets this and writes `is_valid`.
    #[doc(hidden)]
    const CHECK_ON_READ: bool = false;

    /// Whether the bytes at `ptr` are a value of the type; only asked when
    /// [`CHECK_ON_READ`](Self::CHECK_ON_READ). Reads bytes, never a `&Self`.
    ///
    /// # Safety
    /// `ptr` points to `size_of::<Self>()` readable, initialised bytes (any alignment:
    /// fields are read unaligned), not written by this thread meanwhile.
    #[doc(hidden)]
    #[inline(always)]
    unsafe fn is_valid(ptr: *const Self) -> bool {
        let _ = ptr;
        true
    }

    /// Whether the `len` values at `ptr` are all values of the type (a slice's
    /// elements); only asked when [`CHECK_ON_READ`](Self::CHECK_ON_READ). Looks at
    /// every element, with no early exit, so a long run of small ones vectorises.
    ///
    /// # Safety
    /// As [`is_valid`](Self::is_valid), for `len` consecutive values.
    #[doc(hidden)]
    #[inline]
    unsafe fn all_valid(ptr: *const Self, len: usize) -> bool {
        let mut ok = true;
        for i in 0..len {
            // SAFETY: element `i` of the `len` the caller vouches for.
            ok &= unsafe { Self::is_valid(ptr.wrapping_add(i)) };
        }
        ok
    }

    /// The type's name as recorded in a service's static config. Defaults to
    /// [`std::any::type_name`]; `#[iox(type_name = "...")]` on the derive sets it.
    fn type_name() -> Cow<'static, str> {
        Cow::Borrowed(std::any::type_name::<Self>())
    }

    /// The type's field layout, recorded in a publish-subscribe service's static config
    /// so tools (`iox echo`, `iox record`) and bindings can read samples without the
    /// program's source (see [`Schema`]). Built in for numbers, `bool`, arrays and
    /// tuples, written by `#[derive(ZeroCopySafe)]` from the fields; a hand-written
    /// impl defaults to [`Schema::Bytes`] (shown as bytes) and may return the real
    /// layout instead, which, like the rest of the impl, it must get right.
    fn schema() -> Schema {
        Schema::Bytes {
            size: size_of::<Self>() as u64,
        }
    }
}

macro_rules! zero_copy_safe_number {
    ($($t:ty => $schema:expr),*) => {
        $(
            // SAFETY: a plain number with a fixed layout and no pointers; every bit
            // pattern is a valid value (a NaN is a valid float) and it has no padding.
            unsafe impl ZeroCopySafe for $t {
                const ANY_BIT_PATTERN: bool = true;

                fn schema() -> Schema {
                    $schema
                }
            }
        )*
    };
}
zero_copy_safe_number!(
    u8 => Schema::U8, u16 => Schema::U16, u32 => Schema::U32, u64 => Schema::U64,
    u128 => Schema::U128, i8 => Schema::I8, i16 => Schema::I16, i32 => Schema::I32,
    i64 => Schema::I64, i128 => Schema::I128, f32 => Schema::F32, f64 => Schema::F64,
    usize => if size_of::<usize>() == 8 { Schema::U64 } else { Schema::U32 },
    isize => if size_of::<isize>() == 8 { Schema::I64 } else { Schema::I32 }
);

macro_rules! zero_copy_safe_half {
    ($($t:ty => $name:literal, $schema:expr),*) => {
        $(
            // SAFETY: two bytes of a number with a fixed layout (`repr(transparent)`
            // over `u16` in the `half` crate), no pointers, every bit pattern a value.
            unsafe impl ZeroCopySafe for $t {
                const ANY_BIT_PATTERN: bool = true;

                /// Short, as the other numbers' names are (the crate's path would name
                /// its module layout, not the number), and what Python records for
                /// `float16`.
                fn type_name() -> Cow<'static, str> {
                    Cow::Borrowed($name)
                }

                fn schema() -> Schema {
                    $schema
                }
            }
        )*
    };
}
zero_copy_safe_half!(half::f16 => "f16", Schema::F16, half::bf16 => "bf16", Schema::BF16);

// SAFETY: one byte, no pointers. Only 0 and 1 are valid: not ANY_BIT_PATTERN (the
// default), so no type with a stable name can contain one; CHECK_ON_READ, so a reader
// checks the byte before it reads a `bool` another process wrote.
unsafe impl ZeroCopySafe for bool {
    const CHECK_ON_READ: bool = true;

    #[inline(always)]
    unsafe fn is_valid(ptr: *const Self) -> bool {
        // SAFETY: one readable byte (the caller's duty), read as a byte.
        unsafe { ptr.cast::<u8>().read() <= 1 }
    }

    #[inline]
    unsafe fn all_valid(ptr: *const Self, len: usize) -> bool {
        // Every byte at most 1: no bit above bit 0 in any of them (one OR over all,
        // which vectorises). Read through the raw pointer, byte by byte: no reference
        // to memory another process may be writing.
        let bytes = ptr.cast::<u8>();
        let mut seen = 0u8;
        for i in 0..len {
            // SAFETY: byte `i` of the `len` readable, initialised bytes the caller
            // vouches for.
            seen |= unsafe { bytes.add(i).read() };
        }
        seen <= 1
    }

    fn schema() -> Schema {
        Schema::Bool
    }
}

// SAFETY: an array of zero-copy-safe elements is laid out contiguously, with no bytes
// between elements: it is valid for every bit pattern when its element is. Its name is
// composed from the element's (the same as `std::any::type_name` for built-in types).
unsafe impl<T: ZeroCopySafe, const N: usize> ZeroCopySafe for [T; N] {
    const ANY_BIT_PATTERN: bool = T::ANY_BIT_PATTERN;
    const CHECK_ON_READ: bool = T::CHECK_ON_READ;

    #[inline]
    unsafe fn is_valid(ptr: *const Self) -> bool {
        // SAFETY: the array's N elements, which the caller vouches for.
        unsafe { T::all_valid(ptr.cast::<T>(), N) }
    }

    fn type_name() -> Cow<'static, str> {
        Cow::Owned(format!("[{}; {N}]", T::type_name()))
    }

    fn schema() -> Schema {
        Schema::Array {
            element: Box::new(T::schema()),
            len: N as u64,
        }
    }
}

macro_rules! zero_copy_safe_tuple {
    ($($t:ident $i:tt),+) => {
        // SAFETY: tuples of zero-copy-safe fields; layout is fixed per compiler (module
        // docs). Valid for every bit pattern when every field is and the fields' sizes
        // add up to the tuple's (no padding). The name is composed like the array's.
        unsafe impl<$($t: ZeroCopySafe),+> ZeroCopySafe for ($($t,)+) {
            const ANY_BIT_PATTERN: bool = $($t::ANY_BIT_PATTERN &&)+
                size_of::<Self>() == 0 $(+ size_of::<$t>())+;
            const CHECK_ON_READ: bool = false $(|| $t::CHECK_ON_READ)+;

            #[inline]
            unsafe fn is_valid(ptr: *const Self) -> bool {
                // SAFETY: each field lies inside the value the caller vouches for, at
                // its offset.
                true $(&& (!$t::CHECK_ON_READ || unsafe {
                    $t::is_valid(ptr.cast::<u8>().wrapping_add(std::mem::offset_of!(Self, $i)).cast::<$t>())
                }))+
            }

            fn type_name() -> Cow<'static, str> {
                let names = [$($t::type_name()),+];
                Cow::Owned(format!("({})", names.join(", ")))
            }

            fn schema() -> Schema {
                Schema::Struct {
                    name: Self::type_name().into_owned(),
                    size: size_of::<Self>() as u64,
                    alignment: align_of::<Self>() as u64,
                    fields: vec![$(crate::schema::Field {
                        name: stringify!($i).to_owned(),
                        offset: std::mem::offset_of!(Self, $i) as u64,
                        schema: $t::schema(),
                    }),+],
                }
            }
        }
    };
}
zero_copy_safe_tuple!(A 0, B 1);
zero_copy_safe_tuple!(A 0, B 1, C 2);
zero_copy_safe_tuple!(A 0, B 1, C 2, D 3);

/// What a service carries, as recorded in its static config.
///
/// Besides name, size and alignment, the identity says whether some byte strings of
/// the payload's size are not values of it (`invalid_bit_patterns`: padding, or a
/// `bool`, whose bytes other than 0 and 1 are no value): the opposite of
/// `ZeroCopySafe`'s hidden `ANY_BIT_PATTERN`. It is part of the identity, so a
/// program that reads a `bool` never opens a service that someone recorded as
/// carrying bytes of any value; and code that writes or reads a payload as bytes
/// (a bridge: `Publisher::send_payload_bytes`, `Sample::payload_bytes`)
/// does so only for payloads without such bytes. Written to the static config only
/// when set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PayloadType {
    /// One value of a type.
    Typed {
        /// [`ZeroCopySafe::type_name`] of the type.
        type_name: String,
        /// `size_of` the type.
        size: u64,
        /// `align_of` the type.
        alignment: u64,
        /// The type has padding or bytes that are no value (not `ANY_BIT_PATTERN`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        invalid_bit_patterns: bool,
    },
    /// A slice of elements of a type, any length up to the pool's largest chunk.
    Slice {
        /// [`ZeroCopySafe::type_name`] of the element.
        element: String,
        /// `size_of` the element.
        size: u64,
        /// `align_of` the element.
        alignment: u64,
        /// The element has padding or bytes that are no value (not `ANY_BIT_PATTERN`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        invalid_bit_patterns: bool,
    },
}

impl PayloadType {
    /// Bytes of `len` elements of a slice, or of the value (`len` must be 1): what a
    /// chunk's user word `len` means for this payload (language bindings, `raw`).
    pub fn bytes_of(&self, len: usize) -> Option<usize> {
        match self {
            PayloadType::Typed { size, .. } => (len == 1).then_some(*size as usize),
            PayloadType::Slice { size, .. } => len.checked_mul(*size as usize),
        }
    }

    /// The user word for a payload of `bytes` bytes: 1 for exactly the value's size, the
    /// element count for a whole number of elements of a slice; `None` for any other
    /// size.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        let element = self.element_size();
        match self {
            PayloadType::Typed { .. } => (bytes == element).then_some(1),
            PayloadType::Slice { .. } if element == 0 => (bytes == 0).then_some(0),
            // Element sizes are almost always powers of two: a shift and a mask there,
            // where a division would cost tens of cycles on every loan.
            PayloadType::Slice { .. } if element.is_power_of_two() => {
                let shift = element.trailing_zeros();
                (bytes & (element - 1) == 0).then_some(bytes >> shift)
            }
            PayloadType::Slice { .. } => bytes.is_multiple_of(element).then_some(bytes / element),
        }
    }

    /// The type's name (the element's, for a slice).
    pub fn type_name(&self) -> &str {
        match self {
            PayloadType::Typed { type_name, .. } => type_name,
            PayloadType::Slice { element, .. } => element,
        }
    }

    /// Bytes per element (the whole value for typed payloads).
    pub fn element_size(&self) -> usize {
        match self {
            PayloadType::Typed { size, .. } | PayloadType::Slice { size, .. } => *size as usize,
        }
    }

    /// Alignment the payload needs.
    pub fn alignment(&self) -> usize {
        match self {
            PayloadType::Typed { alignment, .. } | PayloadType::Slice { alignment, .. } => {
                *alignment as usize
            }
        }
    }

    /// Whether every byte string of the payload's size is a value of it (no padding,
    /// no invalid bit patterns): what writing or reading it as bytes requires.
    pub fn any_bit_pattern(&self) -> bool {
        match self {
            PayloadType::Typed {
                invalid_bit_patterns, ..
            }
            | PayloadType::Slice {
                invalid_bit_patterns, ..
            } => !invalid_bit_patterns,
        }
    }

    /// The identity with the bit-pattern flag cleared: name, size and alignment alone.
    pub fn without_bit_patterns(&self) -> PayloadType {
        let mut plain = self.clone();
        match &mut plain {
            PayloadType::Typed {
                invalid_bit_patterns, ..
            }
            | PayloadType::Slice {
                invalid_bit_patterns, ..
            } => *invalid_bit_patterns = false,
        }
        plain
    }
}

impl std::fmt::Display for PayloadType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PayloadType::Typed {
                type_name,
                size,
                alignment,
                ..
            } => write!(f, "{type_name} (size {size}, alignment {alignment}")?,
            PayloadType::Slice {
                element,
                size,
                alignment,
                ..
            } => write!(f, "[{element}] (element size {size}, alignment {alignment}")?,
        }
        if self.any_bit_pattern() {
            write!(f, ")")
        } else {
            write!(f, ", not valid for every bit pattern)")
        }
    }
}

mod sealed {
    /// Keeps [`Payload`](super::Payload) to the implementations below.
    pub trait Sealed {}
    impl<T: super::ZeroCopySafe> Sealed for T {}
    impl<T: super::ZeroCopySafe> Sealed for [T] {}
}

/// A payload a service can carry: `T: ZeroCopySafe` or `[T]`. Sealed: implemented for
/// those two alone, so a sample only ever derefs to a `ZeroCopySafe` type.
pub trait Payload: sealed::Sealed + 'static {
    /// The element type (`T` for both `T` and `[T]`).
    type Element: ZeroCopySafe;
    /// The identity recorded in the static config.
    fn payload_type() -> PayloadType;
    /// Whether this is a slice payload.
    const IS_SLICE: bool;
    /// The payload at `ptr`, `len` elements long (1 for typed payloads).
    #[doc(hidden)]
    fn payload_ptr(ptr: *mut u8, len: usize) -> *mut Self;
}

impl<T: ZeroCopySafe> Payload for T {
    type Element = T;
    const IS_SLICE: bool = false;
    fn payload_type() -> PayloadType {
        PayloadType::Typed {
            type_name: T::type_name().into_owned(),
            size: size_of::<T>() as u64,
            alignment: align_of::<T>() as u64,
            invalid_bit_patterns: !T::ANY_BIT_PATTERN,
        }
    }
    fn payload_ptr(ptr: *mut u8, _len: usize) -> *mut Self {
        ptr.cast()
    }
}

impl<T: ZeroCopySafe> Payload for [T] {
    type Element = T;
    const IS_SLICE: bool = true;
    fn payload_type() -> PayloadType {
        PayloadType::Slice {
            element: T::type_name().into_owned(),
            size: size_of::<T>() as u64,
            alignment: align_of::<T>() as u64,
            invalid_bit_patterns: !T::ANY_BIT_PATTERN,
        }
    }
    fn payload_ptr(ptr: *mut u8, len: usize) -> *mut Self {
        std::ptr::slice_from_raw_parts_mut(ptr.cast(), len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_names_match_rust_type_names() {
        fn same<T: ZeroCopySafe>() {
            assert_eq!(T::type_name(), std::any::type_name::<T>());
        }
        same::<u64>();
        same::<bool>();
        same::<[u64; 8]>();
        same::<[[f32; 3]; 2]>();
        same::<(u8, u16)>();
        same::<(u8, [i32; 2], f64)>();
        same::<(u8, u16, u32, (u64, bool))>();
    }
}
