//! Import (Zenoh -> local): one thread per import pattern, holding one Zenoh subscriber
//! on the pattern's keys and the local publishers of the services it has seen.
//!
//! The first sample of a key looks up the service: the exporting bridge's static config
//! (a query on `<prefix>-config/<name>`, answered by the exporter's queryable), then
//! [`local::open_like`] opens or creates the local service to match; with no answer
//! (a plain Zenoh publisher) [`local::open_default`] gives a `[u8]` service. Each
//! payload is copied once, from Zenoh's buffer fragments into a loaned chunk
//! ([`Publisher::send_payload_bytes`](iox_service::Publisher::send_payload_bytes)).
//!
//! The subscriber accepts remote samples only (`Locality::Remote`), so what this
//! bridge exports is never imported back through its own session.
//!
//! Bad input never stops the thread: an incompatible or malformed config marks the
//! service skipped (logged once with its name and the reason; looked up again after
//! [`RETRY`]), a payload the local pool cannot take is logged and counted, and every
//! other service keeps flowing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iox_service::{Publisher, SendBytesError, SendError, StaticConfig};
use zenoh::Wait;
use zenoh::sample::Locality;

use crate::export::OwnSlot;
use crate::keys::{Keys, Pattern};
use crate::local;

/// How long a skipped service stays skipped before the bridge looks it up again.
pub const RETRY: Duration = Duration::from_secs(5);
/// How long the bridge waits for an exporter's config.
pub const CONFIG_TIMEOUT: Duration = Duration::from_secs(1);

/// Counters of one imported service.
#[derive(Debug, Default)]
pub struct ImportStats {
    /// Samples received from Zenoh.
    pub received: AtomicU64,
    /// Samples published locally.
    pub published: AtomicU64,
    /// Samples that could not be published (too large, wrong length, pool exhausted).
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
    map.lock()
        .expect("own slots")
        .entry(name.to_owned())
        .or_insert_with(|| Arc::new(usize::MAX.into()))
        .clone()
}

enum Local {
    Open {
        publisher: Publisher<[u8]>,
        stats: Arc<ImportStats>,
        // Kept after the publisher (field order): the service handle.
        _service: iox_service::PubSubService<[u8]>,
    },
    Skipped {
        since: Instant,
    },
}

/// Runs the import of `pattern` until `shared.stop` is set.
pub fn run(session: zenoh::Session, pattern: Pattern, shared: Arc<ImportShared>) -> Result<(), String> {
    let key = shared.keys.data_pattern(&pattern);
    let subscriber = session
        .declare_subscriber(&key)
        .allowed_origin(Locality::Remote)
        .wait()
        .map_err(|e| format!("cannot subscribe to {key}: {e}"))?;
    let mut locals: HashMap<String, Local> = HashMap::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let sample = match subscriber.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => return Err(format!("the subscriber on {key} closed: {e}")),
        };
        let Some(name) = shared.keys.service_of(sample.key_expr()) else {
            continue;
        };
        let retry = match locals.get(name) {
            Some(Local::Skipped { since }) => since.elapsed() >= RETRY,
            Some(Local::Open { .. }) => false,
            None => true,
        };
        if retry {
            let local = open(&session, &shared, name);
            locals.insert(name.to_owned(), local);
        }
        let Some(Local::Open { publisher, stats, .. }) = locals.get(name) else {
            continue;
        };
        stats.received.fetch_add(1, Ordering::Relaxed);
        let parts: Vec<&[u8]> = sample.payload().slices().collect();
        match publisher.send_payload_bytes(&parts) {
            Ok(_) => {
                stats.published.fetch_add(1, Ordering::Relaxed);
            }
            Err(SendBytesError::Send(SendError::ServiceRemoved)) => {
                // Removed locally (`iox remove --force`): open it afresh next time.
                stats.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("iox-zenoh: local service {name:?} was removed; it is opened again");
                own_slot(&shared.own_slots, name).store(usize::MAX, Ordering::Relaxed);
                locals.remove(name);
            }
            Err(e) => {
                if stats.failed.fetch_add(1, Ordering::Relaxed) % 1000 == 0 {
                    eprintln!("iox-zenoh: import of {name:?}: a sample was not published: {e}");
                }
            }
        }
    }
    Ok(())
}

/// Looks up the service's config, opens the local end, creates the publisher.
fn open(session: &zenoh::Session, shared: &ImportShared, name: &str) -> Local {
    let opened = fetch_config(session, shared, name).and_then(|config| {
        let service = match &config {
            Some(c) => local::open_like(&shared.root, c),
            None => local::open_default(&shared.root, name),
        }
        .map_err(|e| e.to_string())?;
        let publisher = service
            .publisher_builder()
            .create()
            .map_err(|e| format!("cannot create the bridge publisher of {name:?}: {e}"))?;
        Ok((service, publisher))
    });
    let mut status = shared.status.lock().expect("import status");
    match opened {
        Ok((service, publisher)) => {
            own_slot(&shared.own_slots, name).store(publisher.publisher_slot(), Ordering::Relaxed);
            let stats = Arc::new(ImportStats::default());
            status.insert(name.to_owned(), ImportState::Flowing(stats.clone()));
            eprintln!("iox-zenoh: importing {name:?}");
            Local::Open {
                publisher,
                stats,
                _service: service,
            }
        }
        Err(why) => {
            eprintln!("iox-zenoh: import of {name:?} skipped: {why}");
            status.insert(name.to_owned(), ImportState::Skipped(why));
            Local::Skipped {
                since: Instant::now(),
            }
        }
    }
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
        let config: StaticConfig = ron::from_str(&text)
            .map_err(|e| format!("the remote static config of {name:?} is malformed: {e}"))?;
        config
            .check()
            .map_err(|e| format!("the remote static config of {name:?} is invalid: {e}"))?;
        if config.name != name {
            return Err(format!(
                "the remote static config answered for {name:?} names {:?}",
                config.name
            ));
        }
        if config.pattern != iox_service::MessagingPattern::PublishSubscribe {
            return Err(format!("remote service {name:?} is not publish-subscribe"));
        }
        return Ok(Some(config));
    }
    Ok(None)
}
