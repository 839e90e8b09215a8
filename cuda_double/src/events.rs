//! The double's state for streams and events, per process like the real driver's.
//!
//! Nothing is ever pending: every call completes its work before it returns, so a
//! stream is always idle and an event always complete. What the state keeps is what
//! the log needs to show the order of work across processes: which event a record or
//! a wait names, and how often each local event was recorded.
//!
//! Invariants:
//! - Stream and event handles are made-up non-null addresses, distinct from each
//!   other and from the default streams (`0`, `CU_STREAM_LEGACY` = 1,
//!   `CU_STREAM_PER_THREAD` = 2), never dereferenced.
//! - Every event has an origin `(pid, id)`: the creating process and its id there. An
//!   event made here has this process's pid; one opened from an IPC handle keeps the
//!   creator's, so the logs of both processes name the same event the same way.

use std::collections::{HashMap, HashSet};

/// Marks the double's IPC event handles (their first 8 bytes).
pub(crate) const EVENT_MAGIC: &[u8; 8] = b"ioxdblEV";
/// `CU_EVENT_BLOCKING_SYNC`.
pub(crate) const BLOCKING_SYNC: u32 = 1;
/// `CU_EVENT_DISABLE_TIMING`.
pub(crate) const DISABLE_TIMING: u32 = 2;
/// `CU_EVENT_INTERPROCESS`.
pub(crate) const INTERPROCESS: u32 = 4;

const STREAM_BASE: usize = 0x7000_0000;
const EVENT_BASE: usize = 0x6000_0000;

/// One event handle of this process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event {
    pub(crate) flags: u32,
    /// The creator's pid and its id there.
    pub(crate) origin: (u32, u64),
    /// How often this handle was recorded.
    pub(crate) records: u64,
}

impl Event {
    /// `pid:id`, as the log shows it.
    pub(crate) fn name(&self) -> String {
        format!("{}:{}", self.origin.0, self.origin.1)
    }
}

/// Stream and event state.
#[derive(Debug, Default)]
pub(crate) struct Events {
    next_id: u64,
    /// Streams made by `cuStreamCreate` and not destroyed.
    pub(crate) streams: HashSet<usize>,
    /// Handle -> event.
    pub(crate) events: HashMap<usize, Event>,
}

impl Events {
    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A new stream handle.
    pub(crate) fn new_stream(&mut self) -> usize {
        let h = STREAM_BASE + self.next() as usize * 16;
        self.streams.insert(h);
        h
    }

    /// A new event made here with `flags`: (handle, event).
    pub(crate) fn new_event(&mut self, flags: u32) -> (usize, Event) {
        let id = self.next();
        let e = Event {
            flags,
            origin: (std::process::id(), id),
            records: 0,
        };
        self.insert(id, e)
    }

    /// A new local event standing for another process's event `origin`.
    pub(crate) fn open_event(&mut self, origin: (u32, u64)) -> (usize, Event) {
        let id = self.next();
        let e = Event {
            flags: INTERPROCESS | DISABLE_TIMING,
            origin,
            records: 0,
        };
        self.insert(id, e)
    }

    fn insert(&mut self, id: u64, e: Event) -> (usize, Event) {
        let h = EVENT_BASE + id as usize * 16;
        self.events.insert(h, e);
        (h, e)
    }
}

/// The 64 bytes of an IPC handle of event `origin`: magic, pid, id, zeros.
pub(crate) fn encode(origin: (u32, u64)) -> [u8; 64] {
    let mut bytes = [0u8; 64];
    bytes[..8].copy_from_slice(EVENT_MAGIC);
    bytes[8..12].copy_from_slice(&origin.0.to_le_bytes());
    bytes[16..24].copy_from_slice(&origin.1.to_le_bytes());
    bytes
}

/// The event origin in an IPC handle, if it is one of the double's.
pub(crate) fn decode(bytes: &[u8; 64]) -> Option<(u32, u64)> {
    if &bytes[..8] != EVENT_MAGIC {
        return None;
    }
    let pid = u32::from_le_bytes(bytes[8..12].try_into().ok()?);
    let id = u64::from_le_bytes(bytes[16..24].try_into().ok()?);
    (pid != 0 && id != 0).then_some((pid, id))
}
