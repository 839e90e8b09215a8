//! The request-response part of a dynamic segment, and what the core asks of the
//! pattern ([`crate::shm::regions::PatternParts`]).
//!
//! Clients take the sending slots, servers the receiving ones, and the core's pair
//! queues carry requests (client to server, `max_active_requests_per_client` deep).
//! After them: per client slot its request-slot words (one per active request, each
//! client's on its own line(s), see [`crate::shm::request_word`]), then one response queue
//! per (server, client) pair, row-major by server,
//! `max_active_requests_per_client x max_response_buffer` deep, laid out like the
//! pair queues. The header limit it records is that response depth.

use std::sync::atomic::AtomicU64;

use crate::dynamic::Dynamic;
use crate::queue::Queue;
use crate::shm::layout::{queue_bytes, table_bytes};
use crate::shm::regions::{PatternLayout, PatternParts, Regions};
use crate::static_config::RequestResponseConfig;

/// The request-response regions of a dynamic layout.
#[derive(Debug, Clone, Copy)]
pub struct ReqResLayout {
    /// Active requests per client: request-slot words per client.
    pub max_active: usize,
    /// The depth of each response queue.
    pub response_buffer: usize,
    pub max_clients: usize,
    max_servers: usize,
    request_words: usize,
    request_words_stride: usize,
    responses: usize,
    response_stride: usize,
    end: usize,
}

impl ReqResLayout {
    pub fn new(c: &RequestResponseConfig, place_pairs: impl FnOnce(bool) -> usize) -> Self {
        let request_words = place_pairs(true);
        let max_active = c.max_active_requests_per_client as usize;
        let response_buffer = max_active * c.max_response_buffer as usize;
        let (max_clients, max_servers) = (c.max_clients as usize, c.max_servers as usize);
        let request_words_stride = table_bytes(max_active);
        let response_stride = queue_bytes(response_buffer);
        let responses = request_words + request_words_stride * max_clients;
        Self {
            max_active,
            response_buffer,
            max_clients,
            max_servers,
            request_words,
            request_words_stride,
            responses,
            response_stride,
            end: responses + response_stride * max_clients * max_servers,
        }
    }
}

impl Regions for ReqResLayout {
    fn of(p: &PatternLayout) -> Option<&Self> {
        if let PatternLayout::RequestResponse(r) = p {
            Some(r)
        } else {
            None
        }
    }
}

impl<'a> Dynamic<'a> {
    /// Client slot `c`'s request-slot words.
    #[inline]
    pub fn request_words(&self, c: usize) -> &'a [AtomicU64] {
        let r = self.regions::<ReqResLayout>();
        assert!(c < r.max_clients);
        // SAFETY: client c's request words, c checked: inside the request-word region.
        unsafe { self.words(r.request_words + c * r.request_words_stride, r.max_active) }
    }

    /// The response queue from server slot `s` to client slot `c`.
    #[inline]
    pub fn response_queue(&self, s: usize, c: usize) -> Queue<'a> {
        let r = self.regions::<ReqResLayout>();
        assert!(c < r.max_clients && s < r.max_servers);
        // SAFETY: the (s, c) response queue, both checked: inside the response region,
        // which ends at the layout's length.
        unsafe {
            self.queue_region(
                r.responses + (s * r.max_clients + c) * r.response_stride,
                r.response_buffer,
            )
        }
    }
}

impl PatternParts for ReqResLayout {
    fn port_names(&self) -> (&'static str, &'static str) {
        ("client", "server")
    }

    fn header_limit(&self) -> (&'static str, u32) {
        ("response buffer", self.response_buffer as u32)
    }

    fn end(&self) -> usize {
        self.end
    }
}
