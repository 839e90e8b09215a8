//! Payload values as text, by their recorded [`Schema`]: decoding a sample's bytes into
//! a [`Value`] printed as RON or JSON (`iox echo`), and parsing RON or JSON text into
//! bytes (`iox pub`).
//!
//! Decisions:
//! - Output: RON structs as `(x: 1.0, y: 2)`, tuples (fields `0`, `1`, ...) as
//!   `(1.0, 2)`, structs whose field names are not identifiers as maps
//!   (`{"a b": 1}`); JSON objects keep the field order. Floats print as Rust prints
//!   them (shortest round-trip); non-finite floats are `NaN`/`inf` in RON and strings
//!   in JSON (which has no such numbers). A `bool` byte other than 0 or 1 (only a
//!   writer outside Rust's safe code can store one) prints as its number.
//! - Input: RON, of which JSON objects and arrays are a subset (`{"x": 1}` and
//!   `(x: 1)` both work). Every field of a struct must be given, except fields whose
//!   name starts with `_` (explicit padding), which default to zero; a field the schema
//!   does not have, a value of the wrong kind, and a number out of its type's range are
//!   errors naming the field.
//! - Bytes of unknown layout print as a hex string and are given as one (callers
//!   allow that only where every byte string is a value: `topic::by_schema_or_bytes`).
//! - `--max-elements` caps every array, fixed or slice, at any depth.

use std::fmt::Write as _;

use iox_service::Schema;
use iox_service::schema::child_path;

/// A decoded payload value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A `bool`.
    Bool(bool),
    /// A signed integer.
    Int(i128),
    /// An unsigned integer.
    UInt(u128),
    /// A float.
    Float(f64),
    /// An array, or a slice's elements.
    Array(Vec<Value>),
    /// `n` more elements that were not decoded (`--max-elements`).
    More(usize),
    /// A struct's fields, in order.
    Struct(Vec<(String, Value)>),
    /// Bytes of unknown layout.
    Bytes(Vec<u8>),
    /// A note in place of a value (printed as a string).
    Text(String),
}

/// Decodes one value of `schema` from `bytes` (exactly its size; the schema is
/// checked), printing at most `max` elements of each array (the rest counted in a
/// trailing [`Value::More`]).
pub fn decode(schema: &Schema, bytes: &[u8], max: usize) -> Value {
    fn ne<const N: usize>(b: &[u8]) -> [u8; N] {
        b[..N].try_into().expect("length checked by the schema")
    }
    match schema {
        Schema::Bool => match bytes[0] {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            n => Value::UInt(n.into()),
        },
        Schema::U8 => Value::UInt(bytes[0].into()),
        Schema::U16 => Value::UInt(u16::from_ne_bytes(ne(bytes)).into()),
        Schema::U32 => Value::UInt(u32::from_ne_bytes(ne(bytes)).into()),
        Schema::U64 => Value::UInt(u64::from_ne_bytes(ne(bytes)).into()),
        Schema::U128 => Value::UInt(u128::from_ne_bytes(ne(bytes))),
        Schema::I8 => Value::Int((bytes[0] as i8).into()),
        Schema::I16 => Value::Int(i16::from_ne_bytes(ne(bytes)).into()),
        Schema::I32 => Value::Int(i32::from_ne_bytes(ne(bytes)).into()),
        Schema::I64 => Value::Int(i64::from_ne_bytes(ne(bytes)).into()),
        Schema::I128 => Value::Int(i128::from_ne_bytes(ne(bytes))),
        Schema::F32 => Value::Float(f32::from_ne_bytes(ne(bytes)).into()),
        Schema::F64 => Value::Float(f64::from_ne_bytes(ne(bytes))),
        Schema::Array { element, len } => {
            let step = element.size().unwrap_or(0) as usize;
            let len = *len as usize;
            let mut out: Vec<Value> = (0..len.min(max))
                .map(|i| decode(element, &bytes[i * step..(i + 1) * step], max))
                .collect();
            if len > max {
                out.push(Value::More(len - max));
            }
            Value::Array(out)
        }
        Schema::Struct { fields, .. } => Value::Struct(
            fields
                .iter()
                .map(|f| (f.name.clone(), decode(&f.schema, &bytes[f.range()], max)))
                .collect(),
        ),
        // Bytes, and kinds a newer iox may add.
        _ => Value::Bytes(bytes.to_vec()),
    }
}

/// Decodes a slice of `elements` values of `schema`, at most `max` of them (the rest
/// counted in a trailing [`Value::More`]).
pub fn decode_slice(schema: &Schema, bytes: &[u8], max: usize) -> Value {
    let step = schema.size().unwrap_or(0) as usize;
    let count = bytes.len().checked_div(step).unwrap_or(0);
    let mut out: Vec<Value> = (0..count.min(max))
        .map(|i| decode(schema, &bytes[i * step..(i + 1) * step], max))
        .collect();
    if count > max {
        out.push(Value::More(count - max));
    }
    Value::Array(out)
}

/// Whether every `bool` in `bytes` (whole values of `schema`, one after another) is 0
/// or 1: what bytes from outside (a recording) must satisfy before they are sent as a
/// value of a type that has `bool`s.
pub fn bools_valid(schema: &Schema, bytes: &[u8]) -> bool {
    let Some(step) = schema.size().map(|s| s as usize).filter(|&s| s > 0) else {
        return bytes.is_empty();
    };
    bytes.len().is_multiple_of(step) && bytes.chunks(step).all(|value| one_valid(schema, value))
}

fn one_valid(schema: &Schema, bytes: &[u8]) -> bool {
    match schema {
        Schema::Bool => bytes[0] <= 1,
        Schema::Array { element, .. } => bools_valid(element, bytes),
        Schema::Struct { fields, .. } => fields.iter().all(|f| one_valid(&f.schema, &bytes[f.range()])),
        // Bytes of unknown layout cannot be shown to be valid.
        Schema::Bytes { .. } => false,
        // Numbers: every bit pattern is a value.
        _ => true,
    }
}

fn is_ident(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn float(f: f64, json: bool) -> String {
    if f.is_finite() {
        format!("{f:?}")
    } else if json {
        format!("\"{f}\"")
    } else if f.is_nan() {
        "NaN".into()
    } else {
        format!("{f}")
    }
}

/// The value as RON (`json` false) or JSON (true), on one line.
pub fn to_text(value: &Value, json: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, json);
    out
}

fn write_value(out: &mut String, value: &Value, json: bool) {
    match value {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(n) => out.push_str(&n.to_string()),
        Value::UInt(n) => out.push_str(&n.to_string()),
        Value::Float(f) => out.push_str(&float(*f, json)),
        Value::More(n) => out.push_str(&format!("\"... {n} more\"")),
        Value::Bytes(b) => out.push_str(&format!("\"{}\"", hex(b))),
        Value::Text(t) => out.push_str(&serde_json::to_string(t).expect("a string serialises")),
        // JSON keeps arrays numeric: one cut at `--max-elements` becomes an object of
        // its elements and how many more there are.
        Value::Array(items) if json && matches!(items.last(), Some(Value::More(_))) => {
            let Some((Value::More(n), shown)) = items.split_last() else {
                unreachable!("matched above")
            };
            out.push_str("{\"elements\": ");
            write_value(out, &Value::Array(shown.to_vec()), json);
            out.push_str(&format!(", \"more\": {n}}}"));
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, v, json);
            }
            out.push(']');
        }
        Value::Struct(fields) => {
            let tuple = fields.iter().all(|(n, _)| n.bytes().all(|b| b.is_ascii_digit()));
            let named = fields.iter().all(|(n, _)| is_ident(n));
            let (open, close) = match (json, tuple, named) {
                (true, ..) | (false, false, false) => ('{', '}'),
                _ => ('(', ')'),
            };
            out.push(open);
            for (i, (name, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if json || (!tuple && !named) {
                    out.push_str(&serde_json::to_string(name).expect("a string serialises"));
                    out.push_str(": ");
                } else if !tuple {
                    out.push_str(name);
                    out.push_str(": ");
                }
                write_value(out, v, json);
            }
            out.push(close);
        }
    }
}

/// Why text could not become a payload (`iox pub`): the field and what is wrong.
#[derive(Debug, PartialEq)]
pub struct EncodeError(pub String);

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses RON or JSON `text` as a value of `schema` and writes it into `out` (the
/// value's size, zeroed by the caller).
pub fn encode_text(schema: &Schema, text: &str, out: &mut [u8]) -> Result<(), EncodeError> {
    let value: ron::Value = ron::from_str(text).map_err(|e| EncodeError(format!("not RON or JSON: {e}")))?;
    encode(schema, &value, "(value)", out)
}

/// Parses `text` as a sequence of values of `schema` (a slice payload); returns the
/// bytes of all of them.
pub fn encode_slice_text(schema: &Schema, text: &str) -> Result<Vec<u8>, EncodeError> {
    let value: ron::Value = ron::from_str(text).map_err(|e| EncodeError(format!("not RON or JSON: {e}")))?;
    let ron::Value::Seq(items) = value else {
        return Err(EncodeError(format!(
            "this service carries a slice of {schema}: give an array `[...]`"
        )));
    };
    let step = schema.size().unwrap_or(0) as usize;
    let mut out = vec![0u8; step * items.len()];
    for (i, item) in items.iter().enumerate() {
        encode(
            schema,
            item,
            &format!("[{i}]"),
            &mut out[i * step..(i + 1) * step],
        )?;
    }
    Ok(out)
}

fn kind(v: &ron::Value) -> &'static str {
    match v {
        ron::Value::Bool(_) => "a bool",
        ron::Value::Char(_) => "a char",
        ron::Value::Map(_) => "a struct",
        ron::Value::Number(_) => "a number",
        ron::Value::Option(_) => "an option",
        ron::Value::String(_) => "a string",
        ron::Value::Bytes(_) => "bytes",
        ron::Value::Seq(_) => "an array",
        ron::Value::Unit => "()",
    }
}

/// A RON number as an integer, if it is one.
fn integer(n: &ron::Number) -> Option<i128> {
    use ron::Number as N;
    Some(match *n {
        N::I8(v) => v.into(),
        N::I16(v) => v.into(),
        N::I32(v) => v.into(),
        N::I64(v) => v.into(),
        N::U8(v) => v.into(),
        N::U16(v) => v.into(),
        N::U32(v) => v.into(),
        N::U64(v) => v.into(),
        _ => return None,
    })
}

fn encode(schema: &Schema, value: &ron::Value, path: &str, out: &mut [u8]) -> Result<(), EncodeError> {
    let wrong = |want: &str| EncodeError(format!("`{path}` is {want}, got {}", kind(value)));
    macro_rules! int {
        ($t:ty) => {{
            let ron::Value::Number(n) = value else {
                return Err(wrong(concat!("an integer (", stringify!($t), ")")));
            };
            let i = integer(n).ok_or_else(|| {
                EncodeError(format!(
                    "`{path}` is an integer ({}), got {}",
                    stringify!($t),
                    n.into_f64()
                ))
            })?;
            let v = <$t>::try_from(i).map_err(|_| {
                EncodeError(format!(
                    "`{path}`: {i} is out of range for {} ({}..={})",
                    stringify!($t),
                    <$t>::MIN,
                    <$t>::MAX
                ))
            })?;
            out.copy_from_slice(&v.to_ne_bytes());
        }};
    }
    match schema {
        Schema::Bool => match value {
            ron::Value::Bool(b) => out[0] = u8::from(*b),
            _ => return Err(wrong("a bool")),
        },
        Schema::U8 => int!(u8),
        Schema::U16 => int!(u16),
        Schema::U32 => int!(u32),
        Schema::U64 => int!(u64),
        Schema::U128 => int!(u128),
        Schema::I8 => int!(i8),
        Schema::I16 => int!(i16),
        Schema::I32 => int!(i32),
        Schema::I64 => int!(i64),
        Schema::I128 => int!(i128),
        Schema::F32 | Schema::F64 => {
            let ron::Value::Number(n) = value else {
                return Err(wrong("a number"));
            };
            let f = n.into_f64();
            if matches!(schema, Schema::F32) {
                out.copy_from_slice(&(f as f32).to_ne_bytes());
            } else {
                out.copy_from_slice(&f.to_ne_bytes());
            }
        }
        Schema::Array { element, len } => {
            let ron::Value::Seq(items) = value else {
                return Err(wrong(&format!("an array of {len}")));
            };
            if items.len() as u64 != *len {
                return Err(EncodeError(format!(
                    "`{path}` is an array of {len}, got {} elements",
                    items.len()
                )));
            }
            let step = element.size().unwrap_or(0) as usize;
            for (i, item) in items.iter().enumerate() {
                encode(
                    element,
                    item,
                    &format!("{path}[{i}]"),
                    &mut out[i * step..(i + 1) * step],
                )?;
            }
        }
        // A tuple (or a struct given positionally, `(1, 2.0)`): fields in order.
        Schema::Struct { fields, .. } if matches!(value, ron::Value::Seq(items) if items.len() == fields.len()) =>
        {
            let ron::Value::Seq(items) = value else {
                unreachable!()
            };
            for (f, item) in fields.iter().zip(items) {
                encode(&f.schema, item, &child_path(path, &f.name), &mut out[f.range()])?;
            }
        }
        Schema::Struct { fields, .. } => {
            let ron::Value::Map(map) = value else {
                return Err(wrong(&format!("a struct of {} fields", fields.len())));
            };
            let child = |name: &str| child_path(path, name);
            for (key, _) in map.iter() {
                let ron::Value::String(key) = key else {
                    return Err(EncodeError(format!("`{path}`: field names are strings")));
                };
                if !fields.iter().any(|f| &f.name == key) {
                    let known: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
                    return Err(EncodeError(format!(
                        "`{}` is not a field of {schema} (its fields: {})",
                        child(key),
                        known.join(", ")
                    )));
                }
            }
            for f in fields {
                match map.get(&ron::Value::String(f.name.clone())) {
                    Some(v) => encode(&f.schema, v, &child(&f.name), &mut out[f.range()])?,
                    None if f.name.starts_with('_') => {}
                    None => return Err(EncodeError(format!("field `{}` is missing", child(&f.name)))),
                }
            }
        }
        // Bytes, and kinds a newer iox may add.
        _ => {
            let ron::Value::String(text) = value else {
                return Err(wrong(&format!("{} bytes as a hex string", out.len())));
            };
            let bytes = (0..text.len())
                .step_by(2)
                .map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect::<Option<Vec<u8>>>()
                .filter(|b| b.len() == out.len())
                .ok_or_else(|| EncodeError(format!("`{path}` is {} bytes as a hex string", out.len())))?;
            out.copy_from_slice(&bytes);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iox_service::ZeroCopySafe;

    #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Pose {
        x: f64,
        id: u16,
        ok: bool,
        grid: [[u8; 2]; 2],
        pair: (i8, f32),
    }

    fn bytes_of<T: ZeroCopySafe>(v: &T) -> Vec<u8> {
        let mut out = vec![0u8; size_of::<T>()];
        for (start, len) in T::schema().data_ranges() {
            // SAFETY: the ranges are the value's field bytes, all initialised.
            let src = unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>().add(start), len) };
            out[start..start + len].copy_from_slice(src);
        }
        out
    }

    #[test]
    fn round_trip_ron_and_json() {
        let pose = Pose {
            x: 1.5,
            id: 7,
            ok: true,
            grid: [[1, 2], [3, 4]],
            pair: (-3, 0.25),
        };
        let s = Pose::schema();
        let v = decode(&s, &bytes_of(&pose), 16);
        let ron = to_text(&v, false);
        assert_eq!(
            ron,
            "(x: 1.5, id: 7, ok: true, grid: [[1, 2], [3, 4]], pair: (-3, 0.25))"
        );
        let json = to_text(&v, true);
        assert_eq!(
            json,
            r#"{"x": 1.5, "id": 7, "ok": true, "grid": [[1, 2], [3, 4]], "pair": {"0": -3, "1": 0.25}}"#
        );
        for text in [ron.as_str(), json.as_str()] {
            let mut out = vec![0u8; size_of::<Pose>()];
            encode_text(&s, text, &mut out).unwrap();
            assert_eq!(decode(&s, &out, 16), v, "{text}");
        }
    }

    #[test]
    fn bad_input_names_the_field() {
        let s = Pose::schema();
        let mut out = vec![0u8; size_of::<Pose>()];
        let mut err = |text: &str| encode_text(&s, text, &mut out).unwrap_err().0;
        let full = "x: 1.0, id: 1, ok: false, grid: [[0, 0], [0, 0]], pair: (0, 0.0)";
        assert!(err(&format!("({full}, z: 3)")).contains("`z` is not a field"));
        assert!(
            err(&format!("({})", full.replace("id: 1", "id: 70000")))
                .contains("`id`: 70000 is out of range for u16")
        );
        assert!(err(&format!("({})", full.replace("id: 1", "id: -1"))).contains("out of range"));
        assert!(err(&format!("({})", full.replace("ok: false", "ok: 1"))).contains("`ok` is a bool"));
        assert!(err(&format!("({})", full.replace("x: 1.0", "x: \"a\""))).contains("`x` is a number"));
        assert!(
            err(&format!("({})", full.replace("[[0, 0], [0, 0]]", "[[0, 0]]")))
                .contains("`grid` is an array of 2")
        );
        assert!(err(&format!("({})", full.replace("id: 1, ", ""))).contains("field `id` is missing"));
        assert!(err("(x: ").starts_with("not RON or JSON"));
    }

    #[test]
    fn slices_are_capped() {
        let bytes: Vec<u8> = (0..10u32).flat_map(|i| i.to_ne_bytes()).collect();
        let v = decode_slice(&Schema::U32, &bytes, 3);
        assert_eq!(to_text(&v, false), r#"[0, 1, 2, "... 7 more"]"#);
        // JSON keeps the array numeric and puts the count beside it.
        assert_eq!(to_text(&v, true), r#"{"elements": [0, 1, 2], "more": 7}"#);
        let whole = decode_slice(&Schema::U32, &bytes, usize::MAX);
        assert_eq!(to_text(&whole, true), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
        assert_eq!(encode_slice_text(&Schema::U32, "[0, 1, 2]").unwrap(), bytes[..12]);
        assert!(to_text(&Value::Float(f64::NAN), true).contains("NaN"));
    }

    #[test]
    fn bools_are_checked() {
        let s = <[(u8, bool); 2]>::schema();
        assert!(bools_valid(&s, &[7, 1, 9, 0]));
        assert!(!bools_valid(&s, &[7, 1, 9, 2]));
        assert!(!bools_valid(&s, &[7, 1, 9]));
        assert!(bools_valid(&Schema::U32, &[1, 2, 3, 4, 5, 6, 7, 8]));
        // Bytes of unknown layout cannot be shown valid.
        assert!(!bools_valid(&Schema::Bytes { size: 1 }, &[0]));
        // Fixed arrays are capped like slices.
        let v = decode(&<[u8; 5]>::schema(), &[1, 2, 3, 4, 5], 2);
        assert_eq!(to_text(&v, false), r#"[1, 2, "... 3 more"]"#);
    }
}
