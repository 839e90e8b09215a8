//! The messages of an MCAP file read into memory, whoever wrote it: what `iox replay`
//! reads. The file is not trusted: it may be cut short, damaged or made to hurt.
//!
//! Limits (by construction, not by the file's good manners):
//! - no record, and no chunk's records taken together, is longer than the file: a
//!   length field past that (up to `u64::MAX`) is a damaged record, read no further,
//!   never added to an offset or allocated;
//! - only the records a replay needs are decoded (schemas, channels, messages, and
//!   chunks' headers); every other kind (attachments, indexes, statistics, metadata,
//!   the summary) is stepped over by its length without being parsed; before one is
//!   decoded, every length-prefixed string and map in it is checked to end inside the
//!   record (MCAP's decoder reserves a string's stated length before it reads it, so a
//!   few bytes claiming 4 GiB would be an allocation the file asks for);
//! - chunks are read as stored: compressed ones are refused (this tool is built
//!   without decompressors), so no decompressed size the file claims is allocated;
//!   a chunk's records are walked here, each within the chunk;
//! - chunk CRCs are checked where the writer stored them.
//!
//! Reading stops at the first damaged record and says what it was; what came before
//! it was delivered. MCAP's own sans-I/O reader does the framing ([`mcap::sans_io`]);
//! this module gives it the limits and picks the records.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use mcap::records::{Record, op};
use mcap::sans_io::{LinearReadEvent, LinearReader, LinearReaderOptions};
use mcap::{Channel, Message, Schema};

/// Calls `each` with every message of the MCAP file `buf`, in file order (messages in
/// chunks with their chunk), until the end of its data or the first damaged record.
/// Returns why reading stopped early (a damaged record, or no footer: the writer was
/// stopped before it finished), or `None` for a whole file; an error of `each` ends
/// the reading and is returned as it is.
///
/// ```
/// let mut file = Vec::new();
/// {
///     let mut w = mcap::Writer::new(std::io::Cursor::new(&mut file)).unwrap();
///     let ch = w.add_channel(0, "demo", "raw", &Default::default()).unwrap();
///     let header = mcap::records::MessageHeader { channel_id: ch, sequence: 0, log_time: 1, publish_time: 1 };
///     w.write_to_known_channel(&header, b"hi").unwrap();
///     w.finish().unwrap();
/// }
/// let mut got = Vec::new();
/// let end = iox_cli::mcap_read::messages(&file, |m| {
///     got.push((m.channel.topic.clone(), m.data.to_vec()));
///     Ok::<(), ()>(())
/// });
/// assert_eq!(end, Ok(None));
/// assert_eq!(got, [("demo".to_string(), b"hi".to_vec())]);
/// // A record claiming u64::MAX bytes: damage, said, not followed.
/// let mut bad = mcap::MAGIC.to_vec();
/// bad.push(mcap::records::op::HEADER);
/// bad.extend_from_slice(&u64::MAX.to_le_bytes());
/// assert!(iox_cli::mcap_read::messages(&bad, |_| Ok::<(), ()>(())).unwrap().is_some());
/// ```
pub fn messages<E>(
    buf: &[u8],
    mut each: impl FnMut(&Message<'_>) -> Result<(), E>,
) -> Result<Option<String>, E> {
    // Chunks come out whole and their records are walked here, with bounds checks
    // (the MCAP reader's own walk of a chunk's records trusts their lengths).
    let options = LinearReaderOptions::default()
        .with_skip_end_magic(true)
        .with_emit_chunks(true)
        .with_record_length_limit(buf.len());
    let mut reader = LinearReader::new_with_options(options);
    let mut rest = buf;
    let mut known = Known::default();
    while let Some(event) = reader.next_event() {
        let (opcode, data) = match event {
            Ok(LinearReadEvent::ReadRequest(need)) => {
                let n = need.min(rest.len());
                reader.insert(n).copy_from_slice(&rest[..n]);
                reader.notify_read(n);
                rest = &rest[n..];
                continue;
            }
            Ok(LinearReadEvent::Record { opcode, data }) => (opcode, data),
            Err(e) => return Ok(Some(e.to_string())),
        };
        let read = if opcode == op::CHUNK {
            chunk(data, &mut known, &mut each)?
        } else {
            known.record(opcode, data, &mut each)?
        };
        if let Err(damage) = read {
            return Ok(Some(damage));
        }
    }
    if !buf.ends_with(mcap::MAGIC) {
        return Ok(Some(
            "it ends without its footer (its recorder was stopped before it finished)".into(),
        ));
    }
    Ok(None)
}

/// The records of one chunk (`data`: the chunk record's body), each within the chunk,
/// after its CRC is checked where it was written. The outer result is `each`'s error;
/// the inner one says what is damaged.
fn chunk<E>(
    data: &[u8],
    known: &mut Known,
    each: &mut impl FnMut(&Message<'_>) -> Result<(), E>,
) -> Result<Result<(), String>, E> {
    if !lengths_fit(op::CHUNK, data) {
        return Ok(Err("a chunk whose header has a length past its end".into()));
    }
    let (header, records) = match mcap::parse_record(op::CHUNK, data) {
        Ok(Record::Chunk { header, data }) => (header, data),
        Ok(_) => return Ok(Err("a chunk record that is no chunk".into())),
        Err(e) => return Ok(Err(e.to_string())),
    };
    if !header.compression.is_empty() {
        return Ok(Err(format!(
            "a chunk compressed with {:?}, which this tool does not read (record without compression, or convert the file)",
            header.compression
        )));
    }
    if header.uncompressed_size != records.len() as u64 {
        return Ok(Err("a chunk whose sizes disagree".into()));
    }
    if header.uncompressed_crc != 0 && crc32fast::hash(&records) != header.uncompressed_crc {
        return Ok(Err("a chunk whose CRC does not match its records".into()));
    }
    let mut rest: &[u8] = &records;
    while !rest.is_empty() {
        let Some((head, after)) = rest.split_first_chunk::<9>() else {
            return Ok(Err("a record cut short inside a chunk".into()));
        };
        let len = u64::from_le_bytes(head[1..].try_into().expect("8 bytes"));
        let Some(body) = usize::try_from(len).ok().and_then(|l| after.get(..l)) else {
            return Ok(Err("a record longer than its chunk".into()));
        };
        if let Err(damage) = known.record(head[0], body, each)? {
            return Ok(Err(damage));
        }
        rest = &after[body.len()..];
    }
    Ok(Ok(()))
}

/// The schemas and channels read so far, by id.
#[derive(Default)]
struct Known {
    schemas: HashMap<u16, Arc<Schema<'static>>>,
    channels: HashMap<u16, Arc<Channel<'static>>>,
}

impl Known {
    /// One record outside a chunk's framing: a schema or channel is kept, a message
    /// handed to `each`, anything else stepped over unparsed.
    fn record<E>(
        &mut self,
        opcode: u8,
        data: &[u8],
        each: &mut impl FnMut(&Message<'_>) -> Result<(), E>,
    ) -> Result<Result<(), String>, E> {
        if !matches!(opcode, op::SCHEMA | op::CHANNEL | op::MESSAGE) {
            return Ok(Ok(()));
        }
        if !lengths_fit(opcode, data) {
            return Ok(Err(format!(
                "a record (opcode {opcode:#04x}) with a length past its end"
            )));
        }
        let record = match mcap::parse_record(opcode, data) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.to_string())),
        };
        match record {
            Record::Schema { header, data } => {
                if header.id == 0 {
                    return Ok(Err("a schema with id 0".into()));
                }
                let schema = Schema {
                    id: header.id,
                    name: header.name,
                    encoding: header.encoding,
                    data: Cow::Owned(data.into_owned()),
                };
                if let Some(there) = self.schemas.get(&schema.id)
                    && **there != schema
                {
                    return Ok(Err(format!("two schemas with id {}", schema.id)));
                }
                self.schemas.insert(schema.id, Arc::new(schema));
            }
            Record::Channel(c) => {
                let schema = match c.schema_id {
                    0 => None,
                    id => match self.schemas.get(&id) {
                        Some(s) => Some(Arc::clone(s)),
                        None => return Ok(Err(format!("channel {} names unknown schema {id}", c.id))),
                    },
                };
                let channel = Channel {
                    id: c.id,
                    topic: c.topic,
                    schema,
                    message_encoding: c.message_encoding,
                    metadata: c.metadata,
                };
                if let Some(there) = self.channels.get(&channel.id)
                    && **there != channel
                {
                    return Ok(Err(format!("two channels with id {}", channel.id)));
                }
                self.channels.insert(channel.id, Arc::new(channel));
            }
            Record::Message { header, data } => {
                let Some(channel) = self.channels.get(&header.channel_id) else {
                    return Ok(Err(format!("a message of unknown channel {}", header.channel_id)));
                };
                each(&Message {
                    channel: Arc::clone(channel),
                    sequence: header.sequence,
                    log_time: header.log_time,
                    publish_time: header.publish_time,
                    data,
                })?;
            }
            _ => {}
        }
        Ok(Ok(()))
    }
}

/// Whether every length-prefixed string and map of a record (`body`, of kind `opcode`:
/// a schema, a channel or a chunk; other kinds have none that are decoded) ends inside
/// it, so decoding it allocates at most what the record holds. The fields before and
/// between them are stepped over by their fixed sizes (MCAP's record layouts).
fn lengths_fit(opcode: u8, body: &[u8]) -> bool {
    let mut at = Cursor(body);
    match opcode {
        // id, name, encoding (the data's own length is checked by the decoder).
        op::SCHEMA => at.skip(2) && at.string() && at.string(),
        // id, schema id, topic, message encoding, metadata (a map of strings).
        op::CHANNEL => at.skip(4) && at.string() && at.string() && at.string_map(),
        // start, end, uncompressed size, CRC, compression.
        op::CHUNK => at.skip(8 + 8 + 8 + 4) && at.string(),
        _ => true,
    }
}

/// What is left of a record, read from the front.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn skip(&mut self, n: usize) -> bool {
        match self.0.get(n..) {
            Some(rest) => {
                self.0 = rest;
                true
            }
            None => false,
        }
    }

    fn u32(&mut self) -> Option<usize> {
        let (len, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        usize::try_from(u32::from_le_bytes(*len)).ok()
    }

    /// A `uint32` length and that many bytes.
    fn string(&mut self) -> bool {
        self.u32().is_some_and(|n| self.skip(n))
    }

    /// A `uint32` byte length, then strings (keys and values) that fill it exactly.
    fn string_map(&mut self) -> bool {
        let Some(n) = self.u32() else { return false };
        let Some((map, rest)) = self.0.split_at_checked(n) else {
            return false;
        };
        self.0 = rest;
        let mut entries = Cursor(map);
        while !entries.0.is_empty() {
            if !(entries.string() && entries.string()) {
                return false;
            }
        }
        true
    }
}
