//! What a Python service's arrays look like: the payload's dtype and shape
//! ([`ArraySpec`]) and its user header's view ([`HeaderSpec`]), with the dtype rules
//! every port applies (whether a dtype accepts every byte string, the memory type
//! codes). Loans, samples and the opening code all read them; they read nothing else.

use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use iox_service::MemoryType;

use crate::errors;

/// What the arrays of a service look like: element dtype and shape (`None`: a 1-D
/// array as long as the sample, for slice services), and its user header's, if any.
pub(crate) struct ArraySpec {
    pub(crate) dtype: Py<PyArrayDescr>,
    pub(crate) shape: Option<Vec<usize>>,
    pub(crate) itemsize: usize,
    pub(crate) header: Option<HeaderSpec>,
}

/// What a user header's view looks like: a dtype without sub-arrays and a fixed shape
/// (`[]` for one number or record), `size` bytes in all (the recorded header's size).
pub(crate) struct HeaderSpec {
    pub(crate) dtype: Py<PyArrayDescr>,
    pub(crate) shape: Vec<usize>,
    pub(crate) size: usize,
}

impl HeaderSpec {
    /// The header of `dtype` (a sub-array dtype's dimensions become the shape, so the
    /// views and conversions see plain arrays), with its size checked against the
    /// recorded header's.
    pub(crate) fn new(
        dtype: &Bound<'_, PyArrayDescr>,
        mut shape: Vec<usize>,
        recorded: usize,
    ) -> PyResult<Self> {
        let mut dtype = dtype.clone();
        if dtype.has_subarray() {
            shape.extend(dtype.shape());
            dtype = dtype.base();
        }
        let size = shape
            .iter()
            .try_fold(dtype.itemsize(), |n, &d| n.checked_mul(d))
            .unwrap_or(usize::MAX);
        if size != recorded {
            return Err(errors::Error::new_err(format!(
                "the user header's dtype {dtype} of shape {shape:?} is {size} bytes, the \
                 service's header is {recorded}"
            )));
        }
        Ok(Self {
            dtype: dtype.unbind(),
            shape,
            size,
        })
    }
}

impl ArraySpec {
    /// The shape of an array of `bytes` bytes.
    pub(crate) fn shape_for(&self, bytes: usize) -> Vec<usize> {
        match &self.shape {
            Some(s) => s.clone(),
            None => vec![bytes / self.itemsize.max(1)],
        }
    }
}

pub(crate) fn memory_type(code: u16) -> PyResult<MemoryType> {
    MemoryType::from_code(code).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Whether every byte string of `dtype`'s size is a value of it, as Rust's
/// `ZeroCopySafe::ANY_BIT_PATTERN` says of a type: integers, floats and complex
/// numbers; sub-arrays of them; structured dtypes whose fields are such and cover
/// every byte once (no padding). Not `bool` (`?`), objects, strings or datetimes
/// (conservatively). Recorded in the payload's identity, so it matches what a Rust
/// program's type records.
pub(crate) fn any_bit_pattern(dtype: &Bound<'_, PyArrayDescr>) -> bool {
    if dtype.has_subarray() {
        return any_bit_pattern(&dtype.base());
    }
    let Some(names) = dtype.names() else {
        return matches!(dtype.kind(), b'i' | b'u' | b'f' | b'c');
    };
    let mut fields = Vec::with_capacity(names.len());
    for name in &names {
        match dtype.get_field(name) {
            Ok((field, offset)) if any_bit_pattern(&field) => fields.push((offset, field.itemsize())),
            _ => return false,
        }
    }
    fields.sort_unstable();
    let mut end = 0;
    for (offset, size) in fields {
        if offset != end {
            return false; // padding before this field, or fields that overlap
        }
        end = offset + size;
    }
    end == dtype.itemsize()
}

/// Refuses a header view whose size is not the chunk's header length (which the open's
/// check of the recorded header makes impossible; checked so that no view can reach
/// past the header whatever happens).
pub(crate) fn check_header_len(h: &HeaderSpec, header_len: usize) -> PyResult<()> {
    if h.size != header_len {
        return Err(errors::Error::new_err(format!(
            "the header view is {} bytes but the chunk's header is {header_len}",
            h.size
        )));
    }
    Ok(())
}
