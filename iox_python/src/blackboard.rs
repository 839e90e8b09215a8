//! Blackboards from Python (`iox.Blackboard`, built in `iox/_blackboard.py`): keys of an
//! integer dtype, values of any dtype, copied out into (and in from) numpy arrays
//! through their addresses (`iox_service`'s raw blackboard entries), so Rust programs
//! with the real types share the blackboard.
//!
//! The key type is one of Rust's integers, chosen at run time
//! (`iox_service::IntKeyBlackboard`: a monomorphisation of the Rust blackboard per key
//! type). Readers and writers are behind a mutex (the Rust ports are `Send`, not
//! `Sync`).
//!
//! Writes: a key whose recorded type has bit patterns that are no value (a `bool`
//! field, padding) is written from Python only if this handle declared its dtype
//! (`add`), whose numpy conversion makes valid values; the bytes of a type Python was
//! not told about are never written, so a Rust reader never gets an invalid value.

use std::sync::Mutex;

use iox_service::{IntKeyBlackboard, IntKeyError, IntKeyReader, IntKeyWriter, KeyType, PayloadType, Service};
use numpy::{PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;
use crate::event::PyListener;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open_blackboard, m)?)?;
    m.add_class::<PyBlackboard>()?;
    m.add_class::<PyBlackboardReader>()?;
    m.add_class::<PyBlackboardWriter>()?;
    Ok(())
}

/// One key from Python: the key, its value's type name, size and alignment, whether
/// every bit pattern is a value, and the initial value's bytes (creating).
type EntrySpec = (i128, String, u64, u64, bool, Option<Vec<u8>>);

/// Opens (`mode`) blackboard `service` with keys of `key_type` and the entries and
/// settings given.
fn open_any(
    py: Python<'_>,
    key_type: &str,
    service: Service,
    mode: &str,
    entries: Vec<EntrySpec>,
    opts: &Bound<'_, PyDict>,
) -> PyResult<IntKeyBlackboard> {
    let key_type = KeyType::from_name(key_type).ok_or_else(|| {
        PyValueError::new_err(format!(
            "key type {key_type:?}: a blackboard key from Python is one of u8, u16, u32, u64, i8, i16, i32, i64"
        ))
    })?;
    let mut b = service.int_key_blackboard(key_type);
    let get = |k: &str| opts.get_item(k).ok().flatten().filter(|v| !v.is_none());
    if let Some(v) = get("max_writers") {
        b = b.max_writers(v.extract()?);
    }
    if let Some(v) = get("max_readers") {
        b = b.max_readers(v.extract()?);
    }
    if let Some(v) = get("max_listeners") {
        b = b.max_listeners(v.extract()?);
    }
    if let Some(v) = get("permissions") {
        b = b.permissions(v.extract()?);
    }
    b = crate::attributes::apply(b, opts)?;
    for (key, type_name, size, alignment, any_bits, initial) in entries {
        let value = PayloadType::Typed {
            type_name,
            size,
            alignment,
            invalid_bit_patterns: !any_bits,
        };
        let bytes = initial.unwrap_or_else(|| vec![0; size as usize]);
        // SAFETY: the bytes are a numpy value of the dtype this type was named from
        // (`iox/_blackboard.py`), of its size.
        b = unsafe { b.add_raw(key, value, bytes) }.map_err(errors::other)?;
    }
    py.detach(|| match mode {
        "open" => b.open().map_err(|e| errors::open(&e)),
        "create" => b.create().map_err(|e| errors::create(&e)),
        _ => b.open_or_create().map_err(|e| errors::open_or_create(&e)),
    })
}

/// A key's refusal: a size (`ValueError`, as numpy's own), or iox's.
fn key_error(e: IntKeyError) -> PyErr {
    match e {
        IntKeyError::OutOfRange { .. } | IntKeyError::Size { .. } => PyValueError::new_err(e.to_string()),
        e => errors::other(e),
    }
}

/// Opens, creates or opens-or-creates a blackboard.
#[pyfunction]
#[pyo3(signature = (name, mode, key_type, entries, opts))]
fn open_blackboard(
    py: Python<'_>,
    name: &str,
    mode: &str,
    key_type: &str,
    entries: Vec<EntrySpec>,
    opts: &Bound<'_, PyDict>,
) -> PyResult<PyBlackboard> {
    let mut service = Service::named(name).map_err(errors::other)?;
    if let Some(root) = opts.get_item("root")?.filter(|v| !v.is_none()) {
        service = service.root(root.extract::<std::path::PathBuf>()?);
    }
    let declared = entries.iter().map(|e| e.0).collect();
    let inner = open_any(py, key_type, service, mode, entries, opts)?;
    Ok(PyBlackboard { inner, declared })
}

/// An open blackboard (`iox.Blackboard` wraps it).
#[pyclass(name = "BlackboardService", module = "iox", frozen)]
struct PyBlackboard {
    inner: IntKeyBlackboard,
    /// The keys whose dtypes this handle declared (`add`).
    declared: std::collections::HashSet<i128>,
}

#[pymethods]
impl PyBlackboard {
    /// A reader.
    fn reader(&self) -> PyResult<PyBlackboardReader> {
        Ok(PyBlackboardReader {
            inner: Mutex::new(self.inner.reader().map_err(errors::other)?),
        })
    }
    /// A writer.
    fn writer(&self) -> PyResult<PyBlackboardWriter> {
        Ok(PyBlackboardWriter {
            inner: Mutex::new(self.inner.writer().map_err(errors::other)?),
            declared: self.declared.clone(),
        })
    }
    /// A listener of changes: event id i when key number i (the order of `keys`) is
    /// updated.
    fn listener(&self) -> PyResult<PyListener> {
        Ok(PyListener::new(self.inner.listener().map_err(errors::other)?))
    }
    /// The keys, in the order of their event ids.
    fn keys(&self) -> Vec<i128> {
        self.inner.keys()
    }
    /// Per key: (key, value type name, size, alignment), as recorded.
    fn entries(&self) -> Vec<(i128, String, u64, u64)> {
        let keys = self.inner.keys();
        self.inner
            .config()
            .entries
            .iter()
            .zip(keys)
            .map(|(e, k)| match &e.value {
                PayloadType::Typed {
                    type_name,
                    size,
                    alignment,
                    ..
                } => (k, type_name.clone(), *size, *alignment),
                PayloadType::Slice {
                    element,
                    size,
                    alignment,
                    ..
                } => (k, element.clone(), *size, *alignment),
            })
            .collect()
    }
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    /// The attributes the blackboard's creator recorded: a new dict, key to value.
    #[getter]
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::attributes::to_dict(py, self.inner.attributes())
    }
}

/// A reader of a blackboard.
#[pyclass(name = "BlackboardReader", module = "iox", frozen)]
struct PyBlackboardReader {
    inner: Mutex<IntKeyReader>,
}

#[pymethods]
impl PyBlackboardReader {
    /// Copies `key`'s latest value into `dst` (a writable 1-D uint8 array of the
    /// value's size); its generation.
    fn get_into(&self, key: i128, mut dst: PyReadwriteArray1<'_, u8>) -> PyResult<u64> {
        let r = self
            .inner
            .lock()
            .map_err(|_| errors::other("a reader panicked"))?;
        let dst = dst.as_slice_mut()?;
        // SAFETY: `dst` is a writable slice of `dst.len()` bytes.
        unsafe { r.get_into(key, dst.as_mut_ptr(), dst.len()) }.map_err(key_error)
    }
    /// (the generation of `key`'s value now, whether it changed since this reader last
    /// read it).
    fn generation(&self, key: i128) -> PyResult<(u64, bool)> {
        let r = self
            .inner
            .lock()
            .map_err(|_| errors::other("a reader panicked"))?;
        r.generation(key).map_err(key_error)
    }
}

/// A writer of a blackboard.
#[pyclass(name = "BlackboardWriter", module = "iox", frozen)]
struct PyBlackboardWriter {
    inner: Mutex<IntKeyWriter>,
    declared: std::collections::HashSet<i128>,
}

#[pymethods]
impl PyBlackboardWriter {
    /// Sets `key`'s value to the bytes of `src` (a 1-D uint8 array of the value's
    /// size); the generation published.
    fn update_from(&self, key: i128, src: PyReadonlyArray1<'_, u8>) -> PyResult<u64> {
        let w = self
            .inner
            .lock()
            .map_err(|_| errors::other("a writer panicked"))?;
        let src = src.as_slice()?;
        let value = w.value_type(key).map_err(key_error)?;
        if !self.declared.contains(&key)
            && matches!(
                value,
                PayloadType::Typed {
                    invalid_bit_patterns: true,
                    ..
                }
            )
        {
            return Err(PyTypeError::new_err(format!(
                "key {key} holds {value}, which not every bit pattern is a value of: write it from \
                 Python only after declaring its dtype (.add({key}, iox.Type(...)))"
            )));
        }
        // SAFETY: `src` is a slice of `src.len()` bytes (checked against the value's size
        // by `update_from`), the bytes of a numpy value of the key's dtype
        // (`iox/_blackboard.py` converts), which this handle declared or which takes
        // every bit pattern (checked above).
        unsafe { w.update_from(key, src.as_ptr(), src.len()) }.map_err(key_error)
    }
}
