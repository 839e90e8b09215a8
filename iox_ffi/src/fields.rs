//! The C description of a payload or user-header type ([`IoxType`]: the identity a Rust
//! program records) and the field layout a C or C++ program may declare for it
//! ([`IoxField`], `IoxType::fields`): turned into the schema a Rust program's derive
//! records, so every language reads what C or C++ wrote by field name without declaring
//! it again, tools print its fields, and an opener whose fields differ is refused
//! naming the first field that differs.
//!
//! Invariants: a declared layout is checked before anything is recorded: names are
//! valid schema names, every field fits in its struct ([`Schema::check`]), the fields
//! are in offset order without overlapping (as a C compiler lays them out), nesting is
//! bounded, and a type that claims every bit pattern is
//! a value (`any_bit_pattern`) has no `bool` and no byte outside its fields (padding).
//! A type declaring no fields records none (as before: a number's own schema, or none).

use std::ffi::c_char;

use iox_service::Schema;
use iox_service::schema::{Field, MAX_DEPTH, MAX_NODES};

use crate::args::text;
use crate::status::{IoxStatus, refuse};

/// A payload type (or a user header's type) as a Rust program records it: what makes a
/// C or C++ type and a Rust type one service's type.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxType {
    /// The type's name, as a Rust program records it (its `#[iox(type_name = "...")]`,
    /// or `"u64"`, `"f32"`, ... for numbers).
    pub name: *const c_char,
    /// `sizeof` the type (of one element for a slice).
    pub size: u64,
    /// `alignof` the type.
    pub alignment: u64,
    /// Whether every bit pattern of the type's bytes is a value (no padding, no `bool`
    /// or enum fields). Part of the identity: must match the Rust side's.
    pub any_bit_pattern: bool,
    /// Slices of `size`-byte elements instead of one value.
    pub slice: bool,
    /// For a slice: the most elements one payload holds (required when creating).
    pub max_slice_len: u64,
    /// The type's fields (of one element, for a slice), `field_count` of them; NULL
    /// with 0: none declared. A publish-subscribe service records them as its
    /// payload's or user header's layout when created and compares them field by field
    /// when opened (see [`IoxField`]); a request-response service checks them and
    /// records none (its types are compared by name, size and alignment).
    pub fields: *const IoxField,
    /// How many `fields` there are.
    pub field_count: usize,
}

/// One field of a struct type (`IoxType::fields`): its name, its byte offset
/// (`offsetof`), and its type: a number or `bool` by the name Rust gives it (`"u8"`,
/// `"i32"`, `"f64"`, `"bool"`, ...), or a nested struct (`nested`, with its own fields).
/// `count` 0 is one value; `count` N of 1 or more makes it an array of N (`float v[3]`:
/// `"f32"`, count 3; `float v[1]`: count 1, an array of one, as Rust's `[f32; 1]`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxField {
    /// The field's name (printable ASCII, at most 255 bytes).
    pub name: *const c_char,
    /// Its byte offset in the struct (`offsetof`).
    pub offset: u64,
    /// A number's or `bool`'s name as Rust gives it; ignored when `nested` is set.
    pub type_name: *const c_char,
    /// A struct field's type (its `fields` set); NULL for a number or `bool`.
    pub nested: *const IoxType,
    /// 0: one value; N (1 or more): an array of N.
    pub count: u64,
}

/// The numbers and `bool` a field may be, by the names Rust gives them.
const LEAVES: [Schema; 15] = [
    Schema::Bool,
    Schema::U8,
    Schema::U16,
    Schema::U32,
    Schema::U64,
    Schema::U128,
    Schema::I8,
    Schema::I16,
    Schema::I32,
    Schema::I64,
    Schema::I128,
    Schema::F16,
    Schema::BF16,
    Schema::F32,
    Schema::F64,
];

/// The schema `t`'s declared fields describe (`what` names `t` in messages), or `None`
/// when it declares none; refused when the layout is malformed or contradicts
/// `t.any_bit_pattern`.
///
/// # Safety
/// `t.fields` is NULL or points to `t.field_count` readable `IoxField`s, whose strings
/// are NULL or NUL-terminated and whose `nested` types are NULL or readable `IoxType`s
/// with the same properties, recursively.
pub(crate) unsafe fn declared_schema(t: &IoxType, what: &str) -> Result<Option<Schema>, IoxStatus> {
    if t.fields.is_null() && t.field_count == 0 {
        return Ok(None);
    }
    let mut nodes = 0;
    // SAFETY: the caller's contract.
    let schema = unsafe { struct_schema(t, what, what, 0, &mut nodes) }?;
    if let Err(e) = schema.check(t.size) {
        return refuse(IoxStatus::InvalidArgument, format!("{what}.fields: {e}"));
    }
    if t.any_bit_pattern {
        if let Some(path) = bool_field(&schema, "") {
            return refuse(
                IoxStatus::InvalidArgument,
                format!(
                    "{what} claims every bit pattern is a value (any_bit_pattern), but field `{path}` is a bool: \
                     use a u8 for a flag, or set any_bit_pattern false"
                ),
            );
        }
        if let Some(gap) = first_gap(&schema) {
            return refuse(
                IoxStatus::InvalidArgument,
                format!(
                    "{what} claims every bit pattern is a value (any_bit_pattern), but byte {gap} is in no \
                     field (padding, whose bytes are uninitialised): declare it as a field (`_pad`), or set \
                     any_bit_pattern false"
                ),
            );
        }
    }
    Ok(Some(schema))
}

/// The struct `t` describes (`what` in messages), depth `depth` below the type `top`.
///
/// # Safety
/// As for [`declared_schema`].
unsafe fn struct_schema(
    t: &IoxType,
    top: &str,
    what: &str,
    depth: usize,
    nodes: &mut usize,
) -> Result<Schema, IoxStatus> {
    if depth > MAX_DEPTH {
        return refuse(
            IoxStatus::InvalidArgument,
            format!("{top}.fields: structs nested more than {MAX_DEPTH} deep (one that contains itself?)"),
        );
    }
    // Every struct and field counts, before any is built (as the schema's own check
    // counts them), so a large table is refused at once.
    *nodes = nodes.saturating_add(1).saturating_add(t.field_count);
    if *nodes > MAX_NODES {
        return refuse(
            IoxStatus::InvalidArgument,
            format!("{top}.fields: more than {MAX_NODES} fields and structs in all"),
        );
    }
    if t.fields.is_null() {
        return refuse(
            IoxStatus::NullPointer,
            if depth == 0 {
                format!("{what}.fields is NULL with field_count {}", t.field_count)
            } else {
                format!("{what}: a struct field's type declares its fields (fields is NULL)")
            },
        );
    }
    // SAFETY: the caller's contract: `field_count` readable fields.
    let fields = unsafe { std::slice::from_raw_parts(t.fields, t.field_count) };
    // SAFETY: the caller's contract.
    let name = unsafe { text(t.name, &format!("{what}.name")) }?.to_string();
    let mut out: Vec<Field> = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        let at = format!("{what}.fields[{i}]");
        // SAFETY: the caller's contract.
        let field_name = unsafe { text(f.name, &format!("{at}.name")) }?.to_string();
        if out.iter().any(|o| o.name == field_name) {
            return refuse(
                IoxStatus::InvalidArgument,
                format!("{at}: a second field named `{field_name}` (names are unique within a struct)"),
            );
        }
        let one = if f.nested.is_null() {
            // SAFETY: the caller's contract.
            let leaf = unsafe { text(f.type_name, &format!("{at}.type_name")) }?;
            match LEAVES.iter().find(|s| s.to_string() == leaf) {
                Some(s) => s.clone(),
                None => {
                    return refuse(
                        IoxStatus::InvalidArgument,
                        format!(
                            "{at} (`{field_name}`) has type {leaf:?}: a field is a number or bool by Rust's name \
                             (u8 .. u128, i8 .. i128, f16, bf16, f32, f64, bool) or a nested struct"
                        ),
                    );
                }
            }
        } else {
            // SAFETY: the caller's contract: a readable nested type.
            let nested = unsafe { &*f.nested };
            // SAFETY: the caller's contract, recursively.
            unsafe { struct_schema(nested, top, &format!("{at} (`{field_name}`)"), depth + 1, nodes) }?
        };
        let schema = if f.count >= 1 {
            Schema::Array {
                element: Box::new(one),
                len: f.count,
            }
        } else {
            one
        };
        // In declaration order, as a C compiler lays a struct out: each field starts at
        // or after the end of the one before (a C table could say anything).
        if let Some(before) = out.last() {
            let end = before.offset.saturating_add(before.schema.size().unwrap_or(0));
            if f.offset < end {
                return refuse(
                    IoxStatus::InvalidArgument,
                    format!(
                        "{at} (`{field_name}`) at offset {} overlaps `{}` before it (which ends at {end}): \
                         list the fields in order, with their offsetof",
                        f.offset, before.name
                    ),
                );
            }
        }
        out.push(Field {
            name: field_name,
            offset: f.offset,
            schema,
        });
    }
    Ok(Schema::Struct {
        name,
        size: t.size,
        alignment: t.alignment,
        fields: out,
    })
}

/// The path of the first `bool` in `s`, if any.
fn bool_field(s: &Schema, path: &str) -> Option<String> {
    match s {
        Schema::Bool => Some(path.to_string()),
        Schema::Array { element, .. } => bool_field(element, &format!("{path}[]")),
        Schema::Struct { fields, .. } => fields.iter().find_map(|f| {
            let p = if path.is_empty() {
                f.name.clone()
            } else {
                format!("{path}.{}", f.name)
            };
            bool_field(&f.schema, &p)
        }),
        _ => None,
    }
}

/// The first byte of a checked schema's value that lies in no field (padding), if
/// any: found walking the fields in order, an array's elements only as far as its first
/// element (all elements are laid out alike), so a large array costs nothing extra.
fn first_gap(s: &Schema) -> Option<u64> {
    match s {
        Schema::Array { element, len } => {
            if *len == 0 {
                None
            } else {
                first_gap(element)
            }
        }
        Schema::Struct { size, fields, .. } => {
            let mut covered = 0u64;
            for f in fields {
                if f.offset > covered {
                    return Some(covered);
                }
                if let Some(g) = first_gap(&f.schema) {
                    return Some(f.offset + g);
                }
                covered = covered.max(f.offset + f.schema.size().unwrap_or(0));
            }
            (covered < *size).then_some(covered)
        }
        _ => None,
    }
}
