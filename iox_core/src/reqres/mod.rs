//! Request-response's part of the core: the static config section (`config`), the
//! regions of the dynamic segment (`layout`), the request-slot word protocol
//! (`request_word`), the encoding of queue entries and slot states (`slots`), and
//! recovery of dead clients and servers (`recovery`). The ports are above the core
//! (`iox_service`).

pub mod config;
pub mod layout;
pub mod recovery;
pub mod request_word;
pub mod slots;

/// Most active requests per client a service may allow (each has a slot word, and its
/// index travels in 8 bits of the queue entry).
pub const MAX_ACTIVE_REQUESTS: u32 = 64;
