//! The request-response section of a static config ([`RequestResponseConfig`]): the
//! limits of clients, servers and active requests, the response payload and buffer,
//! and their checks. The core sizes the dynamic segment from
//! [`RequestResponseConfig::port_limits`]: clients send (requests), servers receive,
//! one pair queue of `max_active_requests_per_client` entries per (client, server).
//! The service's `payload` is the request type.

use iox_mempool::PoolLayout;
use serde::{Deserialize, Serialize};

use crate::PayloadType;
use crate::static_config::{
    InvalidConfig, MAX_QUEUE_SLOTS, MAX_RESPONSE_BUFFER, PortLimits, bound, check_payload, check_ports,
};

/// Most active requests per client a service may allow (each has a slot word, and its
/// index travels in 8 bits of the queue entry).
pub const MAX_ACTIVE_REQUESTS: u32 = 64;

/// Loans a client or server may hold at once (unsent requests or responses).
pub const MAX_LOANS: u32 = 2;

/// What a request-response service fixes: its port limits, the response payload and
/// how many responses a request queues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestResponseConfig {
    /// Most clients at once.
    pub max_clients: u32,
    /// Most servers at once.
    pub max_servers: u32,
    /// Requests one client may have active (sent, not yet finished) at once.
    pub max_active_requests_per_client: u32,
    /// The response payload.
    pub response: PayloadType,
    /// Responses queued per request before the server's send waits for the client.
    pub max_response_buffer: u32,
}

impl RequestResponseConfig {
    /// What the core sizes for: clients send requests, servers receive them, one
    /// queue of `max_active_requests_per_client` entries per pair; each port loans at
    /// most two chunks.
    pub fn port_limits(&self) -> PortLimits {
        PortLimits {
            sending: self.max_clients,
            receiving: self.max_servers,
            queue_depth: self.max_active_requests_per_client,
            max_loans: MAX_LOANS,
            max_held: 0,
        }
    }

    /// Every limit in bounds, the request slots within the dynamic segment's maximum,
    /// the response payload fitting `layout`.
    pub fn check(&self, layout: &PoolLayout) -> Result<(), InvalidConfig> {
        check_ports(
            ("max_clients", "max_servers"),
            self.max_clients,
            self.max_servers,
            "; clients + servers <= 47 per service (each port is one owner bit in a chunk's ownership word)",
        )?;
        bound(
            "max_active_requests_per_client",
            self.max_active_requests_per_client,
            MAX_ACTIVE_REQUESTS,
            "; each active request has a slot in the dynamic segment",
        )?;
        bound(
            "max_response_buffer",
            self.max_response_buffer,
            MAX_RESPONSE_BUFFER,
            "; responses queued per request",
        )?;
        let slots = u64::from(self.max_clients)
            * u64::from(self.max_servers)
            * u64::from(self.max_active_requests_per_client)
            * u64::from(self.max_response_buffer);
        if slots > MAX_QUEUE_SLOTS {
            return Err(InvalidConfig::TooManyQueueSlots {
                product: "max_clients x max_servers x max_active_requests_per_client x max_response_buffer",
                slots,
                max: MAX_QUEUE_SLOTS,
            });
        }
        check_payload(&self.response, layout)
    }
}
