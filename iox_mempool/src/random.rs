//! Unpredictable (not cryptographic) numbers for names and ids: std's per-process
//! random hash keys, mixed with the time.

use std::hash::{BuildHasher, Hasher};

/// A fresh 64-bit number, different on every call in practice.
pub fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}
