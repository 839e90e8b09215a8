//! Notifiers: set an event id pending for every listener, and wake those that wait.
//!
//! A notify is, per active listener, one `fetch_or` on the word of its pending set
//! that holds the id, then one SeqCst fence, then one load of each reached listener's
//! `waiting` word; the wake syscall (futex wake, or a datagram to an armed listener's
//! doorbell) happens only for listeners that sleep or armed their descriptor. It never
//! blocks and never fails because of a listener: a dead, stopped or slow listener just
//! has the bit set (at most one per id: notifications coalesce).
//!
//! A notifier is `Send + Sync`: its state is the slot it claimed and its connections
//! to the listeners' doorbells (behind a mutex taken only to ring), so threads may
//! share one.

use std::sync::atomic::Ordering;

use thiserror::Error;

use super::{EventId, pending};
use crate::doorbell::Ringer;
use crate::dynamic::PortHeader;
use crate::port::{self, PortCreateError, Shared, Side};
use crate::slot_claim::SlotClaim;

/// Builds a [`Notifier`].
#[derive(Debug)]
pub struct NotifierBuilder {
    service: Shared,
    default_id: EventId,
}

/// Why a notify failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// The id is above the service's `event_id_max`.
    #[error(
        "event id {id} is above this service's event_id_max {max}; use an id from 0 to {max}, or create the service with a larger .event_id_max(..)"
    )]
    EventIdOutOfBounds {
        /// The id notified.
        id: u32,
        /// The service's `event_id_max`.
        max: u32,
    },
    /// The notify reached no listener because the service was removed (e.g.
    /// `iox remove --force`) after this notifier's handle opened it: drop the notifier
    /// and the handle and open the service again.
    #[error(
        "the service was removed after this notifier's handle opened it; the event reached no one (drop the notifier and the handle, and open the service again)"
    )]
    ServiceRemoved,
    /// This process is a fork of the one that made the notifier.
    #[error(
        "this notifier belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
}

impl NotifierBuilder {
    pub(crate) fn new(service: Shared) -> Self {
        Self {
            service,
            default_id: EventId::new(0),
        }
    }

    /// The id [`Notifier::notify`] sends (default 0).
    pub fn default_event_id(mut self, id: EventId) -> Self {
        self.default_id = id;
        self
    }

    /// Claims a notifier slot. Emits the service's `notifier_created_event`, if it
    /// has one.
    pub fn create(self) -> Result<Notifier, PortCreateError> {
        // Claiming recovers dead participants first; a dead notifier found there
        // emits the dead event.
        let claim = SlotClaim::new(&self.service, Side::Sending, "notifier")?;
        let l = *self.service.dynamic().layout();
        let (slot, generation) = claim.activate(None);
        let event = *self
            .service
            .config
            .event()
            .expect("an event service (checked on open)");
        let notifier = Notifier {
            ringer: Ringer::new(&self.service.root, &self.service.stem, l.receiving),
            event_id_max: event.event_id_max,
            fork_generation: self.service.fork_generation,
            service: self.service,
            slot,
            generation,
            default_id: self.default_id,
        };
        if let Some(id) = event.notifier_created_event {
            pending::signal(notifier.service.dynamic(), id, &notifier.ringer);
        }
        Ok(notifier)
    }
}

/// Signals event ids to every listener of the service.
///
/// ```
/// use iox_service::{EventId, Service};
/// let dir = tempfile::tempdir().unwrap();
/// let event = Service::named("door").unwrap().root(dir.path()).event().open_or_create().unwrap();
/// let notifier = event.notifier_builder().create().unwrap();
/// assert_eq!(notifier.notify().unwrap(), 0); // no listener yet
/// let listener = event.listener_builder().create().unwrap();
/// notifier.notify_with_custom_event_id(EventId::new(7)).unwrap();
/// notifier.notify_with_custom_event_id(EventId::new(7)).unwrap(); // coalesces
/// let mut seen = Vec::new();
/// listener.try_wait_all(|id| seen.push(id)).unwrap();
/// assert_eq!(seen, [EventId::new(7)]);
/// assert!(notifier.notify_with_custom_event_id(EventId::new(256)).is_err()); // above event_id_max
/// ```
#[derive(Debug)]
pub struct Notifier {
    service: Shared,
    slot: usize,
    generation: u64,
    default_id: EventId,
    event_id_max: u32,
    fork_generation: u64,
    /// Connections to the listeners' readiness sockets, for those that arm them.
    ringer: Ringer,
}

impl Notifier {
    /// Notifies the builder's default event id; returns how many listeners it reached.
    pub fn notify(&self) -> Result<usize, NotifyError> {
        self.notify_with_custom_event_id(self.default_id)
    }

    /// Notifies `id`; returns how many listeners it reached (those connected now).
    /// Never blocks.
    pub fn notify_with_custom_event_id(&self, id: EventId) -> Result<usize, NotifyError> {
        if !crate::fork::is_same_process(self.fork_generation) {
            return Err(NotifyError::ForkedProcess);
        }
        if id.as_value() > self.event_id_max {
            return Err(NotifyError::EventIdOutOfBounds {
                id: id.as_value(),
                max: self.event_id_max,
            });
        }
        let d = self.service.dynamic();
        let reached = pending::signal(d, id.as_value(), &self.ringer);
        self.header().sent.fetch_add(1, Ordering::Relaxed);
        if reached == 0 && self.service.is_removed() {
            return Err(NotifyError::ServiceRemoved);
        }
        Ok(reached)
    }

    /// The service's `ports_changed` word now, for a caller that keeps the active
    /// listener slots ([`Notifier::listener_slots`]) until it changes.
    pub(crate) fn ports_changed(&self) -> u32 {
        self.service
            .dynamic()
            .header()
            .ports_changed
            .load(Ordering::Acquire)
    }

    /// The listener slots active now, a bit each (read after [`Notifier::ports_changed`]:
    /// a slot that becomes active after this look changes that word).
    pub(crate) fn listener_slots(&self) -> u64 {
        pending::active(self.service.dynamic())
    }

    /// Sets `id` (at most `event_id_max`: the caller's check) pending for the listener
    /// slots `slots` ([`Notifier::listener_slots`], kept while the ports did not change)
    /// and wakes those that wait: a notify without its checks, count or look at every
    /// slot, for a blackboard writer's changes (which checked the process and counts
    /// updates). A listener that became active since the slots were looked up is
    /// reached once the caller looks again, as one that became active just after a
    /// full look would be.
    pub(crate) fn signal(&self, id: EventId, slots: u64) {
        debug_assert!(id.as_value() <= self.event_id_max);
        pending::signal_to(self.service.dynamic(), id.as_value(), slots, &self.ringer);
    }

    /// The id [`Notifier::notify`] sends.
    pub fn default_event_id(&self) -> EventId {
        self.default_id
    }

    /// The largest id this service takes.
    pub fn event_id_max(&self) -> EventId {
        EventId::new(self.event_id_max)
    }

    /// Whether the service was removed (e.g. `iox remove --force`) after this
    /// notifier's handle opened it.
    pub fn is_service_removed(&self) -> bool {
        self.service.is_removed()
    }

    fn header(&self) -> &PortHeader {
        self.service.dynamic().sender(self.slot)
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        if !self.service.is_own_process() {
            return; // a forked child dropping its copy: the port is the parent's
        }
        let d = self.service.dynamic();
        let header = self.header();
        port::close(header, self.generation);
        port::free(header, self.generation);
        port::announce(d);
        if let Some(id) = self.service.config.event().and_then(|e| e.notifier_dropped_event) {
            pending::signal(d, id, &self.ringer);
        }
    }
}
