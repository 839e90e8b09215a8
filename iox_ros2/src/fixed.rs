//! Fixed-size ROS messages as iox structs: the check that an iox payload's recorded
//! [`Schema`] matches a `.msg` definition field by field, and the conversion of values
//! between the two (the struct's bytes in shared memory, CDR on the ROS side), with no
//! code generated per type.
//!
//! A message is fixed-size when it has no strings and no sequences: primitives, fixed
//! arrays (`[N]`) and nested fixed-size messages. It matches a schema when the schema
//! is a struct with the same field names in the same order, each primitive of the same
//! kind (`byte`, `char` and `uint8` are `u8`), each fixed array of the same length, and
//! each nested message a matching struct. A [`MatchError`] names the first field that
//! does not, with both sides.
//!
//! The match becomes a [`Plan`]: every primitive in CDR order with its offset in the
//! struct. CDR here is the encoding ROS 2's middlewares put on the wire (XCDR version 1,
//! "plain CDR"): a 4-byte encapsulation header (`00 01 00 00` little-endian, `00 00 00
//! 00` big-endian), then each primitive aligned to its size (at most 8) from the end of
//! the header, the whole padded to a multiple of 4 bytes, as `rclpy` and Fast DDS write
//! it. Decoding reads either byte order, refuses a message shorter than the plan needs
//! or with another encapsulation, and refuses a `bool` that is neither 0 nor 1 (an iox
//! reader of the struct may hold a Rust `bool`); the struct's padding is written as
//! zeros.

use thiserror::Error;

use iox_service::Schema;

use crate::library::Library;
use crate::msg::{Arity, BaseType, MsgDef, MsgField, Primitive};

/// Why a schema does not match a message definition.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("field `{field}`: the ROS message has {ros}, the iox type has {iox}")]
pub struct MatchError {
    /// The field's path (`pose.position.x`; the message itself when empty).
    pub field: String,
    /// What the `.msg` says there.
    pub ros: String,
    /// What the iox schema says there.
    pub iox: String,
}

/// One primitive of a plan: where it is in the struct, what it is, whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    offset: usize,
    primitive: Primitive,
    field: usize,
}

/// How to convert values of one iox struct to and from one fixed-size ROS message
/// (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    steps: Vec<Step>,
    /// Field paths, by index (for errors).
    fields: Vec<String>,
    struct_size: usize,
    cdr_len: usize,
}

/// Why a CDR message could not be decoded into the struct.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CdrError {
    /// Not a plain-CDR encapsulation this reads.
    #[error("encapsulation {0:02x?} is not plain CDR (00 00 big-endian or 00 01 little-endian)")]
    Encapsulation([u8; 2]),
    /// Shorter than the message's fields need.
    #[error("{got} bytes, but the message's fields need {needed}")]
    Short {
        /// Bytes the plan needs.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// A `bool` that is neither 0 nor 1.
    #[error("field `{field}` is a bool holding {value}")]
    Bool {
        /// The field's path.
        field: String,
        /// The byte found.
        value: u8,
    },
    /// A length or count that runs past the end of the message.
    #[error("field `{field}` needs {needed} bytes at byte {at}, but the message ends at {len}")]
    PastEnd {
        /// The field's path.
        field: String,
        /// Bytes it needs.
        needed: usize,
        /// Where they would start.
        at: usize,
        /// The message's length.
        len: usize,
    },
    /// A bounded sequence holding more than its bound.
    #[error("field `{field}` holds {count} elements, more than its bound {bound}")]
    OverBound {
        /// The field's path.
        field: String,
        /// Elements it says it holds.
        count: usize,
        /// Its bound.
        bound: u64,
    },
    /// The struct buffer is not the struct's size.
    #[error("the struct is {expected} bytes, the buffer {got}")]
    StructSize {
        /// The struct's size.
        expected: usize,
        /// The buffer's.
        got: usize,
    },
}

/// Header of a little-endian plain-CDR message.
const CDR_LE: [u8; 4] = [0, 1, 0, 0];

impl Plan {
    /// Matches `schema` against message type `name` (loaded, with the types it uses,
    /// from `library`) and plans the conversion.
    pub fn new(library: &mut Library, name: &str, schema: &Schema) -> Result<Plan, PlanError> {
        let def = library.load(name)?.clone();
        let Schema::Struct { size, .. } = schema else {
            return Err(PlanError::Match(MatchError {
                field: String::new(),
                ros: format!("message {name}"),
                iox: schema.to_string(),
            }));
        };
        let mut plan = Plan {
            steps: Vec::new(),
            fields: Vec::new(),
            struct_size: *size as usize,
            cdr_len: 0,
        };
        plan.message(library, &def, schema, 0, "")?;
        let mut pos = 0usize;
        for step in &plan.steps {
            pos = pos.next_multiple_of(step.primitive.size()) + step.primitive.size();
        }
        plan.cdr_len = (CDR_LE.len() + pos).next_multiple_of(4);
        Ok(plan)
    }

    /// Bytes of one value of the struct.
    pub fn struct_size(&self) -> usize {
        self.struct_size
    }

    /// Bytes of one CDR message, header and final padding included.
    pub fn cdr_len(&self) -> usize {
        self.cdr_len
    }

    /// Plans `def`'s fields against `schema` (a struct) at `base` in the value.
    fn message(
        &mut self,
        library: &Library,
        def: &MsgDef,
        schema: &Schema,
        base: usize,
        path: &str,
    ) -> Result<(), MatchError> {
        let Schema::Struct { fields, .. } = schema else {
            return Err(mismatch(
                path,
                format!("message {}", def.name),
                schema.to_string(),
            ));
        };
        for i in 0..def.fields.len().max(fields.len()) {
            match (def.fields.get(i), fields.get(i)) {
                (Some(ros), Some(iox)) => {
                    let at = join(path, &ros.name);
                    if ros.name != iox.name {
                        return Err(mismatch(
                            &at,
                            format!("`{} {}`", ros.type_text(), ros.name),
                            format!("`{}: {}`", iox.name, iox.schema),
                        ));
                    }
                    self.field(library, ros, &iox.schema, base + iox.offset as usize, &at)?;
                }
                (Some(ros), None) => {
                    return Err(mismatch(
                        &join(path, &ros.name),
                        format!("`{} {}`", ros.type_text(), ros.name),
                        "no such field".into(),
                    ));
                }
                (None, Some(iox)) => {
                    return Err(mismatch(
                        &join(path, &iox.name),
                        "no such field".into(),
                        format!("`{}: {}`", iox.name, iox.schema),
                    ));
                }
                (None, None) => unreachable!("i is below one of the lengths"),
            }
        }
        Ok(())
    }

    /// Plans one field (its arity) at `at` in the value.
    fn field(
        &mut self,
        library: &Library,
        ros: &MsgField,
        schema: &Schema,
        at: usize,
        path: &str,
    ) -> Result<(), MatchError> {
        match ros.arity {
            Arity::Single => self.value(library, &ros.base, schema, at, path),
            Arity::Fixed(n) => match schema {
                Schema::Array { element, len } if *len == n => {
                    let stride = element_size(element);
                    for k in 0..n as usize {
                        self.value(
                            library,
                            &ros.base,
                            element,
                            at + k * stride,
                            &format!("{path}[{k}]"),
                        )?;
                    }
                    Ok(())
                }
                other => Err(mismatch(path, ros.type_text(), other.to_string())),
            },
            Arity::Sequence | Arity::Bounded(_) => Err(mismatch(
                path,
                format!(
                    "{} (a sequence: not fixed-size; carry the message as CDR bytes)",
                    ros.type_text()
                ),
                schema.to_string(),
            )),
        }
    }

    /// Plans one value of `base` at `at`.
    fn value(
        &mut self,
        library: &Library,
        base: &BaseType,
        schema: &Schema,
        at: usize,
        path: &str,
    ) -> Result<(), MatchError> {
        match base {
            BaseType::Primitive(p) if same_kind(*p, schema) => {
                self.fields.push(path.to_owned());
                self.steps.push(Step {
                    offset: at,
                    primitive: *p,
                    field: self.fields.len() - 1,
                });
                Ok(())
            }
            BaseType::Message(m) => {
                let def = library
                    .get(m)
                    .expect("the library loaded every nested type")
                    .clone();
                self.message(library, &def, schema, at, path)
            }
            BaseType::String(_) | BaseType::WString(_) => Err(mismatch(
                path,
                format!("{base} (a string: not fixed-size; carry the message as CDR bytes)"),
                schema.to_string(),
            )),
            BaseType::Primitive(_) => Err(mismatch(path, base.to_string(), schema.to_string())),
        }
    }

    /// Encodes the struct value `value` (its bytes as an iox sample holds them) as a
    /// little-endian CDR message into `out` (replacing what it held).
    ///
    /// # Panics
    /// If `value` is not [`struct_size`](Self::struct_size) bytes.
    pub fn encode(&self, value: &[u8], out: &mut Vec<u8>) {
        assert_eq!(value.len(), self.struct_size, "a value of the planned struct");
        out.clear();
        out.reserve(self.cdr_len);
        out.extend_from_slice(&CDR_LE);
        for step in &self.steps {
            let size = step.primitive.size();
            let body = out.len() - CDR_LE.len();
            out.resize(out.len() + (body.next_multiple_of(size) - body), 0);
            let bytes = &value[step.offset..step.offset + size];
            if cfg!(target_endian = "little") {
                out.extend_from_slice(bytes);
            } else {
                out.extend(bytes.iter().rev());
            }
        }
        out.resize(self.cdr_len, 0);
    }

    /// Decodes the CDR message `cdr` into `out`, one value of the struct (padding
    /// zeroed). Trailing bytes past the fields are ignored (padding).
    pub fn decode(&self, cdr: &[u8], out: &mut [u8]) -> Result<(), CdrError> {
        if out.len() != self.struct_size {
            return Err(CdrError::StructSize {
                expected: self.struct_size,
                got: out.len(),
            });
        }
        let needed = self.needed();
        if cdr.len() < needed {
            return Err(CdrError::Short {
                needed,
                got: cdr.len(),
            });
        }
        let swap = match [cdr[0], cdr[1]] {
            [0, 1] => cfg!(target_endian = "big"),
            [0, 0] => cfg!(target_endian = "little"),
            other => return Err(CdrError::Encapsulation(other)),
        };
        out.fill(0);
        let body = &cdr[CDR_LE.len()..];
        let mut pos = 0usize;
        for step in &self.steps {
            let size = step.primitive.size();
            pos = pos.next_multiple_of(size);
            let src = &body[pos..pos + size];
            if step.primitive == Primitive::Bool && src[0] > 1 {
                return Err(CdrError::Bool {
                    field: self.fields[step.field].clone(),
                    value: src[0],
                });
            }
            let dst = &mut out[step.offset..step.offset + size];
            dst.copy_from_slice(src);
            if swap {
                dst.reverse();
            }
            pos += size;
        }
        Ok(())
    }

    /// Bytes a message must have: the header and the fields, before the final padding.
    fn needed(&self) -> usize {
        let mut pos = 0usize;
        for step in &self.steps {
            pos = pos.next_multiple_of(step.primitive.size()) + step.primitive.size();
        }
        CDR_LE.len() + pos
    }
}

/// Why a plan could not be made.
#[derive(Debug, Error)]
pub enum PlanError {
    /// The message type could not be loaded.
    #[error(transparent)]
    Load(#[from] crate::library::LoadError),
    /// The schema does not match it.
    #[error(transparent)]
    Match(#[from] MatchError),
}

/// Whether `schema` is the iox kind of ROS primitive `p`.
fn same_kind(p: Primitive, schema: &Schema) -> bool {
    matches!(
        (p, schema),
        (Primitive::Bool, Schema::Bool)
            | (Primitive::Byte | Primitive::Char | Primitive::Uint8, Schema::U8)
            | (Primitive::Int8, Schema::I8)
            | (Primitive::Int16, Schema::I16)
            | (Primitive::Uint16, Schema::U16)
            | (Primitive::Int32, Schema::I32)
            | (Primitive::Uint32, Schema::U32)
            | (Primitive::Int64, Schema::I64)
            | (Primitive::Uint64, Schema::U64)
            | (Primitive::Float32, Schema::F32)
            | (Primitive::Float64, Schema::F64)
    )
}

/// Bytes of one array element as the schema lays it out.
fn element_size(schema: &Schema) -> usize {
    match schema {
        Schema::Bool | Schema::U8 | Schema::I8 => 1,
        Schema::U16 | Schema::I16 => 2,
        Schema::U32 | Schema::I32 | Schema::F32 => 4,
        Schema::U64 | Schema::I64 | Schema::F64 => 8,
        Schema::U128 | Schema::I128 => 16,
        Schema::Array { element, len } => element_size(element) * *len as usize,
        Schema::Struct { size, .. } | Schema::Bytes { size } => *size as usize,
        // A kind this crate does not know matches no ROS type (`same_kind`).
        _ => 0,
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn mismatch(field: &str, ros: String, iox: String) -> MatchError {
    MatchError {
        field: field.to_owned(),
        ros,
        iox,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iox_service::ZeroCopySafe;

    #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Inner {
        flag: bool,
        wide: u64,
    }

    #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Outer {
        small: u16,
        inner: [Inner; 2],
        last: i8,
    }

    fn library() -> (tempfile::TempDir, Library) {
        let dir = tempfile::tempdir().unwrap();
        let msg = dir.path().join("share/t/msg");
        std::fs::create_dir_all(&msg).unwrap();
        std::fs::write(msg.join("Inner.msg"), "bool flag\nuint64 wide\n").unwrap();
        std::fs::write(msg.join("Outer.msg"), "uint16 small\nInner[2] inner\nint8 last\n").unwrap();
        let lib = Library::with_prefixes(vec![dir.path().to_owned()]);
        (dir, lib)
    }

    #[test]
    fn nested_arrays_round_trip_with_cdr_alignment() {
        let (_dir, mut lib) = library();
        let plan = Plan::new(&mut lib, "t/msg/Outer", &Outer::schema()).unwrap();
        let value = Outer {
            small: 0x0102,
            inner: [
                Inner { flag: true, wide: 3 },
                Inner {
                    flag: false,
                    wide: u64::MAX,
                },
            ],
            last: -1,
        };
        // SAFETY: reading a value's bytes to encode them; the plan reads field bytes only.
        let bytes =
            unsafe { std::slice::from_raw_parts((&value as *const Outer).cast::<u8>(), size_of::<Outer>()) };
        let mut cdr = Vec::new();
        plan.encode(bytes, &mut cdr);
        // After the header: u16 at 0, bool at 2, u64 at 8, bool at 16, u64 at 24, i8 at
        // 32: 33 bytes of body, 37 with the header, padded to 40.
        assert_eq!(cdr.len(), 4 + 36);
        assert_eq!(&cdr[4..7], &[2, 1, 1]);
        assert_eq!(cdr[4 + 32], 0xff);
        let mut back = [0u8; size_of::<Outer>()];
        plan.decode(&cdr, &mut back).unwrap();
        // SAFETY: decoded by the plan: every field written, bools 0 or 1.
        assert_eq!(unsafe { back.as_ptr().cast::<Outer>().read_unaligned() }, value);
        cdr[4 + 16] = 7;
        let e = plan.decode(&cdr, &mut back).unwrap_err();
        assert_eq!(
            e,
            CdrError::Bool {
                field: "inner[1].flag".into(),
                value: 7
            }
        );
    }
}
