//! numpy arrays that view a chunk in place: C-contiguous, aligned, with a Python object
//! as their base (numpy keeps the base alive as long as the array or any view derived
//! from it lives, and views derived from it take that same base).
//!
//! Invariant (the callers'): the base object owns the chunk (a received sample, or a
//! loan's cell) and does not release it before it is destroyed, so the memory stays
//! valid while any array refers to it. Received arrays are read-only.

use std::ffi::c_void;

use numpy::npyffi::{NPY_ARRAY_CARRAY, NPY_ARRAY_CARRAY_RO, NpyTypes, PY_ARRAY_API, npy_intp};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;

/// A numpy array of `dtype` and `shape` over `ptr`, whose base is `owner`.
///
/// # Safety
/// `ptr` must point to at least `dtype.itemsize * prod(shape)` bytes, aligned for
/// `dtype`, that stay valid until `owner` is destroyed; if `writable`, nobody else
/// may read or write them while any array lives (the caller's protocol).
pub(crate) unsafe fn view<'py>(
    py: Python<'py>,
    dtype: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    ptr: *const u8,
    writable: bool,
    owner: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut dims: Vec<npy_intp> = shape.iter().map(|&d| d as npy_intp).collect();
    let flags = if writable {
        NPY_ARRAY_CARRAY
    } else {
        NPY_ARRAY_CARRAY_RO
    };
    // PyArray_NewFromDescr steals a reference to the descriptor.
    let descr = dtype.clone().into_dtype_ptr();
    // SAFETY: numpy's C API (imported by the numpy crate under the GIL, which `py`
    // proves); the descriptor is a valid dtype we own a reference to (stolen here);
    // `dims` outlives the call; null strides mean C-contiguous; the data contract is
    // this function's.
    let array = unsafe {
        PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            PY_ARRAY_API.get_type_object(py, NpyTypes::PyArray_Type),
            descr,
            dims.len() as i32,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            ptr.cast_mut().cast::<c_void>(),
            flags,
            std::ptr::null_mut(),
        )
    };
    if array.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `array` is a new reference numpy just returned (non-null).
    let array = unsafe { Bound::from_owned_ptr(py, array) };
    // SAFETY: `array` is a fresh ndarray without a base; SetBaseObject steals the
    // reference to `owner` (into_ptr hands it over), also when it fails.
    let rc = unsafe { PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast(), owner.into_ptr()) };
    if rc != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(array)
}

/// A read-only view of a received payload of `nbytes` bytes at `ptr`, shaped as `spec`
/// says (its shape, or 1-D as long as the payload), whose base is `owner`.
///
/// # Safety
/// As for [`view`] (read-only): `ptr` points to `nbytes` bytes of `spec`'s dtype,
/// aligned for it, valid until `owner` is destroyed.
pub(crate) unsafe fn payload_view<'py>(
    py: Python<'py>,
    spec: &crate::spec::ArraySpec,
    ptr: *const u8,
    nbytes: usize,
    owner: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let shape = spec.shape_for(nbytes);
    // SAFETY: this function's contract, read-only.
    unsafe { view(py, spec.dtype.bind(py), &shape, ptr, false, owner) }
}
