//! What Python values become the bytes of a payload: numpy's conversion of any value
//! to a C-contiguous array of a port's dtype, under numpy's `casting` rule, with
//! `bytes`, `bytearray` and `memoryview` taken as raw bytes where every byte string is
//! a value of the dtype. Publishers and request-response ports copy from what this
//! makes; it writes nothing itself.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::spec::ArraySpec;

/// Whether `data` is `bytes`, `bytearray` or a `memoryview`: taken as raw bytes.
pub(crate) fn is_bytes(data: &Bound<'_, PyAny>) -> bool {
    data.is_instance_of::<pyo3::types::PyBytes>()
        || data.is_instance_of::<pyo3::types::PyByteArray>()
        || data.is_instance_of::<pyo3::types::PyMemoryView>()
}

/// `data` as a C-contiguous array of `dtype`: `bytes`, `bytearray` and `memoryview`
/// as their bytes (no cast), a tuple as one record of a structured `dtype`, a Python
/// `int` (or a list of them) into any integer dtype it fits (else numpy's
/// `OverflowError`), a Python `float` into `float64`, anything else converted where numpy's `casting` rule allows it (a `TypeError` saying how to
/// convert otherwise). `what` names the value and its place in messages ("data to
/// this service", "header to this service's user header").
pub(crate) fn contiguous<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyArrayDescr>,
    casting: &str,
    what: &str,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let np = py.import("numpy")?;
    let src = if is_bytes(data) {
        // Bytes are taken as they are: only where every byte string is a value (a
        // `bool` holding 2 would be undefined behaviour for a Rust reader).
        if !crate::spec::any_bit_pattern(dtype) {
            return Err(PyTypeError::new_err(format!(
                "cannot send bytes as {what} of {dtype}: not every byte string is a value of it \
                 (a bool, or padding); pass an array, a numpy record or a tuple of fields"
            )));
        }
        np.call_method1("frombuffer", (data, dtype))?
    } else if dtype.names().is_some() && data.is_instance_of::<pyo3::types::PyTuple>() {
        // One record, field by field: numpy's own conversion of each field, each under
        // the casting rule as a lone value would be.
        check_record(py, data, dtype, casting, what)?;
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("dtype", dtype)?;
        np.getattr("array")?.call((data,), Some(&kw))?
    } else if is_weak_scalar(data, dtype) || is_weak_list(data, dtype, 0) {
        // A Python number (or a list of them) that takes the dtype exactly or not at all
        // (`is_weak_scalar`): converted by numpy, which refuses an int out of range.
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("dtype", dtype)?;
        np.getattr("asarray")?.call((data,), Some(&kw))?
    } else {
        // What the data is, then the cast the rule allows. asarray, not
        // ascontiguousarray (which makes a 0-d array 1-d).
        let given = np.call_method1("asarray", (data,))?;
        let from = given.getattr("dtype")?;
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("casting", casting)?;
        if !np
            .getattr("can_cast")?
            .call((&from, dtype), Some(&kw))?
            .is_truthy()?
        {
            return Err(PyTypeError::new_err(format!(
                "cannot send {from} {what} of {dtype} with casting {casting:?}: \
                 the conversion could change values; {}",
                how_to_convert(data, dtype, casting)
            )));
        }
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("dtype", dtype)?;
        kw.set_item("order", "C")?;
        np.getattr("asarray")?.call((given,), Some(&kw))?
    };
    if !crate::spec::any_bit_pattern(dtype) {
        check_bools(py, &src, dtype, what)?;
    }
    Ok(src.cast_into::<PyUntypedArray>()?)
}

/// Refuses a tuple `record` for structured `dtype` if one of its values could not be
/// cast to its field's dtype under `casting` (nested tuples for nested structs).
fn check_record(
    py: Python<'_>,
    record: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyArrayDescr>,
    casting: &str,
    what: &str,
) -> PyResult<()> {
    let Some(names) = dtype.names() else {
        return Ok(());
    };
    let np = py.import("numpy")?;
    let values = record.cast::<pyo3::types::PyTuple>()?;
    for (name, value) in names.iter().zip(values.iter()) {
        let (field, _) = dtype.get_field(name)?;
        if field.names().is_some() && value.is_instance_of::<pyo3::types::PyTuple>() {
            check_record(py, &value, &field, casting, what)?;
            continue;
        }
        if is_bytes(&value) || is_weak_scalar(&value, &field) {
            continue; // as for a lone value: bytes as they are, numbers as numpy's arithmetic
        }
        let from = np.call_method1("asarray", (&value,))?.getattr("dtype")?;
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("casting", casting)?;
        let target = if field.has_subarray() {
            field.base()
        } else {
            field.clone()
        };
        if !np
            .getattr("can_cast")?
            .call((&from, &target), Some(&kw))?
            .is_truthy()?
        {
            return Err(PyTypeError::new_err(format!(
                "cannot send field {name:?} of {what} from {from} to {target} with casting \
                 {casting:?}: the conversion could change values; {}",
                how_to_convert(&value, &target, casting)
            )));
        }
    }
    Ok(())
}

/// Refuses `array` (of `dtype`) if a `bool` in it, at any depth of fields and
/// sub-arrays, holds a byte other than 0 or 1 (numpy lets a view make one; a Rust, C
/// or C++ reader may not read it).
fn check_bools(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyArrayDescr>,
    what: &str,
) -> PyResult<()> {
    if dtype.has_subarray() {
        return check_bools(py, array, &dtype.base(), what);
    }
    if let Some(names) = dtype.names() {
        for name in names {
            let (field, _) = dtype.get_field(&name)?;
            check_bools(py, &array.get_item(&name)?, &field, what)?;
        }
        return Ok(());
    }
    if dtype.kind() != b'b' {
        return Ok(());
    }
    let np = py.import("numpy")?;
    let bytes = array.call_method1("view", (np.getattr("uint8")?,))?;
    if np
        .call_method1("greater", (bytes, 1))?
        .call_method0("any")?
        .is_truthy()?
    {
        return Err(PyValueError::new_err(format!(
            "{what}: a bool holds a byte other than 0 or 1 (made by a view of other bytes?): \
             convert it with .astype(bool) first"
        )));
    }
    Ok(())
}

/// Whether `data` is a Python number that takes `dtype` exactly or not at all: an
/// `int` (not a `bool`) for an integer dtype (numpy refuses one out of its range with
/// `OverflowError`), a `float` for `float64` or `complex128`. Others follow `casting`
/// (a Python float into `float32` could change: refused under `"safe"`).
fn is_weak_scalar(data: &Bound<'_, PyAny>, dtype: &Bound<'_, PyArrayDescr>) -> bool {
    use pyo3::types::{PyBool, PyFloat, PyInt};
    let (kind, size) = (dtype.kind(), dtype.itemsize());
    if data.is_exact_instance_of::<PyInt>() && !data.is_instance_of::<PyBool>() {
        return matches!(kind, b'i' | b'u');
    }
    data.is_exact_instance_of::<PyFloat>() && matches!((kind, size), (b'f', 8) | (b'c', 16))
}

/// Whether `data` is a list (of lists, to a depth of 32) of Python numbers that
/// [`is_weak_scalar`] takes for `dtype`.
fn is_weak_list(data: &Bound<'_, PyAny>, dtype: &Bound<'_, PyArrayDescr>, depth: usize) -> bool {
    let Ok(list) = data.cast::<pyo3::types::PyList>() else {
        return false;
    };
    depth < 32
        && !list.is_empty()
        && list
            .iter()
            .all(|item| is_weak_scalar(&item, dtype) || is_weak_list(&item, dtype, depth + 1))
}

/// What to do about a conversion `casting` refused: encode a `str`, or convert, or a
/// looser rule.
fn how_to_convert(data: &Bound<'_, PyAny>, dtype: &Bound<'_, PyArrayDescr>, casting: &str) -> String {
    if data.is_instance_of::<pyo3::types::PyString>() {
        return "a str is text, not bytes: send data.encode() (UTF-8) to a bytes service".to_owned();
    }
    let looser = match casting {
        "no" | "equiv" | "safe" => " or pass casting=\"same_kind\" or \"unsafe\"",
        "same_kind" => " or pass casting=\"unsafe\"",
        _ => "",
    };
    format!("convert it yourself (e.g. a.astype(np.{dtype})){looser}")
}

/// `data` as a C-contiguous array of `spec`'s dtype, of its shape where it has one
/// (fixed-shape and single-value payloads; a slice takes any number of elements).
/// `what` names the value in messages ("data to this service").
pub(crate) fn payload<'py>(
    py: Python<'py>,
    spec: &ArraySpec,
    data: &Bound<'py, PyAny>,
    casting: &str,
    what: &str,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let src = contiguous(py, data, spec.dtype.bind(py), casting, what)?;
    if let Some(shape) = &spec.shape
        && src.shape() != shape.as_slice()
    {
        return Err(PyValueError::new_err(format!(
            "this service carries arrays of shape {shape:?}, not {:?}",
            src.shape()
        )));
    }
    Ok(src)
}

/// The bytes of `src` (a C-contiguous array, as [`contiguous`] makes) copied to `dst`,
/// which holds `len` bytes: refused (nothing copied) unless `src` is exactly `len` bytes.
///
/// # Safety
/// `dst` is valid for writes of `len` bytes and does not overlap `src`.
pub(crate) unsafe fn copy_to(src: &Bound<'_, PyUntypedArray>, dst: *mut u8, len: usize) -> PyResult<()> {
    let bytes = src.len() * src.dtype().itemsize();
    if bytes != len {
        return Err(PyValueError::new_err(format!(
            "the value is {bytes} bytes, its place in the sample {len}: its dtype {} is not the \
             service's element (a sub-array or unsized dtype?)",
            src.dtype()
        )));
    }
    // SAFETY: `src` is C-contiguous (`contiguous` made it), so its data is `bytes`
    // bytes in one run, alive while `src` is; `dst` is writable for `len` = `bytes`
    // bytes and apart (the caller's contract).
    unsafe {
        let data = (*src.as_array_ptr()).data.cast::<u8>();
        std::ptr::copy_nonoverlapping(data, dst, bytes);
    }
    Ok(())
}
