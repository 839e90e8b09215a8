//! The checks a static config's user header passes when the config is read (the file
//! is untrusted): see `crate::user_header` for what a header is.

use iox_mempool::MemoryType;

use super::{InvalidConfig, PatternConfig, StaticConfig};

/// `Ok` when `header` fits a chunk in front of the payload: a typed header of a
/// publish-subscribe service in host memory, aligned within the pool's alignment, with a
/// schema of its size, and the header plus one payload element within the largest chunk.
pub(super) fn check(c: &StaticConfig, header: &crate::HeaderType) -> Result<(), InvalidConfig> {
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
    let crate::PayloadType::Typed { .. } = header.identity else {
        return fail(format!(
            "{} is a slice; a header is one value of a type",
            header.type_name()
        ));
    };
    let (size, align) = (header.size(), header.alignment());
    if !align.is_power_of_two() || align > c.layout.alignment() {
        return fail(format!(
            "alignment {align} is not a power of two up to the pool's alignment {}",
            c.layout.alignment()
        ));
    }
    let offset = crate::user_header::checked_payload_offset(size, c.payload.alignment());
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
