//! `iox replay FILE...`: republishes an `iox record` recording (see `record` for the
//! format) into the services it names, opening each or creating it from the recorded
//! static config (payload type, schema, limits, overflow, history, size classes).
//!
//! Decisions:
//! - Timing: each message is sent at its recorded offset from the first message of the
//!   first file, divided by `--rate` (2 plays twice as fast); files given together play
//!   as one recording (the parts of a split one, in order).
//! - A first pass reads every channel, so all services and publishers exist before the
//!   first message; `--wait-for-subscribers` then waits (within `--timeout`) until each
//!   has a subscriber, so nothing is sent before a reader is there.
//! - `--topics GLOB` (repeatable) replays only matching services (a channel's topic
//!   without the leading `/` ROS channels have is its service's name); `--loop` starts
//!   again after the last message, until interrupted.
//! - A file cut short (the recorder was killed: no footer, see `record`) or damaged
//!   is replayed up to its last readable record; that is then reported and the exit
//!   code is 3 (corrupt or incomplete files found). Channels that are not iox's (another encoding), or whose config
//!   names another service than the channel's topic, are skipped with a warning.
//! - A file is not trusted: its records are read within the limits `mcap_read` sets
//!   (no length past the file's end followed, only schemas, channels and messages
//!   decoded), its ROS definitions must be whole and at most `iox_ros2::library::MAX_DEPTH`
//!   types deep, its configs are checked as any static config is; a
//!   payload with a `bool` is sent only when the service's own schema shows every
//!   `bool` in it is 0 or 1 (so a payload with bytes of unknown layout is not sent);
//!   message times further apart than a year are refused as damage; services are
//!   created with the default permissions (owner only), not the recorded ones.
//! - A file is read into memory whole (recordings are split with `--split-size` when
//!   they are large), so the MCAP reader works on a slice and no file is mapped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iox_service::{Publisher, StaticConfig};

use crate::record::{
    CONFIG_METADATA, MESSAGE_ENCODING, ROS2_MESSAGE_ENCODING, ROS2_SCHEMA_ENCODING, SCHEMA_ENCODING,
};
use crate::ros_form::{Conversion, ros_form};
use crate::topic::{Topic, glob_match, sleep_until};
use crate::{CORRUPT, Failure, fail};

/// The furthest a message may lie after the first (a year, at the given rate).
const MAX_OFFSET: Duration = Duration::from_secs(366 * 86_400);
/// The least time between two passes of `--loop`.
const LOOP_GAP: Duration = Duration::from_millis(1);

/// What `iox replay` was asked for (its command-line arguments).
#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The recording (several: the parts of a split one, in order).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Speed factor (2 plays twice as fast).
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Start again after the last message, until interrupted.
    #[arg(long = "loop")]
    pub looping: bool,
    /// Replay only services matching this glob (repeatable).
    #[arg(long)]
    pub topics: Vec<String>,
    /// Wait until every replayed service has a subscriber before the first message.
    #[arg(long)]
    pub wait_for_subscribers: bool,
    /// Limit for --wait-for-subscribers (10, 2.5s, 500ms, 1m).
    #[arg(long, value_parser = crate::events::parse_duration)]
    pub timeout: Option<Duration>,
}

/// A replayed service: its topic and publisher.
struct Target {
    topic: Topic,
    publisher: Publisher<[u8]>,
    /// A channel in MCAP's ROS 2 profile: its type and the conversion of its CDR
    /// messages.
    ros: Option<(String, Conversion)>,
    /// The service made for a channel a ROS tool recorded (kept while replaying).
    _made: Option<Box<dyn std::any::Any>>,
}

/// The recordings, read whole.
fn read_files(files: &[PathBuf]) -> Result<Vec<(PathBuf, Vec<u8>)>, Failure> {
    files
        .iter()
        .map(|p| {
            std::fs::read(p)
                .map(|b| (p.clone(), b))
                .map_err(|e| fail(crate::NOT_FOUND, format!("cannot read {}: {e}", p.display())))
        })
        .collect()
}

/// Every message of `buf` in order (see [`iox_cli::mcap_read`]: the file is not
/// trusted); stops at the first damaged record and returns what it was, or says that
/// the file ends without its footer.
fn messages(
    buf: &[u8],
    each: impl FnMut(&mcap::Message<'_>) -> Result<(), Failure>,
) -> Result<Option<String>, Failure> {
    iox_cli::mcap_read::messages(buf, each)
}

/// The static config a channel carries, if it is an iox channel, and for one in MCAP's
/// ROS 2 profile (see `ros_form`) the conversion of its CDR messages: the config is
/// then in the channel's metadata, and must give the ROS type the channel's schema
/// names; a ROS 2 channel without it (recorded by ROS's tools) is replayed into a
/// service made for its type, under `root`.
fn channel_config(root: &Path, channel: &mcap::Channel<'_>, path: &Path) -> Result<Channel, String> {
    let schema = channel.schema.as_ref().ok_or("the channel has no schema")?;
    if schema.encoding == ROS2_SCHEMA_ENCODING && channel.message_encoding == ROS2_MESSAGE_ENCODING {
        let Some(text) = channel.metadata.get(CONFIG_METADATA) else {
            // Recorded by a ROS tool: a service made for its type (`ros_form::foreign`).
            let definition =
                std::str::from_utf8(&schema.data).map_err(|_| "its definition is not UTF-8".to_owned())?;
            let (config, made, form) =
                crate::ros_form::foreign(root, &channel.topic, &schema.name, definition)?;
            return Ok((config, Some((form.name, form.conversion)), Some(made)));
        };
        let config = StaticConfig::parse(text, path).map_err(|e| e.to_string())?;
        let mismatch = || {
            format!(
                "its static config does not give the ROS 2 type {} its schema names",
                schema.name
            )
        };
        if let Some(ros) = ros_form(&config).filter(|f| f.name == schema.name) {
            return Ok((config, Some((ros.name, ros.conversion)), None));
        }
        // CDR of a type whose definition neither the config nor this machine's ROS
        // install gives (the recorder found it in its own): the file's definition.
        return match iox_ros2::carried::route_of(&config) {
            Ok((ty, iox_ros2::carried::Route::Cdr)) if ty == schema.name => {
                let definition = std::str::from_utf8(&schema.data)
                    .map_err(|_| "its definition is not UTF-8".to_owned())?;
                let library = iox_ros2::library::Library::from_definition_text(&ty, definition)
                    .map_err(|e| format!("its definition: {e}"))?;
                Ok((config, Some((ty, Conversion::Cdr(library))), None))
            }
            _ => Err(mismatch()),
        };
    }
    if schema.encoding != SCHEMA_ENCODING || channel.message_encoding != MESSAGE_ENCODING {
        return Err(format!(
            "encoding {}/{} is not iox's ({SCHEMA_ENCODING}/{MESSAGE_ENCODING}, or {ROS2_SCHEMA_ENCODING}/{ROS2_MESSAGE_ENCODING} with iox's config)",
            schema.encoding, channel.message_encoding
        ));
    }
    let text = std::str::from_utf8(&schema.data).map_err(|e| e.to_string())?;
    Ok((
        StaticConfig::parse(text, path).map_err(|e| e.to_string())?,
        None,
        None,
    ))
}

/// A channel's service config, its ROS 2 type and conversion, and the service made for
/// it (see [`channel_config`]).
type Channel = (
    StaticConfig,
    Option<(String, Conversion)>,
    Option<Box<dyn std::any::Any>>,
);

/// `iox replay`.
pub fn replay(root: &Path, args: ReplayArgs) -> Result<u8, Failure> {
    if !(args.rate.is_finite() && args.rate > 0.0) {
        return Err(fail(
            2,
            format!(
                "--rate {}: give a factor above 0 (2 plays twice as fast)",
                args.rate
            ),
        ));
    }
    let files = read_files(&args.files)?;
    let wanted = |name: &str| args.topics.is_empty() || args.topics.iter().any(|p| glob_match(p, name));

    // First pass: the channels, each service opened or created, one publisher each.
    let mut targets: BTreeMap<String, Option<Target>> = BTreeMap::new();
    let mut first_time: Option<u64> = None;
    let mut damaged = Vec::new();
    // Channels skipped for what the file says of them (not for `--topics`).
    let mut refused = 0usize;
    for (path, buf) in &files {
        let end = messages(buf, |m| {
            first_time.get_or_insert(m.log_time);
            let topic_name = &m.channel.topic;
            if targets.contains_key(topic_name) {
                return Ok(());
            }
            // A ROS channel's topic is the ROS name (`/camera/image`) of the service.
            let service_name = topic_name.strip_prefix('/').unwrap_or(topic_name);
            if !wanted(service_name) {
                targets.insert(topic_name.clone(), None);
                return Ok(());
            }
            let (config, ros, made) = match channel_config(root, &m.channel, path) {
                // The channel's topic is the service it is replayed into: `--topics`
                // filters on it, so a config naming another service is refused.
                Ok((c, _, None)) if c.name != service_name => {
                    eprintln!(
                        "iox: skipping channel {topic_name:?}: its config is of service {:?}",
                        c.name
                    );
                    refused += 1;
                    targets.insert(topic_name.clone(), None);
                    return Ok(());
                }
                Ok(found) => found,
                Err(e) => {
                    eprintln!("iox: skipping channel {topic_name:?}: {e}");
                    refused += 1;
                    targets.insert(topic_name.clone(), None);
                    return Ok(());
                }
            };
            let topic = Topic::open_config(root, config, true)?;
            let publisher = topic.publisher()?;
            eprintln!("replaying {} ({})", topic.name, topic.config.payload);
            targets.insert(
                topic_name.clone(),
                Some(Target {
                    topic,
                    publisher,
                    ros,
                    _made: made,
                }),
            );
            Ok(())
        })?;
        if let Some(e) = end {
            damaged.push(format!("{}: {e}", path.display()));
        }
    }
    let Some(t0) = first_time else {
        let why = if damaged.is_empty() {
            String::new()
        } else {
            format!(" ({})", damaged.join("; "))
        };
        return Err(fail(
            CORRUPT,
            format!("no message could be read from the recording{why}"),
        ));
    };
    if targets.values().all(Option::is_none) {
        if refused > 0 {
            return Err(fail(
                CORRUPT,
                "no channel of the recording can be replayed (each is named above with the reason)",
            ));
        }
        return Err(fail(crate::NOT_FOUND, "no recorded service matches --topics"));
    }
    if args.wait_for_subscribers {
        let deadline = args.timeout.and_then(|t| Instant::now().checked_add(t));
        for t in targets.values().flatten() {
            let limit = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
            let found = t
                .publisher
                .wait_for_subscribers(1, limit)
                .map_err(|e| fail(CORRUPT, format!("{}: {e}", t.topic.name)))?;
            if found == 0 {
                return Err(fail(
                    crate::NOT_FOUND,
                    format!("no subscriber on {} within --timeout", t.topic.name),
                ));
            }
        }
    }

    // Second pass (and more with --loop): the messages at their times.
    let mut sent = 0u64;
    loop {
        let start = Instant::now();
        for (_, buf) in &files {
            messages(buf, |m| {
                let Some(Some(t)) = targets.get_mut(&m.channel.topic) else {
                    return Ok(());
                };
                sleep_until(due(start, m.log_time.saturating_sub(t0), args.rate)?);
                send(t, &m.data)?;
                sent += 1;
                Ok(())
            })?;
        }
        if !args.looping {
            break;
        }
        // A recording of one instant would loop without pause: at least LOOP_GAP apart.
        sleep_until(start + LOOP_GAP);
    }
    eprintln!("replayed {sent} sample(s)");
    if damaged.is_empty() {
        Ok(0)
    } else {
        for d in &damaged {
            eprintln!("iox: replayed up to the last readable record of {d}");
        }
        Ok(CORRUPT)
    }
}

/// When a message recorded `offset_ns` after the first one is due, at `rate`; a time
/// further than [`MAX_OFFSET`] away is a damaged recording (or a `--rate` too small to
/// play it), not a wait.
fn due(start: Instant, offset_ns: u64, rate: f64) -> Result<Instant, Failure> {
    let secs = offset_ns as f64 / 1e9 / rate;
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| *d <= MAX_OFFSET)
        .and_then(|d| start.checked_add(d))
        .ok_or_else(|| {
            fail(
                CORRUPT,
                format!("a message is due {secs:.0} s after the first: the recording's times are damaged, or --rate is too small"),
            )
        })
}

/// Publishes `data` (one recorded sample: the user header's bytes, if the service has
/// one, then the payload's) on `t` (`t.topic.config` is the opened service's own
/// config, not the file's). A payload or header type with invalid bit patterns (a
/// `bool`) is sent only when its schema shows every `bool` is 0 or 1: a file's bytes
/// are not trusted to be a valid value.
fn send(t: &mut Target, data: &[u8]) -> Result<(), Failure> {
    let decoded;
    let data = match &mut t.ros {
        Some((name, conversion)) => match conversion.decode(name, data) {
            Ok(value) => {
                decoded = value;
                &decoded[..]
            }
            Err(e) => {
                eprintln!(
                    "iox: {}: a recorded CDR message is not a whole {name}: {e}: not sent",
                    t.topic.name
                );
                return Ok(());
            }
        },
        None => data,
    };
    let header_len = t.topic.header_len();
    let Some((header, data)) = data.split_at_checked(header_len) else {
        eprintln!(
            "iox: {}: a recorded sample of {} bytes is shorter than the service's {header_len}-byte user header: not sent",
            t.topic.name,
            data.len()
        );
        return Ok(());
    };
    let topic = &t.topic;
    let header_type = topic.config.user_header.as_ref().map(|h| &h.identity);
    let checks = [
        (header_type, topic.header_schema(), header, "header"),
        (Some(&topic.config.payload), topic.schema(), data, "payload"),
    ];
    for (ty, schema, bytes, what) in checks {
        let Some(ty) = ty.filter(|ty| !ty.any_bit_pattern()) else {
            continue;
        };
        if !schema.is_some_and(|s| crate::value::bools_valid(s, bytes)) {
            eprintln!(
                "iox: {}: a recorded sample's {what} is not a valid {ty} (a bool that is neither 0 nor 1, or no schema to check it): not sent",
                topic.name
            );
            return Ok(());
        }
    }
    let mut loan = match t.publisher.loan_raw(data.len()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "iox: {}: a recorded sample of {} bytes not sent: {e}",
                t.topic.name,
                data.len()
            );
            return Ok(());
        }
    };
    // SAFETY: the loan holds `data.len()` bytes (loan_raw's length) and `header_len`
    // header bytes at its header address (the service's header, of `header`'s length),
    // neither overlapping the recording's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), loan.as_mut_ptr(), data.len());
        std::ptr::copy_nonoverlapping(
            header.as_ptr(),
            loan.header_ptr(),
            loan.header_len().min(header.len()),
        );
    }
    // SAFETY: every byte was written just above. Either every byte string is a value
    // of the payload type, or the service's own schema (compared with the type's by
    // every typed opener) describes every byte and shows each `bool` is 0 or 1 (the
    // check above): the recorded bytes are a valid value.
    unsafe { loan.send() }.map_err(|e| fail(crate::REFUSED, format!("{}: {e}", t.topic.name)))?;
    Ok(())
}
