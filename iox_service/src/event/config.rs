//! The event section of a static config (`event`): the id range and the port
//! lifecycle events, and its checks. Present exactly for event services.

use crate::static_config::{InvalidConfig, MAX_EVENT_ID, MessagingPattern, StaticConfig};

/// The event section: present exactly for event services, ids in range.
pub(crate) fn check_section(c: &StaticConfig) -> Result<(), InvalidConfig> {
    let event = match (c.pattern, &c.event) {
        (MessagingPattern::Event, Some(e)) => e,
        (MessagingPattern::Event, None) | (_, Some(_)) => {
            return Err(InvalidConfig::EventSection {
                pattern: c.pattern,
                has_event: c.event.is_some(),
            });
        }
        (_, None) => return Ok(()),
    };
    if event.event_id_max > MAX_EVENT_ID {
        return Err(InvalidConfig::EventId {
            what: "event_id_max",
            value: event.event_id_max,
            max: MAX_EVENT_ID,
        });
    }
    let lifecycle = [
        ("notifier_created_event", event.notifier_created_event),
        ("notifier_dropped_event", event.notifier_dropped_event),
        ("notifier_dead_event", event.notifier_dead_event),
    ];
    for (what, id) in lifecycle {
        if let Some(value) = id
            && value > event.event_id_max
        {
            return Err(InvalidConfig::EventId {
                what,
                value,
                max: event.event_id_max,
            });
        }
    }
    Ok(())
}
