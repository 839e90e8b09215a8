//! Event ids.

use serde::Serialize;

/// An event id: a number from 0 to the service's `event_id_max`. Any `u32` makes an
/// id; one above the service's maximum is refused when notified
/// ([`crate::NotifyError::EventIdOutOfBounds`]).
///
/// ```
/// use iox_service::EventId;
/// let id = EventId::new(3);
/// assert_eq!(id.as_value(), 3);
/// assert_eq!(id.to_string(), "3");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
pub struct EventId(u32);

impl EventId {
    /// The id `value`.
    pub const fn new(value: u32) -> Self {
        Self(value)
    }

    /// Its number.
    pub const fn as_value(self) -> u32 {
        self.0
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<u32> for EventId {
    fn from(value: u32) -> Self {
        Self(value)
    }
}
