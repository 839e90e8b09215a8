//! CDR messages of any ROS type as field values: [`decode`] (what `iox echo` prints for
//! a ROS-typed service) and [`encode`] (what `iox pub` sends to one), both by the type's
//! definition, read at run time.
//!
//! Decisions:
//! - [`decode`] is [`crate::cdr::check`]'s walk, so a message it decodes is exactly one
//!   `check` accepts: every length, bound and `bool` checked before a value is made.
//!   Arrays keep at most `max_elements` values (the rest counted in a trailing
//!   [`Value::More`]; the rest of an array of strings or messages is checked without
//!   making values), so neither a 6 MB image's `data` nor a message of millions of
//!   small messages becomes millions of values.
//! - Strings are text: bytes that are not UTF-8 decode lossily (U+FFFD), as ROS 2
//!   requires strings to be UTF-8. A `wstring` is UTF-16 code units, each in a
//!   `uint32`, as ROS 2's type support writes it (its bound counts those units; NUL
//!   units at its end are not part of the text).
//! - [`encode`] writes little-endian plain CDR as Fast CDR does (each primitive aligned
//!   to its size from the body's start; an empty sequence is its count alone; the
//!   message padded to 4). A field the value does not give takes its type's default
//!   (zero, `false`, empty), as a ROS message constructor gives it; a field the type
//!   does not have, a value of the wrong kind, a number out of its type's range, a
//!   fixed array of the wrong length and a sequence past its bound are errors naming
//!   the field.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let msg = dir.path().join("share/demo/msg");
//! # std::fs::create_dir_all(&msg).unwrap();
//! # std::fs::write(msg.join("Joint.msg"), "string name\nfloat64[] velocity\nuint8 mode\n").unwrap();
//! use iox_ros2::{library::Library, value::{decode, encode, Value}};
//! let mut ros = Library::with_prefixes(vec![dir.path().to_owned()]);
//! let joint = Value::Message(vec![
//!     ("name".into(), Value::Text("elbow".into())),
//!     ("mode".into(), Value::UInt(2)),
//! ]);
//! let mut cdr = Vec::new();
//! encode(&mut ros, "demo/msg/Joint", &joint, &mut cdr)?;
//! // `velocity` took its default, an empty sequence: its count and no padding.
//! let back = decode(&mut ros, "demo/msg/Joint", &cdr, usize::MAX)?;
//! assert_eq!(back.field("velocity"), Some(&Value::Array(vec![])));
//! assert_eq!(back.field("mode"), Some(&Value::UInt(2)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::cdr::{CheckError, Make, Writer, walk_message};
use crate::library::{Library, LoadError, MAX_DEPTH};
use crate::msg::{Arity, BaseType, MsgField, Primitive};

/// One field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A `bool`.
    Bool(bool),
    /// A signed integer (`int8`..`int64`).
    Int(i64),
    /// An unsigned integer (`uint8`..`uint64`, `byte`, `char`).
    UInt(u64),
    /// A `float32` or `float64`.
    Float(f64),
    /// A `string` or `wstring`.
    Text(String),
    /// An array or sequence's elements.
    Array(Vec<Value>),
    /// `n` more elements that were not decoded (`max_elements`); never encoded.
    More(usize),
    /// A message's fields, in its definition's order.
    Message(Vec<(String, Value)>),
}

impl Value {
    /// The value of field `name` of a message.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Self::Message(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Decodes `cdr`, one whole message of type `name` (loaded with the types it uses from
/// `library`), keeping at most `max_elements` values of each array.
pub fn decode(
    library: &mut Library,
    name: &str,
    cdr: &[u8],
    max_elements: usize,
) -> Result<Value, CheckError> {
    walk_message(library, name, cdr, &mut Decode { max: max_elements })
}

/// The walk that makes values.
struct Decode {
    max: usize,
}

impl Decode {
    fn capped(&self, mut items: Vec<Value>, total: usize) -> Value {
        if total > self.max {
            items.truncate(self.max);
            items.push(Value::More(total - self.max));
        }
        Value::Array(items)
    }
}

fn scalar(p: Primitive, b: &[u8], swap: bool) -> Value {
    fn word<const N: usize>(b: &[u8], swap: bool) -> [u8; N] {
        let mut w: [u8; N] = b.try_into().expect("one element's bytes");
        if swap {
            w.reverse();
        }
        w
    }
    match p {
        Primitive::Bool => Value::Bool(b[0] == 1),
        Primitive::Byte | Primitive::Char | Primitive::Uint8 => Value::UInt(b[0].into()),
        Primitive::Int8 => Value::Int((b[0] as i8).into()),
        Primitive::Int16 => Value::Int(i16::from_ne_bytes(word(b, swap)).into()),
        Primitive::Uint16 => Value::UInt(u16::from_ne_bytes(word(b, swap)).into()),
        Primitive::Int32 => Value::Int(i32::from_ne_bytes(word(b, swap)).into()),
        Primitive::Uint32 => Value::UInt(u32::from_ne_bytes(word(b, swap)).into()),
        Primitive::Int64 => Value::Int(i64::from_ne_bytes(word(b, swap))),
        Primitive::Uint64 => Value::UInt(u64::from_ne_bytes(word(b, swap))),
        Primitive::Float32 => Value::Float(f32::from_ne_bytes(word(b, swap)).into()),
        Primitive::Float64 => Value::Float(f64::from_ne_bytes(word(b, swap))),
    }
}

impl Make for Decode {
    type Out = Value;

    fn primitives(&mut self, p: Primitive, bytes: &[u8], swap: bool, single: bool) -> Value {
        let mut values = bytes.chunks_exact(p.size()).map(|b| scalar(p, b, swap));
        if single {
            return values.next().expect("a single field has its bytes");
        }
        let total = bytes.len() / p.size();
        self.capped(values.take(self.max).collect(), total)
    }

    fn string(&mut self, text: &[u8]) -> Value {
        Value::Text(String::from_utf8_lossy(text).into_owned())
    }

    fn wstring(&mut self, units: &[u8], swap: bool) -> Value {
        // UTF-16 code units, each in a uint32 (as ROS 2's type support writes them).
        let mut utf16: Vec<u16> = units
            .chunks_exact(4)
            .map(|c| {
                let unit = u32::from_ne_bytes(c.try_into().expect("4 bytes"));
                (if swap { unit.swap_bytes() } else { unit }) as u16
            })
            .collect();
        // A writer may count a terminating NUL; NULs at the end are no text (so a
        // decoded wstring encodes, without one, to what decodes the same).
        while utf16.last() == Some(&0) {
            utf16.pop();
        }
        Value::Text(
            char::decode_utf16(utf16)
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect(),
        )
    }

    fn keep(&self) -> usize {
        self.max
    }

    fn array(&mut self, items: Vec<Value>, total: usize) -> Value {
        self.capped(items, total)
    }

    fn message(&mut self, fields: &[MsgField], values: Vec<Value>) -> Value {
        Value::Message(fields.iter().map(|f| f.name.clone()).zip(values).collect())
    }
}

/// Why [`encode`] refused a value.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The type (or one it uses) could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A value of the wrong kind, or out of its type's range.
    #[error("field `{field}` is a {expected}; {got} is not one")]
    Kind {
        /// The field's path.
        field: String,
        /// Its type.
        expected: String,
        /// The value given.
        got: String,
    },
    /// A message's value names a field its type does not have.
    #[error("`{field}` is not a field of {message}")]
    Unknown {
        /// The field's path.
        field: String,
        /// The message type.
        message: String,
    },
    /// A fixed array of another length, or a sequence past its bound.
    #[error("field `{field}` is a {expected}; {got} elements given")]
    Count {
        /// The field's path.
        field: String,
        /// Its type.
        expected: String,
        /// Elements given.
        got: usize,
    },
}

/// Encodes `value` (a [`Value::Message`]) as one little-endian plain-CDR message of
/// type `name` into `out` (replacing what it held).
pub fn encode(
    library: &mut Library,
    name: &str,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    library.load(name)?;
    let mut w = Writer::new(out);
    message(library, name, "", Some(value), &mut w, 0)?;
    w.finish();
    Ok(())
}

fn message(
    library: &Library,
    name: &str,
    path: &str,
    value: Option<&Value>,
    w: &mut Writer<'_>,
    depth: usize,
) -> Result<(), EncodeError> {
    let def = library.get(name).ok_or_else(|| LoadError::Undefined {
        name: name.to_owned(),
        user: path.to_owned(),
    })?;
    if depth > MAX_DEPTH {
        return Err(LoadError::TooDeep(name.to_owned()).into());
    }
    let given: &[(String, Value)] = match value {
        None => &[],
        Some(Value::Message(fields)) => fields,
        Some(other) => return Err(kind(path, name, other)),
    };
    if let Some((unknown, _)) = given
        .iter()
        .find(|(n, _)| !def.fields.iter().any(|f| &f.name == n))
    {
        return Err(EncodeError::Unknown {
            field: join(path, unknown),
            message: name.to_owned(),
        });
    }
    if def.fields.is_empty() {
        w.u8(0);
        return Ok(());
    }
    for field in &def.fields {
        let path = join(path, &field.name);
        let value = given.iter().find(|(n, _)| n == &field.name).map(|(_, v)| v);
        encode_field(library, field, &path, value, w, depth)?;
    }
    Ok(())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn kind(path: &str, expected: impl ToString, got: &Value) -> EncodeError {
    EncodeError::Kind {
        field: path.to_owned(),
        expected: expected.to_string(),
        got: format!("{got:?}"),
    }
}

fn encode_field(
    library: &Library,
    field: &MsgField,
    path: &str,
    value: Option<&Value>,
    w: &mut Writer<'_>,
    depth: usize,
) -> Result<(), EncodeError> {
    let one = |v: Option<&Value>, w: &mut Writer<'_>| -> Result<(), EncodeError> {
        match &field.base {
            BaseType::Primitive(p) => {
                let bytes = primitive_bytes(*p, v, path)?;
                w.elements(p.size(), &bytes);
                Ok(())
            }
            BaseType::String(bound) | BaseType::WString(bound) => {
                let text = match v {
                    None => "",
                    Some(Value::Text(t)) => t.as_str(),
                    Some(other) => return Err(kind(path, &field.base, other)),
                };
                let wide = matches!(field.base, BaseType::WString(_));
                // A wstring's bound counts UTF-16 code units, as ROS 2's does.
                let len = if wide {
                    text.encode_utf16().count()
                } else {
                    text.len()
                };
                if bound.is_some_and(|b| len as u64 > b) {
                    return Err(EncodeError::Count {
                        field: path.to_owned(),
                        expected: field.base.to_string(),
                        got: len,
                    });
                }
                if wide {
                    w.u32(len as u32);
                    let units: Vec<u8> = text
                        .encode_utf16()
                        .flat_map(|u| u32::from(u).to_le_bytes())
                        .collect();
                    w.elements(4, &units);
                } else {
                    w.string(text.as_bytes());
                }
                Ok(())
            }
            BaseType::Message(inner) => message(library, inner, path, v, w, depth + 1),
        }
    };
    if field.arity == Arity::Single {
        return one(value, w);
    }
    let items: &[Value] = match value {
        None => &[],
        Some(Value::Array(items)) => items,
        Some(other) => return Err(kind(path, field.type_text(), other)),
    };
    let count_error = || EncodeError::Count {
        field: path.to_owned(),
        expected: field.type_text(),
        got: items.len(),
    };
    match field.arity {
        Arity::Fixed(n) if value.is_none() => {
            // A fixed array not given is `n` defaults.
            for _ in 0..n {
                one(None, w)?;
            }
            return Ok(());
        }
        Arity::Fixed(n) if items.len() as u64 != n => return Err(count_error()),
        Arity::Bounded(max) if items.len() as u64 > max => return Err(count_error()),
        Arity::Fixed(_) => {}
        _ => w.u32(items.len() as u32),
    }
    if let BaseType::Primitive(p) = &field.base {
        // One run of elements, aligned once (and not at all when there are none).
        let mut bytes = Vec::with_capacity(items.len() * p.size());
        for item in items {
            bytes.extend(primitive_bytes(*p, Some(item), path)?);
        }
        w.elements(p.size(), &bytes);
        return Ok(());
    }
    for item in items {
        one(Some(item), w)?;
    }
    Ok(())
}

/// One primitive's little-endian bytes (its default, zero, when not given).
fn primitive_bytes(p: Primitive, v: Option<&Value>, path: &str) -> Result<Vec<u8>, EncodeError> {
    let wrong = |v: &Value| kind(path, p.name(), v);
    let Some(v) = v else {
        return Ok(vec![0; p.size()]);
    };
    // Integers as i128 (every ROS integer fits), checked against the type's range.
    let int = |lo: i128, hi: i128| -> Result<i128, EncodeError> {
        let n = match *v {
            Value::Int(n) => n as i128,
            Value::UInt(n) => n as i128,
            _ => return Err(wrong(v)),
        };
        if (lo..=hi).contains(&n) {
            Ok(n)
        } else {
            Err(wrong(v))
        }
    };
    let float = || -> Result<f64, EncodeError> {
        match *v {
            Value::Float(f) => Ok(f),
            Value::Int(n) => Ok(n as f64),
            Value::UInt(n) => Ok(n as f64),
            _ => Err(wrong(v)),
        }
    };
    Ok(match p {
        Primitive::Bool => match v {
            Value::Bool(b) => vec![u8::from(*b)],
            _ => return Err(wrong(v)),
        },
        Primitive::Byte | Primitive::Char | Primitive::Uint8 => vec![int(0, u8::MAX.into())? as u8],
        Primitive::Int8 => (int(i8::MIN.into(), i8::MAX.into())? as i8)
            .to_le_bytes()
            .to_vec(),
        Primitive::Int16 => (int(i16::MIN.into(), i16::MAX.into())? as i16)
            .to_le_bytes()
            .to_vec(),
        Primitive::Uint16 => (int(0, u16::MAX.into())? as u16).to_le_bytes().to_vec(),
        Primitive::Int32 => (int(i32::MIN.into(), i32::MAX.into())? as i32)
            .to_le_bytes()
            .to_vec(),
        Primitive::Uint32 => (int(0, u32::MAX.into())? as u32).to_le_bytes().to_vec(),
        Primitive::Int64 => (int(i64::MIN.into(), i64::MAX.into())? as i64)
            .to_le_bytes()
            .to_vec(),
        Primitive::Uint64 => (int(0, u64::MAX.into())? as u64).to_le_bytes().to_vec(),
        Primitive::Float32 => {
            let f = float()?;
            // Out of float32's range is an error (NaN and the infinities are values).
            if f.is_finite() && f.abs() > f64::from(f32::MAX) {
                return Err(wrong(v));
            }
            (f as f32).to_le_bytes().to_vec()
        }
        Primitive::Float64 => float()?.to_le_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What rclpy (Fast CDR) wrote for a `JointState` with one joint's position and no
    /// velocities or efforts: the empty sequences are their counts alone, and the
    /// length it gives counts 8 bytes of padding it never wrote (here garbage).
    #[test]
    fn empty_sequences_are_their_count_alone() {
        let mut lib = Library::from_definition_text(
            "t/msg/Joints",
            "int32 sec\nuint32 nanosec\nstring frame_id\nstring[] name\n\
             float64[] position\nfloat64[] velocity\nfloat64[] effort\n",
        )
        .unwrap();
        let words = "00000000 00000000 03000000 616200aa 01000000 02000000 78000000 01000000 \
                     00000000 0000f03f 00000000 00000000 e47f0000 f00feda9";
        let mut cdr = vec![0, 1, 0, 0];
        for w in words.split_whitespace() {
            cdr.extend((0..4).map(|i| u8::from_str_radix(&w[2 * i..2 * i + 2], 16).unwrap()));
        }
        crate::cdr::check(&mut lib, "t/msg/Joints", &cdr).unwrap();
        let v = decode(&mut lib, "t/msg/Joints", &cdr, usize::MAX).unwrap();
        assert_eq!(v.field("position"), Some(&Value::Array(vec![Value::Float(1.0)])));
        assert_eq!(v.field("effort"), Some(&Value::Array(vec![])));
        // Written back: the same bytes, with zero for the gap after `frame_id` (0xaa
        // there) and without the garbage.
        let mut ours = Vec::new();
        encode(&mut lib, "t/msg/Joints", &v, &mut ours).unwrap();
        cdr[19] = 0;
        assert_eq!(ours, cdr[..ours.len()]);
        assert_eq!(ours.len(), cdr.len() - 8);
    }

    /// Past `max_elements`, an array of messages is checked without making values: a
    /// message of 100,000 small messages is four values and a count.
    #[test]
    fn max_elements_bounds_what_is_made() {
        let text = "demo/Empty[] items\n====\nMSG: demo/Empty\n";
        let mut lib = Library::from_definition_text("demo/msg/Many", text).unwrap();
        let mut cdr = vec![0, 1, 0, 0];
        cdr.extend(100_000u32.to_le_bytes());
        cdr.resize(cdr.len() + 100_000, 0);
        let v = decode(&mut lib, "demo/msg/Many", &cdr, 4).unwrap();
        let Some(Value::Array(items)) = v.field("items") else {
            panic!("{v:?}")
        };
        assert_eq!(items.len(), 5);
        assert_eq!(items[4], Value::More(99_996));
        // Still checked: one byte short is refused.
        assert!(decode(&mut lib, "demo/msg/Many", &cdr[..cdr.len() - 1], 4).is_err());
    }

    /// A wstring is UTF-16 units (a character past the basic plane is two), its bound
    /// counted in them; float32 refuses what it cannot hold.
    #[test]
    fn wstrings_are_utf16_and_float32_has_a_range() {
        let mut lib = Library::from_definition_text("demo/msg/W", "wstring<=2 w\nfloat32 f\n").unwrap();
        let smile = Value::Message(vec![("w".into(), Value::Text("\u{1F600}".into()))]);
        let mut cdr = Vec::new();
        encode(&mut lib, "demo/msg/W", &smile, &mut cdr).unwrap();
        // Count 2, then the surrogates D83D DE00, each in a uint32.
        assert_eq!(&cdr[4..16], &[2, 0, 0, 0, 0x3d, 0xd8, 0, 0, 0x00, 0xde, 0, 0]);
        assert_eq!(
            decode(&mut lib, "demo/msg/W", &cdr, usize::MAX)
                .unwrap()
                .field("w"),
            smile.field("w")
        );
        let three = Value::Message(vec![("w".into(), Value::Text("a\u{1F600}".into()))]);
        assert!(matches!(
            encode(&mut lib, "demo/msg/W", &three, &mut cdr),
            Err(EncodeError::Count { .. })
        ));
        let huge = Value::Message(vec![("f".into(), Value::Float(1e300))]);
        assert!(matches!(
            encode(&mut lib, "demo/msg/W", &huge, &mut cdr),
            Err(EncodeError::Kind { .. })
        ));
    }
}
