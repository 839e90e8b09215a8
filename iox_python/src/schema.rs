//! numpy dtypes to payload schemas ([`iox_service::Schema`]) and back.
//!
//! To a schema ([`of_dtype`]), what a Python-created service records so that Rust
//! tools read its samples by field name and a Rust type of the same name with other
//! fields is refused naming the field: `bool` is `Bool`, native-order integers and
//! `float32`/`float64` their Rust numbers, sub-arrays nested `Array`s (outer dimension
//! first, as Rust's `[[T; 3]; 4]` is `(4, 3)`), structured dtypes `Struct`s with the
//! dtype's field names, offsets, size and alignment. The outermost struct is named
//! after the payload's type (the `iox.Type` name, as a derived Rust type's schema is
//! named after its `type_name`); a nested one after the `iox.Type` whose dtype it is
//! (`Type` records its name in the dtype's metadata, under `iox.type_name`), else
//! after its field (Rust's names of nested structs are not compared on open).
//! `float16` is `F16` (Rust's `half::f16`); numpy has no bfloat16, so a `BF16` schema
//! reads as two bytes (`V2`). Anything else (objects, strings, datetimes, complex, a non-native byte
//! order, a field name that is not printable ASCII, more nesting or fields than a
//! schema may have) makes the whole dtype inexpressible: the service then records no
//! schema, as before schemas existed.
//!
//! From a schema ([`to_dtype`]), for opening a service without a dtype: the same
//! mapping reversed, structs as `np.dtype({names, formats, offsets, itemsize})` with
//! the recorded offsets (aligned when the offsets allow it) and their names in the
//! metadata (so a dtype read from a service records the same schema again),
//! `u128`/`i128` and bytes of unknown layout as `V<size>` (numpy has no 128-bit
//! integers).

use iox_service::Schema;
use iox_service::schema::Field;
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyList, PyTuple};

/// The schema of one value of a service whose element dtype is `dtype`, `shape` the
/// fixed shape of a typed service (`[]` for one element; slices pass `[]` too), the
/// outermost struct named `name`, with `alignment` (the payload's). `None` if the
/// dtype has a part a schema cannot express (module docs).
pub(crate) fn of_dtype(
    dtype: &Bound<'_, PyArrayDescr>,
    shape: &[usize],
    name: &str,
    alignment: u64,
) -> Option<Schema> {
    let mut schema = of_element(dtype, name, Some(alignment))?;
    for &n in shape.iter().rev() {
        schema = Schema::Array {
            element: Box::new(schema),
            len: n as u64,
        };
    }
    // Within the limits a recorded schema has (depth, nodes), or none.
    let size = schema.size()?;
    schema.check(size).ok()?;
    Some(schema)
}

/// `name` and `alignment` apply to the first struct met (through sub-arrays).
fn of_element(dtype: &Bound<'_, PyArrayDescr>, name: &str, alignment: Option<u64>) -> Option<Schema> {
    if dtype.has_subarray() {
        let mut schema = of_element(&dtype.base(), name, alignment)?;
        for n in dtype.shape().into_iter().rev() {
            schema = Schema::Array {
                element: Box::new(schema),
                len: n as u64,
            };
        }
        return Some(schema);
    }
    if let Some(names) = dtype.names() {
        // A nested struct's own name, if it has one (an `iox.Type`'s dtype).
        let own = alignment
            .is_none()
            .then(|| type_name_of(dtype))
            .flatten()
            .filter(|n| iox_service::schema::valid_name(n));
        let name = own.as_deref().unwrap_or(name);
        if !iox_service::schema::valid_name(name) {
            return None;
        }
        let mut fields = Vec::with_capacity(names.len());
        for field_name in names {
            if !iox_service::schema::valid_name(&field_name) {
                return None;
            }
            let (field, offset) = dtype.get_field(&field_name).ok()?;
            fields.push(Field {
                schema: of_element(&field, &field_name, None)?,
                name: field_name,
                offset: offset as u64,
            });
        }
        return Some(Schema::Struct {
            name: name.to_owned(),
            size: dtype.itemsize() as u64,
            alignment: alignment.unwrap_or(dtype.alignment() as u64),
            fields,
        });
    }
    if dtype.is_native_byteorder() == Some(false) {
        return None;
    }
    Some(match (dtype.kind(), dtype.itemsize()) {
        (b'b', 1) => Schema::Bool,
        (b'u', 1) => Schema::U8,
        (b'u', 2) => Schema::U16,
        (b'u', 4) => Schema::U32,
        (b'u', 8) => Schema::U64,
        (b'i', 1) => Schema::I8,
        (b'i', 2) => Schema::I16,
        (b'i', 4) => Schema::I32,
        (b'i', 8) => Schema::I64,
        (b'f', 2) => Schema::F16,
        (b'f', 4) => Schema::F32,
        (b'f', 8) => Schema::F64,
        _ => return None,
    })
}

/// The metadata key under which a structured dtype carries its type name: set by
/// `iox.Type` and by [`to_dtype`], read for nested structs by [`of_dtype`].
const NAME_KEY: &str = "iox.type_name";

/// `dtype.metadata[NAME_KEY]`, if it is a string.
fn type_name_of(dtype: &Bound<'_, PyArrayDescr>) -> Option<String> {
    dtype
        .getattr("metadata")
        .ok()?
        .get_item(NAME_KEY)
        .ok()?
        .extract()
        .ok()
}

/// The element dtype and shape of a value of `schema`. With `peel_arrays` (a typed
/// service's value) the arrays around the outermost non-array become the shape (outer
/// first) and the rest the dtype; without (a slice's element) arrays stay in the
/// dtype as a sub-array (numpy then adds their dimensions to each array).
pub(crate) fn to_dtype<'py>(
    py: Python<'py>,
    schema: &Schema,
    peel_arrays: bool,
) -> PyResult<(Bound<'py, PyArrayDescr>, Vec<usize>)> {
    if !peel_arrays {
        return Ok((element_dtype(py, schema)?, Vec::new()));
    }
    let (inner, shape) = peel(schema);
    Ok((element_dtype(py, inner)?, shape))
}

/// The schema inside nested arrays, and their lengths (outer first).
fn peel(mut schema: &Schema) -> (&Schema, Vec<usize>) {
    let mut shape = Vec::new();
    while let Schema::Array { element, len } = schema {
        shape.push(*len as usize);
        schema = element;
    }
    (schema, shape)
}

fn element_dtype<'py>(py: Python<'py>, schema: &Schema) -> PyResult<Bound<'py, PyArrayDescr>> {
    let np_dtype = |spec: Bound<'py, PyAny>| -> PyResult<Bound<'py, PyArrayDescr>> {
        Ok(py
            .import("numpy")?
            .getattr("dtype")?
            .call1((spec,))?
            .cast_into()?)
    };
    Ok(match schema {
        Schema::Bool => numpy::dtype::<bool>(py),
        Schema::U8 => numpy::dtype::<u8>(py),
        Schema::U16 => numpy::dtype::<u16>(py),
        Schema::U32 => numpy::dtype::<u32>(py),
        Schema::U64 => numpy::dtype::<u64>(py),
        Schema::I8 => numpy::dtype::<i8>(py),
        Schema::I16 => numpy::dtype::<i16>(py),
        Schema::I32 => numpy::dtype::<i32>(py),
        Schema::I64 => numpy::dtype::<i64>(py),
        Schema::F16 => np_dtype("float16".into_pyobject(py)?.into_any())?,
        Schema::F32 => numpy::dtype::<f32>(py),
        Schema::F64 => numpy::dtype::<f64>(py),
        Schema::Array { .. } => {
            let (inner, shape) = peel(schema);
            let base = element_dtype(py, inner)?;
            np_dtype(PyTuple::new(py, [base.into_any(), PyTuple::new(py, shape)?.into_any()])?.into_any())?
        }
        Schema::Struct {
            name, size, fields, ..
        } => {
            let spec = PyDict::new(py);
            let names = PyList::empty(py);
            let formats = PyList::empty(py);
            let offsets = PyList::empty(py);
            for f in fields {
                names.append(&f.name)?;
                formats.append(element_dtype(py, &f.schema)?)?;
                offsets.append(f.offset)?;
            }
            spec.set_item("names", names)?;
            spec.set_item("formats", formats)?;
            spec.set_item("offsets", offsets)?;
            spec.set_item("itemsize", size)?;
            let dtype = py.import("numpy")?.getattr("dtype")?;
            // Aligned (as a Rust repr(C) struct is) when every offset allows it; a
            // packed struct's fields may not be aligned.
            let metadata = [(NAME_KEY, name)].into_py_dict(py)?;
            let kwargs = [
                ("align", true.into_pyobject(py)?.to_owned().into_any()),
                ("metadata", metadata.clone().into_any()),
            ]
            .into_py_dict(py)?;
            match dtype.call((&spec,), Some(&kwargs)) {
                Ok(d) => d.cast_into()?,
                Err(_) => dtype
                    .call((spec,), Some(&[("metadata", metadata)].into_py_dict(py)?))?
                    .cast_into()?,
            }
        }
        // u128, i128 (no numpy type) and bytes of unknown layout: raw bytes.
        other => {
            let size = other.size().unwrap_or(0);
            np_dtype(format!("V{size}").into_pyobject(py)?.into_any())?
        }
    })
}

/// The schema as plain Python values (`svc.schema`): a primitive as its Rust name
/// (`"f64"`, `"bool"`), an array as `{"array": element, "len": n}`, a struct as
/// `{"struct": name, "size": s, "alignment": a, "fields": [(name, offset, schema), ...]}`,
/// bytes of unknown layout as `{"bytes": size}`.
pub(crate) fn to_python<'py>(py: Python<'py>, schema: &Schema) -> PyResult<Bound<'py, PyAny>> {
    Ok(match schema {
        Schema::Array { element, len } => {
            let d = PyDict::new(py);
            d.set_item("array", to_python(py, element)?)?;
            d.set_item("len", len)?;
            d.into_any()
        }
        Schema::Struct {
            name,
            size,
            alignment,
            fields,
        } => {
            let d = PyDict::new(py);
            d.set_item("struct", name)?;
            d.set_item("size", size)?;
            d.set_item("alignment", alignment)?;
            let list = PyList::empty(py);
            for f in fields {
                list.append((&f.name, f.offset, to_python(py, &f.schema)?))?;
            }
            d.set_item("fields", list)?;
            d.into_any()
        }
        Schema::Bytes { size } => {
            let d = PyDict::new(py);
            d.set_item("bytes", size)?;
            d.into_any()
        }
        primitive => primitive.to_string().into_pyobject(py)?.into_any(),
    })
}
