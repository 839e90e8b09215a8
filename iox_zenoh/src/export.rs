//! Export (local -> Zenoh): one bridge subscriber per exported service, each sample
//! one Zenoh put whose buffer *is* the received sample (no copy on the send side).
//!
//! Two threads per service. The receiver blocks in `receive_timeout` (the subscriber's
//! futex, the wait the hot path already supports; no readiness socket is armed, so
//! local publishers never ring one for the bridge) and moves each sample into a small
//! ring; the sender takes from the ring and puts it on Zenoh (`CongestionControl::Block`,
//! reliable). A slow or absent network thus blocks only the sender, never a local
//! publisher: the service's queue to the bridge buffers as for any subscriber, and once
//! it is full (`subscriber_buffer` entries waiting) while the ring is full too, the
//! receiver drops the oldest sample of the ring and counts it
//! ([`ExportStats::dropped`]). The receiver looks every millisecond while the ring is
//! full, so a publisher sending faster than that into a full queue can also have the
//! service's own drop-oldest act in the queue, uncounted: the count is a lower bound. The ring holds at most `max_held - 1`
//! samples (one more is in the sender's hands), so the bridge never exceeds the
//! service's `max_held`.
//!
//! Zero copy: the `Sample` is `'static + Send + Sync`, so it is moved into a
//! `bytes::Bytes` (`Bytes::from_owner`), which backs the `ZBytes` of the put; the chunk
//! returns to the pool when Zenoh drops the buffer (after serialising it onto the link).
//!
//! No echo: samples whose [`publisher_slot`](iox_service::Sample::publisher_slot) is the
//! slot of this bridge's own import publisher for the service are not exported.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use iox_service::{PubSubService, ReceiveError, Sample};
use zenoh::Wait;
use zenoh::key_expr::OwnedKeyExpr;
use zenoh::qos::CongestionControl;
use zenoh::sample::Locality;

/// Counters of one exported service.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Samples put on Zenoh.
    pub sent: AtomicU64,
    /// Samples dropped because the network did not keep up (oldest first).
    pub dropped: AtomicU64,
    /// Samples not exported because this bridge published them (imported).
    pub echo_skipped: AtomicU64,
    /// Puts Zenoh refused, and samples with a corrupt length.
    pub failed: AtomicU64,
}

/// The slot of the bridge's own publisher of a service (`usize::MAX`: none).
pub type OwnSlot = Arc<AtomicUsize>;

/// A sample as a byte buffer Zenoh can hold.
struct Held(Sample<[u8]>);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        // Checked to be Some before wrapping (see `sender`).
        self.0.payload_bytes().unwrap_or_default()
    }
}

struct Ring {
    queue: Mutex<VecDeque<Sample<[u8]>>>,
    ready: Condvar,
    capacity: usize,
}

/// A running export of one service; dropping it does not stop it, [`Export::stop`] does.
pub struct Export {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Its counters.
    pub stats: Arc<ExportStats>,
}

impl Export {
    /// Starts exporting `service` on `key`.
    pub fn start(
        service: PubSubService<[u8]>,
        session: zenoh::Session,
        key: OwnedKeyExpr,
        own: OwnSlot,
    ) -> Result<Self, String> {
        let name = service.name().to_owned();
        let subscriber = service
            .subscriber_builder()
            .create()
            .map_err(|e| format!("cannot create the bridge subscriber of {name:?}: {e}"))?;
        let max_held = service.static_config().max_held as usize;
        let buffer = service.static_config().subscriber_buffer as usize;
        let ring = Arc::new(Ring {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            capacity: max_held.saturating_sub(1).max(1),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ExportStats::default());
        let receiver = {
            let (ring, stop, stats, name) = (ring.clone(), stop.clone(), stats.clone(), name.clone());
            std::thread::Builder::new()
                .name(format!("export-rx {name}"))
                .spawn(move || receive(subscriber, &ring, &stop, &stats, &own, &name, buffer))
                .map_err(|e| e.to_string())?
        };
        let sender = {
            let (ring, stop, stats) = (ring.clone(), stop.clone(), stats.clone());
            std::thread::Builder::new()
                .name(format!("export-tx {name}"))
                .spawn(move || send(&session, &key, &ring, &stop, &stats, &name))
                .map_err(|e| e.to_string())?
        };
        Ok(Self {
            stop,
            threads: vec![receiver, sender],
            stats,
        })
    }

    /// Whether it ended on its own (the service was removed locally).
    pub fn is_finished(&self) -> bool {
        self.threads.iter().any(|t| t.is_finished())
    }

    /// Stops both threads and waits for them.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn receive(
    subscriber: iox_service::Subscriber<[u8]>,
    ring: &Ring,
    stop: &AtomicBool,
    stats: &ExportStats,
    own: &AtomicUsize,
    name: &str,
    buffer: usize,
) {
    while !stop.load(Ordering::Relaxed) {
        {
            let mut q = ring.queue.lock().expect("export ring");
            if q.len() >= ring.capacity {
                if subscriber.pending() >= buffer {
                    // The network is behind and the service's queue to the bridge is
                    // full: drop the oldest here, counted, rather than in the queue.
                    q.pop_front();
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                } else {
                    // The queue still has room: let it buffer (as for any subscriber).
                    let _ = ring.ready.wait_timeout(q, Duration::from_millis(1));
                    continue;
                }
            }
        }
        match subscriber.receive_timeout(Duration::from_millis(100)) {
            Ok(Some(sample)) => {
                if sample.publisher_slot() == own.load(Ordering::Relaxed) {
                    stats.echo_skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                ring.queue.lock().expect("export ring").push_back(sample);
                ring.ready.notify_all();
            }
            Ok(None) => {}
            // The sender holds one more than the ring: wait for it.
            Err(ReceiveError::TooManyHeld { .. }) => std::thread::sleep(Duration::from_millis(1)),
            Err(ReceiveError::ServiceRemoved) => {
                eprintln!("iox-zenoh: export of {name:?} ends: the service was removed");
                break;
            }
            Err(e) => {
                eprintln!("iox-zenoh: export of {name:?} ends: {e}");
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    ring.ready.notify_all();
}

fn send(
    session: &zenoh::Session,
    key: &OwnedKeyExpr,
    ring: &Ring,
    stop: &AtomicBool,
    stats: &ExportStats,
    name: &str,
) {
    loop {
        let sample = {
            let mut q = ring.queue.lock().expect("export ring");
            loop {
                if let Some(s) = q.pop_front() {
                    break Some(s);
                }
                if stop.load(Ordering::Relaxed) {
                    break None;
                }
                q = ring
                    .ready
                    .wait_timeout(q, Duration::from_millis(100))
                    .expect("export ring")
                    .0;
            }
        };
        let Some(sample) = sample else { return };
        // The receiver may wait for room in the ring.
        ring.ready.notify_all();
        if sample.payload_bytes().is_none() {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            eprintln!("iox-zenoh: {name:?}: a sample's length does not fit its chunk; not exported");
            continue;
        }
        let payload = zenoh::bytes::ZBytes::from(bytes::Bytes::from_owner(Held(sample)));
        let put = session
            .put(key, payload)
            .congestion_control(CongestionControl::Block)
            .allowed_destination(Locality::Remote)
            .wait();
        match put {
            Ok(()) => stats.sent.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                eprintln!("iox-zenoh: {name:?}: put on {key} failed: {e}");
                stats.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}
