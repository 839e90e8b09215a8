//! `iox record -o FILE NAME|GLOB...`: records publish-subscribe services into an MCAP
//! file, one channel per service.
//!
//! Format (what `iox replay` and other MCAP readers find):
//! - a service with a ROS 2 form ([`crate::ros_form`]: CDR of a ROS type, images,
//!   typed payloads whose schema describes every byte) is a channel in MCAP's ROS 2
//!   profile, which Foxglove and ROS 2's MCAP readers decode by field: schema
//!   encoding [`ROS2_SCHEMA_ENCODING`], named after the ROS type
//!   (`sensor_msgs/msg/Image`, or `iox_msgs/msg/<Type>` for a `.msg` written for an
//!   iox type), its data the definition; messages in [`ROS2_MESSAGE_ENCODING`]
//!   (little-endian plain CDR); the topic the service's name as ROS names topics
//!   (`/camera/image` for `camera/image`); the static config in the channel's metadata under
//!   [`CONFIG_METADATA`], for `replay`. Decision: the ROS 2
//!   profile rather than JSON with a JSON schema, because it is the one ROS users'
//!   tools already read, it keeps numbers exact and compact (a `u64` sample is 12
//!   bytes, not a formatted number), and it is the profile the ROS 2 gateway's
//!   channels use;
//! - every other service: one channel, its topic the service name, message encoding
//!   [`MESSAGE_ENCODING`] (the payload's bytes as the publisher wrote them, padding
//!   zeroed; for a service with a user header, the header's bytes first, then the
//!   payload's, the header's size being the one the schema's config records),
//!   metadata `iox.payload` (the payload type as `iox show` prints it);
//!   and the channel's schema: named after the payload type, encoding
//!   [`SCHEMA_ENCODING`], data the service's static config as RON (pattern settings,
//!   payload type and its field schema), from which `replay` recreates the service;
//! - the header's profile: `ros2` (which rosbag2 writes, and which ROS readers such as
//!   `rosbags` require) when every service matched at the start has a ROS 2 form, or
//!   as `--profile` says; a service without one that appears later is still recorded
//!   (in iox's own encoding, which ROS readers skip or refuse), with a warning;
//! - `log_time` and `publish_time`: when the recorder received the sample (ns since the
//!   Unix epoch; iox samples carry no send time);
//! - chunked, with CRCs, no compression; chunks are written (and their lengths
//!   patched) in memory and reach the file only in whole commits
//!   ([`crate::commit_file`]): the open chunk is closed and everything since the last
//!   commit written out at least every [`FLUSH_EVERY`] and every
//!   [`crate::commit_file::COMMIT_BYTES`]. So a recorder stopped at any moment (SIGKILL,
//!   a signal it does not handle) leaves a file that ends at its last complete record,
//!   with every message up to its last commit (no footer then: readers that read a file
//!   without one read it, as `iox replay` and MCAP's streaming readers do, and `mcap
//!   recover` rewrites it with one). A file is written as `FILE.partial` until its
//!   header is committed and then renamed, so `FILE` always starts with one.
//!
//! The recorder never blocks a publisher: a receiving thread copies each sample out of
//! shared memory and releases it at once, and hands the copy to a writing thread
//! through a bounded queue (`--queue` samples and `--queue-bytes` payload bytes);
//! when the disk falls behind and the queue is full, samples are dropped, counted and
//! reported at the end (and a service
//! whose subscriber queue overflows loses samples as its overflow policy says, as for
//! any slow subscriber).
//!
//! Services are matched by exact name or glob (`robot/*`); services created later that
//! match are picked up (the root is listed again every [`RESCAN_EVERY`], every 50 ms
//! while nothing matched yet or an open is in flight). The receiving thread never
//! opens a service itself: an opener (`iox_service::opener`) opens each on a thread of
//! its own with a short timeout and backs off one that keeps failing, so a service
//! whose holders another user stopped delays no sample of the others. A service
//! whose payload has padding and no recorded schema is skipped with a warning: its
//! padding bytes cannot be copied. `--split-size` / `--split-duration` start a new file
//! (`STEM_000.mcap`, `STEM_001.mcap`, ...) when the current one reaches the size or
//! age; each file holds every channel's schema, so each replays on its own. SIGINT or
//! SIGTERM (or `--duration`, `--count`) ends the recording and completes the file;
//! signals that come within the WaitSet's grace of the first (`timeout` signals the
//! process and then its group) are the same request.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError, channel, sync_channel};
use std::time::{Duration, Instant, SystemTime};

use iox_service::opener::{Backoff, DAEMON_OPEN_TIMEOUT, Opener};
use iox_service::{CallbackProgression, Service, StaticConfig, Subscriber, WaitSet, WaitSetRunResult};

use crate::commit_file::{COMMIT_BYTES, CommitFile};
use crate::ros_form::{Conversion, ros_form};
use crate::topic::{Topic, by_schema_or_bytes, glob_match, header_by_schema_or_bytes};
use crate::{Failure, fail};

/// Schema encoding of iox channels: the data is a static config in RON.
pub const SCHEMA_ENCODING: &str = "iox.static_config.ron";
/// Message encoding of iox channels: the payload's raw bytes.
pub const MESSAGE_ENCODING: &str = "iox.raw";
/// Schema encoding of channels in MCAP's ROS 2 profile: a `.msg` definition.
pub const ROS2_SCHEMA_ENCODING: &str = "ros2msg";
/// Message encoding of channels in MCAP's ROS 2 profile.
pub const ROS2_MESSAGE_ENCODING: &str = "cdr";
/// Channel metadata key of a `ros2msg` channel's static config (RON), from which
/// `replay` recreates the service.
pub const CONFIG_METADATA: &str = "iox.static_config";

/// Longest a chunk stays open (what a SIGKILL can lose).
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);
/// Buffers kept for reuse between the receiving and the writing thread.
const RECYCLED: usize = 64;
/// How often the root is listed for new matching services.
pub const RESCAN_EVERY: Duration = Duration::from_secs(1);

/// What `iox record` was asked for (its command-line arguments).
#[derive(clap::Args)]
pub struct RecordArgs {
    /// The MCAP file to write (with splitting: STEM_000.mcap, STEM_001.mcap, ...).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Service names or globs ('robot/*'); services created later are picked up.
    #[arg(required = true)]
    pub services: Vec<String>,
    /// Start a new file when this many payload bytes are in the current one
    /// (a number, or with K, M, G).
    #[arg(long, value_parser = crate::parse_size)]
    pub split_size: Option<u64>,
    /// Start a new file after this long (10, 2.5s, 500ms, 1m).
    #[arg(long, value_parser = crate::events::parse_duration)]
    pub split_duration: Option<Duration>,
    /// Stop after this long (default: until Ctrl-C / SIGTERM).
    #[arg(long, value_parser = crate::events::parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many samples.
    #[arg(long)]
    pub count: Option<u64>,
    /// Samples held in memory for the disk; more are dropped (and counted).
    #[arg(long, default_value_t = 65_536)]
    pub queue: usize,
    /// Payload bytes held in memory for the disk (K, M, G); more are dropped.
    #[arg(long, value_parser = crate::parse_size, default_value = "256M")]
    pub queue_bytes: u64,
    /// The file's MCAP profile: `ros2` (what rosbag2 writes and ROS readers require),
    /// `none`, or `auto`: `ros2` when every service matched at the start has a ROS 2
    /// form.
    #[arg(long, value_enum, default_value_t = Profile::Auto)]
    pub profile: Profile,
}

/// The MCAP profile a recording declares in its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// `ros2` when every service matched at the start has a ROS 2 form, else none.
    Auto,
    /// `ros2`.
    Ros2,
    /// No profile.
    None,
}

/// The profile `args` ask for: `auto` decides by the services under `root` that match
/// now (at least one, each with a ROS 2 form).
fn profile(root: &Path, args: &RecordArgs) -> &'static str {
    let ros2 = match args.profile {
        Profile::Ros2 => true,
        Profile::None => false,
        Profile::Auto => {
            let matched: Vec<StaticConfig> = Service::list_in(root)
                .map(|configs| {
                    configs
                        .into_iter()
                        .flatten()
                        .filter(|c| c.publish_subscribe().is_some())
                        .filter(|c| args.services.iter().any(|p| glob_match(p, &c.name)))
                        .collect()
                })
                .unwrap_or_default();
            !matched.is_empty() && matched.iter().all(|c| ros_form(c).is_some())
        }
    };
    if ros2 { "ros2" } else { "" }
}

/// A sample for the writing thread: its channel, when it was received (ns since the
/// epoch), its payload.
type Item = (usize, u64, Vec<u8>);

/// A new channel for the writing thread: its index and the service's static config.
/// Announced on a channel of their own, never full, so announcing one never waits for
/// the disk; the writer takes all announced channels before each sample.
type Announcement = (usize, Box<StaticConfig>);

/// One recorded service.
struct Recorded {
    topic: Topic,
    subscriber: Subscriber<[u8]>,
    channel: usize,
    /// The conversion to CDR of a channel in the ROS 2 profile ([`ros_form`]).
    ros: Option<Conversion>,
}

/// Now, in ns since the Unix epoch (what MCAP's and Foxglove's log times hold).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `iox record`.
pub fn record(root: &Path, args: RecordArgs) -> Result<u8, Failure> {
    if args.services.is_empty() {
        return Err(fail(2, "name at least one service (or a glob such as 'robot/*')"));
    }
    if args.queue == 0 {
        return Err(fail(2, "--queue must be at least 1"));
    }
    let (tx, rx) = sync_channel::<Item>(args.queue);
    let (announce, announced) = channel::<Announcement>();
    // Payload bytes handed to the writer and not yet written (`--queue-bytes`).
    let in_flight = Arc::new(AtomicU64::new(0));
    // Buffers written out, back to the receiving side for reuse.
    let (recycle, recycled) = sync_channel::<Vec<u8>>(RECYCLED);
    let files = Files::new(
        &args.output,
        args.split_size.is_some() || args.split_duration.is_some(),
    );
    let profile = profile(root, &args);
    if profile == "ros2" {
        eprintln!("iox: recording in MCAP's ros2 profile (ROS 2 readers open the file)");
    }
    let first = files.path(0);
    let first_file = create_partial(&first).map_err(|e| {
        fail(
            crate::ROOT_UNUSABLE,
            format!("cannot create {}: {e}", partial(&first).display()),
        )
    })?;
    let (split_size, split_duration) = (args.split_size, args.split_duration);
    let queue = Queue {
        samples: tx,
        announce,
        recycled,
        in_flight: in_flight.clone(),
        budget: args.queue_bytes,
    };
    let writer = std::thread::spawn(move || {
        let inbox = Inbox {
            samples: rx,
            announced,
            recycle,
            in_flight,
        };
        write_files(inbox, files, first_file, profile, split_size, split_duration)
    });
    let received = receive(root, &args, &queue);
    drop(queue);
    let written = writer
        .join()
        .map_err(|_| fail(crate::ROOT_UNUSABLE, "the writing thread panicked"))?;
    // The writer's own error first: it says why the receiving side saw it stop.
    let written = written?;
    let (received, dropped) = received?;
    eprintln!(
        "recorded {} sample(s) of {} service(s) into {}{}",
        received - dropped,
        written.channels,
        written
            .files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if dropped > 0 {
            format!("; dropped {dropped} the disk could not keep up with")
        } else {
            String::new()
        }
    );
    Ok(0)
}

/// The receiving thread's ends of the queues to the writer.
struct Queue {
    samples: SyncSender<Item>,
    announce: Sender<Announcement>,
    recycled: Receiver<Vec<u8>>,
    in_flight: Arc<AtomicU64>,
    budget: u64,
}

/// The writing thread's ends.
struct Inbox {
    samples: Receiver<Item>,
    announced: Receiver<Announcement>,
    recycle: SyncSender<Vec<u8>>,
    in_flight: Arc<AtomicU64>,
}

/// The receiving side: opens matching services, drains their subscribers into `tx`
/// until a stop condition; returns (samples received, samples dropped).
fn receive(root: &Path, args: &RecordArgs, queue: &Queue) -> Result<(u64, u64), Failure> {
    let waitset = WaitSet::new().map_err(|e| fail(2, e.to_string()))?;
    let start = Instant::now();
    let end = args.duration.and_then(|d| start.checked_add(d));
    let mut recorded: Vec<Recorded> = Vec::new();
    let (mut received, mut dropped) = (0u64, 0u64);
    let mut skipped: Vec<String> = Vec::new();
    // Reasons an open failed, each said once.
    let mut said = std::collections::HashSet::new();
    let mut said_waiting = false;
    // Opens the services to record off this thread (`iox_service::opener`).
    let mut opener: Opener<(Topic, Subscriber<[u8]>)> = Opener::new(Backoff::default());
    // A ROS 2 channel's sample, copied out before it is encoded.
    let mut scratch = Vec::new();
    loop {
        for r in opened(&mut opener, recorded.len(), &mut said, &queue.announce)? {
            eprintln!("recording {} ({})", r.topic.name, r.topic.config.payload);
            recorded.push(r);
        }
        scan(root, args, &recorded, &mut skipped, &mut opener);
        if recorded.is_empty() && !said_waiting {
            eprintln!("waiting for services matching {}", args.services.join(" "));
            said_waiting = true;
        }
        let guards = recorded
            .iter()
            .map(|r| waitset.attach_notification(&r.subscriber))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail(2, e.to_string()))?;
        // Nothing matched yet, or an open in flight: look again soon, so a service
        // created just after the recorder started loses few samples.
        let rescan_at = Instant::now()
            + if recorded.is_empty() || !opener.idle() {
                RESCAN_EVERY / 20
            } else {
                RESCAN_EVERY
            };
        loop {
            let stop_at = end.map_or(rescan_at, |e| e.min(rescan_at));
            let wait = stop_at.saturating_duration_since(Instant::now());
            let result = waitset
                .wait_and_process_once_with_timeout(|_| CallbackProgression::Continue, wait)
                .map_err(|e| fail(2, e.to_string()))?;
            for r in &recorded {
                while let Some(sample) = r
                    .subscriber
                    .receive_raw()
                    .map_err(|e| fail(crate::CORRUPT, format!("{}: {e}", r.topic.name)))?
                {
                    let at = now_ns();
                    // A buffer the writer is done with, so large samples cost no fresh
                    // allocation (and its page faults) each.
                    let mut bytes = queue.recycled.try_recv().unwrap_or_default();
                    bytes.clear();
                    let copied = match &r.ros {
                        Some(conversion) => {
                            scratch.clear();
                            r.topic.copy_header_into(&sample, &mut scratch)
                                && r.topic.copy_payload_into(&sample, &mut scratch)
                                && conversion.encode(&scratch, &mut bytes)
                        }
                        None => {
                            r.topic.copy_header_into(&sample, &mut bytes)
                                && r.topic.copy_payload_into(&sample, &mut bytes)
                        }
                    };
                    drop(sample);
                    received += 1;
                    let len = bytes.len() as u64;
                    // Over the byte budget, or the queue full: dropped, and counted.
                    if !copied || queue.in_flight.load(Ordering::Relaxed) + len > queue.budget {
                        dropped += 1;
                    } else {
                        queue.in_flight.fetch_add(len, Ordering::Relaxed);
                        match queue.samples.try_send((r.channel, at, bytes)) {
                            Ok(()) => {}
                            Err(TrySendError::Full(_)) => {
                                queue.in_flight.fetch_sub(len, Ordering::Relaxed);
                                dropped += 1;
                            }
                            Err(TrySendError::Disconnected(_)) => {
                                return Err(fail(crate::ROOT_UNUSABLE, "the writing thread stopped"));
                            }
                        }
                    }
                    if args.count.is_some_and(|c| received >= c) {
                        return Ok((received, dropped));
                    }
                }
            }
            if result == WaitSetRunResult::TerminationRequest || end.is_some_and(|e| Instant::now() >= e) {
                return Ok((received, dropped));
            }
            if Instant::now() >= rescan_at {
                break;
            }
        }
        drop(guards);
    }
}

/// Asks `opener` to open the services under `root` that match the patterns and are
/// neither recorded nor skipped (each on a thread of its own, with a short timeout:
/// this thread forwards samples and never waits on one service).
fn scan(
    root: &Path,
    args: &RecordArgs,
    recorded: &[Recorded],
    skipped: &mut Vec<String>,
    opener: &mut Opener<(Topic, Subscriber<[u8]>)>,
) {
    let Ok(configs) = Service::list_in(root) else {
        return; // the root may not exist yet
    };
    for config in configs.into_iter().flatten() {
        let name = config.name.clone();
        let wanted = args.services.iter().any(|p| glob_match(p, &name));
        let known = recorded.iter().any(|r| r.topic.name == name) || skipped.contains(&name);
        if !wanted || known || config.publish_subscribe().is_none() || !opener.ready(&name) {
            continue;
        }
        if !by_schema_or_bytes(&config) {
            eprintln!(
                "iox: skipping {name}: its payload {} has padding or invalid bit patterns and no schema describes all its bytes",
                config.payload
            );
            skipped.push(name);
            continue;
        }
        if !header_by_schema_or_bytes(&config) {
            eprintln!(
                "iox: skipping {name}: its user header has padding or invalid bit patterns and no schema describes all its bytes"
            );
            skipped.push(name);
            continue;
        }
        let root = root.to_owned();
        opener.open(&name, move || {
            let topic = Topic::open_config_within(&root, config, false, Some(DAEMON_OPEN_TIMEOUT))
                .map_err(|e| e.text)?;
            let subscriber = topic.subscriber().map_err(|e| e.text)?;
            Ok((topic, subscriber))
        });
    }
}

/// The services `opener` opened since the last look, with their channels announced to
/// the writer (numbered from `next`); an open that failed is said once per reason and
/// tried again after its back-off (a service removed meanwhile, or whose holders did
/// not answer in time).
fn opened(
    opener: &mut Opener<(Topic, Subscriber<[u8]>)>,
    next: usize,
    said: &mut std::collections::HashSet<String>,
    announce: &Sender<Announcement>,
) -> Result<Vec<Recorded>, Failure> {
    let mut found = Vec::new();
    for f in opener.finished() {
        let (topic, subscriber) = match f.result {
            Ok(opened) => opened,
            Err(failed) => {
                let line = format!("iox: not recording {} yet: {}", f.name, failed.why);
                if said.insert(line.clone()) {
                    eprintln!("{line} (trying again)");
                }
                continue;
            }
        };
        let channel = next + found.len();
        announce
            .send((channel, Box::new(topic.config.clone())))
            .map_err(|_| fail(crate::ROOT_UNUSABLE, "the writing thread stopped"))?;
        let ros = ros_form(&topic.config).map(|f| f.conversion);
        found.push(Recorded {
            topic,
            subscriber,
            channel,
            ros,
        });
    }
    Ok(found)
}

/// The output file names: the path itself, or `STEM_NNN.EXT` when splitting.
struct Files {
    base: PathBuf,
    split: bool,
}

impl Files {
    fn new(base: &Path, split: bool) -> Self {
        Files {
            base: base.to_owned(),
            split,
        }
    }

    fn path(&self, index: usize) -> PathBuf {
        if !self.split {
            return self.base.clone();
        }
        let stem = self
            .base
            .file_stem()
            .map_or_else(|| "recording".into(), |s| s.to_string_lossy());
        let ext = self
            .base
            .extension()
            .map_or_else(|| "mcap".into(), |e| e.to_string_lossy());
        self.base.with_file_name(format!("{stem}_{index:03}.{ext}"))
    }
}

/// What the writing thread did.
struct Written {
    files: Vec<PathBuf>,
    channels: usize,
}

/// One open output file.
struct Output {
    writer: mcap::Writer<CommitFile>,
    /// Bytes written and not yet committed to the file.
    pending: Rc<Cell<usize>>,
    /// Our channel index -> the file's channel id.
    ids: BTreeMap<usize, u16>,
    opened: Instant,
    bytes: u64,
    sequence: u32,
    profile: &'static str,
}

fn io_failure(path: &Path, e: impl std::fmt::Display) -> Failure {
    fail(crate::ROOT_UNUSABLE, format!("writing {}: {e}", path.display()))
}

/// Where an output file is written until its header is committed: `PATH.partial`.
fn partial(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn create_partial(path: &Path) -> std::io::Result<File> {
    File::create(partial(path))
}

/// The MCAP writer of `file` (created by [`create_partial`] for `path`): the header and
/// `channels` committed, then renamed to `path`, so `path` never names a file without
/// a header (a recorder killed before holds only `PATH.partial`).
fn open_output(
    file: File,
    path: &Path,
    profile: &'static str,
    channels: &BTreeMap<usize, StaticConfig>,
) -> Result<Output, Failure> {
    let (file, pending) = CommitFile::new(file);
    let writer = mcap::WriteOptions::new()
        .compression(None)
        .profile(profile)
        .library(concat!("iox ", env!("CARGO_PKG_VERSION")))
        .chunk_size(Some(1 << 20))
        // Chunks written in place and patched in memory (see `crate::commit_file`).
        .create(file)
        .map_err(|e| io_failure(path, e))?;
    let mut out = Output {
        writer,
        pending,
        ids: BTreeMap::new(),
        opened: Instant::now(),
        bytes: 0,
        sequence: 0,
        profile,
    };
    for (&index, config) in channels {
        add_channel(&mut out, index, config, path)?;
    }
    // The header and the channels known so far, committed: from now on the file is a
    // readable MCAP prefix, whenever the recorder stops.
    out.writer.flush().map_err(|e| io_failure(path, e))?;
    std::fs::rename(partial(path), path).map_err(|e| io_failure(path, e))?;
    Ok(out)
}

fn add_channel(out: &mut Output, index: usize, config: &StaticConfig, path: &Path) -> Result<(), Failure> {
    let mut metadata = BTreeMap::from([("iox.payload".to_owned(), config.payload.to_string())]);
    let (schema, encoding, topic) = match ros_form(config) {
        Some(ros) => {
            metadata.insert(CONFIG_METADATA.to_owned(), config.to_ron());
            let schema = out
                .writer
                .add_schema(&ros.name, ROS2_SCHEMA_ENCODING, ros.text.as_bytes())
                .map_err(|e| io_failure(path, e))?;
            // The topic as ROS names it.
            (schema, ROS2_MESSAGE_ENCODING, format!("/{}", config.name))
        }
        None => {
            if out.profile == "ros2" {
                eprintln!(
                    "iox: {} has no ROS 2 form (no ROS type, or no definition of it found: \
                     set AMENT_PREFIX_PATH or record `ros2/definition`); recorded in iox's \
                     own encoding, which ROS readers of this ros2-profile file skip or refuse",
                    config.name
                );
            }
            let schema = out
                .writer
                .add_schema(
                    config.payload.type_name(),
                    SCHEMA_ENCODING,
                    config.to_ron().as_bytes(),
                )
                .map_err(|e| io_failure(path, e))?;
            (schema, MESSAGE_ENCODING, config.name.clone())
        }
    };
    let id = out
        .writer
        .add_channel(schema, &topic, encoding, &metadata)
        .map_err(|e| io_failure(path, e))?;
    out.ids.insert(index, id);
    Ok(())
}

/// Completes `out` (summary, footer) and commits all of it to its file.
fn close(mut out: Output, path: &Path) -> Result<(), Failure> {
    out.writer.finish().map_err(|e| io_failure(path, e))?;
    std::io::Write::flush(&mut out.writer.into_inner()).map_err(|e| io_failure(path, e))
}

/// The writing thread: writes what `rx` brings into the files until it closes.
fn write_files(
    inbox: Inbox,
    files: Files,
    first: File,
    profile: &'static str,
    split_size: Option<u64>,
    split_duration: Option<Duration>,
) -> Result<Written, Failure> {
    let mut channels: BTreeMap<usize, StaticConfig> = BTreeMap::new();
    let mut paths = vec![files.path(0)];
    let mut out = open_output(first, &paths[0], profile, &channels)?;
    let mut last_flush = Instant::now();
    loop {
        // Wake for the next flush at the latest: a closed chunk at least every
        // FLUSH_EVERY, however the samples come.
        let wait = (last_flush + FLUSH_EVERY).saturating_duration_since(Instant::now());
        let item = match inbox.samples.recv_timeout(wait) {
            Ok(item) => Some(item),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let path = paths.last().expect("one file at least").clone();
        // Every channel announced before this sample was sent.
        while let Ok((index, config)) = inbox.announced.try_recv() {
            add_channel(&mut out, index, &config, &path)?;
            channels.insert(index, *config);
        }
        if let Some((index, at, data)) = item {
            let split = split_size.is_some_and(|s| out.bytes >= s)
                || split_duration.is_some_and(|d| out.opened.elapsed() >= d);
            if split && out.bytes > 0 {
                let next = files.path(paths.len());
                let file = create_partial(&next).map_err(|e| io_failure(&partial(&next), e))?;
                close(
                    std::mem::replace(&mut out, open_output(file, &next, profile, &channels)?),
                    &path,
                )?;
                paths.push(next);
            }
            let path = paths.last().expect("one file at least");
            let header = mcap::records::MessageHeader {
                channel_id: out.ids[&index],
                sequence: out.sequence,
                log_time: at,
                publish_time: at,
            };
            out.sequence = out.sequence.wrapping_add(1);
            out.bytes += data.len() as u64;
            out.writer
                .write_to_known_channel(&header, &data)
                .map_err(|e| io_failure(path, e))?;
            if out.pending.get() >= COMMIT_BYTES {
                out.writer.flush().map_err(|e| io_failure(path, e))?;
                last_flush = Instant::now();
            }
            inbox.in_flight.fetch_sub(data.len() as u64, Ordering::Relaxed);
            let _ = inbox.recycle.try_send(data);
        }
        if last_flush.elapsed() >= FLUSH_EVERY {
            out.writer.flush().map_err(|e| io_failure(&path, e))?;
            last_flush = Instant::now();
        }
    }
    let path = paths.last().expect("one file at least").clone();
    while let Ok((index, config)) = inbox.announced.try_recv() {
        add_channel(&mut out, index, &config, &path)?;
        channels.insert(index, *config);
    }
    close(out, paths.last().expect("one file at least"))?;
    Ok(Written {
        files: paths,
        channels: channels.len(),
    })
}
