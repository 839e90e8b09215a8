//! The blackboard section of a static config ([`BlackboardConfig`]): the port limits,
//! the key type, and the keys with their value types, fixed at creation. The core
//! sizes the dynamic segment from [`BlackboardConfig::port_limits`]: writers send,
//! readers receive, no pair queues and no chunks (values live in the blackboard's own
//! regions, `blackboard::layout`).

use serde::{Deserialize, Serialize};

use crate::PayloadType;
use crate::static_config::{InvalidConfig, PortLimits, check_ports};

/// Most keys a blackboard holds.
pub const MAX_BLACKBOARD_KEYS: usize = 4096;
/// Largest value of one key, in bytes.
pub const MAX_BLACKBOARD_VALUE: u64 = 64 * 1024 * 1024;

/// One key of a blackboard and the type of its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlackboardEntry {
    /// The key's bytes (a value of the key type, which has no padding).
    pub key: Vec<u8>,
    /// The value's type (always [`PayloadType::Typed`]).
    pub value: PayloadType,
}

/// What a blackboard fixes: its port limits, key type and keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlackboardConfig {
    /// Most writers at once.
    pub max_writers: u32,
    /// Most readers at once.
    pub max_readers: u32,
    /// Value buffers per key: at least `2 * max_readers + 2` (see
    /// `shm::blackboard_value`), at most 256.
    pub buffers: u32,
    /// The key type (its name, and its size: every entry's key has that many bytes).
    pub key_type: PayloadType,
    /// The keys, in the order their regions are laid out.
    pub entries: Vec<BlackboardEntry>,
}

impl BlackboardConfig {
    /// What the core sizes for: writers send, readers receive, no pair queues, no
    /// chunks loaned or held.
    pub fn port_limits(&self) -> PortLimits {
        PortLimits {
            sending: self.max_writers,
            receiving: self.max_readers,
            queue_depth: 0,
            max_loans: 0,
            max_held: 0,
        }
    }

    /// The index of the entry whose key has `bytes`.
    pub fn index_of(&self, bytes: &[u8]) -> Option<usize> {
        self.entries.iter().position(|e| e.key == bytes)
    }

    /// Port limits in bounds, buffers enough, keys of the key type's size and unique,
    /// values typed and in bounds.
    pub fn check(&self) -> Result<(), InvalidConfig> {
        check_ports(
            ("max_writers", "max_readers"),
            self.max_writers,
            self.max_readers,
            "; writers + readers <= 47 per service",
        )?;
        let bad = |what: String| Err(InvalidConfig::Blackboard(what));
        let needed = 2 * self.max_readers + 2;
        if self.buffers < needed || self.buffers > 256 {
            return bad(format!(
                "buffers is {}; it must be from 2 * max_readers + 2 = {needed} to 256",
                self.buffers
            ));
        }
        let key_size = match &self.key_type {
            PayloadType::Typed { size, .. } => *size,
            PayloadType::Slice { .. } => return bad("the key type is a slice".into()),
        };
        if self.entries.is_empty() || self.entries.len() > MAX_BLACKBOARD_KEYS {
            return bad(format!(
                "{} keys; a blackboard has 1 to {MAX_BLACKBOARD_KEYS}",
                self.entries.len()
            ));
        }
        for (i, e) in self.entries.iter().enumerate() {
            if e.key.len() as u64 != key_size {
                return bad(format!(
                    "key {i} has {} bytes; the key type has {key_size}",
                    e.key.len()
                ));
            }
            if self.entries[..i].iter().any(|o| o.key == e.key) {
                return bad(format!("key {i} appears twice"));
            }
            match &e.value {
                PayloadType::Typed { size, alignment, .. }
                    if *size <= MAX_BLACKBOARD_VALUE && alignment.is_power_of_two() && *alignment <= 4096 => {
                }
                other => {
                    return bad(format!(
                        "key {i}'s value type {other} is not a value of at most {MAX_BLACKBOARD_VALUE} bytes aligned to at most 4096"
                    ));
                }
            }
        }
        Ok(())
    }
}
