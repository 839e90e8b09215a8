//! Import (Zenoh -> local): one Zenoh subscriber per import pattern, whose callback
//! publishes each sample into the local service on the Zenoh thread that delivered it,
//! and one set-up thread per pattern that opens the local services.
//!
//! Publishing in Zenoh's callback means no thread hand-off between the network and
//! the local subscribers (before, a thread of the bridge took each sample from Zenoh's
//! channel: one more wake-up per sample). Zenoh runs a subscriber's callbacks on
//! whichever of its threads received the sample, so the local publishers are kept as
//! [`SendablePublisher`]s in one `Mutex`: a callback takes the one of its service out,
//! sends, and puts it back. Samples of one key from one peer arrive in order on one
//! link and their callbacks do not overlap, so the order per publisher is kept.
//!
//! The first sample of a key must not wait in the callback (that would hold up
//! Zenoh's receive path, and the config query's reply travels on it): it is held
//! (at most [`HELD_WHILE_OPENING`] per service, the oldest dropped beyond and counted
//! as failed) and the service's name goes to the set-up thread, whose opener
//! (`iox_service::opener`) opens each service on a thread of its own, with a short
//! timeout, so a service whose holders do not answer delays no other; that thread asks
//! the exporting bridge for the static config (a query on `<prefix>-config/<name>`,
//! answered by the exporter's queryable), opens or creates the local service to match
//! with [`local::open_like`] (or, with no answer, a plain Zenoh publisher's,
//! [`local::open_default`] gives a `[u8]` service), creates the publisher, publishes
//! what was held, in order, and only then lets the callbacks publish directly.
//! Each payload is copied once, from Zenoh's buffer fragments into a loaned chunk
//! ([`Publisher::send_payload_bytes`](iox_service::Publisher::send_payload_bytes)).
//! A publisher never blocks (its overflow policy drops or refuses), so neither does
//! the callback.
//!
//! The subscriber accepts remote samples only (`Locality::Remote`), so what this
//! bridge exports is never imported back through its own session.
//!
//! Bad input never stops the import: an incompatible or malformed config, or an open
//! that fails, marks the service skipped (logged with its name and the reason; looked
//! up again after [`RETRY`], doubling while it keeps failing), a payload the local pool
//! cannot take is logged and counted, and every other service keeps flowing.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iox_service::opener::{Backoff, OpenFailed, Opener};
use iox_service::{SendBytesError, SendError, SendablePublisher, StaticConfig};
use zenoh::Wait;
use zenoh::bytes::ZBytes;
use zenoh::sample::Locality;

use crate::export::OwnSlot;
use crate::keys::{Keys, Pattern};
use crate::local;

/// How long a skipped service stays skipped before the bridge looks it up again.
pub const RETRY: Duration = Duration::from_secs(5);
/// How long the bridge waits for an exporter's config.
pub const CONFIG_TIMEOUT: Duration = Duration::from_secs(1);
/// Samples of one service held while its local end is being opened.
pub const HELD_WHILE_OPENING: usize = 64;

/// Counters of one imported service.
#[derive(Debug, Default)]
pub struct ImportStats {
    /// Samples received from Zenoh.
    pub received: AtomicU64,
    /// Samples published locally.
    pub published: AtomicU64,
    /// Samples that could not be published (too large, wrong length, pool exhausted,
    /// or more than [`HELD_WHILE_OPENING`] arriving while the service was opened).
    pub failed: AtomicU64,
}

/// What the import side shares with the rest of the bridge.
pub struct ImportShared {
    /// The local root.
    pub root: PathBuf,
    /// The key mapping.
    pub keys: Keys,
    /// The bridge's publisher slot per service (for the exporters' echo filter).
    pub own_slots: Arc<Mutex<HashMap<String, OwnSlot>>>,
    /// Per imported service: its counters, or why it is skipped.
    pub status: Mutex<HashMap<String, ImportState>>,
    /// Set to stop.
    pub stop: AtomicBool,
}

/// How one imported service is doing.
#[derive(Debug, Clone)]
pub enum ImportState {
    /// Flowing, with its counters.
    Flowing(Arc<ImportStats>),
    /// Skipped, and why.
    Skipped(String),
}

/// The slot cell of service `name` (created on first use).
pub fn own_slot(map: &Mutex<HashMap<String, OwnSlot>>, name: &str) -> OwnSlot {
    crate::lock(map)
        .entry(name.to_owned())
        .or_insert_with(|| Arc::new(usize::MAX.into()))
        .clone()
}

/// The local end of one imported service.
enum Local {
    /// The set-up thread is opening it; samples wait here.
    Opening {
        held: VecDeque<ZBytes>,
        stats: Arc<ImportStats>,
    },
    Open {
        /// `None` only while a callback sends through it (never seen outside the lock).
        publisher: Option<SendablePublisher<[u8]>>,
        stats: Arc<ImportStats>,
        // Kept after the publisher (field order): the service handle.
        _service: iox_service::PubSubService<[u8]>,
    },
    Skipped {
        /// When the next sample may have it opened again (the opener's back-off).
        until: Instant,
    },
}

/// One import pattern's state, shared by Zenoh's callbacks and the set-up thread.
struct Importer {
    shared: Arc<ImportShared>,
    locals: Mutex<HashMap<String, Local>>,
    /// Names for the set-up thread to open.
    to_open: mpsc::Sender<String>,
}

/// Runs the import of `pattern` until `shared.stop` is set: declares the subscriber,
/// then opens local services as their first samples arrive.
pub fn run(session: zenoh::Session, pattern: Pattern, shared: Arc<ImportShared>) -> Result<(), String> {
    let key = shared.keys.data_pattern(&pattern);
    let (to_open, opening) = mpsc::channel();
    let importer = Arc::new(Importer {
        shared: shared.clone(),
        locals: Mutex::new(HashMap::new()),
        to_open,
    });
    let subscriber = {
        let importer = importer.clone();
        session
            .declare_subscriber(&key)
            .allowed_origin(Locality::Remote)
            .callback(move |sample| importer.on_sample(&sample))
            .wait()
            .map_err(|e| format!("cannot subscribe to {key}: {e}"))?
    };
    // Each service is opened on a thread of its own (`iox_service::opener`): one whose
    // holders do not answer delays no other.
    let mut opener: Opener<Opened> = Opener::new(Backoff {
        first: RETRY,
        most: RETRY * 6,
    });
    while !shared.stop.load(Ordering::Relaxed) {
        for f in opener.finished() {
            importer.settle(&f.name, f.result);
        }
        let wait = if opener.idle() {
            Duration::from_millis(100)
        } else {
            Duration::from_millis(10)
        };
        match opening.recv_timeout(wait) {
            Ok(name) => {
                let (session, shared, key) = (session.clone(), shared.clone(), name.clone());
                if !opener.open(&name, move || open(&session, &shared, &key)) {
                    // Still being opened, or waiting out its back-off: the first sample
                    // after that opens it.
                    importer.settle(
                        &name,
                        Err(OpenFailed {
                            why: "an open of it is in flight or backed off".into(),
                            failures: 0,
                            retry_in: RETRY,
                        }),
                    );
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // No callback runs after this; the publishers go with the last `Arc`.
    let _ = subscriber.undeclare().wait();
    Ok(())
}

impl Importer {
    /// Zenoh's callback: publish, or hold the sample while the service is opened.
    fn on_sample(&self, sample: &zenoh::sample::Sample) {
        let Some(name) = self.shared.keys.service_of(sample.key_expr()) else {
            return;
        };
        let mut locals = crate::lock(&self.locals);
        match locals.get_mut(name) {
            Some(Local::Open { publisher, stats, .. }) => {
                stats.received.fetch_add(1, Ordering::Relaxed);
                if publish(name, publisher, stats, sample.payload()) == Published::ServiceRemoved {
                    // Removed locally (`iox remove --force`): open it afresh next time.
                    eprintln!("iox-zenoh: local service {name:?} was removed; it is opened again");
                    own_slot(&self.shared.own_slots, name).store(usize::MAX, Ordering::Relaxed);
                    locals.remove(name);
                }
            }
            Some(Local::Opening { held, stats }) => {
                stats.received.fetch_add(1, Ordering::Relaxed);
                if held.len() == HELD_WHILE_OPENING {
                    held.pop_front();
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                }
                held.push_back(sample.payload().clone());
            }
            Some(Local::Skipped { until }) if Instant::now() < *until => {}
            _ => {
                let stats = Arc::new(ImportStats::default());
                stats.received.fetch_add(1, Ordering::Relaxed);
                let held = VecDeque::from([sample.payload().clone()]);
                locals.insert(name.to_owned(), Local::Opening { held, stats });
                // The set-up thread is gone only when the import stops.
                let _ = self.to_open.send(name.to_owned());
            }
        }
    }

    /// The set-up thread, once `name`'s open finished: publishes what was held and
    /// lets the callbacks publish, or marks it skipped until its back-off passes.
    fn settle(&self, name: &str, opened: Result<Opened, OpenFailed>) {
        let mut locals = crate::lock(&self.locals);
        if !matches!(locals.get(name), Some(Local::Opening { .. })) {
            return; // nothing waits for this open (an entry in another state stays)
        }
        let Some(Local::Opening { held, stats }) = locals.remove(name) else {
            return;
        };
        let local = match opened {
            Ok((service, publisher)) => {
                let mut publisher = Some(publisher);
                for payload in &held {
                    if publish(name, &mut publisher, &stats, payload) == Published::ServiceRemoved {
                        // Removed in between: the next sample opens it afresh.
                        own_slot(&self.shared.own_slots, name).store(usize::MAX, Ordering::Relaxed);
                        return;
                    }
                }
                crate::lock(&self.shared.status).insert(name.to_owned(), ImportState::Flowing(stats.clone()));
                eprintln!("iox-zenoh: importing {name:?}");
                Local::Open {
                    publisher,
                    stats,
                    _service: service,
                }
            }
            Err(failed) => {
                eprintln!("iox-zenoh: import of {name:?} skipped: {failed}");
                crate::lock(&self.shared.status)
                    .insert(name.to_owned(), ImportState::Skipped(failed.why.clone()));
                Local::Skipped {
                    until: Instant::now() + failed.retry_in,
                }
            }
        };
        locals.insert(name.to_owned(), local);
    }
}

#[derive(PartialEq, Eq)]
enum Published {
    Done,
    ServiceRemoved,
}

/// Publishes one payload through the service's publisher (taken out of its slot for
/// the send, put back after: no loan outlives `send_payload_bytes`).
fn publish(
    name: &str,
    slot: &mut Option<SendablePublisher<[u8]>>,
    stats: &ImportStats,
    payload: &ZBytes,
) -> Published {
    let Some(publisher) = slot.take().map(SendablePublisher::into_publisher) else {
        return Published::ServiceRemoved;
    };
    let parts: Vec<&[u8]> = payload.slices().collect();
    let sent = match publisher.header_len() {
        0 => publisher.send_payload_bytes(&parts),
        n => {
            // The header's bytes lead (see `export`): split them off the parts.
            let (header, rest) = split_header(&parts, n);
            publisher.send_sample_bytes(&header, &rest)
        }
    };
    *slot = publisher.into_sendable().ok();
    match sent {
        Ok(_) => {
            stats.published.fetch_add(1, Ordering::Relaxed);
            Published::Done
        }
        Err(SendBytesError::Send(SendError::ServiceRemoved)) => {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            Published::ServiceRemoved
        }
        Err(e) => {
            if stats.failed.fetch_add(1, Ordering::Relaxed).is_multiple_of(1000) {
                eprintln!("iox-zenoh: import of {name:?}: a sample was not published: {e}");
            }
            Published::Done
        }
    }
}

/// The first `n` bytes of the concatenation of `parts` (fewer if there are fewer:
/// then the send refuses the short header), and the parts that follow them.
fn split_header<'a>(parts: &[&'a [u8]], n: usize) -> (Vec<u8>, Vec<&'a [u8]>) {
    let mut header = Vec::with_capacity(n);
    let mut rest = Vec::with_capacity(parts.len());
    for part in parts {
        let take = (n - header.len()).min(part.len());
        header.extend_from_slice(&part[..take]);
        if take < part.len() {
            rest.push(&part[take..]);
        }
    }
    (header, rest)
}

/// A local service opened for import, and the bridge's publisher of it.
type Opened = (iox_service::PubSubService<[u8]>, SendablePublisher<[u8]>);

/// Looks up the service's config, opens the local end, creates the publisher (and
/// records its slot for the exporters' echo filter). Runs on an opener's thread.
fn open(session: &zenoh::Session, shared: &ImportShared, name: &str) -> Result<Opened, String> {
    let config = fetch_config(session, shared, name)?;
    let service = match &config {
        Some(c) => local::open_like(&shared.root, c),
        None => local::open_default(&shared.root, name),
    }
    .map_err(|e| e.to_string())?;
    let publisher = service
        .publisher_builder()
        .create()
        .map_err(|e| format!("cannot create the bridge publisher of {name:?}: {e}"))?;
    own_slot(&shared.own_slots, name).store(publisher.publisher_slot(), Ordering::Relaxed);
    let publisher = publisher
        .into_sendable()
        .map_err(|_| format!("the bridge publisher of {name:?} has a loan alive"))?;
    Ok((service, publisher))
}

/// The exporter's static config of `name`: `Ok(None)` when no exporter answers.
fn fetch_config(
    session: &zenoh::Session,
    shared: &ImportShared,
    name: &str,
) -> Result<Option<StaticConfig>, String> {
    let key = shared.keys.config_key(name).map_err(|e| e.to_string())?;
    let replies = session
        .get(&key)
        .timeout(CONFIG_TIMEOUT)
        .wait()
        .map_err(|e| format!("cannot query {key}: {e}"))?;
    while let Ok(reply) = replies.recv() {
        let Ok(sample) = reply.result() else { continue };
        let text = sample
            .payload()
            .try_to_string()
            .map_err(|e| format!("the remote static config of {name:?} is not UTF-8 ({e})"))?;
        // Parsed as a config file is (its size and nesting bounded, then checked).
        let label = std::path::PathBuf::from(format!("the remote static config of {name:?}"));
        let config = StaticConfig::parse(&text, &label).map_err(|e| e.to_string())?;
        if config.name != name {
            return Err(format!(
                "the remote static config answered for {name:?} names {:?}",
                config.name
            ));
        }
        if config.messaging_pattern() != iox_service::MessagingPattern::PublishSubscribe {
            return Err(format!("remote service {name:?} is not publish-subscribe"));
        }
        return Ok(Some(config));
    }
    Ok(None)
}
