//! ROS 2 `.msg` definitions, parsed from their text: the fields (type, array kind, name)
//! and constants of one message type, as `rosidl` reads them.
//!
//! Grammar handled (the ROS 2 interface definition for messages): one declaration per
//! line; `#` starts a comment (outside a string default); a field is `TYPE NAME` with an
//! optional default value after it; a constant is `TYPE NAME=VALUE`. `TYPE` is a
//! primitive (`bool`, `byte`, `char`, `int8`..`uint64`, `float32`, `float64`), `string`
//! or `wstring` (optionally bounded, `string<=N`), or a message type `Name` (same
//! package), `pkg/Name` or `pkg/msg/Name`, followed by an optional array suffix: `[N]`
//! (fixed), `[]` (unbounded sequence) or `[<=N]` (bounded sequence).
//!
//! Invariants of a parsed [`MsgDef`]: field and constant names are valid identifiers,
//! unique within the message; a nested type names its package (a bare `Name` takes the
//! definition's own package); array bounds are positive. A definition that breaks the
//! grammar is a [`ParseError`] naming the file and line.

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// A primitive ROS type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primitive {
    /// `bool`: one byte, 0 or 1.
    Bool,
    /// `byte`: one opaque byte.
    Byte,
    /// `char`: one byte (`uint8` in ROS 2).
    Char,
    /// `int8`.
    Int8,
    /// `uint8`.
    Uint8,
    /// `int16`.
    Int16,
    /// `uint16`.
    Uint16,
    /// `int32`.
    Int32,
    /// `uint32`.
    Uint32,
    /// `int64`.
    Int64,
    /// `uint64`.
    Uint64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
}

impl Primitive {
    /// The primitive a `.msg` names, if `word` is one.
    pub fn from_name(word: &str) -> Option<Self> {
        Some(match word {
            "bool" => Self::Bool,
            "byte" => Self::Byte,
            "char" => Self::Char,
            "int8" => Self::Int8,
            "uint8" => Self::Uint8,
            "int16" => Self::Int16,
            "uint16" => Self::Uint16,
            "int32" => Self::Int32,
            "uint32" => Self::Uint32,
            "int64" => Self::Int64,
            "uint64" => Self::Uint64,
            "float32" => Self::Float32,
            "float64" => Self::Float64,
            _ => return None,
        })
    }

    /// Its size in bytes (also its CDR alignment).
    pub fn size(self) -> usize {
        match self {
            Self::Bool | Self::Byte | Self::Char | Self::Int8 | Self::Uint8 => 1,
            Self::Int16 | Self::Uint16 => 2,
            Self::Int32 | Self::Uint32 | Self::Float32 => 4,
            Self::Int64 | Self::Uint64 | Self::Float64 => 8,
        }
    }

    /// Its name in a `.msg`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::Byte => "byte",
            Self::Char => "char",
            Self::Int8 => "int8",
            Self::Uint8 => "uint8",
            Self::Int16 => "int16",
            Self::Uint16 => "uint16",
            Self::Int32 => "int32",
            Self::Uint32 => "uint32",
            Self::Int64 => "int64",
            Self::Uint64 => "uint64",
            Self::Float32 => "float32",
            Self::Float64 => "float64",
        }
    }
}

/// The type of a field, without its array suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseType {
    /// A primitive.
    Primitive(Primitive),
    /// `string`, with its bound (`string<=N`).
    String(Option<u64>),
    /// `wstring`, with its bound.
    WString(Option<u64>),
    /// A message type, fully named (`pkg/msg/Name`).
    Message(String),
}

impl fmt::Display for BaseType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Primitive(p) => f.write_str(p.name()),
            Self::String(None) => f.write_str("string"),
            Self::String(Some(n)) => write!(f, "string<={n}"),
            Self::WString(None) => f.write_str("wstring"),
            Self::WString(Some(n)) => write!(f, "wstring<={n}"),
            Self::Message(m) => f.write_str(m),
        }
    }
}

/// How many values of its type a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// One.
    Single,
    /// `[N]`: exactly N.
    Fixed(u64),
    /// `[]`: any number.
    Sequence,
    /// `[<=N]`: at most N.
    Bounded(u64),
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsgField {
    /// The field's name.
    pub name: String,
    /// Its type.
    pub base: BaseType,
    /// How many values.
    pub arity: Arity,
}

impl MsgField {
    /// The field's type as a `.msg` writes it (`float64[9]`).
    pub fn type_text(&self) -> String {
        match self.arity {
            Arity::Single => self.base.to_string(),
            Arity::Fixed(n) => format!("{}[{n}]", self.base),
            Arity::Sequence => format!("{}[]", self.base),
            Arity::Bounded(n) => format!("{}[<={n}]", self.base),
        }
    }
}

/// A parsed `.msg`: its fields in order (constants are kept by name only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsgDef {
    /// The message type's full name (`pkg/msg/Name`).
    pub name: String,
    /// The fields, in order.
    pub fields: Vec<MsgField>,
    /// The constants' names.
    pub constants: Vec<String>,
}

/// Why a `.msg` text did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}:{line}: {what}", file.display())]
pub struct ParseError {
    /// The file (or what the text came from).
    pub file: PathBuf,
    /// The line, from 1.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// Parses the `.msg` text of message type `name` (`pkg/msg/Name`), read from `file`
/// (named in errors only).
///
/// ```
/// use iox_ros2::msg::{parse, Arity, BaseType, Primitive};
/// let def = parse("geometry_msgs/msg/Point32", "x.msg", "float32 x\nfloat32 y # right\nfloat32 z\n")?;
/// assert_eq!(def.fields.len(), 3);
/// assert_eq!(def.fields[1].base, BaseType::Primitive(Primitive::Float32));
/// assert_eq!(def.fields[1].arity, Arity::Single);
/// # Ok::<(), iox_ros2::msg::ParseError>(())
/// ```
pub fn parse(name: &str, file: impl AsRef<Path>, text: &str) -> Result<MsgDef, ParseError> {
    let file = file.as_ref();
    let package = name.split('/').next().unwrap_or_default();
    let mut def = MsgDef {
        name: name.to_owned(),
        fields: Vec::new(),
        constants: Vec::new(),
    };
    for (i, raw) in text.lines().enumerate() {
        let fail = |what: String| ParseError {
            file: file.to_owned(),
            line: i + 1,
            what,
        };
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        let (type_word, rest) = split_word(line);
        let rest = rest.trim_start();
        if rest.is_empty() {
            return Err(fail(format!("`{line}` has a type but no field name")));
        }
        // A constant (`NAME=VALUE`) or a field (`name [default]`).
        let name_end = rest
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(rest.len());
        let name_part = &rest[..name_end];
        let is_constant = rest[name_end..].trim_start().starts_with('=');
        if !is_identifier(name_part) {
            return Err(fail(format!("`{name_part}` is not a field or constant name")));
        }
        if def.fields.iter().any(|f| f.name == name_part) || def.constants.iter().any(|c| c == name_part) {
            return Err(fail(format!("`{name_part}` is declared twice")));
        }
        let (base, arity) = parse_type(type_word, package).map_err(fail)?;
        if is_constant {
            if arity != Arity::Single || matches!(base, BaseType::Message(_)) {
                return Err(fail(format!(
                    "constant `{name_part}` must be a primitive or a string"
                )));
            }
            def.constants.push(name_part.to_owned());
        } else {
            def.fields.push(MsgField {
                name: name_part.to_owned(),
                base,
                arity,
            });
        }
    }
    Ok(def)
}

/// `line` without its comment: from a `#` outside a quoted string on.
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

/// The first whitespace-separated word of `s` and the rest.
fn split_word(s: &str) -> (&str, &str) {
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

/// Whether `s` is a name ROS accepts for a field or constant.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A field type word (`uint8[<=4]`, `string<=10`, `Point`, `std_msgs/Header[]`).
fn parse_type(word: &str, package: &str) -> Result<(BaseType, Arity), String> {
    let (base_word, arity) = match word.find('[') {
        Some(i) => {
            let suffix = &word[i..];
            let inner = suffix
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .ok_or_else(|| format!("`{word}`: an array suffix is `[N]`, `[]` or `[<=N]`"))?;
            let arity = if inner.is_empty() {
                Arity::Sequence
            } else if let Some(n) = inner.strip_prefix("<=") {
                Arity::Bounded(bound(n, word)?)
            } else {
                Arity::Fixed(bound(inner, word)?)
            };
            (&word[..i], arity)
        }
        None => (word, Arity::Single),
    };
    let base = if let Some(p) = Primitive::from_name(base_word) {
        BaseType::Primitive(p)
    } else if let Some(rest) = base_word.strip_prefix("wstring") {
        BaseType::WString(string_bound(rest, word)?)
    } else if let Some(rest) = base_word.strip_prefix("string") {
        BaseType::String(string_bound(rest, word)?)
    } else {
        BaseType::Message(message_name(base_word, package).ok_or_else(|| format!("`{word}` is not a type"))?)
    };
    Ok((base, arity))
}

/// A positive array or string bound.
fn bound(text: &str, word: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{word}`: `{text}` is not a positive bound")),
    }
}

/// The bound after `string` / `wstring` (`<=N`, or nothing).
fn string_bound(rest: &str, word: &str) -> Result<Option<u64>, String> {
    match rest {
        "" => Ok(None),
        r => match r.strip_prefix("<=") {
            Some(n) => bound(n, word).map(Some),
            None => Err(format!("`{word}` is not a type")),
        },
    }
}

/// The full name (`pkg/msg/Name`) of a message type a `.msg` of `package` refers to.
fn message_name(word: &str, package: &str) -> Option<String> {
    let parts: Vec<&str> = word.split('/').collect();
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match parts.as_slice() {
        [name] if valid(name) && name.starts_with(|c: char| c.is_ascii_uppercase()) => {
            Some(format!("{package}/msg/{name}"))
        }
        [pkg, name] if valid(pkg) && valid(name) => Some(format!("{pkg}/msg/{name}")),
        [pkg, "msg", name] if valid(pkg) && valid(name) => Some(format!("{pkg}/msg/{name}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> MsgField {
        parse("pkg/msg/T", "t.msg", text).unwrap().fields.remove(0)
    }

    #[test]
    fn types_arrays_and_names() {
        assert_eq!(one("uint8[4] a").arity, Arity::Fixed(4));
        assert_eq!(one("uint8[] a").arity, Arity::Sequence);
        assert_eq!(one("int32[<=3] a").arity, Arity::Bounded(3));
        assert_eq!(one("string<=10 s").base, BaseType::String(Some(10)));
        assert_eq!(one("wstring w").base, BaseType::WString(None));
        assert_eq!(one("Point p").base, BaseType::Message("pkg/msg/Point".into()));
        assert_eq!(
            one("std_msgs/Header h").base,
            BaseType::Message("std_msgs/msg/Header".into())
        );
        assert_eq!(
            one("geometry_msgs/msg/Point[2] p").base,
            BaseType::Message("geometry_msgs/msg/Point".into())
        );
        assert_eq!(one("float64 x 1.5 # with a default").name, "x");
        assert_eq!(one("string s \"a # not a comment\"").name, "s");
        let def = parse("pkg/msg/T", "t.msg", "uint8 A=1\nstring B=\"x\"\nint32 v\n").unwrap();
        assert_eq!(def.constants, ["A", "B"]);
        assert_eq!(def.fields.len(), 1);
    }

    #[test]
    fn errors_name_file_and_line() {
        for (text, line, what) in [
            ("int32 a\nint32\n", 2, "no field name"),
            ("uint8[0] a", 1, "positive bound"),
            ("uint8[x a", 1, "array suffix"),
            ("int32 a\nint32 a", 2, "declared twice"),
            ("int32 9a", 1, "not a field"),
            ("lower b", 1, "not a type"),
            ("Point[2] P=3", 1, "must be a primitive"),
        ] {
            let e = parse("pkg/msg/T", "dir/t.msg", text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.to_string().starts_with("dir/t.msg:"), "{e}");
            assert!(e.what.contains(what), "{text}: {e}");
        }
    }
}
