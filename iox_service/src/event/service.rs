//! An event service: its builder (limits, id range, lifecycle events, compatibility
//! with an existing service) and the open service that notifiers and listeners are
//! built from.

use std::sync::Arc;
use std::time::Duration;

use super::{ListenerBuilder, NotifierBuilder};
use crate::static_config::{EventConfig, MessagingPattern, PatternConfig, StaticConfig};
use iox_core::service::{self, CreateError, OpenError, OpenOrCreateError, Pattern, ServiceShared, Target};

/// Default `max_notifiers`.
const DEFAULT_NOTIFIERS: u32 = 16;
/// Default `max_listeners`.
const DEFAULT_LISTENERS: u32 = 16;
/// Default `event_id_max` (one cache line of pending bits per listener).
const DEFAULT_EVENT_ID_MAX: u32 = 255;

/// Builds, opens or creates an event service. Settings are applied when creating;
/// when opening, those the caller set are checked against the existing service (each
/// mismatch is [`OpenError::IncompatibleLimit`] naming the setting).
///
/// ```
/// use iox_service::{EventId, Service};
/// let dir = tempfile::tempdir().unwrap();
/// let event = Service::named("robot/estop").unwrap()
///     .root(dir.path())
///     .event()
///     .max_notifiers(4)
///     .max_listeners(8)
///     .event_id_max(255)
///     .open_or_create()
///     .unwrap();
/// let listener = event.listener_builder().create().unwrap();
/// let notifier = event.notifier_builder().default_event_id(EventId::new(3)).create().unwrap();
/// assert_eq!(notifier.notify().unwrap(), 1); // reached one listener
/// assert_eq!(listener.try_wait_one().unwrap(), Some(EventId::new(3)));
/// ```
#[derive(Debug)]
pub struct EventBuilder {
    target: Target,
    max_notifiers: Option<u32>,
    max_listeners: Option<u32>,
    event_id_max: Option<u32>,
    created: Option<u32>,
    dropped: Option<u32>,
    dead: Option<u32>,
    permissions: Option<u32>,
}

impl EventBuilder {
    pub(crate) fn new(target: Target) -> Self {
        Self {
            target,
            max_notifiers: None,
            max_listeners: None,
            event_id_max: None,
            created: None,
            dropped: None,
            dead: None,
            permissions: None,
        }
    }

    /// Most notifiers at once (default 16; notifiers + listeners <= 47). On open: the
    /// service must allow this many.
    pub fn max_notifiers(mut self, n: u32) -> Self {
        self.max_notifiers = Some(n);
        self
    }
    /// Most listeners at once (default 16). On open: the service must allow this many.
    pub fn max_listeners(mut self, n: u32) -> Self {
        self.max_listeners = Some(n);
        self
    }
    /// The largest event id (default 255, at most
    /// [`MAX_EVENT_ID`](crate::static_config::MAX_EVENT_ID)). On open: the service's must be
    /// at least this.
    pub fn event_id_max(mut self, max: u32) -> Self {
        self.event_id_max = Some(max);
        self
    }
    /// The event the service emits to its listeners when a notifier is created
    /// (default none). On open: must match if set.
    pub fn notifier_created_event(mut self, id: super::EventId) -> Self {
        self.created = Some(id.as_value());
        self
    }
    /// The event the service emits to its listeners when a notifier is dropped
    /// (default none). On open: must match if set.
    pub fn notifier_dropped_event(mut self, id: super::EventId) -> Self {
        self.dropped = Some(id.as_value());
        self
    }
    /// The event the service emits to its listeners when a dead notifier is recovered
    /// (default none). Emitted by the process that recovers it: see
    /// [`EventService::cleanup_dead`]. On open: must match if set.
    pub fn notifier_dead_event(mut self, id: super::EventId) -> Self {
        self.dead = Some(id.as_value());
        self
    }
    /// Unix permissions of the files and sockets (default 0o600; e.g. 0o660 for group
    /// access).
    pub fn permissions(mut self, mode: u32) -> Self {
        self.permissions = Some(mode);
        self
    }
    /// How long open and open-or-create wait for a service another process is
    /// creating or removing (default 10 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.target.timeout = d;
        self
    }

    crate::builder_attributes::attribute_methods!("event()");

    /// Creates the service; fails if it exists.
    pub fn create(self) -> Result<EventService, CreateError> {
        service::create(&self.target, &self).map(EventService::new)
    }

    /// Opens the service; fails if it does not exist.
    pub fn open(self) -> Result<EventService, OpenError> {
        service::open(&self.target, &self).map(EventService::new)
    }

    /// Opens the service, or creates it if it does not exist. Any number of processes
    /// may race this: exactly one creates, the others open.
    pub fn open_or_create(self) -> Result<EventService, OpenOrCreateError> {
        service::open_or_create(&self.target, &self).map(EventService::new)
    }
}

impl Pattern for EventBuilder {
    const PATTERN: MessagingPattern = MessagingPattern::Event;
    type Section = EventConfig;

    fn section(c: &StaticConfig) -> Option<&EventConfig> {
        c.event()
    }

    fn new_config(&self, target: &Target) -> Result<StaticConfig, CreateError> {
        let pattern = PatternConfig::Event(EventConfig {
            max_notifiers: self.max_notifiers.unwrap_or(DEFAULT_NOTIFIERS),
            max_listeners: self.max_listeners.unwrap_or(DEFAULT_LISTENERS),
            event_id_max: self.event_id_max.unwrap_or(DEFAULT_EVENT_ID_MAX),
            notifier_created_event: self.created,
            notifier_dropped_event: self.dropped,
            notifier_dead_event: self.dead,
        });
        service::payloadless_config(target, pattern, "event", self.permissions)
    }

    fn check_compatible(
        &self,
        target: &Target,
        _: &StaticConfig,
        event: &EventConfig,
    ) -> Result<(), OpenError> {
        let incompatible = |what, requested: String, found: String| {
            Err(OpenError::IncompatibleLimit {
                name: target.name.to_string(),
                what,
                requested,
                found,
            })
        };
        let limits = [
            ("max_notifiers", self.max_notifiers, event.max_notifiers),
            ("max_listeners", self.max_listeners, event.max_listeners),
            ("event_id_max", self.event_id_max, event.event_id_max),
        ];
        for (what, requested, found) in limits {
            if let Some(r) = requested
                && r > found
            {
                return incompatible(what, r.to_string(), found.to_string());
            }
        }
        let lifecycle = [
            (
                "notifier_created_event",
                self.created,
                event.notifier_created_event,
            ),
            (
                "notifier_dropped_event",
                self.dropped,
                event.notifier_dropped_event,
            ),
            ("notifier_dead_event", self.dead, event.notifier_dead_event),
        ];
        let show = |id: Option<u32>| id.map_or("none".to_string(), |i| i.to_string());
        for (what, requested, found) in lifecycle {
            if requested.is_some() && requested != found {
                return incompatible(what, show(requested), show(found));
            }
        }
        Ok(())
    }
}

/// An open event service. Clone it freely; ports keep it alive. When the last handle
/// of the last process goes, the service is removed.
#[derive(Debug, Clone)]
pub struct EventService {
    pub(crate) shared: Arc<ServiceShared>,
}

impl EventService {
    crate::handle_methods::handle_methods!(
        "notifiers and listeners",
        "event()",
        "A dead notifier found here makes the service emit its `notifier_dead_event` to \
         the listeners: call this from a listener's process (a timer, or after learning \
         that a peer died) to have dead notifiers reported without waiting for another \
         process to recover them."
    );

    pub(crate) fn new(shared: ServiceShared) -> Self {
        Self {
            shared: Arc::new(shared),
        }
    }

    /// The event section of the static config (id range, lifecycle events).
    pub fn event_config(&self) -> EventConfig {
        *self
            .shared
            .config
            .event()
            .expect("an event service has its event section (checked on open)")
    }

    /// A builder for a notifier.
    pub fn notifier_builder(&self) -> NotifierBuilder {
        NotifierBuilder::new(self.shared.clone())
    }

    /// A builder for a listener.
    pub fn listener_builder(&self) -> ListenerBuilder {
        ListenerBuilder::new(self.shared.clone())
    }

    /// Listeners blocked in a `timed_wait_*` or `blocking_wait_*` right now (a
    /// snapshot).
    pub fn waiting_listeners(&self) -> usize {
        let d = self.shared.dynamic();
        (0..d.layout().receiving)
            .map(|s| {
                (d.receiver(s).waiting.load(std::sync::atomic::Ordering::Relaxed) & crate::doorbell::SLEEPERS)
                    as usize
            })
            .sum()
    }
}
