//! ROS 2 services and iox request-response services, both ways, as CDR.
//!
//! - **Export** (`--export-service PATTERN`): an iox request-response service of
//!   `[u8]` requests and responses that records `ros2/type` (a service type,
//!   `std_srvs/srv/SetBool`) becomes a ROS 2 service of that name and type: the
//!   gateway serves it on ROS and calls the iox servers with each request's CDR,
//!   answering the ROS client with the iox server's CDR response.
//! - **Import** (`--import-service PATTERN`): a ROS 2 service served by another node
//!   becomes an iox request-response service (`[u8]` both ways, requests and
//!   responses up to [`SLICE_LEN`] bytes, recording `ros2/type`) that the gateway
//!   serves, calling the ROS service with each request.
//!
//! A request is answered within [`CALL_TIMEOUT`] or not at all (ROS 2 has no error
//! response): the call is counted as failed and reported. A request or response that
//! is not a whole message of its type is refused by the middleware's deserialisation
//! and counted as malformed. Only the CDR route applies to services: the typed route
//! needs every field valid for every bit pattern and fixed in size, which `std_srvs`
//! (a `bool`, a `string`) are not.
//!
//! No loops: ROS services this node serves (its exports) are never imported, and iox
//! services it serves (its imports) are never exported. ROS 2's own services
//! (`rcl_interfaces`, `type_description_interfaces`: every node's parameter services)
//! are never imported. One thread per carried service. The iox side of each is opened
//! by an opener (`iox_service::opener`: on a thread of its own, with a short timeout,
//! backed off when it keeps failing), so one service whose holders another user
//! stopped delays neither the scanner nor any other service.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iox_service::opener::{DAEMON_OPEN_TIMEOUT, Opener};
use iox_service::{RequestResponseService, Service};

use crate::names::{self, Pattern};
use crate::rcl::{Ros, ServiceClient, ServiceServer, WaitSet};
use iox_ros2::carried::{IMPORTED_KEY, TYPE_KEY};

/// Largest request or response of a service the gateway creates, in bytes.
pub const SLICE_LEN: usize = 65536;
/// How long a call may take before it is counted as failed.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Counters of one carried service.
#[derive(Debug, Default)]
pub struct CallStats {
    /// Requests taken.
    pub calls: AtomicU64,
    /// Answered.
    pub answered: AtomicU64,
    /// Not answered in time, or refused by the other side.
    pub failed: AtomicU64,
    /// Not a whole request or response of the type.
    pub malformed: AtomicU64,
}

/// Which way a service is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// iox server, ROS clients.
    Export,
    /// ROS server, iox clients.
    Import,
}

/// One carried service.
pub struct Carried {
    /// The ROS service name.
    pub ros_name: String,
    /// Its type.
    pub type_name: String,
    /// Which way.
    pub direction: Direction,
    /// Its counters.
    pub stats: Arc<CallStats>,
    /// Ends when the gateway stops (or the iox service goes away).
    pub(crate) thread: JoinHandle<()>,
}

/// Per iox service name: what is carried, or why not.
pub type ServiceStatus = Arc<Mutex<BTreeMap<String, Result<Carried, String>>>>;

pub(crate) type Bytes = RequestResponseService<[u8], [u8]>;

/// Finds services to carry, every `interval` until `stop`.
pub(crate) struct ServiceScanner {
    pub(crate) ros: Arc<Ros>,
    pub(crate) root: PathBuf,
    pub(crate) export: Vec<Pattern>,
    pub(crate) import: Vec<Pattern>,
    pub(crate) status: ServiceStatus,
    pub(crate) stop: Arc<AtomicBool>,
    /// Opens the iox services to carry, off this thread (`iox_service::opener`).
    pub(crate) opener: Opener<Opened>,
}

/// A service to carry whose iox side is open: (direction, ROS name, type, service).
pub(crate) type Opened = (Direction, String, String, Bytes);

impl ServiceScanner {
    pub(crate) fn run(mut self, interval: Duration) {
        while !self.stop.load(Ordering::Relaxed) {
            crate::lock(&self.status).retain(|_, c| c.as_ref().map_or(true, |c| !c.thread.is_finished()));
            self.start_opened();
            if !self.export.is_empty() {
                self.scan_iox();
            }
            if !self.import.is_empty() {
                self.scan_ros();
            }
            std::thread::sleep(interval);
        }
        let carried = std::mem::take(&mut *crate::lock(&self.status));
        for (_, c) in carried {
            if let Ok(c) = c {
                let _ = c.thread.join();
            }
        }
    }

    /// Whether `name` is carried now, or its iox side is being opened or waits out a
    /// back-off.
    fn busy(&self, name: &str) -> bool {
        !self.opener.ready(name) || matches!(crate::lock(&self.status).get(name), Some(Ok(_)))
    }

    fn record(&self, name: &str, result: Result<Carried, String>) {
        let mut status = crate::lock(&self.status);
        match &result {
            Ok(c) => eprintln!(
                "iox-ros2: {} service {name:?} as {} ({})",
                if c.direction == Direction::Export {
                    "exporting"
                } else {
                    "importing"
                },
                c.ros_name,
                c.type_name
            ),
            Err(why) => {
                if !matches!(status.get(name), Some(Err(before)) if before == why) {
                    eprintln!(
                        "iox-ros2: not carrying service {name:?} (tried again after a back-off): {why}"
                    );
                }
            }
        }
        status.insert(name.to_owned(), result);
    }

    /// Makes the ROS side of the services whose iox side opened since the last look,
    /// and starts their threads.
    fn start_opened(&mut self) {
        for f in self.opener.finished() {
            let Ok((direction, ros_name, type_name, service)) = f.result else {
                let why = f.result.err().map(|failed| failed.why).unwrap_or_default();
                self.record(&f.name, Err(why));
                continue;
            };
            let result = (|| match direction {
                Direction::Export => {
                    let server = self
                        .ros
                        .service_server(&ros_name, &type_name)
                        .map_err(|e| e.to_string())?;
                    spawn(ros_name, type_name, direction, &self.stop, move |stats, stop| {
                        export(service, server, stats, stop)
                    })
                }
                Direction::Import => {
                    let client = self
                        .ros
                        .service_client(&ros_name, &type_name)
                        .map_err(|e| e.to_string())?;
                    spawn(ros_name, type_name, direction, &self.stop, move |stats, stop| {
                        import(service, client, stats, stop)
                    })
                }
            })()
            // A failure after the open (the ROS server or client) is backed off too.
            .map_err(|why| self.opener.failed_later(&f.name, why).why);
            self.record(&f.name, result);
        }
    }

    fn scan_iox(&mut self) {
        let Ok(info) = iox_service::inspect::inspect_all_in(&self.root) else {
            return;
        };
        for service in info.services {
            let Some(config) = service.config else { continue };
            let name = config.name.clone();
            if config.messaging_pattern() != iox_service::MessagingPattern::RequestResponse
                || !self.export.iter().any(|p| p.matches(&name))
                || self.busy(&name)
                || config.attributes.get(IMPORTED_KEY).is_some()
            {
                continue;
            }
            let root = self.root.clone();
            self.opener.open(&name, move || {
                let type_name = config
                    .attributes
                    .get(TYPE_KEY)
                    .ok_or_else(|| format!("it records no ROS service type ({TYPE_KEY})"))?
                    .to_owned();
                let ros_name = names::topic_name(&config.name).map_err(|e| e.to_string())?;
                let service = Service::named(&config.name)
                    .map_err(|e| e.to_string())?
                    .root(&root)
                    .request_response::<[u8], [u8]>()
                    .timeout(DAEMON_OPEN_TIMEOUT)
                    .open()
                    .map_err(|e| format!("cannot open it as [u8] requests and responses (CDR): {e}"))?;
                Ok((Direction::Export, ros_name, type_name, service))
            });
        }
    }

    fn scan_ros(&mut self) {
        let (Ok(all), Ok(own)) = (self.ros.services(false), self.ros.services(true)) else {
            return;
        };
        let own: HashSet<String> = own.into_iter().map(|(n, _)| n).collect();
        for (ros_name, types) in all {
            if own.contains(&ros_name) || types.iter().any(|t| is_infrastructure(t)) {
                continue;
            }
            let Ok(name) = names::service_name(&ros_name) else {
                continue;
            };
            if !self.import.iter().any(|p| p.matches(&name)) || self.busy(&name) {
                continue;
            }
            let [type_name] = &types[..] else {
                self.record(
                    &name,
                    Err(format!("{ros_name} has several types: {}", types.join(", "))),
                );
                continue;
            };
            let (root, type_name, key) = (self.root.clone(), type_name.clone(), name.clone());
            self.opener.open(&name, move || {
                let service = Service::named(&key)
                    .map_err(|e| e.to_string())?
                    .root(&root)
                    .request_response::<[u8], [u8]>()
                    .request_slice_len(SLICE_LEN)
                    .response_slice_len(SLICE_LEN)
                    .attribute(TYPE_KEY, type_name.as_str())
                    .attribute(IMPORTED_KEY, "ros2")
                    .timeout(DAEMON_OPEN_TIMEOUT)
                    .open_or_create()
                    .map_err(|e| format!("cannot open or create iox service {key:?}: {e}"))?;
                Ok((Direction::Import, ros_name, type_name, service))
            });
        }
    }
}

fn is_infrastructure(type_name: &str) -> bool {
    type_name.starts_with("rcl_interfaces/") || type_name.starts_with("type_description_interfaces/")
}

fn spawn(
    ros_name: String,
    type_name: String,
    direction: Direction,
    stop: &Arc<AtomicBool>,
    body: impl FnOnce(&CallStats, &AtomicBool) + Send + 'static,
) -> Result<Carried, String> {
    let stats = Arc::new(CallStats::default());
    let (s, st) = (stats.clone(), stop.clone());
    let thread = std::thread::Builder::new()
        .name(format!("service {ros_name}"))
        .spawn(move || body(&s, &st))
        .map_err(|e| e.to_string())?;
    Ok(Carried {
        ros_name,
        type_name,
        direction,
        stats,
        thread,
    })
}

/// Serves ROS clients by calling the iox servers.
fn export(service: Bytes, mut server: ServiceServer, stats: &CallStats, stop: &AtomicBool) {
    let client = match service.client_builder().create() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("iox-ros2: service {:?}: no iox client: {e}", service.name());
            return;
        }
    };
    let mut waits = WaitSet::new(&server.ros());
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = waits.wait(&[], &[&server], &[], Duration::from_millis(100)) {
            eprintln!("iox-ros2: service {:?}: waiting failed: {e}", service.name());
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        loop {
            let (id, pending) = match server.take() {
                Ok(None) => break,
                Err(e) => {
                    eprintln!("iox-ros2: service {:?}: {e}", service.name());
                    break;
                }
                Ok(Some((id, cdr))) => {
                    stats.calls.fetch_add(1, Ordering::Relaxed);
                    let sent = client
                        .loan_slice_uninit(cdr.len())
                        .map_err(|e| e.to_string())
                        .and_then(|l| l.write_from_slice(cdr).send().map_err(|e| e.to_string()));
                    (id, sent)
                }
            };
            let answer = pending.and_then(|p| match p.receive_timeout(CALL_TIMEOUT) {
                Ok(Some(response)) => Ok(response.to_vec()),
                Ok(None) if p.is_finished() => {
                    Err("the iox server dropped the request unanswered".to_owned())
                }
                Ok(None) => Err(format!("no iox server answered within {CALL_TIMEOUT:?}")),
                Err(e) => Err(e.to_string()),
            });
            match answer.map(|cdr| server.respond(id, &cdr)) {
                Ok(Ok(())) => {
                    stats.answered.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(e)) => {
                    stats.malformed.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "iox-ros2: service {:?}: the iox server's response was refused: {e}",
                        service.name()
                    );
                }
                Err(why) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    eprintln!("iox-ros2: service {:?}: a call failed: {why}", service.name());
                }
            }
        }
    }
}

/// Serves iox clients by calling the ROS service.
fn import(service: Bytes, mut client: ServiceClient, stats: &CallStats, stop: &AtomicBool) {
    let server = match service.server_builder().create() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("iox-ros2: service {:?}: no iox server: {e}", service.name());
            return;
        }
    };
    let mut waits = WaitSet::new(&client.ros());
    while !stop.load(Ordering::Relaxed) {
        let active = match server.receive_timeout(Duration::from_millis(100)) {
            Ok(Some(a)) => a,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("iox-ros2: service {:?} ends: {e}", service.name());
                return;
            }
        };
        stats.calls.fetch_add(1, Ordering::Relaxed);
        // A server that discovery listed may not be matched by this client yet.
        let deadline = Instant::now() + CALL_TIMEOUT;
        while !client.server_available().unwrap_or(false) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let seq = match client.send(&active) {
            Ok(seq) => seq,
            Err(e) => {
                // Dropping the request unanswered tells the iox client it failed.
                stats.malformed.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "iox-ros2: service {:?}: a request was refused: {e}",
                    service.name()
                );
                continue;
            }
        };
        let deadline = Instant::now() + CALL_TIMEOUT;
        let mut answer = None;
        while answer.is_none() && Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(e) = waits.wait(&[], &[], &[&client], left.min(Duration::from_millis(100))) {
                eprintln!("iox-ros2: service {:?}: waiting failed: {e}", service.name());
                break;
            }
            while let Ok(Some((s, cdr))) = client.take() {
                if s == seq {
                    answer = Some(cdr.to_vec());
                }
            }
        }
        let Some(cdr) = answer else {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "iox-ros2: service {:?}: the ROS service did not answer within {CALL_TIMEOUT:?}",
                service.name()
            );
            continue;
        };
        let sent = active
            .loan_slice_uninit(cdr.len())
            .map_err(|e| e.to_string())
            .and_then(|l| l.write_from_slice(&cdr).send().map_err(|e| e.to_string()));
        match sent {
            Ok(()) => {
                stats.answered.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "iox-ros2: service {:?}: the response could not be sent: {e}",
                    service.name()
                );
            }
        }
    }
}
