//! ROS messages that iox carries as a fixed header plus a byte slice in one chunk:
//! every field of the message but its large `uint8[] data` in the sample's user
//! header, and `data` as the sample's bytes, so an iox reader gets the data in place
//! without decoding ([`crate::image`] for `sensor_msgs/msg/Image`,
//! [`crate::pointcloud`] for `sensor_msgs/msg/PointCloud2`).
//!
//! Invariants of every [`Framed`] header (why the trait is sealed): `#[repr(C)]`, only
//! integer fields and arrays of them, no padding, so every byte string of its size is
//! a value of it and its bytes are all initialised; strings and lists it holds are
//! bounded, and longer ones are refused ([`FramedError::TooLong`]), never cut.

use std::ops::Range;

use iox_service::ZeroCopySafe;

use crate::fixed::CdrError;

/// Why a message could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramedError {
    /// The CDR message is malformed.
    #[error("malformed message: {0}")]
    Cdr(#[from] CdrError),
    /// A string or list longer than the header holds.
    #[error("the message's {field} is {len} long; an iox header holds at most {max}")]
    TooLong {
        /// Which field.
        field: &'static str,
        /// Its length (bytes, or entries).
        len: usize,
        /// What fits.
        max: usize,
    },
}

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// A header that carries a ROS message with its data beside it (module docs).
pub trait Framed: ZeroCopySafe + Copy + Sealed {
    /// The ROS type (`sensor_msgs/msg/Image`).
    const ROS_TYPE: &'static str;
    /// The type's definition as MCAP's `ros2msg` holds it (fields only, with the types
    /// it uses), for recordings made without a ROS install at hand.
    const DEFINITION: &'static str;

    /// Reads a message: its header, and where its data is in `cdr`.
    fn from_cdr(cdr: &[u8]) -> Result<(Self, Range<usize>), FramedError>;

    /// Writes the message of this header and `data` into `out` (replacing what it
    /// held).
    fn to_cdr(&self, data: &[u8], out: &mut Vec<u8>) -> Result<(), FramedError>;

    /// The header from its bytes as a sample holds them (`Sample::header_bytes`),
    /// `None` unless they are the header's size.
    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        const {
            assert!(
                <Self as ZeroCopySafe>::ANY_BIT_PATTERN,
                "a Framed header is valid for every bit pattern"
            )
        };
        if bytes.len() != size_of::<Self>() {
            return None;
        }
        // SAFETY: `bytes` holds `size_of::<Self>()` bytes, read unaligned; every byte
        // string of that size is a value of `Self` (sealed: the module's invariants).
        Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<Self>()) })
    }

    /// The header's bytes, as a sample holds them.
    fn to_bytes(&self) -> Vec<u8> {
        // Every bit pattern valid implies no padding (the derive checks the fields fill it).
        const {
            assert!(
                <Self as ZeroCopySafe>::ANY_BIT_PATTERN,
                "a Framed header has no padding"
            )
        };
        // SAFETY: `Self` has no padding (sealed: the module's invariants), so all its
        // `size_of::<Self>()` bytes are initialised; the slice borrows `self`.
        unsafe { std::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>()) }.to_vec()
    }
}

/// Copies `text` into `dst` (the rest zeroed); its length, or [`FramedError::TooLong`].
pub(crate) fn put<const N: usize>(
    dst: &mut [u8; N],
    text: &[u8],
    field: &'static str,
) -> Result<u8, FramedError> {
    if text.len() > N || text.len() > u8::MAX as usize {
        return Err(FramedError::TooLong {
            field,
            len: text.len(),
            max: N.min(u8::MAX as usize),
        });
    }
    dst.fill(0);
    dst[..text.len()].copy_from_slice(text);
    Ok(text.len() as u8)
}

/// The first `len` bytes of `array` (all of them for a length past it, which only a
/// faulty writer leaves).
pub(crate) fn used(array: &[u8], len: u8) -> &[u8] {
    &array[..(len as usize).min(array.len())]
}
