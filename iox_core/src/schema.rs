//! Payload schemas: the field layout of a service's payload, recorded in its static
//! config so that tools and bindings can read samples without the writer's source.
//!
//! A [`Schema`] describes one value (the element, for a slice service): a primitive
//! number or `bool`, a fixed array, a struct of named fields at byte offsets, or
//! opaque bytes (a type that records no layout). [`ZeroCopySafe::schema`](crate::ZeroCopySafe::schema)
//! gives a type's schema: primitives, arrays and tuples have theirs built in,
//! `#[derive(ZeroCopySafe)]` writes one from the struct's fields (names, `offset_of!`,
//! each field's own schema), and a hand-written impl is [`Schema::Bytes`] unless it
//! says more.
//!
//! Invariants of a schema in a static config ([`Schema::check`], run with the rest of
//! the config's checks, so a damaged file is a clear error and never a wrong read):
//! - its size equals the payload's element size;
//! - every field lies inside its struct (offset + size <= struct size), every array's
//!   size does not overflow (an array of zero-size elements has at most
//!   [`MAX_EMPTY_ELEMENTS`]), and nesting is at most [`MAX_DEPTH`] deep with at most
//!   [`MAX_NODES`] nodes;
//! - names are 1..=255 printable ASCII bytes.
//!
//! Not checked (nothing reads by them): alignment, and whether fields overlap or are in
//! offset order. A type whose own schema breaks an invariant (a non-ASCII field name, a
//! 300-byte type name) records none rather than failing to create its service.
//!
//! Compatibility ([`Schema::difference`]): two schemas agree when their fields have
//! the same names, offsets and kinds in the same order. Names of nested structs are
//! not compared (the layout is what a reader depends on), and [`Schema::Bytes`] agrees
//! with anything of its size (it claims no layout). A service created with a schema
//! and opened by a type with another one is refused, naming the first differing field
//! ([`OpenError::IncompatibleSchema`](crate::OpenError::IncompatibleSchema)); a config
//! without a schema (from an older version, or a binding that knows none) opens
//! without a layout check.
//!
//! ```
//! use iox_service::{Schema, ZeroCopySafe};
//!
//! #[derive(ZeroCopySafe, Clone, Copy)]
//! #[repr(C)]
//! struct Pose { x: f64, y: f64, id: [u16; 2] }
//!
//! let Schema::Struct { fields, size, .. } = Pose::schema() else { unreachable!() };
//! assert_eq!(size, 24);
//! assert_eq!(fields[2].name, "id");
//! assert_eq!(fields[2].offset, 16);
//! assert_eq!(fields[2].schema, Schema::Array { element: Box::new(Schema::U16), len: 2 });
//! ```

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Deepest nesting of arrays and structs a recorded schema may have.
pub const MAX_DEPTH: usize = 32;
/// Most nodes (primitives, arrays, structs, fields) a recorded schema may have.
pub const MAX_NODES: usize = 4096;
/// Longest struct or field name, in bytes.
pub const MAX_NAME: usize = 255;
/// Most elements of an array whose elements have no bytes (`[Empty; N]`).
pub const MAX_EMPTY_ELEMENTS: u64 = 1 << 16;

/// The layout of one payload value (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Schema {
    /// `bool`: one byte, 0 or 1.
    Bool,
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64` (and `usize` on 64-bit targets).
    U64,
    /// `u128`.
    U128,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64` (and `isize` on 64-bit targets).
    I64,
    /// `i128`.
    I128,
    /// IEEE 754 half precision (`half::f16`, numpy's `float16`).
    F16,
    /// bfloat16 (`half::bf16`, an `f32` with 8 bits of mantissa).
    BF16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `[element; len]`.
    Array {
        /// The element's schema.
        element: Box<Schema>,
        /// How many elements.
        len: u64,
    },
    /// A struct (or tuple: fields `0`, `1`, ...) with fields at byte offsets.
    Struct {
        /// The type's name ([`ZeroCopySafe::type_name`](crate::ZeroCopySafe::type_name)).
        name: String,
        /// `size_of` the struct, padding included.
        size: u64,
        /// `align_of` the struct.
        alignment: u64,
        /// The fields, in declaration order.
        fields: Vec<Field>,
    },
    /// A value whose layout is not recorded: shown as bytes.
    Bytes {
        /// Its size.
        size: u64,
    },
}

/// One field of a [`Schema::Struct`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// The field's name (`0`, `1`, ... for tuple fields).
    pub name: String,
    /// Its byte offset in the struct.
    pub offset: u64,
    /// Its layout.
    pub schema: Schema,
}

impl Field {
    /// The field's bytes within its struct (`offset .. offset + size`; in a checked
    /// schema, inside the struct).
    pub fn range(&self) -> std::ops::Range<usize> {
        let start = self.offset as usize;
        start..start + self.schema.size().unwrap_or(0) as usize
    }
}

/// The path of field `name` inside the value at `path` (`pose.x`; a top-level field
/// is its name alone): how schema errors and differences name fields.
pub fn child_path(path: &str, name: &str) -> String {
    if path == "(value)" {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// Why a recorded schema is not usable (part of
/// [`InvalidConfig`](crate::static_config::InvalidConfig)).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The schema's size is not the payload's.
    #[error("the schema describes {schema} bytes, the payload is {payload}")]
    Size {
        /// Bytes the schema describes.
        schema: u64,
        /// Bytes of the payload (its element, for a slice).
        payload: u64,
    },
    /// A field does not fit in its struct.
    #[error("field `{field}` (offset {offset}, {size} bytes) does not fit in its {struct_size}-byte struct")]
    FieldOutside {
        /// The field's path.
        field: String,
        /// Its offset.
        offset: u64,
        /// Its size.
        size: u64,
        /// The struct's size.
        struct_size: u64,
    },
    /// An array's size overflows.
    #[error("`{0}`: the array's size overflows")]
    Overflow(String),
    /// Nested too deep or too many nodes.
    #[error("the schema is larger than iox accepts ({MAX_DEPTH} levels, {MAX_NODES} nodes at most)")]
    TooLarge,
    /// A struct or field name is empty, too long or not printable ASCII.
    #[error("`{0}` is not a valid name (1 to {MAX_NAME} printable ASCII bytes)")]
    Name(String),
}

/// Where two schemas first differ ([`Schema::difference`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The path of the first differing field (`pose.x`, `points[]`), or `(value)` for
    /// the whole value.
    pub field: String,
    /// What the first schema has there.
    pub left: String,
    /// What the second has there.
    pub right: String,
}

/// A service whose payload type has the caller's name but another layout
/// ([`OpenError::IncompatibleSchema`](crate::OpenError::IncompatibleSchema)): its
/// message names the first difference from each side, both sizes, the processes that
/// hold the service with its layout, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaMismatch {
    /// The service.
    pub name: String,
    /// The payload's type name (its element's, for a slice).
    pub type_name: String,
    /// The first field that differs (`pose.x`, `points[]`, `(value)`).
    pub field: String,
    /// What the caller's type has there (`nothing` for a field it lacks).
    pub requested: String,
    /// What the service's schema has there (`nothing` for a field it lacks).
    pub found: String,
    /// The size of the caller's type, if its schema says.
    pub requested_size: Option<u64>,
    /// The size of the service's, if its schema says.
    pub found_size: Option<u64>,
    /// Live processes (pids as they see themselves) that have the service open with its
    /// layout; empty if none is known.
    pub holders: Vec<u32>,
}

impl std::error::Error for SchemaMismatch {}

impl std::fmt::Display for SchemaMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, t) = (&self.name, &self.type_name);
        write!(f, "service {name:?} carries another layout of {t}: ")?;
        let member = |s: &str| s.starts_with('`');
        match (self.found.as_str(), self.requested.as_str()) {
            ("nothing", r) => write!(
                f,
                "this program's {t} has field `{}` ({r}), which the service's has not",
                self.field
            )?,
            (found, "nothing") => write!(
                f,
                "the service's {t} has field `{}` ({found}), which this program's has not",
                self.field
            )?,
            (found, r) if member(found) && member(r) => {
                // Inside a nested struct, say which (`pose.z` is in `pose`).
                if let Some((within, _)) = self.field.rsplit_once('.') {
                    write!(f, "in `{within}`, ")?;
                }
                write!(f, "the service has field {found} where this program has {r}")?
            }
            (found, r) => write!(
                f,
                "field `{}` is {found} in the service but {r} in this program",
                self.field
            )?,
        }
        if let (Some(theirs), Some(mine)) = (self.found_size, self.requested_size) {
            write!(f, " (the service's {t} is {theirs} bytes, this program's {mine})")?;
        }
        write!(f, ". Every program of a service uses one definition of {t}; ")?;
        match self.holders.as_slice() {
            [] => write!(f, "`iox show {name}` lists the processes using the service")?,
            pids => {
                let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
                write!(
                    f,
                    "process{} {} hold{} it with the service's layout (`iox show {name}`)",
                    if pids.len() == 1 { "" } else { "es" },
                    pids.join(", "),
                    if pids.len() == 1 { "s" } else { "" }
                )?
            }
        }
        write!(
            f,
            ". Build this program with that definition, or stop those processes and remove the service (`iox remove {name}`) so the next program creates it with the new one"
        )
    }
}

impl Schema {
    /// The value's size in bytes (`None` if an array's size overflows).
    pub fn size(&self) -> Option<u64> {
        Some(match self {
            Self::Bool | Self::U8 | Self::I8 => 1,
            Self::U16 | Self::I16 | Self::F16 | Self::BF16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::U64 | Self::I64 | Self::F64 => 8,
            Self::U128 | Self::I128 => 16,
            Self::Array { element, len } => element.size()?.checked_mul(*len)?,
            Self::Struct { size, .. } | Self::Bytes { size } => *size,
        })
    }

    /// Whether the schema records a layout ([`Schema::Bytes`] does not).
    pub fn is_known(&self) -> bool {
        !matches!(self, Self::Bytes { .. })
    }

    /// Whether every byte of the value is described: no [`Schema::Bytes`] node
    /// anywhere. A payload type with padding or invalid bit patterns (a `bool`) can be
    /// read or written by its schema alone only when it is complete: bytes of unknown
    /// layout inside it may be padding, or a `bool` that must be 0 or 1.
    pub fn is_complete(&self) -> bool {
        match self {
            Self::Bytes { .. } => false,
            Self::Array { element, .. } => element.is_complete(),
            Self::Struct { fields, .. } => fields.iter().all(|f| f.schema.is_complete()),
            _ => true,
        }
    }

    /// Checks the invariants (module docs) for a payload of `payload_size` bytes.
    pub fn check(&self, payload_size: u64) -> Result<(), SchemaError> {
        let mut nodes = 0;
        let size = self.check_node("(value)", 0, &mut nodes)?;
        if size != payload_size {
            return Err(SchemaError::Size {
                schema: size,
                payload: payload_size,
            });
        }
        Ok(())
    }

    /// Checks this node and below; returns its size.
    fn check_node(&self, path: &str, depth: usize, nodes: &mut usize) -> Result<u64, SchemaError> {
        *nodes += 1;
        if depth > MAX_DEPTH || *nodes > MAX_NODES {
            return Err(SchemaError::TooLarge);
        }
        match self {
            Self::Array { element, len } => {
                let element_size = element.check_node(&format!("{path}[]"), depth + 1, nodes)?;
                // Zero-size elements never overflow the size: bound the count itself,
                // or walking the array (decoding, data ranges) would never end.
                if element_size == 0 && *len > MAX_EMPTY_ELEMENTS {
                    return Err(SchemaError::TooLarge);
                }
                element_size
                    .checked_mul(*len)
                    .ok_or_else(|| SchemaError::Overflow(path.to_owned()))
            }
            Self::Struct {
                name, size, fields, ..
            } => {
                check_name(name)?;
                for f in fields {
                    check_name(&f.name)?;
                    let field_path = child_path(path, &f.name);
                    *nodes += 1;
                    let field_size = f.schema.check_node(&field_path, depth + 1, nodes)?;
                    if f.offset.checked_add(field_size).is_none_or(|end| end > *size) {
                        return Err(SchemaError::FieldOutside {
                            field: field_path,
                            offset: f.offset,
                            size: field_size,
                            struct_size: *size,
                        });
                    }
                }
                Ok(*size)
            }
            other => Ok(other.size().expect("a primitive or bytes has a size")),
        }
    }

    /// Where `self` and `other` first differ, if they do (module docs: nested struct
    /// names are not compared, bytes agree with anything of their size).
    pub fn difference(&self, other: &Schema) -> Option<Difference> {
        self.difference_at("(value)", other)
    }

    fn difference_at(&self, path: &str, other: &Schema) -> Option<Difference> {
        let differ = |field: &str| {
            Some(Difference {
                field: field.to_owned(),
                left: self.to_string(),
                right: other.to_string(),
            })
        };
        match (self, other) {
            (Self::Bytes { size }, o) | (o, Self::Bytes { size }) => {
                (o.size() != Some(*size)).then(|| differ(path)).flatten()
            }
            (Self::Array { element: a, len: n }, Self::Array { element: b, len: m }) => {
                if n != m {
                    return differ(path);
                }
                a.difference_at(&format!("{path}[]"), b)
            }
            (
                Self::Struct {
                    fields: a, size: sa, ..
                },
                Self::Struct {
                    fields: b, size: sb, ..
                },
            ) => {
                let child = |name: &str| child_path(path, name);
                for (fa, fb) in a.iter().zip(b) {
                    if fa.name != fb.name || fa.offset != fb.offset {
                        return Some(Difference {
                            field: child(&fa.name),
                            left: format!("`{}` ({}) at offset {}", fa.name, fa.schema, fa.offset),
                            right: format!("`{}` ({}) at offset {}", fb.name, fb.schema, fb.offset),
                        });
                    }
                    if let Some(d) = fa.schema.difference_at(&child(&fa.name), &fb.schema) {
                        return Some(d);
                    }
                }
                if a.len() != b.len() {
                    let (field, left, right) = match (a.get(b.len()), b.get(a.len())) {
                        (Some(extra), _) => (child(&extra.name), extra.schema.to_string(), "nothing".into()),
                        (_, Some(extra)) => (child(&extra.name), "nothing".into(), extra.schema.to_string()),
                        _ => unreachable!("the lengths differ"),
                    };
                    return Some(Difference { field, left, right });
                }
                (sa != sb).then(|| differ(path)).flatten()
            }
            (a, b) if a == b => None,
            _ => differ(path),
        }
    }

    /// The byte ranges `(offset, len)` of the value that hold field data (every
    /// primitive leaf; adjacent ranges merged), in order. Bytes outside them are
    /// padding. [`Schema::Bytes`] is one range of its size. Call on a checked schema.
    pub fn data_ranges(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        self.collect_ranges(0, &mut out);
        out
    }

    fn collect_ranges(&self, base: usize, out: &mut Vec<(usize, usize)>) {
        match self {
            Self::Array { element, len } => {
                let step = element.size().unwrap_or(0) as usize;
                if step == 0 {
                    return; // no bytes, whatever the count
                }
                if element.data_ranges() == [(0, step)] {
                    push_range(out, base, step * *len as usize);
                } else {
                    for i in 0..*len as usize {
                        element.collect_ranges(base + i * step, out);
                    }
                }
            }
            Self::Struct { fields, .. } => {
                for f in fields {
                    f.schema.collect_ranges(base + f.offset as usize, out);
                }
            }
            leaf => push_range(out, base, leaf.size().unwrap_or(0) as usize),
        }
    }
}

fn push_range(out: &mut Vec<(usize, usize)>, offset: usize, len: usize) {
    if len == 0 {
        return;
    }
    match out.last_mut() {
        Some((o, l)) if *o + *l == offset => *l += len,
        _ => out.push((offset, len)),
    }
}

/// Whether `name` is a valid struct or field name in a schema: 1 to [`MAX_NAME`]
/// printable ASCII bytes.
pub fn valid_name(name: &str) -> bool {
    let printable = name.bytes().all(|b| (0x20..0x7f).contains(&b));
    !name.is_empty() && name.len() <= MAX_NAME && printable
}

fn check_name(name: &str) -> Result<(), SchemaError> {
    if !valid_name(name) {
        return Err(SchemaError::Name(name.chars().take(40).collect()));
    }
    Ok(())
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bool => f.write_str("bool"),
            Self::U8 => f.write_str("u8"),
            Self::U16 => f.write_str("u16"),
            Self::U32 => f.write_str("u32"),
            Self::U64 => f.write_str("u64"),
            Self::U128 => f.write_str("u128"),
            Self::I8 => f.write_str("i8"),
            Self::I16 => f.write_str("i16"),
            Self::I32 => f.write_str("i32"),
            Self::I64 => f.write_str("i64"),
            Self::I128 => f.write_str("i128"),
            Self::F16 => f.write_str("f16"),
            Self::BF16 => f.write_str("bf16"),
            Self::F32 => f.write_str("f32"),
            Self::F64 => f.write_str("f64"),
            Self::Array { element, len } => write!(f, "[{element}; {len}]"),
            Self::Struct { name, fields, .. } => write!(f, "struct {name} ({} fields)", fields.len()),
            Self::Bytes { size } => write!(f, "{size} bytes of unknown layout"),
        }
    }
}
