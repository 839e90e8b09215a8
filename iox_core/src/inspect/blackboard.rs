//! What tools show of a blackboard's keys (`iox show`): each key, its value type, the
//! generation of its value, the buffers readers pin and whether a writer holds it.
//! Loads only (tools map the segment read-only).

use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::PayloadType;
use crate::dynamic::Dynamic;
use crate::shm::blackboard_value as value;
use crate::static_config::blackboard::BlackboardConfig;

/// One key of a blackboard, as tools show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyInfo {
    /// The key, as a number for an integer key type, else its bytes in hex.
    pub key: String,
    /// Its value type.
    pub value: String,
    /// The generation of its value (1: the initial one).
    pub generation: u64,
    /// Buffers readers pin now.
    pub pinned_buffers: usize,
    /// Whether a writer holds the key's lock now (in the middle of an update).
    pub locked: bool,
}

/// The keys of the blackboard `c` in the attached segment `d`.
pub fn keys(d: Dynamic<'_>, c: &BlackboardConfig) -> Vec<KeyInfo> {
    c.entries
        .iter()
        .enumerate()
        .map(|(k, e)| {
            let words = d.key_words(k);
            KeyInfo {
                key: show_key(&c.key_type, &e.key),
                value: e.value.to_string(),
                generation: words.generation(),
                pinned_buffers: pinned(words.pins),
                locked: words.lock.holder() != 0,
            }
        })
        .collect()
}

/// A key's bytes as a number for an integer key type (little-endian, as this machine
/// wrote them), else as hex.
pub fn show_key(key_type: &PayloadType, bytes: &[u8]) -> String {
    let name = match key_type {
        PayloadType::Typed { type_name, .. } => type_name.as_str(),
        PayloadType::Slice { .. } => "",
    };
    let mut word = [0u8; 16];
    let n = bytes.len().min(16);
    word[..n].copy_from_slice(&bytes[..n]);
    let unsigned = u128::from_le_bytes(word);
    let bits = 8 * n as u32;
    let signed = if bits == 0 || bits >= 128 {
        unsigned as i128
    } else {
        ((unsigned << (128 - bits)) as i128) >> (128 - bits)
    };
    match name {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => unsigned.to_string(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => signed.to_string(),
        _ => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// How many distinct buffers the pin words `pins` (every reader slot's) name.
fn pinned(pins: &[std::sync::atomic::AtomicU64]) -> usize {
    let mut seen: Vec<u64> = pins
        .chunks(value::READER_WORDS)
        .flat_map(|r| {
            [
                r[value::COPY].load(Ordering::Relaxed),
                r[value::GUARD].load(Ordering::Relaxed),
            ]
        })
        .filter(|&p| p != 0)
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}
