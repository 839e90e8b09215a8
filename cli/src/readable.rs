//! Which of a service's bytes the tools may read out of shared memory, or write into
//! it, as they are: a payload (or user header) whose type has no padding and no invalid
//! bit patterns, or whose schema names every field (the padding between fields is then
//! skipped on reading and zero on writing).

use iox_service::{Schema, StaticConfig};

/// Whether the tools may read or write `config`'s payload by its bytes: it has no
/// padding and no invalid bit patterns, or its schema describes every byte (module
/// docs). Otherwise bytes of unknown layout may be padding (not to be read) or a
/// `bool` (not to be written as anything but 0 or 1).
pub fn by_schema_or_bytes(config: &StaticConfig) -> bool {
    config.payload.any_bit_pattern() || config.schema.as_ref().is_some_and(Schema::is_complete)
}

/// [`by_schema_or_bytes`] for the user header: true for a service without one.
pub fn header_by_schema_or_bytes(config: &StaticConfig) -> bool {
    config
        .user_header
        .as_ref()
        .is_none_or(|h| h.identity.any_bit_pattern() || h.schema.as_ref().is_some_and(Schema::is_complete))
}
