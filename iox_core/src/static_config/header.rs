//! A user header as the static config records it ([`HeaderType`]: the type's identity
//! and schema), where it sits in a chunk ([`payload_offset`]: the header first, the
//! payload after it, rounded up to the payload's alignment), and the checks it passes
//! when a config is read (the file is untrusted). What a header is for, and the loans'
//! header states: `crate::user_header`.

use iox_mempool::MemoryType;
use serde::{Deserialize, Serialize};

use super::{InvalidConfig, PatternConfig, StaticConfig};
use crate::schema::Schema;
use crate::{PayloadType, ZeroCopySafe};

/// `Ok` when `header` fits a chunk in front of the payload: a typed header of a
/// publish-subscribe service in host memory, aligned within the pool's alignment, with a
/// schema of its size, and the header plus one payload element within the largest chunk.
pub(super) fn check(c: &StaticConfig, header: &HeaderType) -> Result<(), InvalidConfig> {
    let fail = |what: String| Err(InvalidConfig::UserHeader(what));
    if !matches!(c.pattern, PatternConfig::PublishSubscribe(_)) {
        return fail(format!(
            "a {} service has no user header; only publish-subscribe services do",
            c.pattern.kind()
        ));
    }
    if c.memory_type == MemoryType::CudaDevice {
        return fail(
            "a CudaDevice service's chunks are GPU memory; user headers are for host memory types".into(),
        );
    }
    let PayloadType::Typed { .. } = header.identity else {
        return fail(format!(
            "{} is a slice; a header is one value of a type",
            header.type_name()
        ));
    };
    let (size, align) = (header.size(), header.alignment());
    if let Some(problem) = super::alignment_problem(align, c.layout.alignment()) {
        return fail(format!("alignment {align} {problem}"));
    }
    let offset = checked_payload_offset(size, c.payload.alignment());
    let end = offset.and_then(|o| o.checked_add(c.payload.element_size()));
    if end.is_none_or(|end| end > c.layout.max_chunk_size()) {
        let offset = offset.map_or_else(|| "past the end of memory".to_string(), |o| o.to_string());
        return fail(format!(
            "{size} bytes (payload at offset {offset}) and a payload element of {} bytes do not fit the largest chunk ({} bytes)",
            c.payload.element_size(),
            c.layout.max_chunk_size()
        ));
    }
    if let Some(schema) = &header.schema {
        schema
            .check(size as u64)
            .map_err(InvalidConfig::UserHeaderSchema)?;
    }
    Ok(())
}

/// A service's user header as its static config records it: the type's identity and,
/// when known, its field layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderType {
    /// The header type: always [`PayloadType::Typed`].
    pub identity: PayloadType,
    /// The header's field layout, when the creator knew one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
}

impl HeaderType {
    /// The header of `H`: its identity and its schema (when `H` knows its layout and
    /// the layout passes the config's checks, as for payloads).
    pub fn of<H: ZeroCopySafe>() -> Self {
        let size = size_of::<H>() as u64;
        Self {
            identity: <H as crate::Payload>::payload_type(),
            schema: Some(H::schema()).filter(|s| s.is_known() && s.check(size).is_ok()),
        }
    }

    /// Bytes of the header.
    pub fn size(&self) -> usize {
        self.identity.element_size()
    }

    /// Alignment of the header.
    pub fn alignment(&self) -> usize {
        self.identity.alignment()
    }

    /// The type's name.
    pub fn type_name(&self) -> &str {
        self.identity.type_name()
    }
}

/// Where the payload starts in a chunk whose header is `header_size` bytes, for a
/// payload aligned to `payload_alignment` (a power of two): the header's size rounded
/// up to it. 0 without a header. For a Rust type's size (which never overflows here)
/// and for sizes a static config records, which its check refuses when they would
/// ([`checked_payload_offset`]).
#[inline]
pub const fn payload_offset(header_size: usize, payload_alignment: usize) -> usize {
    match checked_payload_offset(header_size, payload_alignment) {
        Some(offset) => offset,
        None => panic!("a header's size rounded up to the payload's alignment overflows"),
    }
}

/// [`payload_offset`], `None` where the rounding overflows (a damaged config).
#[inline]
pub const fn checked_payload_offset(header_size: usize, payload_alignment: usize) -> Option<usize> {
    let align = if payload_alignment == 0 {
        1
    } else {
        payload_alignment
    };
    header_size.checked_next_multiple_of(align)
}

/// The payload's offset in a chunk of the service recorded in `config` (0 without a
/// header): what bindings use. A checked config's offset never overflows; an unchecked
/// one's that would gives `usize::MAX`, which no chunk holds.
pub fn payload_offset_of(config: &StaticConfig) -> usize {
    config.user_header.as_ref().map_or(0, |h| {
        checked_payload_offset(h.size(), config.payload.alignment()).unwrap_or(usize::MAX)
    })
}
