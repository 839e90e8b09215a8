//! A blackboard service: its builder (limits, keys with their initial values,
//! compatibility with an existing service) and the open service that writers, readers
//! and change listeners are built from.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use super::config::{BlackboardConfig, BlackboardEntry};
use super::layout::{BlackboardLayout, ValuePlace, value_places};
use super::{ReaderBuilder, WriterBuilder, key_bytes, value};
use crate::dynamic::Dynamic;
use crate::event::{EventId, EventService, ListenerBuilder};
use crate::static_config::{MessagingPattern, PatternConfig, StaticConfig};
use crate::{Payload, PayloadType, ZeroCopySafe};
use iox_core::service::{self, CreateError, OpenError, OpenOrCreateError, Pattern, ServiceShared, Target};

/// Default `max_writers`.
const DEFAULT_WRITERS: u32 = 1;
/// Default `max_readers`.
const DEFAULT_READERS: u32 = 8;
/// Default `max_listeners` of the changes service.
const DEFAULT_LISTENERS: u32 = 16;

/// What writes a key's initial value into its first buffer.
pub(crate) type Initial = Box<dyn Fn(*mut u8) + Send + Sync>;

/// Builds, opens or creates a blackboard with keys of type `K`. The keys and their
/// value types are fixed when it is created ([`add`](Self::add), each with its initial
/// value); an opener's `add`s are checked against the existing keys instead (a
/// missing key or another value type is [`OpenError::IncompatibleLimit`] naming it),
/// and so are the limits it sets.
///
/// ```
/// use iox_service::Service;
/// let dir = tempfile::tempdir().unwrap();
/// let board = Service::named("robot/state").unwrap()
///     .root(dir.path())
///     .blackboard::<u32>()
///     .add::<f64>(0, 0.0)          // key 0: a speed
///     .add::<[f32; 3]>(1, [0.0; 3]) // key 1: a position
///     .open_or_create()
///     .unwrap();
/// let writer = board.writer_builder().create().unwrap();
/// let reader = board.reader_builder().create().unwrap();
/// writer.entry::<f64>(&0).unwrap().update_with_copy(1.5).unwrap();
/// let speed = reader.entry::<f64>(&0).unwrap();
/// assert_eq!(speed.get().unwrap(), 1.5);
/// assert!(!speed.has_changed());
/// ```
pub struct BlackboardBuilder<K: ZeroCopySafe> {
    target: Target,
    max_writers: Option<u32>,
    max_readers: Option<u32>,
    max_listeners: Option<u32>,
    permissions: Option<u32>,
    entries: Vec<(BlackboardEntry, Initial)>,
    _key: PhantomData<fn() -> K>,
}

impl<K: ZeroCopySafe> std::fmt::Debug for BlackboardBuilder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlackboardBuilder")
            .field("target", &self.target)
            .field("keys", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl<K: ZeroCopySafe + std::fmt::Debug> BlackboardBuilder<K> {
    pub(crate) fn new(target: Target) -> Self {
        const {
            assert!(
                K::ANY_BIT_PATTERN,
                "a blackboard key type has no padding and no invalid bit patterns (an integer, or an array of them)"
            )
        };
        Self {
            target,
            max_writers: None,
            max_readers: None,
            max_listeners: None,
            permissions: None,
            entries: Vec::new(),
            _key: PhantomData,
        }
    }

    /// Adds key `key` with values of type `V`, starting at `initial` (when creating;
    /// when opening, the service must have this key with this value type). A key
    /// added twice is refused at creation.
    pub fn add<V: ZeroCopySafe>(self, key: K, initial: V) -> Self {
        let write: Initial = Box::new(move |dst| {
            // SAFETY: `dst` is the key's first buffer, sized and aligned for V (the
            // entry's recorded type, from which its place was computed).
            unsafe { dst.cast::<V>().write(initial) }
        });
        self.add_entry(key_bytes(&key).to_vec(), <V as Payload>::payload_type(), write)
    }

    /// Adds the key with bytes `key`, values of `value`, written first by `initial`.
    pub(crate) fn add_entry(mut self, key: Vec<u8>, value: PayloadType, initial: Initial) -> Self {
        self.entries.push((BlackboardEntry { key, value }, initial));
        self
    }

    /// Most writers at once (default 1). On open: the service must allow this many.
    pub fn max_writers(mut self, n: u32) -> Self {
        self.max_writers = Some(n);
        self
    }
    /// Most readers at once (default 8; writers + readers <= 47). On open: the
    /// service must allow this many.
    pub fn max_readers(mut self, n: u32) -> Self {
        self.max_readers = Some(n);
        self
    }
    /// Most change listeners at once (default 16), when creating.
    pub fn max_listeners(mut self, n: u32) -> Self {
        self.max_listeners = Some(n);
        self
    }
    /// Unix permissions of the files and sockets (default 0o600).
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

    crate::builder_attributes::attribute_methods!("blackboard::<u32>().add::<u64>(0, 0)");

    /// Creates the blackboard; fails if it exists.
    pub fn create(self) -> Result<BlackboardService<K>, CreateError> {
        let shared = service::create(&self.target, &self)?;
        let changes = self
            .changes(true)
            .map_err(|(changes, source)| CreateError::BlackboardChanges {
                name: self.target.name.to_string(),
                changes,
                source,
            })?;
        Ok(BlackboardService::new(shared, changes))
    }

    /// Opens the blackboard; fails if it does not exist.
    pub fn open(self) -> Result<BlackboardService<K>, OpenError> {
        let shared = service::open(&self.target, &self)?;
        let changes = self
            .changes(false)
            .map_err(|(changes, source)| OpenError::BlackboardChanges {
                name: self.target.name.to_string(),
                changes,
                source,
            })?;
        Ok(BlackboardService::new(shared, changes))
    }

    /// Opens the blackboard, or creates it if it does not exist. Any number of
    /// processes may race this: exactly one creates, the others open.
    pub fn open_or_create(self) -> Result<BlackboardService<K>, OpenOrCreateError> {
        let shared = service::open_or_create(&self.target, &self)?;
        let changes = self.changes(shared.created).map_err(|(changes, source)| {
            OpenOrCreateError::Open(OpenError::BlackboardChanges {
                name: self.target.name.to_string(),
                changes,
                source,
            })
        })?;
        Ok(BlackboardService::new(shared, changes))
    }

    /// The event service that carries "key changed" (`NAME/~changes`, event id = the
    /// key's index), opened or created beside the blackboard (its creator sets its
    /// limits); on failure its name and why.
    fn changes(&self, created: bool) -> Result<EventService, (String, Box<OpenOrCreateError>)> {
        let name = format!("{}/~changes", self.target.name);
        let fail = |e: OpenOrCreateError| (name.clone(), Box::new(e));
        let service_name = crate::ServiceName::new(&name).map_err(|e| {
            fail(OpenOrCreateError::Create(CreateError::InvalidSetting {
                name: name.clone(),
                source: e.into(),
            }))
        })?;
        let mut b = crate::EventBuilder::new(Target::new(service_name, self.target.root.clone()))
            .timeout(self.target.timeout);
        if created {
            b = b
                .max_notifiers(self.max_writers.unwrap_or(DEFAULT_WRITERS))
                .max_listeners(self.max_listeners.unwrap_or(DEFAULT_LISTENERS))
                .event_id_max(self.entries.len().saturating_sub(1) as u32);
        }
        if let Some(mode) = self.permissions {
            b = b.permissions(mode);
        }
        b.open_or_create().map_err(fail)
    }
}

impl<K: ZeroCopySafe + std::fmt::Debug> Pattern for BlackboardBuilder<K> {
    const PATTERN: MessagingPattern = MessagingPattern::Blackboard;
    type Section = BlackboardConfig;

    fn section(c: &StaticConfig) -> Option<&BlackboardConfig> {
        c.blackboard()
    }

    fn new_config(&self, target: &Target) -> Result<StaticConfig, CreateError> {
        let max_readers = self.max_readers.unwrap_or(DEFAULT_READERS);
        let pattern = PatternConfig::Blackboard(BlackboardConfig {
            max_writers: self.max_writers.unwrap_or(DEFAULT_WRITERS),
            max_readers,
            buffers: 2 * max_readers + 2,
            key_type: <K as Payload>::payload_type(),
            entries: self.entries.iter().map(|(e, _)| e.clone()).collect(),
        });
        // The values live in the dynamic segment (see the module docs): the pool is
        // the minimal one.
        service::payloadless_config(target, pattern, "blackboard", self.permissions)
    }

    fn init_dynamic(&self, config: &StaticConfig, d: Dynamic<'_>) {
        let Some(c) = config.blackboard() else { return };
        let (places, _) = value_places(c, d.regions::<BlackboardLayout>().values);
        for (k, ((_, initial), place)) in self.entries.iter().zip(places).enumerate() {
            initial(d.value_ptr(place, 0));
            value::publish(d.key_words(k).current, 0);
        }
    }

    fn check_compatible(
        &self,
        target: &Target,
        _: &StaticConfig,
        found: &BlackboardConfig,
    ) -> Result<(), OpenError> {
        let incompatible = |what, requested: String, found: String| {
            Err(OpenError::IncompatibleLimit {
                name: target.name.to_string(),
                what,
                requested,
                found,
            })
        };
        let key_type = <K as Payload>::payload_type();
        if found.key_type != key_type {
            return incompatible("key type", key_type.to_string(), found.key_type.to_string());
        }
        let limits = [
            ("max_writers", self.max_writers, found.max_writers),
            ("max_readers", self.max_readers, found.max_readers),
        ];
        for (what, requested, have) in limits {
            if let Some(r) = requested
                && r > have
            {
                return incompatible(what, r.to_string(), have.to_string());
            }
        }
        for (entry, _) in &self.entries {
            let key = key_of::<K>(&entry.key);
            match found.index_of(&entry.key) {
                None => {
                    return incompatible("no key", format!("key {key:?}"), format!("{key:?}"));
                }
                Some(i) if found.entries[i].value != entry.value => {
                    return incompatible(
                        "value type",
                        format!("{} for key {key:?}", entry.value),
                        format!("{} for key {key:?}", found.entries[i].value),
                    );
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// The key whose bytes are `bytes` (of `K`'s size: from a checked config).
pub(crate) fn key_of<K: ZeroCopySafe>(bytes: &[u8]) -> K {
    assert_eq!(bytes.len(), size_of::<K>(), "a key of the key type's size");
    // SAFETY: K is valid for every bit pattern (checked when the builder was made)
    // and `bytes` has its size; read unaligned.
    unsafe { bytes.as_ptr().cast::<K>().read_unaligned() }
}

/// An open blackboard. Clone it freely; ports keep it alive.
#[derive(Debug)]
pub struct BlackboardService<K> {
    pub(crate) shared: Arc<ServiceShared>,
    pub(crate) places: Arc<Vec<ValuePlace>>,
    pub(crate) changes: EventService,
    _key: PhantomData<fn() -> K>,
}

impl<K> Clone for BlackboardService<K> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            places: self.places.clone(),
            changes: self.changes.clone(),
            _key: PhantomData,
        }
    }
}

impl<K: ZeroCopySafe + std::fmt::Debug> BlackboardService<K> {
    crate::handle_methods::handle_methods!("writers and readers", "blackboard::<u32>().add::<u64>(0, 0)");

    fn new(shared: ServiceShared, changes: EventService) -> Self {
        let c = shared
            .config
            .blackboard()
            .expect("a blackboard service has its blackboard section (checked on open)");
        let (places, _) = value_places(c, shared.dynamic().regions::<BlackboardLayout>().values);
        Self {
            shared: Arc::new(shared),
            places: Arc::new(places),
            changes,
            _key: PhantomData,
        }
    }

    /// The blackboard section of the static config (limits, keys, value types).
    pub fn blackboard_config(&self) -> &BlackboardConfig {
        self.shared
            .config
            .blackboard()
            .expect("a blackboard service has its blackboard section (checked on open)")
    }

    /// The keys, in the order of their event ids.
    pub fn keys(&self) -> Vec<K> {
        self.blackboard_config()
            .entries
            .iter()
            .map(|e| key_of(&e.key))
            .collect()
    }

    /// The event id a change listener gets when `key` changes (its index), if the
    /// blackboard has the key.
    pub fn event_id(&self, key: &K) -> Option<EventId> {
        self.blackboard_config()
            .index_of(key_bytes(key))
            .map(|i| EventId::new(i as u32))
    }

    /// A builder for a writer.
    pub fn writer_builder(&self) -> WriterBuilder<K> {
        WriterBuilder::new(self.clone())
    }

    /// A builder for a reader.
    pub fn reader_builder(&self) -> ReaderBuilder<K> {
        ReaderBuilder::new(self.clone())
    }

    /// A builder for a listener of changes: it gets event id `i` (see
    /// [`event_id`](Self::event_id)) when key `i` is updated, and works with the
    /// WaitSet and (`tokio` feature) `wait_async` as any listener.
    pub fn listener_builder(&self) -> ListenerBuilder {
        self.changes.listener_builder()
    }

    /// The generation of `key`'s value now (1 for the initial value, one more per
    /// update), without reading it; `None` for a key the blackboard does not have.
    pub fn generation(&self, key: &K) -> Option<u64> {
        let k = self.blackboard_config().index_of(key_bytes(key))?;
        Some(self.shared.dynamic().key_words(k).generation())
    }
}

impl<K> BlackboardService<K> {
    /// The buffers of key number `index` (the order of [`keys`](Self::keys)) that
    /// readers pin right now, each with the reader slots pinning it (a snapshot, for
    /// tools and tests); `None` for an index out of range.
    pub fn pins_of(&self, index: usize) -> Option<Vec<(usize, Vec<usize>)>> {
        let c = self.shared.config.blackboard()?;
        if index >= c.entries.len() {
            return None;
        }
        let words = self.shared.dynamic().key_words(index);
        let mut pins: Vec<(usize, Vec<usize>)> = Vec::new();
        for (slot, mine) in words.pins.chunks(value::READER_WORDS).enumerate() {
            for w in [value::COPY, value::GUARD] {
                let p = mine[w].load(std::sync::atomic::Ordering::Relaxed);
                if p == 0 {
                    continue;
                }
                let b = p as usize - 1;
                match pins.iter_mut().find(|(x, _)| *x == b) {
                    Some((_, slots)) => slots.push(slot),
                    None => pins.push((b, vec![slot])),
                }
            }
        }
        pins.sort();
        Some(pins)
    }

    pub(crate) fn dynamic(&self) -> Dynamic<'_> {
        self.shared.dynamic()
    }
}
