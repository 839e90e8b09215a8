//! Blackboards from Python (`iox.Blackboard`, built in `iox/_blackboard.py`): keys of an
//! integer dtype, values of any dtype, copied out into (and in from) numpy arrays
//! through their addresses (`iox_service`'s raw blackboard entries), so Rust programs
//! with the real types share the blackboard.
//!
//! The key type is one of Rust's integers; each is its own monomorphisation of the
//! Rust blackboard, behind the enums here. Readers and writers are behind a mutex (the
//! Rust ports are `Send`, not `Sync`).
//!
//! Writes: a key whose recorded type has bit patterns that are no value (a `bool`
//! field, padding) is written from Python only if this handle declared its dtype
//! (`add`), whose numpy conversion makes valid values; the bytes of a type Python was
//! not told about are never written, so a Rust reader never gets an invalid value.

use std::sync::Mutex;

use iox_service::{BlackboardService, PayloadType, Reader, Service, Writer};
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

macro_rules! key_types {
    ($($variant:ident => $k:ty, $name:literal;)*) => {
        /// A blackboard of one of the integer key types.
        enum Board { $($variant(BlackboardService<$k>),)* }
        /// A reader of one.
        enum AnyReader { $($variant(Reader<$k>),)* }
        /// A writer of one.
        enum AnyWriter { $($variant(Writer<$k>),)* }

        fn open_any(
            py: Python<'_>,
            key_type: &str,
            service: Service,
            mode: &str,
            entries: Vec<EntrySpec>,
            opts: &Bound<'_, PyDict>,
        ) -> PyResult<Board> {
            match key_type {
                $($name => {
                    let mut b = service.blackboard::<$k>();
                    let get = |k: &str| opts.get_item(k).ok().flatten().filter(|v| !v.is_none());
                    if let Some(v) = get("max_writers") { b = b.max_writers(v.extract()?); }
                    if let Some(v) = get("max_readers") { b = b.max_readers(v.extract()?); }
                    if let Some(v) = get("max_listeners") { b = b.max_listeners(v.extract()?); }
                    if let Some(v) = get("permissions") { b = b.permissions(v.extract()?); }
                    b = crate::attributes::apply(b, opts)?;
                    for (key, type_name, size, alignment, any_bits, initial) in entries {
                        let key = <$k>::try_from(key).map_err(|_| {
                            PyValueError::new_err(format!("key {key} is not a {}", $name))
                        })?;
                        let value = PayloadType::Typed { type_name, size, alignment, invalid_bit_patterns: !any_bits };
                        let bytes = initial.unwrap_or_else(|| vec![0; size as usize]);
                        // SAFETY: the bytes are a numpy value of the dtype this type
                        // was named from (`iox/_blackboard.py`), of its size.
                        b = unsafe { b.add_raw(key, value, bytes) };
                    }
                    let s = py.detach(|| match mode {
                        "open" => b.open().map_err(|e| errors::open(&e)),
                        "create" => b.create().map_err(|e| errors::create(&e)),
                        _ => b.open_or_create().map_err(|e| errors::open_or_create(&e)),
                    })?;
                    Ok(Board::$variant(s))
                })*
                other => Err(PyValueError::new_err(format!(
                    "key type {other:?}: a blackboard key from Python is one of u8, u16, u32, u64, i8, i16, i32, i64"
                ))),
            }
        }

        impl Board {
            fn reader(&self) -> PyResult<AnyReader> {
                match self { $(Board::$variant(b) => Ok(AnyReader::$variant(b.reader_builder().create().map_err(errors::other)?)),)* }
            }
            fn writer(&self) -> PyResult<AnyWriter> {
                match self { $(Board::$variant(b) => Ok(AnyWriter::$variant(b.writer_builder().create().map_err(errors::other)?)),)* }
            }
            fn listener(&self) -> PyResult<iox_service::Listener> {
                match self { $(Board::$variant(b) => b.listener_builder().create().map_err(errors::other),)* }
            }
            fn config(&self) -> &iox_service::BlackboardConfig {
                match self { $(Board::$variant(b) => b.blackboard_config(),)* }
            }
            fn keys(&self) -> Vec<i128> {
                match self { $(Board::$variant(b) => b.keys().into_iter().map(i128::from).collect(),)* }
            }
            fn name(&self) -> &str {
                match self { $(Board::$variant(b) => b.name(),)* }
            }
            fn attributes(&self) -> &iox_service::Attributes {
                match self { $(Board::$variant(b) => b.attributes(),)* }
            }
        }

        impl AnyReader {
            /// Copies `key`'s value into `dst` (its size checked); the generation.
            fn get_into(&self, key: i128, dst: &mut [u8]) -> PyResult<u64> {
                match self { $(AnyReader::$variant(r) => {
                    let key = <$k>::try_from(key).map_err(|_| PyValueError::new_err(format!("key {key} is not a {}", $name)))?;
                    let e = r.entry_raw(&key).map_err(errors::other)?;
                    check_size(e.size(), dst.len())?;
                    // SAFETY: `dst` holds the value's size, checked above.
                    unsafe { e.get_into(dst.as_mut_ptr()) }.map_err(errors::other)
                })* }
            }
            /// (generation now, whether it changed since this reader read it).
            fn generation(&self, key: i128) -> PyResult<(u64, bool)> {
                match self { $(AnyReader::$variant(r) => {
                    let key = <$k>::try_from(key).map_err(|_| PyValueError::new_err(format!("key {key} is not a {}", $name)))?;
                    let e = r.entry_raw(&key).map_err(errors::other)?;
                    Ok((e.generation(), e.has_changed()))
                })* }
            }
        }

        impl AnyWriter {
            /// Sets `key`'s value to the bytes `src` (their size checked); the generation.
            /// `declared`: whether this handle declared the key's dtype.
            fn update_from(&self, key: i128, src: &[u8], declared: bool) -> PyResult<u64> {
                match self { $(AnyWriter::$variant(w) => {
                    let k = <$k>::try_from(key).map_err(|_| PyValueError::new_err(format!("key {key} is not a {}", $name)))?;
                    let e = w.entry_raw(&k).map_err(errors::other)?;
                    check_size(e.size(), src.len())?;
                    if !declared && matches!(e.value_type(), PayloadType::Typed { invalid_bit_patterns: true, .. }) {
                        return Err(PyTypeError::new_err(format!(
                            "key {key} holds {}, which not every bit pattern is a value of: write it from Python only after declaring its dtype (.add({key}, iox.Type(...)))",
                            e.value_type()
                        )));
                    }
                    // SAFETY: `src` holds the value's size (checked above), the bytes of
                    // a numpy value of the key's dtype (`iox/_blackboard.py` converts).
                    unsafe { e.update_from(src.as_ptr()) }.map_err(errors::other)
                })* }
            }
        }
    };
}

key_types! {
    U8 => u8, "u8";
    U16 => u16, "u16";
    U32 => u32, "u32";
    U64 => u64, "u64";
    I8 => i8, "i8";
    I16 => i16, "i16";
    I32 => i32, "i32";
    I64 => i64, "i64";
}

fn check_size(size: usize, got: usize) -> PyResult<()> {
    if size != got {
        return Err(PyValueError::new_err(format!(
            "the key's value is {size} bytes, the array given {got}"
        )));
    }
    Ok(())
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
    inner: Board,
    /// The keys whose dtypes this handle declared (`add`).
    declared: std::collections::HashSet<i128>,
}

#[pymethods]
impl PyBlackboard {
    /// A reader.
    fn reader(&self) -> PyResult<PyBlackboardReader> {
        Ok(PyBlackboardReader {
            inner: Mutex::new(self.inner.reader()?),
        })
    }
    /// A writer.
    fn writer(&self) -> PyResult<PyBlackboardWriter> {
        Ok(PyBlackboardWriter {
            inner: Mutex::new(self.inner.writer()?),
            declared: self.declared.clone(),
        })
    }
    /// A listener of changes: event id i when key number i (the order of `keys`) is
    /// updated.
    fn listener(&self) -> PyResult<PyListener> {
        Ok(PyListener::new(self.inner.listener()?))
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
    inner: Mutex<AnyReader>,
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
        r.get_into(key, dst.as_slice_mut()?)
    }
    /// (the generation of `key`'s value now, whether it changed since this reader last
    /// read it).
    fn generation(&self, key: i128) -> PyResult<(u64, bool)> {
        let r = self
            .inner
            .lock()
            .map_err(|_| errors::other("a reader panicked"))?;
        r.generation(key)
    }
}

/// A writer of a blackboard.
#[pyclass(name = "BlackboardWriter", module = "iox", frozen)]
struct PyBlackboardWriter {
    inner: Mutex<AnyWriter>,
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
        w.update_from(key, src.as_slice()?, self.declared.contains(&key))
    }
}
