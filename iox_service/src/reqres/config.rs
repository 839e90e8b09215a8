//! The request-response section of a static config (`request_response`): what the
//! pattern fixes beyond the limits every service has, and its checks. Present exactly
//! for request-response services.

use crate::static_config::{
    InvalidConfig, MAX_QUEUE_SLOTS, MAX_RESPONSE_BUFFER, MessagingPattern, StaticConfig,
};

/// The request-response section: present exactly for request-response services,
/// its buffer in range, the response payload fitting the pool.
pub(crate) fn check_section(c: &StaticConfig) -> Result<(), InvalidConfig> {
    let rr = match (c.pattern, &c.request_response) {
        (MessagingPattern::RequestResponse, Some(r)) => r,
        (MessagingPattern::RequestResponse, None) | (_, Some(_)) => {
            return Err(InvalidConfig::RequestResponseSection {
                pattern: c.pattern,
                present: c.request_response.is_some(),
            });
        }
        (_, None) => return Ok(()),
    };
    if rr.max_response_buffer == 0 || rr.max_response_buffer > MAX_RESPONSE_BUFFER {
        return Err(InvalidConfig::Limit {
            what: "max_response_buffer",
            value: rr.max_response_buffer,
            max: MAX_RESPONSE_BUFFER,
            rule: "; responses queued per request",
        });
    }
    if c.subscriber_buffer > super::MAX_ACTIVE_REQUESTS {
        return Err(InvalidConfig::Limit {
            what: "max_active_requests_per_client",
            value: c.subscriber_buffer,
            max: super::MAX_ACTIVE_REQUESTS,
            rule: "; each active request has a slot in the dynamic segment",
        });
    }
    let slots = u64::from(c.max_publishers)
        * u64::from(c.max_subscribers)
        * u64::from(c.subscriber_buffer)
        * u64::from(rr.max_response_buffer);
    if slots > MAX_QUEUE_SLOTS {
        return Err(InvalidConfig::TooManyQueueSlots {
            slots,
            max: MAX_QUEUE_SLOTS,
        });
    }
    let (size, align) = (rr.response.element_size(), rr.response.alignment());
    if !align.is_power_of_two() || align > c.layout.alignment() {
        return Err(InvalidConfig::PayloadAlignment {
            align,
            pool: c.layout.alignment(),
        });
    }
    if size > c.layout.max_chunk_size() {
        return Err(InvalidConfig::PayloadSize {
            size,
            chunk: c.layout.max_chunk_size(),
        });
    }
    Ok(())
}
