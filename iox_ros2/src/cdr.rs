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
    pub fn bytes(&mut self, align: usize, len: usize, field: &str) -> Result<&'a [u8], CdrError> {
        let start = self.pos.next_multiple_of(align);
        let end = start.checked_add(len).filter(|&e| e <= self.body.len());
        let Some(end) = end else {
            return Err(CdrError::PastEnd {
                field: field.to_owned(),
                needed: len,
                at: start + 4,
                len: self.body.len() + 4,
            });
        };
        self.pos = end;
        Ok(&self.body[start..end])
    }

    /// A `uint32` (lengths, counts, and fields).
    pub fn u32(&mut self, field: &str) -> Result<u32, CdrError> {
        let b: [u8; 4] = self.bytes(4, 4, field)?.try_into().expect("4 bytes");
        let v = u32::from_ne_bytes(b);
        Ok(if self.swap { v.swap_bytes() } else { v })
    }

    /// An `int32`.
    pub fn i32(&mut self, field: &str) -> Result<i32, CdrError> {
        Ok(self.u32(field)? as i32)
    }

    /// A `uint8` (or `bool`, `byte`, `char`).
    pub fn u8(&mut self, field: &str) -> Result<u8, CdrError> {
        Ok(self.bytes(1, 1, field)?[0])
    }

    /// A `string`'s bytes, without the terminating NUL.
    pub fn string(&mut self, field: &str) -> Result<&'a [u8], CdrError> {
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
/// from `library`): every length within the message, every `bool` 0 or 1.
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
    library.load(name)?;
    let mut r = Reader::new(cdr)?;
    walk(library, name, "", &mut r, 0)
}

/// Why [`check`] refused a message.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The type (or one it uses) could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The message is malformed.
    #[error(transparent)]
    Cdr(#[from] CdrError),
}

/// Walks one message of type `name` nested `depth` deep. A library made by `load` or
/// `from_definition_text` holds every type it uses, at most [`MAX_DEPTH`] deep; one
/// that was given definitions by hand ([`Library::insert`]) may not, and is refused
/// here rather than trusted.
fn walk(
    library: &Library,
    name: &str,
    path: &str,
    r: &mut Reader<'_>,
    depth: usize,
) -> Result<(), CheckError> {
    let def = library.get(name).ok_or_else(|| LoadError::Undefined {
        name: name.to_owned(),
        user: if path.is_empty() {
            name.to_owned()
        } else {
            path.to_owned()
        },
    })?;
    if depth > MAX_DEPTH {
        return Err(LoadError::TooDeep(name.to_owned()).into());
    }
    if def.fields.is_empty() {
        // An empty message is one byte on the wire (rosidl's
        // `structure_needs_at_least_one_member`).
        r.u8(if path.is_empty() { name } else { path })?;
        return Ok(());
    }
    for field in &def.fields {
        let path = if path.is_empty() {
            field.name.clone()
        } else {
            format!("{path}.{}", field.name)
        };
        let count = match field.arity {
            Arity::Single => 1,
            Arity::Fixed(n) => n as usize,
            Arity::Sequence | Arity::Bounded(_) => sequence_count(field, &path, r)?,
        };
        element(library, field, &path, count, r, depth)?;
    }
    Ok(())
}

fn sequence_count(field: &MsgField, path: &str, r: &mut Reader<'_>) -> Result<usize, CdrError> {
    let n = r.u32(path)? as usize;
    // Every element takes at least a byte: a count past the bytes left is malformed,
    // refused before it is walked (no loop of billions over nothing).
    if n > r.remaining() {
        return Err(CdrError::PastEnd {
            field: path.to_owned(),
            needed: n,
            at: r.offset(),
            len: r.offset() + r.remaining(),
        });
    }
    if let Arity::Bounded(max) = field.arity
        && n as u64 > max
    {
        return Err(CdrError::OverBound {
            field: path.to_owned(),
            count: n,
            bound: max,
        });
    }
    Ok(n)
}

fn element(
    library: &Library,
    field: &MsgField,
    path: &str,
    count: usize,
    r: &mut Reader<'_>,
    depth: usize,
) -> Result<(), CheckError> {
    match &field.base {
        BaseType::Primitive(p) => {
            let size = p.size();
            let len = count.saturating_mul(size);
            let bytes = r.bytes(size, len, path)?;
            if *p == Primitive::Bool
                && let Some(&value) = bytes.iter().find(|&&b| b > 1)
            {
                return Err(CdrError::Bool {
                    field: path.to_owned(),
                    value,
                }
                .into());
            }
        }
        BaseType::String(_) => {
            for _ in 0..count {
                r.string(path)?;
            }
        }
        BaseType::WString(_) => {
            for _ in 0..count {
                let n = r.u32(path)? as usize;
                r.bytes(4, n.saturating_mul(4), path)?;
            }
        }
        BaseType::Message(inner) => {
            for _ in 0..count {
                walk(library, inner, path, r, depth + 1)?;
            }
        }
    }
    Ok(())
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
