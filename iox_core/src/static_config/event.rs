//! The event section of a static config ([`EventConfig`]): the limits of notifiers and
//! listeners, the id range and the port lifecycle events, and their checks. The core
//! sizes the dynamic segment from [`EventConfig::port_limits`]: notifiers send,
//! listeners receive, no pair queues (ids are pending bits, `shm/pending_set.rs`).

use serde::{Deserialize, Serialize};

use crate::static_config::{InvalidConfig, MAX_EVENT_ID, PortLimits, check_ports};

/// What an event service fixes: its port limits, id range and lifecycle events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventConfig {
    /// Most notifiers at once.
    pub max_notifiers: u32,
    /// Most listeners at once.
    pub max_listeners: u32,
    /// The largest event id: ids are `0..=event_id_max`.
    pub event_id_max: u32,
    /// Emitted to the listeners when a notifier is created.
    pub notifier_created_event: Option<u32>,
    /// Emitted to the listeners when a notifier is dropped.
    pub notifier_dropped_event: Option<u32>,
    /// Emitted to the listeners by whichever process recovers a dead notifier.
    pub notifier_dead_event: Option<u32>,
}

impl EventConfig {
    /// What the core sizes for: notifiers send, listeners receive, no pair queues,
    /// no loans (an event carries no payload).
    pub fn port_limits(&self) -> PortLimits {
        PortLimits {
            sending: self.max_notifiers,
            receiving: self.max_listeners,
            queue_depth: 0,
            max_loans: 0,
            max_held: 0,
        }
    }

    /// Port limits in bounds, ids in range.
    pub fn check(&self) -> Result<(), InvalidConfig> {
        check_ports(
            ("max_notifiers", "max_listeners"),
            self.max_notifiers,
            self.max_listeners,
            "; notifiers + listeners <= 47 per service (each port is one owner bit in a chunk's ownership word)",
        )?;
        if self.event_id_max > MAX_EVENT_ID {
            return Err(InvalidConfig::EventId {
                what: "event_id_max",
                value: self.event_id_max,
                max: MAX_EVENT_ID,
            });
        }
        let lifecycle = [
            ("notifier_created_event", self.notifier_created_event),
            ("notifier_dropped_event", self.notifier_dropped_event),
            ("notifier_dead_event", self.notifier_dead_event),
        ];
        for (what, id) in lifecycle {
            if let Some(value) = id
                && value > self.event_id_max
            {
                return Err(InvalidConfig::EventId {
                    what,
                    value,
                    max: self.event_id_max,
                });
            }
        }
        Ok(())
    }
}
