//! The publish-subscribe section of a static config ([`PubSubConfig`]): the limits of
//! publishers and subscribers, the overflow policy and the history, and their checks.
//! The core sizes the dynamic segment from [`PubSubConfig::port_limits`]: publishers
//! send, subscribers receive, one pair queue of `subscriber_buffer` entries per
//! (publisher, subscriber).

use serde::{Deserialize, Serialize};

use crate::static_config::{
    InvalidConfig, MAX_BUFFER, MAX_OUTSTANDING, MAX_QUEUE_SLOTS, PortLimits, bound, check_ports,
};

/// What a publisher does when a subscriber's buffer is full. Either way the loss is
/// counted for that subscriber (`Subscriber::missed`, `iox show`), and a
/// `send` returns how many subscribers it reached.
///
/// iox has no policy that blocks the publisher. A service without loss for its one
/// subscriber rejects, and the publisher sends again once the subscriber made room:
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use iox_service::{Overflow, SendError, Service};
/// let svc = Service::named("doc/lossless")?
///     .root(dir.path())
///     .publish_subscribe::<u64>()
///     .subscriber_buffer(2)
///     .overflow(Overflow::Reject)
///     .create()?;
/// let subscriber = svc.subscriber_builder().create()?;
/// let publisher = svc.publisher_builder().create()?;
/// let mut received = Vec::new();
/// for i in 0..5u64 {
///     loop {
///         match publisher.loan_uninit()?.write_payload(i).send() {
///             Ok(_) => break,
///             // Full: nothing was delivered; make room (here: read), then send again.
///             Err(SendError::QueueFull { delivered: 0, .. }) => {
///                 received.push(*subscriber.receive()?.expect("the full buffer has one"));
///             }
///             Err(e) => return Err(e.into()),
///         }
///     }
/// }
/// while let Some(s) = subscriber.receive()? {
///     received.push(*s);
/// }
/// assert_eq!(received, [0, 1, 2, 3, 4]); // none lost
/// assert_eq!(subscriber.missed(), 3); // the refused sends of 2, 3 and 4, each sent again
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Overflow {
    /// Drop that subscriber's oldest sample (its chunk returns to the pool).
    #[default]
    DropOldest,
    /// Do not deliver to that subscriber; `send` reports it.
    Reject,
}

/// What a publish-subscribe service fixes: its port limits, overflow policy and
/// history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PubSubConfig {
    /// Most publishers at once.
    pub max_publishers: u32,
    /// Most subscribers at once.
    pub max_subscribers: u32,
    /// Samples queued per publisher-subscriber pair before overflow.
    pub subscriber_buffer: u32,
    /// Samples one publisher may loan at once.
    pub max_loans: u32,
    /// Samples one subscriber may hold at once.
    pub max_held: u32,
    /// Full-buffer policy.
    pub overflow: Overflow,
    /// Samples each publisher keeps for subscribers that connect later (0 = none; at
    /// most `subscriber_buffer`).
    pub history: u32,
    /// Whether each sample carries a tensor record (element type, shape, strides; see
    /// `crate::tensor`) beside its chunk, written by tensor publishers only. A
    /// `CudaDevice` service always has them; a host service has them when its creator
    /// asked (`tensors(true)`). Absent from the text when false; an older iox refuses a
    /// config with it (an unknown field) rather than send samples without records.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tensors: bool,
}

impl PubSubConfig {
    /// What the core sizes for: publishers send, subscribers receive, one queue of
    /// `subscriber_buffer` entries per pair.
    pub fn port_limits(&self) -> PortLimits {
        PortLimits {
            sending: self.max_publishers,
            receiving: self.max_subscribers,
            queue_depth: self.subscriber_buffer,
            max_loans: self.max_loans,
            max_held: self.max_held,
        }
    }

    /// Every limit in bounds, the history within the buffer, the queues within the
    /// dynamic segment's maximum.
    pub fn check(&self) -> Result<(), InvalidConfig> {
        check_ports(
            ("max_publishers", "max_subscribers"),
            self.max_publishers,
            self.max_subscribers,
            "; publishers + subscribers <= 47 per service (each port is one owner bit in a chunk's ownership word)",
        )?;
        bound(
            "subscriber_buffer",
            self.subscriber_buffer,
            MAX_BUFFER,
            "; a publisher-subscriber queue has at most 65536 entries",
        )?;
        let outstanding_rule = "; at most 256 samples loaned per publisher or held per subscriber (each counts into the pool's size)";
        bound("max_loans", self.max_loans, MAX_OUTSTANDING, outstanding_rule)?;
        bound("max_held", self.max_held, MAX_OUTSTANDING, outstanding_rule)?;
        if self.history > self.subscriber_buffer {
            return Err(InvalidConfig::History {
                history: self.history,
                buffer: self.subscriber_buffer,
            });
        }
        let slots = u64::from(self.max_publishers)
            * u64::from(self.max_subscribers)
            * u64::from(self.subscriber_buffer);
        if slots > MAX_QUEUE_SLOTS {
            return Err(InvalidConfig::TooManyQueueSlots {
                product: "max_publishers x max_subscribers x subscriber_buffer",
                slots,
                max: MAX_QUEUE_SLOTS,
            });
        }
        Ok(())
    }

    /// Chunks the limits can occupy at once: each publisher's loans, its spare (the
    /// chunk it loans ahead after each send), full queues to every subscriber and its
    /// history; each subscriber's held samples.
    pub fn worst_case_chunks(&self) -> u64 {
        let (p, s) = (u64::from(self.max_publishers), u64::from(self.max_subscribers));
        p * (u64::from(self.max_loans) + 1 + s * u64::from(self.subscriber_buffer) + u64::from(self.history))
            + s * u64::from(self.max_held)
    }
}

/// The section of a publish-subscribe service's config (its pattern is checked when
/// the service is opened, so ports of a pub-sub service always find it).
pub fn of(c: &crate::StaticConfig) -> &PubSubConfig {
    c.publish_subscribe()
        .expect("a publish-subscribe service has its section (checked on open)")
}
