//! Payload types: what may travel through shared memory, and how a service records it.
//!
//! [`ZeroCopySafe`] marks types that can be shared by bytes between processes: no
//! pointers or references, no drop glue, a layout both sides agree on. It is `unsafe`
//! to implement by hand because iox cannot check that; `#[derive(ZeroCopySafe)]` checks
//! it for `#[repr(C)]` structs whose fields are all `ZeroCopySafe`. Implemented here for
//! integers, floats, `bool`, arrays and tuples (up to 4) of such types. Tuples have no
//! `repr(C)`: their layout is only stable between processes built by the same
//! compiler, which is the case iox supports. Readers trust writers for `bool`: a
//! writer storing another byte there is a bug on its side.
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
//!   `posesub::Pose` are different payloads even with identical fields.
//! - `#[iox(type_name = "Pose")]` next to `#[derive(ZeroCopySafe)]` sets a stable name
//!   of your choosing, so two programs (or two crates) that each define their own
//!   `Pose` can share one service. Arrays and tuples compose the names of their
//!   elements (`[Pose; 4]`), slices record the element's name.
//! - Size and alignment are always recorded and checked, whatever the name. iox does
//!   not compare fields: two types given the same name must have the same fields in
//!   the same order, which is up to you.
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
//! }
//!
//! let service = Service::named("robot/pose").unwrap()
//! #   .root(dir.path())
//!     .publish_subscribe::<Pose>()
//!     .open_or_create()
//!     .unwrap();
//! assert_eq!(
//!     service.static_config().payload,
//!     iox_service::PayloadType::Typed { type_name: "Pose".into(), size: 24, alignment: 8 }
//! );
//! let publisher = service.publisher_builder().create().unwrap();
//! let subscriber = service.subscriber_builder().create().unwrap();
//! let pose = Pose { x: 1.0, y: 2.0, yaw: 0.5 };
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

use std::borrow::Cow;

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
/// struct Pose { x: f64, y: f64, yaw: f32 }
///
/// assert_eq!(Pose::type_name(), "Pose");
/// assert_eq!(<[Pose; 2]>::type_name(), "[Pose; 2]");
/// ```
///
/// # Safety
/// The type must contain no pointers, references or handles valid only in one process,
/// must have no drop glue, must be valid for the bit patterns writers put in it, and
/// must have the same layout in every process (use `#[repr(C)]` for your structs).
/// [`type_name`](Self::type_name) (hand-written or set with the derive's attribute)
/// must name one layout: two types given the same name must have the same fields in
/// the same order. iox checks size and alignment only; a mismatch is a bug of the
/// same kind as a writer storing an invalid `bool`.
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
    /// The type's name as recorded in a service's static config. Defaults to
    /// [`std::any::type_name`]; `#[iox(type_name = "...")]` on the derive sets it.
    fn type_name() -> Cow<'static, str> {
        Cow::Borrowed(std::any::type_name::<Self>())
    }
}

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

// SAFETY: an array of zero-copy-safe elements is laid out contiguously. Its name is
// composed from the element's (the same as `std::any::type_name` for built-in types).
unsafe impl<T: ZeroCopySafe, const N: usize> ZeroCopySafe for [T; N] {
    fn type_name() -> Cow<'static, str> {
        Cow::Owned(format!("[{}; {N}]", T::type_name()))
    }
}

macro_rules! zero_copy_safe_tuple {
    ($($t:ident),+) => {
        // SAFETY: tuples of zero-copy-safe fields; layout is fixed per compiler (module
        // docs). The name is composed like the array's.
        unsafe impl<$($t: ZeroCopySafe),+> ZeroCopySafe for ($($t,)+) {
            fn type_name() -> Cow<'static, str> {
                let names = [$($t::type_name()),+];
                Cow::Owned(format!("({})", names.join(", ")))
            }
        }
    };
}
zero_copy_safe_tuple!(A, B);
zero_copy_safe_tuple!(A, B, C);
zero_copy_safe_tuple!(A, B, C, D);

/// What a service carries, as recorded in its static config.
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
    },
    /// A slice of elements of a type, any length up to the pool's largest chunk.
    Slice {
        /// [`ZeroCopySafe::type_name`] of the element.
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
            type_name: T::type_name().into_owned(),
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
            element: T::type_name().into_owned(),
            size: size_of::<T>() as u64,
            alignment: align_of::<T>() as u64,
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

    /// The derive's `::iox_service` paths resolve inside this crate too.
    #[test]
    fn derive_inside_this_crate() {
        #[derive(ZeroCopySafe, Clone, Copy)]
        #[repr(C)]
        #[iox(type_name = "Inner")]
        struct Inner {
            a: u32,
            b: [u8; 2],
        }
        assert_eq!(
            <[Inner]>::payload_type(),
            PayloadType::Slice {
                element: "Inner".into(),
                size: 8,
                alignment: 4
            }
        );
        assert_eq!(<(Inner, u8)>::type_name(), "(Inner, u8)");
    }
}
