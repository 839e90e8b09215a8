//! Export: an iox publish-subscribe service published as a ROS 2 topic.
//!
//! Which services, and how ([`route_of`]), from what the service records:
//! - a `[u8]` service with attribute `ros2/type` carries CDR messages of that type and
//!   is passed through unchanged (**CDR route**); each sample is checked to be a whole
//!   message of its type first ([`iox_ros2::cdr::check`]), and a malformed one is
//!   counted and not published;
//! - a `[u8]` service whose user header is [`ImageHeader`] or [`PointCloud2Header`]
//!   carries images or point clouds (**framed route**): each sample becomes a
//!   `sensor_msgs/msg/Image` or `PointCloud2` (one copy of the data);
//! - a typed service (a `#[derive(ZeroCopySafe)]` struct, or Python's `iox.Type`) with
//!   attribute `ros2/type` naming a fixed-size message (**typed route**): its recorded
//!   schema is matched field by field against the `.msg` when the export starts
//!   ([`iox_ros2::fixed::Plan`]; a mismatch names the field and the service is not
//!   exported), and each sample is converted to CDR. The type must be valid for every
//!   bit pattern (no `bool`, no padding): its bytes are read as bytes;
//! - anything else is skipped, and the gateway's status says why.
//!
//! The service is opened by [`open`], on a thread of the scanner's opener (with a short
//! timeout, backed off when it fails: `iox_service::opener`), never on a thread that
//! forwards and never under a lock; [`Export::start`] then makes the ROS publisher and
//! the thread. One thread per exported service waits in its iox subscriber and
//! publishes each sample on the gateway's ROS publisher, whose QoS comes from
//! [`crate::qos`]. No echo:
//! samples whose [`publisher_slot`](iox_service::Sample::publisher_slot) is the slot of
//! the gateway's own import publisher of the service are skipped.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use iox_ros2::carried::FramedKind;
use iox_ros2::carried::{QOS_KEY, Route, route_of};
use iox_ros2::fixed::Plan;
use iox_ros2::framed::Framed;
use iox_ros2::image::ImageHeader;
use iox_ros2::library::Library;
use iox_ros2::pointcloud::PointCloud2Header;
use iox_service::opener::DAEMON_OPEN_TIMEOUT;
use iox_service::{PubSubService, ReceiveError, Sample, Service, StaticConfig, Subscriber, UserHeader};

use crate::qos::Qos;
use crate::rcl::{Publisher, Ros};

/// The slot of the gateway's own import publisher of a service (`usize::MAX`: none).
pub type OwnSlot = Arc<AtomicUsize>;

/// Counters of one export.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Published on ROS.
    pub sent: AtomicU64,
    /// Skipped: the gateway imported them.
    pub echo_skipped: AtomicU64,
    /// Not published: malformed (not a whole message of the type).
    pub malformed: AtomicU64,
    /// Not published: ROS refused them.
    pub failed: AtomicU64,
}

/// A running export; [`Export::stop`] ends it.
pub struct Export {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    /// Its counters.
    pub stats: Arc<ExportStats>,
    /// The topic.
    pub topic: String,
    /// The ROS type.
    pub type_name: String,
    /// The route.
    pub route: Route,
    /// The QoS offered.
    pub qos: Qos,
}

struct Exporter {
    name: String,
    publisher: Publisher,
    stats: Arc<ExportStats>,
    own: OwnSlot,
    stop: Arc<AtomicBool>,
}

/// What goes wrong with one sample.
enum Skip {
    Malformed(String),
    Failed(String),
}

/// What an export reads from: its iox service, opened as its route needs it.
enum Source {
    Cdr(PubSubService<[u8]>, Library),
    Typed(PubSubService<[u8]>, Plan),
    Image(PubSubService<[u8], ImageHeader>),
    PointCloud2(PubSubService<[u8], PointCloud2Header>),
}

/// An export ready to start: the topic, what it is published as, and its source.
pub struct Opened {
    name: String,
    topic: String,
    type_name: String,
    route: Route,
    qos: Qos,
    source: Source,
}

/// Everything an export of the service of `config` (already matched) on `topic` needs
/// from the iox side: its route, QoS and definitions, and the service, opened with
/// [`DAEMON_OPEN_TIMEOUT`]. Runs on the scanner's opener's thread, never on a thread
/// that forwards (see `iox_service::opener`).
pub fn open(root: &Path, config: &StaticConfig, topic: String, library: &Library) -> Result<Opened, String> {
    let (type_name, route) = route_of(config)?;
    let name = config.name.clone();
    let section = config
        .publish_subscribe()
        .ok_or("not a publish-subscribe service")?;
    let qos = match config.attributes.get(QOS_KEY) {
        Some(text) => text.parse::<Qos>().map_err(|e| e.to_string())?,
        None => Qos::of_service(section.subscriber_buffer, section.history),
    };
    let open_err = |e: &dyn std::fmt::Display| format!("cannot open {name:?} to export it: {e}");
    let builder = Service::named(&name)
        .map_err(|e| open_err(&e))?
        .root(root)
        .publish_subscribe::<[u8]>()
        .timeout(DAEMON_OPEN_TIMEOUT);
    let mut library = library.clone();
    let source = match route {
        Route::Cdr => {
            library.load(&type_name).map_err(|e| e.to_string())?;
            Source::Cdr(builder.open().map_err(|e| open_err(&e))?, library)
        }
        Route::Typed => {
            let schema = config.schema.clone().ok_or("no recorded schema")?;
            let plan = Plan::new(&mut library, &type_name, &schema)
                .map_err(|e| format!("its type does not match {type_name}: {e}"))?;
            // `route_of` took this route only for a type valid for every bit
            // pattern, which `carry_payload_type` requires of a byte view.
            let service = builder
                .carry_payload_type(config.payload.clone())
                .payload_schema(schema)
                .open()
                .map_err(|e| open_err(&e))?;
            Source::Typed(service, plan)
        }
        Route::Framed(FramedKind::Image) => {
            Source::Image(builder.user_header().open().map_err(|e| open_err(&e))?)
        }
        Route::Framed(FramedKind::PointCloud2) => {
            Source::PointCloud2(builder.user_header().open().map_err(|e| open_err(&e))?)
        }
    };
    Ok(Opened {
        name,
        topic,
        type_name,
        route,
        qos,
        source,
    })
}

impl Export {
    /// Starts exporting what [`open`] opened: the ROS publisher, then the thread.
    pub fn start(ros: &Arc<Ros>, opened: Opened, own: OwnSlot) -> Result<Self, String> {
        let Opened {
            name,
            topic,
            type_name,
            route,
            qos,
            source,
        } = opened;
        let publisher = ros
            .publisher(&topic, &type_name, &qos.profile())
            .map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ExportStats::default());
        let x = Exporter {
            name: name.clone(),
            publisher,
            stats: stats.clone(),
            own,
            stop: stop.clone(),
        };
        let spawn = std::thread::Builder::new().name(format!("export {name}"));
        let thread = match source {
            Source::Cdr(service, mut library) => {
                let ty = type_name.clone();
                spawn.spawn(move || {
                    x.pump(&service, |sample: &Sample<[u8]>, publisher: &Publisher| {
                        iox_ros2::cdr::check(&mut library, &ty, sample)
                            .map_err(|e| Skip::Malformed(e.to_string()))?;
                        publisher.publish(sample).map_err(|e| Skip::Failed(e.to_string()))
                    })
                })
            }
            Source::Typed(service, plan) => {
                let mut out = Vec::with_capacity(plan.cdr_len());
                spawn.spawn(move || {
                    x.pump(&service, |sample: &Sample<[u8]>, publisher: &Publisher| {
                        let value = sample
                            .payload_bytes()
                            .filter(|v| v.len() == plan.struct_size())
                            .ok_or_else(|| {
                                Skip::Malformed("a sample is not one value of the struct".into())
                            })?;
                        plan.encode(value, &mut out);
                        publisher.publish(&out).map_err(|e| Skip::Failed(e.to_string()))
                    })
                })
            }
            Source::Image(service) => framed(service, x, spawn),
            Source::PointCloud2(service) => framed(service, x, spawn),
        }
        .map_err(|e| e.to_string())?;
        Ok(Self {
            stop,
            thread,
            stats,
            topic,
            type_name,
            route,
            qos,
        })
    }

    /// Whether it ended on its own (the service was removed).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Stops the thread and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// Starts the thread that exports a service of header `H` and its data as `H`'s ROS
/// message (one copy of the data).
fn framed<H: Framed>(
    service: PubSubService<[u8], H>,
    x: Exporter,
    spawn: std::thread::Builder,
) -> std::io::Result<JoinHandle<()>> {
    let mut out = Vec::new();
    spawn.spawn(move || {
        x.pump(&service, |sample: &Sample<[u8], H>, publisher: &Publisher| {
            sample
                .user_header()
                .to_cdr(sample, &mut out)
                .map_err(|e| Skip::Malformed(e.to_string()))?;
            publisher.publish(&out).map_err(|e| Skip::Failed(e.to_string()))
        })
    })
}

impl Exporter {
    fn pump<H: UserHeader>(
        &self,
        service: &PubSubService<[u8], H>,
        mut send: impl FnMut(&Sample<[u8], H>, &Publisher) -> Result<(), Skip>,
    ) {
        let subscriber: Subscriber<[u8], H> = match service.subscriber_builder().create() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("iox-ros2: export of {:?} ends: no subscriber: {e}", self.name);
                return;
            }
        };
        let mut reported = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            match subscriber.receive_timeout(Duration::from_millis(100)) {
                Ok(Some(sample)) => {
                    if sample.publisher_slot() == self.own.load(Ordering::Relaxed) {
                        self.stats.echo_skipped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let (counter, why) = match send(&sample, &self.publisher) {
                        Ok(()) => {
                            self.stats.sent.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Err(Skip::Malformed(why)) => (&self.stats.malformed, why),
                        Err(Skip::Failed(why)) => (&self.stats.failed, why),
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    // The first few, then every thousandth: the status has the counts.
                    if reported < 5 || counter.load(Ordering::Relaxed).is_multiple_of(1000) {
                        reported += 1;
                        eprintln!("iox-ros2: {:?}: a sample was not exported: {why}", self.name);
                    }
                }
                Ok(None) => {}
                Err(ReceiveError::ServiceRemoved) => {
                    eprintln!(
                        "iox-ros2: export of {:?} ends: the service was removed",
                        self.name
                    );
                    break;
                }
                Err(e) => {
                    eprintln!("iox-ros2: export of {:?} ends: {e}", self.name);
                    break;
                }
            }
        }
    }
}
