//! Export (local -> Zenoh): one bridge subscriber per exported service, each sample
//! one Zenoh put whose buffer *is* the received sample (no copy on the send side).
//!
//! One thread per service: it takes what is queued and puts each sample on Zenoh
//! itself (`CongestionControl::Block`, reliable), with no hand-off to another thread.
//! When the queue is empty it keeps looking for [`LINGER`] (50 us), yielding the CPU
//! between looks, and only then blocks in `receive_timeout` (the subscriber's futex,
//! the wait the hot path already supports; no readiness socket is armed, so local
//! publishers never ring one for the bridge). So a stream of samples finds the bridge
//! awake and its publishers make no wake-up system call per sample; a sample after a
//! pause travels with one thread wake-up, the bridge's. Decision: the linger costs an
//! idle bridge at most 50 us of looking per sample it exported (5 % of a core at
//! 1 kHz), and on the 2-vCPU VM it raised the 8 B throughput from 6.4-7.7 to
//! 8.4-8.7 MB/s (`bridge_bench`, alternated).
//!
//! A slow or absent network never blocks a local publisher: while a put waits for the
//! network, the service's queue to the bridge buffers as for any subscriber
//! (`subscriber_buffer` entries), and once it is full the service's overflow policy
//! acts there, in the publisher's send, which never waits: under
//! `Overflow::DropOldest` (the default) the oldest sample waiting for the bridge is
//! dropped; under `Overflow::Reject` the publisher's send reports the bridge's queue
//! as full, the policy that service chose. Either way the publishers count the
//! samples the bridge missed in shared memory
//! ([`Subscriber::missed`](iox_service::Subscriber::missed)), so
//! [`ExportStats::dropped`] is exact, and `iox show` lists it for the bridge's
//! subscriber too. (Before, a second thread took samples out of the queue into a ring
//! and put them; that hand-off cost one more wake-up per sample, a third of the
//! bridge's added latency, for a drop count that was only a lower bound.)
//!
//! The bridge's own copy of that count ([`ExportStats::dropped`]) is refreshed after
//! each put and at least every 100 ms; while a put is blocked it lags, and the live
//! count is the one in shared memory (`iox show`).
//!
//! What the bridge cannot count: Zenoh closes a link whose sends stay blocked for 5 s
//! (its `wait_before_close`, settable with `--config`), and the samples its queue held
//! for that link are lost with it, after the put returned. A peer stalled for seconds
//! rather than a slow one shows as a reconnection in Zenoh's log, not as drops here.
//!
//! Zenoh may hold a sample's buffer after the put returns (until it is on the link);
//! while the bridge holds `max_held` samples, its receive waits for Zenoh to let go.
//!
//! Zero copy: the `Sample` is `'static + Send + Sync`, so it is moved into a
//! `bytes::Bytes` (`Bytes::from_owner`), which backs the `ZBytes` of the put; the chunk
//! returns to the pool when Zenoh drops the buffer (after serialising it onto the link).
//!
//! No echo: samples whose [`publisher_slot`](iox_service::Sample::publisher_slot) is the
//! slot of this bridge's own import publisher for the service are not exported.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use iox_service::{PubSubService, ReceiveError, Sample, Subscriber};
use zenoh::Wait;
use zenoh::key_expr::OwnedKeyExpr;
use zenoh::qos::CongestionControl;
use zenoh::sample::Locality;

/// How long an export thread that found its queue empty keeps looking (yielding the
/// CPU between looks) before it sleeps.
pub const LINGER: Duration = Duration::from_micros(50);

/// Counters of one exported service.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Samples put on Zenoh.
    pub sent: AtomicU64,
    /// Samples dropped because the network did not keep up: the bridge subscriber's
    /// [`missed`](iox_service::Subscriber::missed) count, exact as of the last
    /// refresh (see the module docs).
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
        // Checked to be Some before wrapping (see `put`).
        self.0.payload_bytes().unwrap_or_default()
    }
}

/// A running export of one service; dropping it does not stop it, [`Export::stop`] does.
pub struct Export {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    /// Its counters.
    pub stats: Arc<ExportStats>,
}

/// What the export thread works with.
struct Exporter {
    /// Declared once per exported service: Zenoh resolves the key's routing at
    /// declaration, and each put then travels under the declared key's numeric id
    /// instead of resolving and sending the whole key expression again.
    publisher: zenoh::pubsub::Publisher<'static>,
    key: OwnedKeyExpr,
    stats: Arc<ExportStats>,
    own: OwnSlot,
    name: String,
}

impl Export {
    /// Starts exporting `service` on `key`.
    pub fn start(
        service: PubSubService<[u8]>,
        session: &zenoh::Session,
        key: OwnedKeyExpr,
        own: OwnSlot,
    ) -> Result<Self, String> {
        let name = service.name().to_owned();
        let subscriber = service
            .subscriber_builder()
            .create()
            .map_err(|e| format!("cannot create the bridge subscriber of {name:?}: {e}"))?;
        let publisher = session
            .declare_publisher(key.clone())
            .congestion_control(CongestionControl::Block)
            .allowed_destination(Locality::Remote)
            .wait()
            .map_err(|e| format!("cannot declare the Zenoh publisher of {name:?} on {key}: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ExportStats::default());
        let exporter = Exporter {
            publisher,
            key,
            stats: stats.clone(),
            own,
            name: name.clone(),
        };
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("export {name}"))
                .spawn(move || exporter.run(subscriber, &stop))
                .map_err(|e| e.to_string())?
        };
        Ok(Self { stop, thread, stats })
    }

    /// Whether it ended on its own (the service was removed locally).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Stops the thread and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

impl Exporter {
    fn run(&self, subscriber: Subscriber<[u8]>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let received = match subscriber.receive() {
                Ok(None) => Self::receive_soon(&subscriber),
                other => other,
            };
            self.stats.dropped.store(subscriber.missed(), Ordering::Relaxed);
            match received {
                Ok(Some(sample)) => {
                    if sample.publisher_slot() == self.own.load(Ordering::Relaxed) {
                        self.stats.echo_skipped.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.put(sample);
                    }
                }
                Ok(None) => {}
                // Zenoh still holds `max_held` of our samples: wait for it to let go.
                Err(ReceiveError::TooManyHeld { .. }) => std::thread::sleep(Duration::from_millis(1)),
                Err(ReceiveError::ServiceRemoved) => {
                    eprintln!(
                        "iox-zenoh: export of {:?} ends: the service was removed",
                        self.name
                    );
                    break;
                }
                Err(e) => {
                    eprintln!("iox-zenoh: export of {:?} ends: {e}", self.name);
                    break;
                }
            }
        }
    }

    /// The next sample when none was queued: looks again for up to [`LINGER`],
    /// yielding the CPU between looks, before it sleeps in `receive_timeout`. A stream
    /// of samples then finds the bridge awake, and its publisher makes no wake-up
    /// system call per sample (it wakes only a subscriber that sleeps).
    fn receive_soon(subscriber: &Subscriber<[u8]>) -> Result<Option<Sample<[u8]>>, ReceiveError> {
        let start = std::time::Instant::now();
        while start.elapsed() < LINGER {
            std::thread::yield_now();
            if let Some(sample) = subscriber.receive()? {
                return Ok(Some(sample));
            }
        }
        subscriber.receive_timeout(Duration::from_millis(100))
    }

    /// Puts one sample on Zenoh, its chunk backing the buffer.
    fn put(&self, sample: Sample<[u8]>) {
        let (name, key, stats) = (&self.name, &self.key, &self.stats);
        if sample.payload_bytes().is_none() {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            eprintln!("iox-zenoh: {name:?}: a sample's length does not fit its chunk; not exported");
            return;
        }
        // With a user header: its bytes (copied, they are few), then the payload's
        // (the chunk backs them). The importer splits them by the recorded size.
        let header = match sample.header_bytes() {
            Some(h) => (!h.is_empty()).then(|| h.to_vec()),
            None => {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("iox-zenoh: {name:?}: a sample's header cannot be read as bytes; not exported");
                return;
            }
        };
        let mut payload = zenoh::bytes::ZBytes::from(bytes::Bytes::from_owner(Held(sample)));
        if let Some(header) = header {
            let mut writer = zenoh::bytes::ZBytes::writer();
            writer.append(zenoh::bytes::ZBytes::from(header));
            writer.append(payload);
            payload = writer.finish();
        }
        let put = self.publisher.put(payload).wait();
        match put {
            Ok(()) => stats.sent.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                eprintln!("iox-zenoh: {name:?}: put on {key} failed: {e}");
                stats.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}
