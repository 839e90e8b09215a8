//! Import: a ROS 2 topic published into an iox service.
//!
//! A topic is imported when its service name ([`crate::names`]) matches an import
//! pattern and some node other than the gateway publishes it (so a topic the gateway
//! exports is never imported back). One thread does every import: it looks at the ROS
//! graph every scan interval for new topics, and otherwise waits on all the
//! subscriptions at once (`rcl_wait`) and publishes what it takes. It never opens a
//! service itself: an opener (`iox_service::opener`) opens or creates each new topic's
//! service on a thread of its own, with a short timeout, backed off when it keeps
//! failing, and the import thread then makes the publisher and the ROS subscription,
//! so a service whose holders another user stopped delays no message of the others.
//!
//! The service ([`open_service`]) is `[u8]`, created with the size classes of
//! [`iox_ros2::carried::DEFAULT_CLASSES`] (a sample that finds its class empty is
//! counted as dropped), and
//! records `ros2/type`, `ros2/qos` and `ros2/definition` (the type's `.msg` text with
//! the types it uses). Its buffer and history follow the publishers' QoS
//! ([`crate::qos`]). By route:
//! - `sensor_msgs/msg/Image` and `sensor_msgs/msg/PointCloud2` (unless a `--cdr`
//!   pattern names the service): the service has the [`ImageHeader`] or
//!   [`PointCloud2Header`] user header and each message becomes the header plus the
//!   pixels or points as the slice;
//! - a service that exists already with a typed payload (a `#[derive(ZeroCopySafe)]`
//!   struct a program created, recording `ros2/type` as the topic's type): the struct,
//!   converted field by field from CDR; the struct's recorded schema is checked
//!   against the `.msg` when the import starts, and a mismatch names the field (the
//!   topic is then not imported, and the status says why);
//! - any other type: the CDR bytes, passed through unchanged.
//!
//! Every message is checked before it is published: a whole message of its type
//! ([`iox_ros2::cdr::check`], or the image decode), or it is counted as malformed,
//! reported (the first few, then every thousandth) and dropped. The gateway's own
//! subscriptions ignore what its own publishers send (`ignore_local_publications`),
//! and its export of the same service skips what this publisher sends, so nothing
//! loops.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iox_ros2::carried::FramedKind;
use iox_ros2::fixed::Plan;
use iox_ros2::framed::Framed;
use iox_ros2::image::ImageHeader;
use iox_ros2::library::Library;
use iox_ros2::pointcloud::PointCloud2Header;
use iox_service::opener::{Backoff, DAEMON_OPEN_TIMEOUT, Opener};
use iox_service::{PubSubBuilder, PubSubService, Publisher, Service, UserHeader};

use crate::export::OwnSlot;
use crate::names::{self, Pattern};
use crate::qos::Qos;
use crate::rcl::{Ros, Subscription, WaitSet};
use crate::sizing::Sizing;
use iox_ros2::carried::{QOS_KEY, Route, TYPE_KEY, ros_service};

/// Counters of one import.
#[derive(Debug, Default)]
pub struct ImportStats {
    /// Taken from ROS.
    pub received: AtomicU64,
    /// Published into iox.
    pub published: AtomicU64,
    /// Dropped: not a whole message of the type.
    pub malformed: AtomicU64,
    /// Dropped: no chunk free, or the send failed.
    pub dropped: AtomicU64,
}

/// What one import does.
#[derive(Debug, Clone)]
pub struct ImportInfo {
    /// The topic.
    pub topic: String,
    /// The ROS type.
    pub type_name: String,
    /// The route.
    pub route: Route,
    /// The subscription's QoS.
    pub qos: Qos,
    /// Its counters.
    pub stats: Arc<ImportStats>,
}

/// Per service: its import, or why it is not imported.
pub type ImportStatus = Arc<Mutex<BTreeMap<String, Result<ImportInfo, String>>>>;

enum Sink {
    Cdr(Publisher<[u8]>, Library),
    Image(Publisher<[u8], ImageHeader>),
    PointCloud2(Publisher<[u8], PointCloud2Header>),
    /// A struct's bytes, decoded by the plan into the buffer.
    Typed(Publisher<[u8]>, Plan, Vec<u8>),
}

struct Import {
    name: String,
    type_name: String,
    sub: Subscription,
    sink: Sink,
    stats: Arc<ImportStats>,
    reported: u32,
}

/// The import thread's state.
pub struct Importer {
    pub(crate) ros: Arc<Ros>,
    pub(crate) root: PathBuf,
    pub(crate) patterns: Vec<Pattern>,
    pub(crate) cdr_only: Vec<Pattern>,
    pub(crate) library: Library,
    pub(crate) own_slots: Arc<Mutex<HashMap<String, OwnSlot>>>,
    pub(crate) status: ImportStatus,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) scan_interval: Duration,
    /// What `--qos` and `--pool` say of imports.
    pub(crate) sizing: Arc<Sizing>,
    /// Opens the services to import into, off this thread (`iox_service::opener`).
    opener: Opener<Opened>,
}

/// The iox end of an import, opened off the import thread: what its publisher will be
/// made from.
enum Target {
    Cdr(PubSubService<[u8]>, Library),
    Image(PubSubService<[u8], ImageHeader>),
    PointCloud2(PubSubService<[u8], PointCloud2Header>),
    Typed(PubSubService<[u8]>, Plan),
}

/// An import whose iox service is open: the ROS side is made on the import thread.
struct Opened {
    topic: String,
    type_name: String,
    qos: Qos,
    target: Target,
}

impl Importer {
    /// An importer with nothing imported yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        ros: Arc<Ros>,
        root: PathBuf,
        patterns: Vec<Pattern>,
        cdr_only: Vec<Pattern>,
        library: Library,
        own_slots: Arc<Mutex<HashMap<String, OwnSlot>>>,
        status: ImportStatus,
        stop: Arc<AtomicBool>,
        scan_interval: Duration,
        sizing: Arc<Sizing>,
    ) -> Self {
        Self {
            ros,
            root,
            patterns,
            cdr_only,
            library,
            own_slots,
            status,
            stop,
            scan_interval,
            sizing,
            opener: Opener::new(Backoff::default()),
        }
    }

    /// Imports until stopped. (The imports live on this thread: iox publishers stay
    /// on the thread that made them.)
    pub(crate) fn run(mut self) {
        let mut imports: Vec<Import> = Vec::new();
        let mut waits = WaitSet::new(&self.ros);
        let mut last_scan: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            self.start_opened(&mut imports);
            if last_scan.is_none_or(|t| t.elapsed() >= self.scan_interval) {
                self.scan(&imports);
                last_scan = Some(Instant::now());
            }
            let ready = {
                let subs: Vec<&Subscription> = imports.iter().map(|i| &i.sub).collect();
                match waits.wait(&subs, &[], &[], Duration::from_millis(100)) {
                    Ok(r) => r.subscriptions,
                    Err(e) => {
                        eprintln!("iox-ros2: waiting for ROS messages failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                }
            };
            for (import, ready) in imports.iter_mut().zip(ready) {
                if ready {
                    import.drain();
                }
                // A subscriber that connected since gets the history (transient local).
                import.update_connections();
            }
        }
        for import in imports.drain(..) {
            if let Some(slot) = crate::lock(&self.own_slots).get(&import.name) {
                slot.store(usize::MAX, Ordering::Relaxed);
            }
        }
    }

    /// Finds new topics to import; asks the opener to open their services.
    fn scan(&mut self, imports: &[Import]) {
        let topics = match self.ros.topics() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("iox-ros2: cannot list ROS topics: {e}");
                return;
            }
        };
        for (topic, types) in topics {
            if names::is_infrastructure(&topic)
                || imports
                    .iter()
                    .any(|i| names::topic_name(&i.name).ok().as_deref() == Some(&topic))
            {
                continue;
            }
            let name = match names::service_name(&topic) {
                Ok(n) => n,
                Err(e) => {
                    let looks = topic.trim_start_matches('/');
                    if self.patterns.iter().any(|p| p.matches(looks)) {
                        self.skip(looks, e.to_string());
                    }
                    continue;
                }
            };
            if !self.patterns.iter().any(|p| p.matches(&name)) || !self.opener.ready(&name) {
                continue;
            }
            let publishers = match self.ros.endpoints(&topic, true) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("iox-ros2: cannot list the publishers of {topic}: {e}");
                    continue;
                }
            };
            let external: Vec<_> = publishers
                .iter()
                .filter(|e| !(e.node == self.ros.node_name() && e.namespace == "/"))
                .collect();
            if external.is_empty() {
                continue;
            }
            let [type_name] = &types[..] else {
                self.skip(
                    &name,
                    format!("topic {topic} has several types: {}", types.join(", ")),
                );
                continue;
            };
            let qos = self
                .sizing
                .qos_for(&name)
                .unwrap_or_else(|| Qos::accepting(&external.iter().map(|e| e.qos).collect::<Vec<_>>()));
            let classes = self.sizing.classes_for(&name, &qos);
            let framed = FramedKind::of_ros_type(type_name)
                .filter(|_| !self.cdr_only.iter().any(|p| p.matches(&name)));
            let (root, library, key) = (self.root.clone(), self.library.clone(), name.clone());
            let type_name = type_name.clone();
            self.opener.open(&name, move || {
                let target = open_target(&root, library, &key, &type_name, &qos, &classes, framed)?;
                Ok(Opened {
                    topic,
                    type_name,
                    qos,
                    target,
                })
            });
        }
    }

    /// Makes the ROS side of the imports whose services opened since the last look (on
    /// this thread: iox publishers stay on the thread that made them); records why the
    /// others did not open (each tried again after its back-off).
    fn start_opened(&mut self, imports: &mut Vec<Import>) {
        for f in self.opener.finished() {
            let name = f.name;
            let started = match f.result {
                // A failure after the open (the publisher, the ROS subscription) is
                // backed off too.
                Ok(opened) => self
                    .start(&name, opened)
                    .map_err(|why| self.opener.failed_later(&name, why).why),
                Err(failed) => Err(failed.why),
            };
            match started {
                Ok((import, info)) => {
                    eprintln!(
                        "iox-ros2: importing {} ({}, {}, {}) into {name:?}",
                        info.topic, info.type_name, info.route, info.qos
                    );
                    crate::lock(&self.status).insert(name, Ok(info));
                    imports.push(import);
                }
                Err(why) => self.skip(&name, why),
            }
        }
    }

    fn skip(&mut self, name: &str, why: String) {
        let mut status = crate::lock(&self.status);
        if !matches!(status.get(name), Some(Err(before)) if *before == why) {
            eprintln!("iox-ros2: not importing {name:?} (tried again after a back-off): {why}");
        }
        status.insert(name.to_owned(), Err(why));
    }

    /// The import of `opened`: its publisher, then the ROS subscription.
    fn start(&mut self, name: &str, opened: Opened) -> Result<(Import, ImportInfo), String> {
        let Opened {
            topic,
            type_name,
            qos,
            target,
        } = opened;
        let create = |e: iox_service::PortCreateError| e.to_string();
        let (sink, slot, route) = match target {
            Target::Typed(service, plan) => {
                let publisher = service.publisher_builder().create().map_err(create)?;
                let slot = publisher.publisher_slot();
                let value = vec![0; plan.struct_size()];
                (Sink::Typed(publisher, plan, value), slot, Route::Typed)
            }
            Target::Image(service) => {
                let publisher = service.publisher_builder().create().map_err(create)?;
                let slot = publisher.publisher_slot();
                (Sink::Image(publisher), slot, Route::Framed(FramedKind::Image))
            }
            Target::PointCloud2(service) => {
                let publisher = service.publisher_builder().create().map_err(create)?;
                let slot = publisher.publisher_slot();
                (
                    Sink::PointCloud2(publisher),
                    slot,
                    Route::Framed(FramedKind::PointCloud2),
                )
            }
            Target::Cdr(service, library) => {
                let publisher = service.publisher_builder().create().map_err(create)?;
                let slot = publisher.publisher_slot();
                (Sink::Cdr(publisher, library), slot, Route::Cdr)
            }
        };
        let sub = self
            .ros
            .subscription(&topic, &type_name, &qos.profile())
            .map_err(|e| e.to_string())?;
        crate::lock(&self.own_slots)
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(usize::MAX.into()))
            .store(slot, Ordering::Relaxed);
        let stats = Arc::new(ImportStats::default());
        let info = ImportInfo {
            topic,
            type_name: type_name.clone(),
            route,
            qos,
            stats: stats.clone(),
        };
        let import = Import {
            name: name.to_owned(),
            type_name,
            sub,
            sink,
            stats,
            reported: 0,
        };
        Ok((import, info))
    }
}

/// Opens (or creates) the iox service an import of `topic`'s type publishes into, by
/// route (module docs), with [`DAEMON_OPEN_TIMEOUT`]: on an opener's thread, never on
/// the import thread.
fn open_target(
    root: &std::path::Path,
    mut library: Library,
    name: &str,
    type_name: &str,
    qos: &Qos,
    classes: &[(usize, usize)],
    framed: Option<FramedKind>,
) -> Result<Target, String> {
    let definition = library.definition_text(type_name).map_err(|e| e.to_string())?;
    let existing = iox_service::inspect::inspect_in(root, name)
        .ok()
        .and_then(|i| i.config);
    let typed = existing.filter(|c| c.payload != <[u8] as iox_service::Payload>::payload_type());
    Ok(match (typed, framed) {
        (Some(config), _) => {
            let (service, plan) = typed_target(root, &mut library, &config, type_name)?;
            Target::Typed(service, plan)
        }
        (None, Some(FramedKind::Image)) => Target::Image(open_service(
            bytes(root, name)?.user_header::<ImageHeader>(),
            name,
            type_name,
            qos,
            classes,
            &definition,
        )?),
        (None, Some(FramedKind::PointCloud2)) => Target::PointCloud2(open_service(
            bytes(root, name)?.user_header::<PointCloud2Header>(),
            name,
            type_name,
            qos,
            classes,
            &definition,
        )?),
        (None, None) => {
            let service = open_service(bytes(root, name)?, name, type_name, qos, classes, &definition)?;
            Target::Cdr(service, library)
        }
    })
}

/// The existing typed service of `config`, opened as bytes, and the plan that converts
/// its values, once its recorded type is checked against `type_name` (module docs).
fn typed_target(
    root: &std::path::Path,
    library: &mut Library,
    config: &iox_service::StaticConfig,
    type_name: &str,
) -> Result<(PubSubService<[u8]>, Plan), String> {
    let name = &config.name;
    match config.attributes.get(TYPE_KEY) {
        Some(t) if t == type_name => {}
        other => {
            return Err(format!(
                "iox service {name:?} exists with payload {} and records ROS type {}, not {type_name}",
                config.payload,
                other.unwrap_or("none")
            ));
        }
    }
    let usable = config.payload.any_bit_pattern() && config.user_header.is_none();
    let Some(schema) = config.schema.clone().filter(|_| usable) else {
        return Err(format!(
            "iox service {name:?} carries {}, which is not a struct with a recorded schema valid for every bit pattern",
            config.payload
        ));
    };
    let plan = Plan::new(library, type_name, &schema).map_err(|e| {
        format!(
            "iox service {name:?} ({}) does not match {type_name}: {e}",
            config.payload
        )
    })?;
    let service = bytes(root, name)?
        .carry_payload_type(config.payload.clone())
        .payload_schema(schema)
        .open()
        .map_err(|e| format!("cannot open iox service {name:?}: {e}"))?;
    Ok((service, plan))
}

/// Publishes the message `cdr` as header `H` and its data (one copy of the data); on
/// failure, the counter to count it in and why.
fn publish_framed<'s, H: Framed>(
    publisher: &Publisher<[u8], H>,
    cdr: &[u8],
    stats: &'s ImportStats,
) -> Result<usize, (&'s AtomicU64, String)> {
    let (header, data) = H::from_cdr(cdr).map_err(|e| (&stats.malformed, e.to_string()))?;
    let loan = publisher
        .loan_slice_uninit(data.len())
        .map_err(|e| (&stats.dropped, e.to_string()))?;
    loan.write_header(header)
        .write_from_slice(&cdr[data])
        .send()
        .map_err(|e| (&stats.dropped, e.to_string()))
}

/// The `[u8]` builder of service `name` under `root`, with the short open timeout of
/// a program that must not wait on one service (`iox_service::opener`).
fn bytes(root: &std::path::Path, name: &str) -> Result<PubSubBuilder<[u8]>, String> {
    Ok(Service::named(name)
        .map_err(|e| e.to_string())?
        .root(root)
        .publish_subscribe::<[u8]>()
        .timeout(DAEMON_OPEN_TIMEOUT))
}

/// Opens the iox service of `builder` for import, or creates it (module docs).
pub fn open_service<H: UserHeader>(
    builder: PubSubBuilder<[u8], H>,
    name: &str,
    type_name: &str,
    qos: &Qos,
    classes: &[(usize, usize)],
    definition: &str,
) -> Result<PubSubService<[u8], H>, String> {
    let (buffer, history) = qos.iox_buffer_and_history();
    let builder = builder
        .subscriber_buffer(buffer)
        .history(history)
        .attribute(QOS_KEY, qos.to_string());
    let service = ros_service(builder, type_name, definition)
        .size_classes(classes)
        .open_or_create()
        .map_err(|e| format!("cannot open or create iox service {name:?}: {e}"))?;
    match service.attributes().get(TYPE_KEY) {
        Some(t) if t == type_name => Ok(service),
        other => Err(format!(
            "iox service {name:?} exists and records ROS type {}, not {type_name}",
            other.unwrap_or("none")
        )),
    }
}

impl Import {
    fn update_connections(&self) {
        let result = match &self.sink {
            Sink::Cdr(p, _) => p.update_connections(),
            Sink::Image(p) => p.update_connections(),
            Sink::PointCloud2(p) => p.update_connections(),
            Sink::Typed(p, ..) => p.update_connections(),
        };
        if let Err(e) = result {
            eprintln!(
                "iox-ros2: {:?}: cannot give late subscribers the history: {e}",
                self.name
            );
        }
    }

    /// Publishes what waits, up to 64 messages (then the other imports get a turn).
    fn drain(&mut self) {
        for _ in 0..64 {
            let cdr = match self.sub.take() {
                Ok(Some(cdr)) => cdr,
                Ok(None) => return,
                Err(e) => {
                    eprintln!("iox-ros2: taking from {:?} failed: {e}", self.name);
                    return;
                }
            };
            self.stats.received.fetch_add(1, Ordering::Relaxed);
            let result = match &mut self.sink {
                Sink::Cdr(publisher, library) => match iox_ros2::cdr::check(library, &self.type_name, cdr) {
                    Err(e) => Err((&self.stats.malformed, e.to_string())),
                    Ok(()) => publisher
                        .loan_slice_uninit(cdr.len())
                        .map_err(|e| e.to_string())
                        .and_then(|loan| loan.write_from_slice(cdr).send().map_err(|e| e.to_string()))
                        .map_err(|e| (&self.stats.dropped, e)),
                },
                Sink::Typed(publisher, plan, value) => match plan.decode(cdr, value) {
                    Err(e) => Err((&self.stats.malformed, e.to_string())),
                    Ok(()) => publisher
                        .send_payload_bytes(&[value])
                        .map_err(|e| (&self.stats.dropped, e.to_string())),
                },
                Sink::Image(publisher) => publish_framed(publisher, cdr, &self.stats),
                Sink::PointCloud2(publisher) => publish_framed(publisher, cdr, &self.stats),
            };
            match result {
                Ok(_) => {
                    self.stats.published.fetch_add(1, Ordering::Relaxed);
                }
                Err((counter, why)) => {
                    let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
                    if self.reported < 5 || n.is_multiple_of(1000) {
                        self.reported += 1;
                        // A full pool: say how to size it.
                        let hint = if why.contains("in use") || why.contains("exhausted") {
                            format!(
                                " (readers hold every chunk of that size: give the service more \
                                 with --pool '{}=SIZExCOUNT,...', or read faster)",
                                self.name
                            )
                        } else {
                            String::new()
                        };
                        eprintln!("iox-ros2: a message on {:?} was dropped: {why}{hint}", self.name);
                    }
                }
            }
        }
    }
}
