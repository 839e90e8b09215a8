//! Payload types: what may travel through shared memory, and how a service records it.
//!
//! [`ZeroCopySafe`] marks types that can be shared by bytes between processes: no
//! pointers or references, no drop glue, a layout both sides agree on. It is `unsafe`
//! to implement because iox cannot check that. Implemented here for integers, floats,
//! `bool`, arrays and tuples (up to 4) of such types. Tuples have no `repr(C)`: their
//! layout is only stable between processes built by the same compiler, which is the
//! case iox supports (its type identity is `std::any::type_name`, size and alignment,
//! also compiler-specific). Readers trust writers for `bool`: a writer storing another
//! byte there is a bug on its side.
//!
//! [`Payload`] is implemented for every `T: ZeroCopySafe` (a typed service) and for
//! `[T]` (a slice service); it gives the [`PayloadType`] stored in the static config.
//! It is sealed: no other type can be a payload.
//!
//! ```compile_fail,E0277
//! struct Foreign(Vec<u8>);
//! impl iox_service::Payload for Foreign {
//!     type Element = u8;
//!     const IS_SLICE: bool = false;
//!     fn payload_type() -> iox_service::PayloadType {
//!         unimplemented!()
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

use serde::{Deserialize, Serialize};

/// Types whose values may be shared between processes as raw bytes.
///
/// # Safety
/// The type must contain no pointers, references or handles valid only in one process,
/// must have no drop glue, must be valid for the bit patterns writers put in it, and
/// must have the same layout in every process (use `#[repr(C)]` for your structs).
///
/// ```
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Pose { x: f64, y: f64, yaw: f32 }
/// // SAFETY: repr(C), plain numbers only.
/// unsafe impl iox_service::ZeroCopySafe for Pose {}
/// ```
pub unsafe trait ZeroCopySafe: Copy + Send + Sync + 'static {}

macro_rules! zero_copy_safe {
    ($($t:ty),*) => {
        $(
            // SAFETY: a plain number (or bool) with a fixed layout and no pointers.
            unsafe impl ZeroCopySafe for $t {}
        )*
    };
}
zero_copy_safe!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, bool
);

// SAFETY: an array of zero-copy-safe elements is laid out contiguously.
unsafe impl<T: ZeroCopySafe, const N: usize> ZeroCopySafe for [T; N] {}
// SAFETY: tuples of zero-copy-safe fields; layout is fixed per compiler (module docs).
unsafe impl<A: ZeroCopySafe, B: ZeroCopySafe> ZeroCopySafe for (A, B) {}
// SAFETY: as above.
unsafe impl<A: ZeroCopySafe, B: ZeroCopySafe, C: ZeroCopySafe> ZeroCopySafe for (A, B, C) {}
// SAFETY: as above.
unsafe impl<A: ZeroCopySafe, B: ZeroCopySafe, C: ZeroCopySafe, D: ZeroCopySafe> ZeroCopySafe
    for (A, B, C, D)
{
}

/// What a service carries, as recorded in its static config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PayloadType {
    /// One value of a type.
    Typed {
        /// `std::any::type_name` of the type.
        type_name: String,
        /// `size_of` the type.
        size: u64,
        /// `align_of` the type.
        alignment: u64,
    },
    /// A slice of elements of a type, any length up to the pool's largest chunk.
    Slice {
        /// `std::any::type_name` of the element.
        element: String,
        /// `size_of` the element.
        size: u64,
        /// `align_of` the element.
        alignment: u64,
    },
}

impl PayloadType {
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
}

impl std::fmt::Display for PayloadType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PayloadType::Typed {
                type_name,
                size,
                alignment,
            } => write!(f, "{type_name} (size {size}, alignment {alignment})"),
            PayloadType::Slice {
                element,
                size,
                alignment,
            } => write!(f, "[{element}] (element size {size}, alignment {alignment})"),
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
            type_name: std::any::type_name::<T>().to_owned(),
            size: size_of::<T>() as u64,
            alignment: align_of::<T>() as u64,
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
            element: std::any::type_name::<T>().to_owned(),
            size: size_of::<T>() as u64,
            alignment: align_of::<T>() as u64,
        }
    }
    fn payload_ptr(ptr: *mut u8, len: usize) -> *mut Self {
        std::ptr::slice_from_raw_parts_mut(ptr.cast(), len)
    }
}
