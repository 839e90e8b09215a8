//! Tensors: what a sample of a tensor service holds beyond its bytes, its element type
//! ([`DType`]), shape and strides ([`TensorLayout`]), and the one check every port
//! applies before a layout describes a chunk.
//!
//! A service's element type is its payload's (a slice of numbers: `[f32]` records
//! [`Schema::F32`] as its schema, `iox show` prints it); a
//! [`DType`] is one of those numbers, named as DLPack and the array libraries name
//! them. A layout is `ndim <= MAX_DIMS` dimensions, each with a size and a stride in
//! elements (as DLPack counts them; numpy counts bytes), and the element type. A layout describes a
//! sample when ([`TensorLayout::check`]):
//! - its element type is the service's;
//! - no stride is negative (a tensor reaching below its first element has no place in
//!   a chunk), and the elements it reaches, `1 + sum((size_i - 1) * stride_i)`, times
//!   the element size, fit the sample's bytes (none when a size is 0). Overflow is
//!   refused, never wrapped.
//!
//! In shared memory a layout is [`WORDS`] words ([`TensorLayout::to_words`] /
//! [`TensorLayout::from_words`]): word 0 packs `ndim | code << 8 | bits << 16 |
//! lanes << 24` (the DLPack type fields), then `MAX_DIMS` sizes, then `MAX_DIMS`
//! strides (two's complement). Decoding checks what the words say (the dimension
//! count, the type), so a damaged or hostile record is an error, never a wrong read;
//! the caller then checks the layout against the sample as for one it was given.
//!
//! ```
//! use iox_service::tensor::{DType, TensorLayout};
//!
//! let t = TensorLayout::contiguous(DType::F32, &[2, 3])?;
//! assert_eq!(t.strides(), [3, 1]);
//! assert_eq!(t.span_bytes(), Some(24));
//! assert!(t.check(DType::F32, 24).is_ok());
//! assert!(t.check(DType::F32, 20).is_err()); // 24 bytes do not fit 20
//! assert!(t.check(DType::I32, 24).is_err()); // not the service's element type
//! # Ok::<(), iox_service::tensor::TensorError>(())
//! ```

use std::fmt;

use thiserror::Error;

use crate::Schema;

/// Most dimensions a tensor sample may have.
pub const MAX_DIMS: usize = 8;
/// Words of a layout in shared memory: the type word, sizes, strides.
pub const WORDS: usize = 1 + 2 * MAX_DIMS;

/// An element type of a tensor: a number (or `bool`) of one of the sizes DLPack and
/// the array libraries share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// `bool` (one byte, 0 or 1).
    Bool,
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// IEEE half precision (`float16`).
    F16,
    /// bfloat16 (`bfloat16`).
    BF16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

/// DLPack's type codes (`DLDataTypeCode`).
const KDL_INT: u8 = 0;
const KDL_UINT: u8 = 1;
const KDL_FLOAT: u8 = 2;
const KDL_BFLOAT: u8 = 4;
const KDL_BOOL: u8 = 6;

impl DType {
    /// Every element type, in declaration order.
    pub const ALL: [DType; 13] = [
        Self::Bool,
        Self::U8,
        Self::U16,
        Self::U32,
        Self::U64,
        Self::I8,
        Self::I16,
        Self::I32,
        Self::I64,
        Self::F16,
        Self::BF16,
        Self::F32,
        Self::F64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        usize::from(self.dlpack().1 / 8)
    }

    /// DLPack's `(code, bits)` of the type (lanes are 1).
    pub fn dlpack(self) -> (u8, u8) {
        match self {
            Self::Bool => (KDL_BOOL, 8),
            Self::U8 => (KDL_UINT, 8),
            Self::U16 => (KDL_UINT, 16),
            Self::U32 => (KDL_UINT, 32),
            Self::U64 => (KDL_UINT, 64),
            Self::I8 => (KDL_INT, 8),
            Self::I16 => (KDL_INT, 16),
            Self::I32 => (KDL_INT, 32),
            Self::I64 => (KDL_INT, 64),
            Self::F16 => (KDL_FLOAT, 16),
            Self::BF16 => (KDL_BFLOAT, 16),
            Self::F32 => (KDL_FLOAT, 32),
            Self::F64 => (KDL_FLOAT, 64),
        }
    }

    /// The type of DLPack's `(code, bits, lanes)`, if it is one of these.
    pub fn from_dlpack(code: u8, bits: u8, lanes: u16) -> Option<Self> {
        if lanes != 1 {
            return None;
        }
        Self::ALL.into_iter().find(|t| t.dlpack() == (code, bits))
    }

    /// The element type a payload element's schema records, if it is a number or
    /// `bool` of these sizes.
    pub fn of_schema(schema: &Schema) -> Option<Self> {
        Some(match schema {
            Schema::Bool => Self::Bool,
            Schema::U8 => Self::U8,
            Schema::U16 => Self::U16,
            Schema::U32 => Self::U32,
            Schema::U64 => Self::U64,
            Schema::I8 => Self::I8,
            Schema::I16 => Self::I16,
            Schema::I32 => Self::I32,
            Schema::I64 => Self::I64,
            Schema::F16 => Self::F16,
            Schema::BF16 => Self::BF16,
            Schema::F32 => Self::F32,
            Schema::F64 => Self::F64,
            _ => return None,
        })
    }

    /// The name array libraries use (`float32`, `int64`, `bfloat16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::U8 => "uint8",
            Self::U16 => "uint16",
            Self::U32 => "uint32",
            Self::U64 => "uint64",
            Self::I8 => "int8",
            Self::I16 => "int16",
            Self::I32 => "int32",
            Self::I64 => "int64",
            Self::F16 => "float16",
            Self::BF16 => "bfloat16",
            Self::F32 => "float32",
            Self::F64 => "float64",
        }
    }

    /// The type named `name` (as [`name`](Self::name) writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a tensor layout was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TensorError {
    /// More dimensions than a sample can carry.
    #[error("a tensor of {ndim} dimensions; a sample carries at most {MAX_DIMS}")]
    TooManyDims {
        /// Dimensions asked for.
        ndim: usize,
    },
    /// Sizes and strides of different lengths.
    #[error("{shape} sizes but {strides} strides: give one stride per dimension")]
    StridesLength {
        /// Dimensions of the shape.
        shape: usize,
        /// Strides given.
        strides: usize,
    },
    /// A negative stride.
    #[error(
        "dimension {dim} has stride {stride}; negative strides are not carried (make the tensor contiguous first)"
    )]
    NegativeStride {
        /// The dimension.
        dim: usize,
        /// Its stride, in elements.
        stride: i64,
    },
    /// An element type other than the service's.
    #[error("a tensor of {given} on a service of {recorded} elements")]
    DType {
        /// The tensor's type.
        given: DType,
        /// The service's recorded element type.
        recorded: DType,
    },
    /// An element type no sample carries.
    #[error("DLPack type (code {code}, bits {bits}, lanes {lanes}) is not a tensor element type iox carries")]
    UnknownDType {
        /// DLPack's type code.
        code: u8,
        /// Bits per element.
        bits: u8,
        /// Lanes.
        lanes: u16,
    },
    /// The tensor reaches more bytes than the sample (or the service's largest
    /// sample) has.
    #[error("the tensor reaches {needed} bytes; {capacity} bytes fit")]
    TooLarge {
        /// Bytes the sizes and strides reach.
        needed: u64,
        /// Bytes there are.
        capacity: usize,
    },
    /// Sizes and strides whose reach does not fit 64 bits.
    #[error("the tensor's sizes and strides overflow 64 bits")]
    Overflow,
    /// The service's payload is not a slice of one of the element types.
    #[error("the service carries {payload}, not a slice of numbers: it is no tensor service")]
    NotATensorService {
        /// The recorded payload, as `iox show` names it.
        payload: String,
    },
}

/// The element type, shape and strides of a tensor sample (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TensorLayout {
    dtype: DType,
    ndim: usize,
    shape: [u64; MAX_DIMS],
    strides: [i64; MAX_DIMS],
}

impl fmt::Debug for TensorLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorLayout")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .finish()
    }
}

impl TensorLayout {
    /// A row-major (C order) tensor of `shape`.
    pub fn contiguous(dtype: DType, shape: &[usize]) -> Result<Self, TensorError> {
        if shape.len() > MAX_DIMS {
            return Err(TensorError::TooManyDims { ndim: shape.len() });
        }
        let mut strides = [0i64; MAX_DIMS];
        let mut next: i64 = 1;
        for (i, &size) in shape.iter().enumerate().rev() {
            strides[i] = next;
            let size = i64::try_from(size).map_err(|_| TensorError::Overflow)?;
            next = next.checked_mul(size.max(1)).ok_or(TensorError::Overflow)?;
        }
        Self::strided(dtype, shape, &strides[..shape.len()])
    }

    /// A tensor of `shape` with `strides` (in elements, one per dimension, none
    /// negative).
    pub fn strided(dtype: DType, shape: &[usize], strides: &[i64]) -> Result<Self, TensorError> {
        if shape.len() > MAX_DIMS {
            return Err(TensorError::TooManyDims { ndim: shape.len() });
        }
        if strides.len() != shape.len() {
            return Err(TensorError::StridesLength {
                shape: shape.len(),
                strides: strides.len(),
            });
        }
        let mut t = Self {
            dtype,
            ndim: shape.len(),
            shape: [0; MAX_DIMS],
            strides: [0; MAX_DIMS],
        };
        for (dim, (&size, &stride)) in shape.iter().zip(strides).enumerate() {
            if stride < 0 {
                return Err(TensorError::NegativeStride { dim, stride });
            }
            // Sizes are `int64_t` in DLPack: one that does not fit is refused, even
            // where a 0 elsewhere makes the tensor empty.
            if i64::try_from(size).is_err() {
                return Err(TensorError::Overflow);
            }
            t.shape[dim] = size as u64;
            t.strides[dim] = stride;
        }
        t.span_elements()?;
        Ok(t)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The sizes, outermost first.
    pub fn shape(&self) -> &[u64] {
        &self.shape[..self.ndim]
    }

    /// The strides, in elements.
    pub fn strides(&self) -> &[i64] {
        &self.strides[..self.ndim]
    }

    /// Elements in the tensor (the product of the sizes).
    pub fn elements(&self) -> Option<u64> {
        self.shape().iter().try_fold(1u64, |n, &d| n.checked_mul(d))
    }

    /// Whether the strides are row-major over the shape (dimensions of size 1 may
    /// have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut next = 1i64;
        for (&size, &stride) in self.shape().iter().zip(self.strides()).rev() {
            if size != 1 && stride != next {
                return false;
            }
            next = next.saturating_mul(size as i64);
        }
        true
    }

    /// Elements from the first to the last one the tensor reaches (0 when a size
    /// is 0).
    fn span_elements(&self) -> Result<u64, TensorError> {
        let mut last: u64 = 0;
        for (&size, &stride) in self.shape().iter().zip(self.strides()) {
            if size == 0 {
                return Ok(0);
            }
            let reach = (size - 1)
                .checked_mul(stride as u64)
                .ok_or(TensorError::Overflow)?;
            last = last.checked_add(reach).ok_or(TensorError::Overflow)?;
        }
        last.checked_add(1).ok_or(TensorError::Overflow)
    }

    /// Bytes from the tensor's first element to the end of its last (`None` if that
    /// overflows).
    pub fn span_bytes(&self) -> Option<u64> {
        self.span_elements().ok()?.checked_mul(self.dtype.size() as u64)
    }

    /// Whether the layout describes a sample of `capacity` bytes on a service of
    /// `recorded` elements (module docs).
    pub fn check(&self, recorded: DType, capacity: usize) -> Result<(), TensorError> {
        if self.dtype != recorded {
            return Err(TensorError::DType {
                given: self.dtype,
                recorded,
            });
        }
        let needed = self.span_bytes().ok_or(TensorError::Overflow)?;
        if needed > capacity as u64 {
            return Err(TensorError::TooLarge { needed, capacity });
        }
        Ok(())
    }

    /// The layout as shared-memory words (module docs).
    pub fn to_words(&self) -> [u64; WORDS] {
        let (code, bits) = self.dtype.dlpack();
        let mut w = [0u64; WORDS];
        w[0] = self.ndim as u64 | u64::from(code) << 8 | u64::from(bits) << 16 | 1 << 24;
        for d in 0..self.ndim {
            w[1 + d] = self.shape[d];
            w[1 + MAX_DIMS + d] = self.strides[d] as u64;
        }
        w
    }

    /// The layout the words say, checked for what words alone can get wrong (the
    /// dimension count, the type, negative strides, overflow).
    pub fn from_words(w: &[u64; WORDS]) -> Result<Self, TensorError> {
        let ndim = (w[0] & 0xff) as usize;
        let (code, bits, lanes) = ((w[0] >> 8) as u8, (w[0] >> 16) as u8, (w[0] >> 24) as u16);
        let dtype =
            DType::from_dlpack(code, bits, lanes).ok_or(TensorError::UnknownDType { code, bits, lanes })?;
        if ndim > MAX_DIMS {
            return Err(TensorError::TooManyDims { ndim });
        }
        let mut shape = [0usize; MAX_DIMS];
        let mut strides = [0i64; MAX_DIMS];
        for d in 0..ndim {
            shape[d] = usize::try_from(w[1 + d]).map_err(|_| TensorError::Overflow)?;
            strides[d] = w[1 + MAX_DIMS + d] as i64;
        }
        Self::strided(dtype, &shape[..ndim], &strides[..ndim])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_dlpack_and_its_name() {
        for t in DType::ALL {
            let (code, bits) = t.dlpack();
            assert_eq!(DType::from_dlpack(code, bits, 1), Some(t));
            assert_eq!(DType::from_dlpack(code, bits, 2), None, "lanes are 1");
            assert_eq!(DType::from_name(t.name()), Some(t));
            assert_eq!(t.size() * 8, usize::from(bits));
        }
        assert_eq!(DType::from_dlpack(5, 64, 1), None, "complex is not carried");
    }

    #[test]
    fn layouts_round_trip_through_words() {
        let t = TensorLayout::strided(DType::BF16, &[4, 0, 7], &[1, 9, 4]).unwrap();
        assert_eq!(TensorLayout::from_words(&t.to_words()), Ok(t));
        let c = TensorLayout::contiguous(DType::U8, &[]).unwrap();
        assert_eq!(c.span_bytes(), Some(1), "a 0-d tensor is one element");
        assert_eq!(TensorLayout::from_words(&c.to_words()), Ok(c));
    }

    #[test]
    fn the_reach_counts_strides_not_elements() {
        // A transposed 3x2 view of 2x3: reaches 6 elements; a stride-2 column: 5.
        let t = TensorLayout::strided(DType::F32, &[3, 2], &[1, 3]).unwrap();
        assert_eq!(t.span_bytes(), Some(24));
        assert!(!t.is_contiguous());
        let col = TensorLayout::strided(DType::F32, &[3], &[2]).unwrap();
        assert_eq!(col.span_bytes(), Some(20));
        assert!(
            TensorLayout::contiguous(DType::F32, &[2, 1, 3])
                .unwrap()
                .is_contiguous()
        );
        assert_eq!(
            TensorLayout::contiguous(DType::F32, &[5, 0])
                .unwrap()
                .span_bytes(),
            Some(0)
        );
    }

    #[test]
    fn bad_layouts_are_refused_naming_what_is_wrong() {
        assert_eq!(
            TensorLayout::contiguous(DType::U8, &[1; 9]),
            Err(TensorError::TooManyDims { ndim: 9 })
        );
        assert_eq!(
            TensorLayout::strided(DType::U8, &[2, 2], &[1]),
            Err(TensorError::StridesLength { shape: 2, strides: 1 })
        );
        assert_eq!(
            TensorLayout::strided(DType::U8, &[2], &[-1]),
            Err(TensorError::NegativeStride { dim: 0, stride: -1 })
        );
        assert_eq!(
            TensorLayout::strided(DType::U8, &[usize::MAX, 3], &[i64::MAX, 1]),
            Err(TensorError::Overflow)
        );
        // A size past i64 is refused even with a stride of 0 or beside an empty
        // dimension (it could not be handed to DLPack).
        assert_eq!(
            TensorLayout::strided(DType::U8, &[usize::MAX], &[0]),
            Err(TensorError::Overflow)
        );
        assert_eq!(
            TensorLayout::strided(DType::U8, &[0, usize::MAX], &[1, 1]),
            Err(TensorError::Overflow)
        );
        let t = TensorLayout::contiguous(DType::F64, &[4]).unwrap();
        assert_eq!(
            t.check(DType::F64, 31),
            Err(TensorError::TooLarge {
                needed: 32,
                capacity: 31
            })
        );
        assert_eq!(
            t.check(DType::F32, 64),
            Err(TensorError::DType {
                given: DType::F64,
                recorded: DType::F32
            })
        );
    }

    #[test]
    fn damaged_words_are_errors() {
        let mut w = TensorLayout::contiguous(DType::F32, &[2]).unwrap().to_words();
        w[0] = (w[0] & !0xff) | 9;
        assert_eq!(
            TensorLayout::from_words(&w),
            Err(TensorError::TooManyDims { ndim: 9 })
        );
        let mut w = TensorLayout::contiguous(DType::F32, &[2]).unwrap().to_words();
        w[0] |= 0xff << 8;
        assert!(matches!(
            TensorLayout::from_words(&w),
            Err(TensorError::UnknownDType { .. })
        ));
        let mut w = TensorLayout::contiguous(DType::F32, &[2]).unwrap().to_words();
        w[1 + MAX_DIMS] = u64::MAX; // stride -1
        assert!(matches!(
            TensorLayout::from_words(&w),
            Err(TensorError::NegativeStride { .. })
        ));
        let mut w = TensorLayout::contiguous(DType::F32, &[2, 2]).unwrap().to_words();
        w[1] = u64::MAX;
        assert!(TensorLayout::from_words(&w).is_err());
    }
}
