//! ROS 2 message definitions written for iox's own types: a payload's recorded
//! [`Schema`] as a `.msg` (in the `iox_msgs` package), so tools that read ROS 2
//! messages (Foxglove, MCAP's `ros2msg` readers) decode iox samples by field, and the
//! [`Plan`] that converts the values to CDR.
//!
//! Mapping: a struct is a message of the same fields (nested structs are messages of
//! their own, named after the struct); a payload that is not a struct is a message with
//! one field `data` (as `std_msgs/UInt64` wraps a `uint64`); primitives as in
//! [`crate::fixed`] (`u8` is `uint8`), fixed arrays as `[N]`, a value of unknown layout
//! as `uint8[N]`. Not representable (a [`NotRepresentable`] naming the field): 128-bit
//! integers, arrays of arrays (ROS has no multi-dimensional arrays), field names ROS
//! does not accept (`_pad`, tuple fields `0`), and two different structs of one name.
//!
//! Invariant: the generated text parses back ([`crate::msg::parse`]) to the definitions
//! the plan was made from, so what a reader decodes from the text is what was encoded.

use iox_service::Schema;
use iox_service::schema::Field;

use crate::fixed::Plan;
use crate::library::Library;
use crate::msg;

/// The package of generated definitions.
pub const PACKAGE: &str = "iox_msgs";

/// A payload's schema as ROS 2 messages.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The top message type (`iox_msgs/msg/Name`).
    pub name: String,
    /// Its definition as MCAP's `ros2msg` encoding holds it: the top message's
    /// fields, then each nested type after a line of `=` and `MSG: iox_msgs/Name`.
    pub text: String,
    /// The conversion of one payload value to and from CDR.
    pub plan: Plan,
}

/// Why a schema has no ROS 2 form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct NotRepresentable {
    /// The field's path (the payload itself when empty).
    pub field: String,
    /// Why.
    pub why: String,
}

/// The ROS 2 form of a payload of `schema` whose type is named `type_name`.
///
/// ```
/// use iox_service::ZeroCopySafe;
/// #[derive(ZeroCopySafe, Clone, Copy)]
/// #[repr(C)]
/// #[iox(type_name = "Reading")]
/// struct Reading { seq: u64, value: f64 }
/// let g = iox_ros2::generate::generate(&Reading::schema(), "Reading").unwrap();
/// assert_eq!(g.name, "iox_msgs/msg/Reading");
/// assert_eq!(g.text, "uint64 seq\nfloat64 value\n");
/// ```
pub fn generate(schema: &Schema, type_name: &str) -> Result<Generated, NotRepresentable> {
    let top = match schema {
        Schema::Struct { .. } => schema.clone(),
        other => Schema::Struct {
            name: type_name.to_owned(),
            size: size_of_schema(other),
            alignment: 1,
            fields: vec![Field {
                name: "data".into(),
                offset: 0,
                schema: other.clone(),
            }],
        },
    };
    let mut messages: Vec<(String, Schema, String)> = Vec::new();
    let name = message_of(&top, type_name, "", &mut messages)?;
    let mut text = String::new();
    let mut library = Library::with_prefixes(Vec::new());
    for (i, (full, _, body)) in messages.iter().enumerate() {
        if i > 0 {
            text.push_str(&"=".repeat(80));
            text.push('\n');
            text.push_str(&format!(
                "MSG: {PACKAGE}/{}\n",
                full.rsplit('/').next().unwrap_or(full)
            ));
        }
        text.push_str(body);
        let def = msg::parse(full, "generated.msg", body).map_err(|e| NotRepresentable {
            field: String::new(),
            why: format!("the generated definition does not parse: {e}"),
        })?;
        library.insert(def);
    }
    let plan = Plan::new(&mut library, &name, &top).map_err(|e| NotRepresentable {
        field: String::new(),
        why: e.to_string(),
    })?;
    Ok(Generated { name, text, plan })
}

/// Writes the message for struct `schema` (and its nested ones) into `messages`, top
/// first; returns its full name.
fn message_of(
    schema: &Schema,
    type_name: &str,
    path: &str,
    messages: &mut Vec<(String, Schema, String)>,
) -> Result<String, NotRepresentable> {
    let Schema::Struct { fields, .. } = schema else {
        unreachable!("only structs become messages");
    };
    let full = format!("{PACKAGE}/msg/{}", message_name(type_name));
    if let Some((_, known, _)) = messages.iter().find(|(n, _, _)| *n == full) {
        if known == schema {
            return Ok(full);
        }
        return Err(NotRepresentable {
            field: path.to_owned(),
            why: format!("two different structs are both named {type_name}"),
        });
    }
    let at = messages.len();
    messages.push((full.clone(), schema.clone(), String::new()));
    let mut body = String::new();
    for f in fields {
        let field_path = if path.is_empty() {
            f.name.clone()
        } else {
            format!("{path}.{}", f.name)
        };
        if !valid_field_name(&f.name) {
            return Err(NotRepresentable {
                field: field_path,
                why: "ROS field names start with a letter (a `_pad` or tuple field has no ROS form)".into(),
            });
        }
        let ty = type_of(&f.schema, &field_path, messages)?;
        body.push_str(&format!("{ty} {}\n", f.name));
    }
    messages[at].2 = body;
    Ok(full)
}

/// The `.msg` type of a field of `schema`.
fn type_of(
    schema: &Schema,
    path: &str,
    messages: &mut Vec<(String, Schema, String)>,
) -> Result<String, NotRepresentable> {
    let fail = |why: &str| NotRepresentable {
        field: path.to_owned(),
        why: why.into(),
    };
    Ok(match schema {
        Schema::Bool => "bool".into(),
        Schema::U8 => "uint8".into(),
        Schema::I8 => "int8".into(),
        Schema::U16 => "uint16".into(),
        Schema::I16 => "int16".into(),
        Schema::U32 => "uint32".into(),
        Schema::I32 => "int32".into(),
        Schema::U64 => "uint64".into(),
        Schema::I64 => "int64".into(),
        Schema::F32 => "float32".into(),
        Schema::F64 => "float64".into(),
        Schema::U128 | Schema::I128 => return Err(fail("ROS has no 128-bit integers")),
        Schema::Bytes { size } => format!("uint8[{size}]"),
        Schema::Array { element, len } => {
            if matches!(**element, Schema::Array { .. }) {
                return Err(fail("ROS has no arrays of arrays"));
            }
            format!("{}[{len}]", type_of(element, path, messages)?)
        }
        Schema::Struct { name, .. } => {
            let full = message_of(schema, name, path, messages)?;
            format!("{PACKAGE}/{}", full.rsplit('/').next().unwrap_or(&full))
        }
        _ => return Err(fail("a kind of value this iox does not know")),
    })
}

/// A ROS message name for an iox type name: its last path segment without generic
/// arguments, letters and digits only, starting with a capital letter.
fn message_name(type_name: &str) -> String {
    let last = type_name.split('<').next().unwrap_or(type_name);
    let last = last.rsplit("::").next().unwrap_or(last);
    let mut name: String = last.chars().filter(char::is_ascii_alphanumeric).collect();
    match name.chars().next() {
        Some(c) if c.is_ascii_alphabetic() => {
            let upper = c.to_ascii_uppercase();
            name.replace_range(..1, &upper.to_string());
        }
        _ => name.insert(0, 'T'),
    }
    name
}

fn valid_field_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn size_of_schema(schema: &Schema) -> u64 {
    match schema {
        Schema::Bool | Schema::U8 | Schema::I8 => 1,
        Schema::U16 | Schema::I16 => 2,
        Schema::U32 | Schema::I32 | Schema::F32 => 4,
        Schema::U64 | Schema::I64 | Schema::F64 => 8,
        Schema::U128 | Schema::I128 => 16,
        Schema::Array { element, len } => size_of_schema(element) * len,
        Schema::Struct { size, .. } | Schema::Bytes { size } => *size,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iox_service::ZeroCopySafe;

    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Vec3 {
        x: f32,
        y: f32,
        z: f32,
    }

    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Body {
        id: u16,
        points: [Vec3; 2],
        speed: Vec3,
        flag: bool,
    }

    #[test]
    fn nested_structs_become_messages_of_their_own_once() {
        let g = generate(&Body::schema(), "robot::Body").unwrap();
        assert_eq!(g.name, "iox_msgs/msg/Body");
        let sep = "=".repeat(80);
        assert_eq!(
            g.text,
            format!(
                "uint16 id\niox_msgs/Vec3[2] points\niox_msgs/Vec3 speed\nbool flag\n{sep}\nMSG: iox_msgs/Vec3\nfloat32 x\nfloat32 y\nfloat32 z\n"
            )
        );
        assert_eq!(g.plan.struct_size(), size_of::<Body>());
        let g = generate(&u64::schema(), "u64").unwrap();
        assert_eq!(
            (g.name.as_str(), g.text.as_str()),
            ("iox_msgs/msg/U64", "uint64 data\n")
        );
    }

    #[test]
    fn what_has_no_ros_form_is_named() {
        #[derive(ZeroCopySafe, Clone, Copy)]
        #[repr(C)]
        struct Padded {
            a: u32,
            _pad: [u8; 4],
        }
        let e = generate(&Padded::schema(), "Padded").unwrap_err();
        assert_eq!(e.field, "_pad");
        assert!(
            generate(&u128::schema(), "u128")
                .unwrap_err()
                .why
                .contains("128-bit")
        );
        assert!(
            generate(&<[[f32; 3]; 4]>::schema(), "m")
                .unwrap_err()
                .why
                .contains("arrays of arrays")
        );
        assert!(generate(&<(u8, u16)>::schema(), "(u8, u16)").is_err());
    }
}
