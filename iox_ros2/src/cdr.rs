//! Plain CDR (XCDR version 1) read with bounds checks, for messages of any shape: the
//! walk that tells a whole message from a malformed one ([`check`]), and the cursor the
//! image conversion ([`crate::image`]) reads with.
//!
//! The encoding is the one [`crate::fixed`] describes (a 4-byte encapsulation header,
//! each primitive aligned to its size from the end of the header), plus what variable
//! messages add: a `string` is a `uint32` length counting its terminating NUL, then the
//! bytes and the NUL; a `wstring` a `uint32` count of 4-byte characters, then those; a
//! sequence (`T[]`, `T[<=N]`) a `uint32` count, then the elements. Every length is
//! checked against the bytes that remain before anything is read past it, so a message
//! whose lengths run past its end is a [`CdrError`], never a read out of bounds or an
//! allocation its lengths ask for.

use std::fmt;

use crate::fixed::CdrError;
use crate::library::{Library, LoadError, MAX_DEPTH};
use crate::msg::{Arity, BaseType, MsgField, Primitive};

/// A position in a CDR message's body (after the encapsulation header), with the byte
/// order the header gave.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    body: &'a [u8],
    pos: usize,
    swap: bool,
}

impl<'a> Reader<'a> {
    /// Reads the encapsulation header of `cdr` (plain CDR, either byte order).
    pub fn new(cdr: &'a [u8]) -> Result<Self, CdrError> {
        if cdr.len() < 4 {
            return Err(CdrError::Short {
                needed: 4,
                got: cdr.len(),
            });
        }
        let swap = match [cdr[0], cdr[1]] {
            [0, 1] => cfg!(target_endian = "big"),
            [0, 0] => cfg!(target_endian = "little"),
            other => return Err(CdrError::Encapsulation(other)),
        };
        Ok(Self {
            body: &cdr[4..],
            pos: 0,
            swap,
        })
    }

    /// Where the next read starts, from the start of the whole message.
    pub fn offset(&self) -> usize {
        self.pos + 4
    }

    /// The next `len` bytes after aligning to `align`; `field` names them in errors.
    pub fn bytes(
        &mut self,
        align: usize,
        len: usize,
        field: &(impl fmt::Display + ?Sized),
    ) -> Result<&'a [u8], CdrError> {
        let start = self.pos.next_multiple_of(align);
        let end = start.checked_add(len).filter(|&e| e <= self.body.len());
        let Some(end) = end else {
            return Err(CdrError::PastEnd {
                field: field.to_string(),
                needed: len,
                at: start + 4,
                len: self.body.len() + 4,
            });
        };
        self.pos = end;
        Ok(&self.body[start..end])
    }

    /// A `uint32` (lengths, counts, and fields).
    pub fn u32(&mut self, field: &(impl fmt::Display + ?Sized)) -> Result<u32, CdrError> {
        let b: [u8; 4] = self.bytes(4, 4, field)?.try_into().expect("4 bytes");
        let v = u32::from_ne_bytes(b);
        Ok(if self.swap { v.swap_bytes() } else { v })
    }

    /// An `int32`.
    pub fn i32(&mut self, field: &(impl fmt::Display + ?Sized)) -> Result<i32, CdrError> {
        Ok(self.u32(field)? as i32)
    }

    /// A `uint8` (or `bool`, `byte`, `char`).
    pub fn u8(&mut self, field: &(impl fmt::Display + ?Sized)) -> Result<u8, CdrError> {
        Ok(self.bytes(1, 1, field)?[0])
    }

    /// A `string`'s bytes, without the terminating NUL.
    pub fn string(&mut self, field: &(impl fmt::Display + ?Sized)) -> Result<&'a [u8], CdrError> {
        let len = self.u32(field)? as usize;
        let bytes = self.bytes(1, len, field)?;
        Ok(match bytes.split_last() {
            Some((0, text)) => text,
            // Writers put the NUL in; a length of 0 (no NUL) is read as empty.
            _ => bytes,
        })
    }

    /// Bytes left after the position.
    pub fn remaining(&self) -> usize {
        self.body.len() - self.pos
    }

    /// Whether the message's byte order is the other one than this machine's.
    pub fn swapped(&self) -> bool {
        self.swap
    }
}

/// Checks that `cdr` is a whole message of type `name` (loaded with the types it uses
/// from `library`): every length within the message and every bound kept, every `bool`
/// 0 or 1.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let msg = dir.path().join("share/demo/msg");
/// # std::fs::create_dir_all(&msg).unwrap();
/// # std::fs::write(msg.join("Named.msg"), "string name\nuint8[] data\n").unwrap();
/// use iox_ros2::{cdr, library::Library};
/// let mut ros = Library::with_prefixes(vec![dir.path().to_owned()]);
/// // "ab" and two bytes.
/// let good = [0, 1, 0, 0, 3, 0, 0, 0, b'a', b'b', 0, 0, 2, 0, 0, 0, 7, 8];
/// cdr::check(&mut ros, "demo/msg/Named", &good)?;
/// // The sequence says 200 bytes follow.
/// let bad = [0, 1, 0, 0, 3, 0, 0, 0, b'a', b'b', 0, 0, 200, 0, 0, 0, 7, 8];
/// assert!(cdr::check(&mut ros, "demo/msg/Named", &bad).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check(library: &mut Library, name: &str, cdr: &[u8]) -> Result<(), CheckError> {
    walk_message(library, name, cdr, &mut Check)
}

/// Why [`check`] (or the value decoder, which is its walk) refused a message.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The type (or one it uses) could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The message is malformed.
    #[error(transparent)]
    Cdr(#[from] CdrError),
}

/// What a walk of a message makes of the values it passes over: nothing ([`Check`]),
/// or values (the value decoder). The walk does every check; a `Make` only builds.
pub(crate) trait Make {
    /// What one field's value becomes.
    type Out;
    /// `count` primitives `p` in `bytes` (in the message's byte order, `swap` when
    /// that is not this machine's); `single` for a field that is not an array.
    fn primitives(&mut self, p: Primitive, bytes: &[u8], swap: bool, single: bool) -> Self::Out;
    /// A `string`'s bytes (without the NUL).
    fn string(&mut self, text: &[u8]) -> Self::Out;
    /// A `wstring`'s 4-byte characters.
    fn wstring(&mut self, units: &[u8], swap: bool) -> Self::Out;
    /// How many elements of an array of strings or messages to make values of; the
    /// rest are walked (and checked) without.
    fn keep(&self) -> usize {
        usize::MAX
    }
    /// An array of strings or messages: the first [`keep`](Self::keep) of its `total`.
    fn array(&mut self, items: Vec<Self::Out>, total: usize) -> Self::Out;
    /// A message: its fields' values, in the definition's order.
    fn message(&mut self, fields: &[MsgField], values: Vec<Self::Out>) -> Self::Out;
}

/// The walk that only checks.
struct Check;

impl Make for Check {
    type Out = ();
    fn primitives(&mut self, _: Primitive, _: &[u8], _: bool, _: bool) {}
    fn string(&mut self, _: &[u8]) {}
    fn wstring(&mut self, _: &[u8], _: bool) {}
    fn array(&mut self, _: Vec<()>, _: usize) {}
    fn message(&mut self, _: &[MsgField], _: Vec<()>) {}
}

/// Walks `cdr` as one whole message of type `name`, loading the types it uses.
pub(crate) fn walk_message<M: Make>(
    library: &mut Library,
    name: &str,
    cdr: &[u8],
    make: &mut M,
) -> Result<M::Out, CheckError> {
    library.load(name)?;
    let mut r = Reader::new(cdr)?;
    walk(library, name, &FieldPath::ROOT, &mut r, 0, make)
}

/// Where a field is in a message (`header.stamp.sec`), made into text only for an
/// error: the walk of a valid message builds no string.
#[derive(Clone, Copy)]
struct FieldPath<'a> {
    parent: Option<&'a FieldPath<'a>>,
    name: &'a str,
}

impl<'a> FieldPath<'a> {
    const ROOT: FieldPath<'static> = FieldPath {
        parent: None,
        name: "",
    };

    fn is_root(&self) -> bool {
        self.parent.is_none()
    }

    fn child(&'a self, name: &'a str) -> FieldPath<'a> {
        FieldPath {
            parent: Some(self),
            name,
        }
    }
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parent {
            None => Ok(()),
            Some(parent) if parent.is_root() => f.write_str(self.name),
            Some(parent) => write!(f, "{parent}.{}", self.name),
        }
    }
}

/// Walks one message of type `name` nested `depth` deep. A library made by `load` or
/// `from_definition_text` holds every type it uses, at most [`MAX_DEPTH`] deep; one
/// that was given definitions by hand ([`Library::insert`]) may not, and is refused
/// here rather than trusted.
fn walk<M: Make>(
    library: &Library,
    name: &str,
    path: &FieldPath<'_>,
    r: &mut Reader<'_>,
    depth: usize,
    make: &mut M,
) -> Result<M::Out, CheckError> {
    let def = library.get(name).ok_or_else(|| LoadError::Undefined {
        name: name.to_owned(),
        user: if path.is_root() {
            name.to_owned()
        } else {
            path.to_string()
        },
    })?;
    if depth > MAX_DEPTH {
        return Err(LoadError::TooDeep(name.to_owned()).into());
    }
    if def.fields.is_empty() {
        // An empty message is one byte on the wire (rosidl's
        // `structure_needs_at_least_one_member`).
        if path.is_root() {
            r.u8(name)?;
        } else {
            r.u8(path)?;
        }
        return Ok(make.message(&def.fields, Vec::new()));
    }
    let mut values = Vec::with_capacity(def.fields.len());
    for field in &def.fields {
        let path = path.child(&field.name);
        let count = match field.arity {
            Arity::Single => 1,
            Arity::Fixed(n) => n as usize,
            Arity::Sequence | Arity::Bounded(_) => sequence_count(field, &path, r)?,
        };
        values.push(element(library, field, &path, count, r, depth, make)?);
    }
    Ok(make.message(&def.fields, values))
}

fn sequence_count(field: &MsgField, path: &FieldPath<'_>, r: &mut Reader<'_>) -> Result<usize, CdrError> {
    let n = r.u32(path)? as usize;
    // Every element takes at least a byte: a count past the bytes left is malformed,
    // refused before it is walked (no loop of billions over nothing).
    if n > r.remaining() {
        return Err(CdrError::PastEnd {
            field: path.to_string(),
            needed: n,
            at: r.offset(),
            len: r.offset() + r.remaining(),
        });
    }
    over_bound(path, n, field.arity)?;
    Ok(n)
}

/// Refuses `n` elements (or a string's `n` bytes) past a `[<=N]` (or `<=N`) bound.
fn over_bound(path: &FieldPath<'_>, n: usize, arity: Arity) -> Result<(), CdrError> {
    match arity {
        Arity::Bounded(max) if n as u64 > max => Err(CdrError::OverBound {
            field: path.to_string(),
            count: n,
            bound: max,
        }),
        _ => Ok(()),
    }
}

/// Where a sequence's elements start: aligned to the element, except that an empty
/// sequence is its count alone (Fast CDR, and every ROS 2 middleware after it, writes
/// no padding for elements that are not there: a `float64[]` of none after an odd
/// offset is followed at once by the next field).
fn element_align(count: usize, size: usize) -> usize {
    if count == 0 { 1 } else { size }
}

fn element<M: Make>(
    library: &Library,
    field: &MsgField,
    path: &FieldPath<'_>,
    count: usize,
    r: &mut Reader<'_>,
    depth: usize,
    make: &mut M,
) -> Result<M::Out, CheckError> {
    let single = field.arity == Arity::Single;
    let mut items = Vec::new();
    match &field.base {
        BaseType::Primitive(p) => {
            let size = p.size();
            let len = count.saturating_mul(size);
            let bytes = r.bytes(element_align(count, size), len, path)?;
            if *p == Primitive::Bool
                && let Some(&value) = bytes.iter().find(|&&b| b > 1)
            {
                return Err(CdrError::Bool {
                    field: path.to_string(),
                    value,
                }
                .into());
            }
            return Ok(make.primitives(*p, bytes, r.swapped(), single));
        }
        BaseType::String(bound) => {
            for _ in 0..count {
                let text = r.string(path)?;
                if let Some(max) = bound {
                    over_bound(path, text.len(), Arity::Bounded(*max))?;
                }
                if items.len() < make.keep() {
                    items.push(make.string(text));
                }
            }
        }
        BaseType::WString(bound) => {
            for _ in 0..count {
                let n = r.u32(path)? as usize;
                let units = r.bytes(4, n.saturating_mul(4), path)?;
                if let Some(max) = bound {
                    // The bound counts characters; a writer may count the NUL.
                    let chars = units.len() / 4 - usize::from(units.ends_with(&[0; 4]));
                    over_bound(path, chars, Arity::Bounded(*max))?;
                }
                if items.len() < make.keep() {
                    items.push(make.wstring(units, r.swapped()));
                }
            }
        }
        BaseType::Message(inner) => {
            for _ in 0..count {
                if items.len() < make.keep() {
                    items.push(walk(library, inner, path, r, depth + 1, make)?);
                } else {
                    // Past what is kept: checked, no values made.
                    walk(library, inner, path, r, depth + 1, &mut Check)?;
                }
            }
        }
    }
    Ok(if single {
        items.pop().expect("one value for a single field")
    } else {
        make.array(items, count)
    })
}

/// A little-endian plain-CDR message being written.
#[derive(Debug)]
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    /// Starts a message in `out` (replacing what it held).
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        out.clear();
        out.extend_from_slice(&[0, 1, 0, 0]);
        Self { out }
    }

    fn align(&mut self, to: usize) {
        let body = self.out.len() - 4;
        self.out
            .resize(self.out.len() + (body.next_multiple_of(to) - body), 0);
    }

    /// A `uint32`.
    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// An `int32`.
    pub fn i32(&mut self, v: i32) {
        self.u32(v as u32);
    }

    /// A `uint8`.
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    /// A `string` (its NUL added).
    pub fn string(&mut self, text: &[u8]) {
        self.u32(text.len() as u32 + 1);
        self.out.extend_from_slice(text);
        self.out.push(0);
    }

    /// A `uint8[]`.
    pub fn byte_sequence(&mut self, bytes: &[u8]) {
        self.u32(bytes.len() as u32);
        self.out.extend_from_slice(bytes);
    }

    /// Elements of `size` bytes each, already little-endian, aligned to `size` unless
    /// there are none (an empty sequence is its count alone, as Fast CDR writes it).
    pub fn elements(&mut self, size: usize, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.align(size);
        }
        self.out.extend_from_slice(bytes);
    }

    /// Pads the message to a multiple of 4 bytes, as ROS 2's writers do.
    pub fn finish(mut self) {
        self.align(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn library(defs: &[(&str, &str)]) -> (tempfile::TempDir, Library) {
        let dir = tempfile::tempdir().unwrap();
        let msg = dir.path().join("share/t/msg");
        std::fs::create_dir_all(&msg).unwrap();
        for (name, text) in defs {
            std::fs::write(msg.join(format!("{name}.msg")), text).unwrap();
        }
        let lib = Library::with_prefixes(vec![dir.path().to_owned()]);
        (dir, lib)
    }

    #[test]
    fn a_huge_count_of_empty_messages_is_refused_at_once() {
        let (_dir, mut lib) = library(&[("Empty", ""), ("Many", "Empty[] items\n")]);
        // Two empty messages (a byte each), then one claiming four billion.
        check(&mut lib, "t/msg/Many", &[0, 1, 0, 0, 2, 0, 0, 0, 0, 0]).unwrap();
        let err = check(&mut lib, "t/msg/Many", &[0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0]).unwrap_err();
        assert!(matches!(err, CheckError::Cdr(CdrError::PastEnd { .. })), "{err}");
    }

    #[test]
    fn every_cut_of_a_message_is_refused() {
        let (_dir, mut lib) = library(&[("Rec", "string name\nint64 t\nbool[<=2] flags\nwstring w\n")]);
        let mut cdr = Vec::new();
        let mut w = Writer::new(&mut cdr);
        w.string(b"abc");
        w.u32(0);
        w.u32(0); // int64 at 8-aligned: the two words
        w.u32(2);
        w.u8(1);
        w.u8(0);
        w.u32(1);
        w.u32(0x41);
        w.finish();
        check(&mut lib, "t/msg/Rec", &cdr).unwrap();
        for cut in 0..cdr.len() - 3 {
            assert!(check(&mut lib, "t/msg/Rec", &cdr[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_bool = cdr.clone();
        bad_bool[24] = 2;
        assert!(matches!(
            check(&mut lib, "t/msg/Rec", &bad_bool),
            Err(CheckError::Cdr(CdrError::Bool { .. }))
        ));
        let mut over = cdr.clone();
        over[20] = 3;
        assert!(matches!(
            check(&mut lib, "t/msg/Rec", &over),
            Err(CheckError::Cdr(CdrError::OverBound { .. }))
        ));
    }

    /// A definition inserted by hand that uses itself is refused by the CDR walk.
    #[test]
    fn a_hand_inserted_loop_is_refused_by_the_walk() {
        let mut lib = Library::with_prefixes(Vec::new());
        lib.insert(crate::msg::parse("evil/msg/Loop", "test", "evil/Loop next\n").unwrap());
        let err = check(&mut lib, "evil/msg/Loop", &[0, 1, 0, 0, 0]).unwrap_err();
        assert!(err.to_string().contains("deep"), "{err}");
        lib.insert(crate::msg::parse("evil/msg/Gap", "test", "evil/Gone g\n").unwrap());
        let err = check(&mut lib, "evil/msg/Gap", &[0, 1, 0, 0, 0]).unwrap_err();
        assert!(err.to_string().contains("evil/msg/Gone"), "{err}");
    }
}
