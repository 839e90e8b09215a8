//! `iox echo` (alias `sub`) and `iox hz`: a subscriber on a publish-subscribe service
//! from the shell, printing each sample by its recorded schema, or the rate samples
//! arrive at.
//!
//! Both open the service (never create it; `--wait` waits for it). Samples are printed
//! one per line on stdout (RON, or JSON with `--json`); status goes to stderr. Both
//! stop at `--count`, at `--timeout` (exit 0, like `iox listen`), or when killed; they
//! block in the subscriber's futex wait between samples, so they use no CPU while
//! idle.
//!
//! A service with a user header prints each sample as `(header: ..., payload: ...)`,
//! the header decoded by its own recorded schema (hex without one). A service of CDR
//! messages of a ROS type (`ros2/type`) whose definition is known (the service's
//! `ros2/definition`, or the ROS install: `AMENT_PREFIX_PATH`, the active virtual
//! environment) prints each message's fields (`iox_ros2::value`); a message that is not
//! one of its type prints as `(malformed: why, bytes: hex)`.
//!
//! `hz` decisions: the rate is over a window of the last `--window` intervals between
//! receive times (default 1000; ROS 2's `topic hz` also averages over a window), with
//! mean, min, max and standard deviation of the intervals; it reports every
//! `--interval` (1 s) once it has seen two samples, refreshing one line in place on a
//! terminal and printing one plain line per report otherwise (or one JSON object per
//! line with `--json`).

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use iox_ros2::library::Library;

use crate::ros_form::{Conversion, RosForm};
use crate::topic::Topic;
use crate::value::{self, Value};
use crate::{Failure, fail};

/// What `iox echo` was asked for (its command-line arguments).
#[derive(clap::Args)]
pub struct EchoArgs {
    /// The service name.
    pub name: String,
    /// Print JSON instead of RON.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many samples.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long (10, 2.5s, 500ms, 1m); default: until interrupted.
    #[arg(long, value_parser = crate::events::parse_duration)]
    pub timeout: Option<Duration>,
    /// Most elements of a slice to print (the rest are counted: `"... N more"` in RON,
    /// `{"elements": [...], "more": N}` in JSON); 0 prints all of them.
    #[arg(long, default_value_t = 16)]
    pub max_elements: usize,
    /// Wait for the service to be created instead of failing (within --timeout).
    #[arg(long)]
    pub wait: bool,
}

/// Time left before `deadline` (an hour at a time without one); `None` once passed.
fn left(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        Some(d) => d.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()),
        None => Some(Duration::from_secs(3600)),
    }
}

/// A ROS message's decoded fields as a value to print.
fn ros_value(v: iox_ros2::value::Value) -> Value {
    use iox_ros2::value::Value as Ros;
    match v {
        Ros::Bool(b) => Value::Bool(b),
        Ros::Int(n) => Value::Int(n.into()),
        Ros::UInt(n) => Value::UInt(n.into()),
        Ros::Float(f) => Value::Float(f),
        Ros::Text(t) => Value::Text(t),
        Ros::Array(items) => Value::Array(items.into_iter().map(ros_value).collect()),
        Ros::More(n) => Value::More(n),
        Ros::Message(fields) => Value::Struct(fields.into_iter().map(|(k, v)| (k, ros_value(v))).collect()),
    }
}

/// A CDR sample of ROS type `name` as its fields, or a note why it is no message of it.
fn render_cdr(library: &mut Library, name: &str, bytes: &[u8], max_elements: usize) -> Value {
    match iox_ros2::value::decode(library, name, bytes, max_elements) {
        Ok(v) => ros_value(v),
        Err(e) => Value::Struct(vec![
            ("malformed".into(), Value::Text(format!("not a {name}: {e}"))),
            ("bytes".into(), Value::Bytes(bytes.to_vec())),
        ]),
    }
}

/// A sample's payload as a value by the topic's schema, or hex, or a note why not.
fn render(topic: &Topic, bytes: Option<Vec<u8>>, len: usize, max_elements: usize) -> Value {
    let Some(bytes) = bytes else {
        return Value::Struct(vec![
            ("unreadable_bytes".into(), Value::UInt(len as u128)),
            (
                "why".into(),
                Value::Text(
                    "the type has padding or invalid bit patterns and no schema describes all its bytes"
                        .into(),
                ),
            ),
        ]);
    };
    match topic.schema() {
        Some(schema) if topic.is_slice() => value::decode_slice(schema, &bytes, max_elements),
        Some(schema) => value::decode(schema, &bytes, max_elements),
        None => Value::Bytes(bytes),
    }
}

/// A sample's user header as a value by its schema, or hex, or a note why not.
fn render_header(topic: &Topic, bytes: Option<Vec<u8>>, max_elements: usize) -> Value {
    match (bytes, topic.header_schema()) {
        (Some(bytes), Some(schema)) => value::decode(schema, &bytes, max_elements),
        (Some(bytes), None) => Value::Bytes(bytes),
        (None, _) => Value::Struct(vec![
            ("unreadable_bytes".into(), Value::UInt(topic.header_len() as u128)),
            (
                "why".into(),
                Value::Text("the header type has padding or invalid bit patterns and no schema describes all its bytes".into()),
            ),
        ]),
    }
}

/// `iox echo NAME`.
pub fn echo(root: &Path, args: EchoArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    let deadline = args.timeout.and_then(|t| Instant::now().checked_add(t));
    let topic = Topic::open(root, name, args.wait, deadline)?;
    let subscriber = topic.subscriber()?;
    // A service of CDR messages whose ROS type's definition is known (recorded with
    // it, or in the ROS install) prints their fields.
    let mut cdr = match crate::ros_form::ros_form(&topic.config) {
        Some(RosForm {
            name,
            conversion: Conversion::Cdr(library),
            ..
        }) => Some((name, library)),
        _ => None,
    };
    if let Some((ty, _)) = &cdr {
        eprintln!("{name}: CDR messages of {ty}; printing their fields");
    } else if topic.schema().is_none() {
        eprintln!(
            "{name}: no schema recorded ({}); printing bytes as hex",
            topic.config.payload
        );
    }
    eprintln!("subscribed to {name}");
    let mut out = std::io::stdout().lock();
    let mut seen = 0u64;
    while args.count.is_none_or(|c| seen < c) {
        let Some(wait) = left(deadline) else { break };
        let Some(sample) = subscriber
            .receive_timeout_raw(wait)
            .map_err(|e| fail(crate::CORRUPT, format!("{name}: {e}")))?
        else {
            continue;
        };
        let bytes = topic.copy_payload(&sample);
        let len = sample.len_bytes();
        let mut header = Vec::new();
        let header = topic.copy_header_into(&sample, &mut header).then_some(header);
        drop(sample);
        let max_elements = match args.max_elements {
            0 => usize::MAX,
            n => n,
        };
        let mut v = match (&mut cdr, bytes) {
            (Some((ty, library)), Some(bytes)) => render_cdr(library, ty, &bytes, max_elements),
            (_, bytes) => render(&topic, bytes, len, max_elements),
        };
        if topic.config.user_header.is_some() {
            v = Value::Struct(vec![
                ("header".into(), render_header(&topic, header, max_elements)),
                ("payload".into(), v),
            ]);
        }
        seen += 1;
        if writeln!(out, "{}", value::to_text(&v, args.json)).is_err() {
            return Ok(0); // stdout closed (`| head`): done
        }
        let _ = out.flush();
    }
    Ok(0)
}

/// What `iox hz` was asked for (its command-line arguments).
#[derive(clap::Args)]
pub struct HzArgs {
    /// The service name.
    pub name: String,
    /// Intervals the statistics are over (the most recent).
    #[arg(long, default_value_t = 1000)]
    pub window: usize,
    /// Seconds between reports.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many reports.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long (10, 2.5s, 500ms, 1m).
    #[arg(long, value_parser = crate::events::parse_duration)]
    pub timeout: Option<Duration>,
    /// One JSON object per report.
    #[arg(long)]
    pub json: bool,
    /// Wait for the service to be created instead of failing (within --timeout).
    #[arg(long)]
    pub wait: bool,
}

/// Interval statistics over a window, in seconds.
#[derive(Debug, serde::Serialize)]
pub struct Rate {
    pub hz: f64,
    pub mean_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub std_s: f64,
    pub window: usize,
    pub samples: u64,
}

/// Statistics of `intervals` (seconds), with `samples` received in all.
pub fn rate(intervals: &VecDeque<f64>, samples: u64) -> Option<Rate> {
    let n = intervals.len();
    if n == 0 {
        return None;
    }
    let mean = intervals.iter().sum::<f64>() / n as f64;
    let var = intervals.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64;
    Some(Rate {
        hz: if mean > 0.0 { 1.0 / mean } else { f64::INFINITY },
        mean_s: mean,
        min_s: intervals.iter().copied().fold(f64::INFINITY, f64::min),
        max_s: intervals.iter().copied().fold(0.0, f64::max),
        std_s: var.sqrt(),
        window: n,
        samples,
    })
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

/// `iox hz NAME`.
pub fn hz(root: &Path, args: HzArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    let interval = Duration::try_from_secs_f64(args.interval)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            fail(
                2,
                format!("--interval {} is not a duration above 0", args.interval),
            )
        })?;
    if args.window < 1 {
        return Err(fail(2, "--window must be at least 1"));
    }
    let deadline = args.timeout.and_then(|t| Instant::now().checked_add(t));
    let topic = Topic::open(root, name, args.wait, deadline)?;
    let subscriber = topic.subscriber()?;
    eprintln!("measuring the rate of {name}");
    let in_place = std::io::stdout().is_terminal() && !args.json;
    let mut out = std::io::stdout().lock();
    let mut intervals = VecDeque::with_capacity(args.window.min(1 << 16));
    let mut last: Option<Instant> = None;
    let mut samples = 0u64;
    let mut reports = 0u64;
    let mut next_report = Instant::now() + interval;
    while args.count.is_none_or(|c| reports < c) {
        let Some(until_end) = left(deadline) else { break };
        let wait = until_end.min(next_report.saturating_duration_since(Instant::now()));
        let got = subscriber
            .receive_timeout_raw(wait)
            .map_err(|e| fail(crate::CORRUPT, format!("{name}: {e}")))?;
        if got.is_some() {
            let now = Instant::now();
            samples += 1;
            if let Some(prev) = last {
                if intervals.len() == args.window {
                    intervals.pop_front();
                }
                intervals.push_back(now.duration_since(prev).as_secs_f64());
            }
            last = Some(now);
            // Drain what is queued without waiting: each is timed as it is taken.
            continue;
        }
        if Instant::now() < next_report {
            continue;
        }
        next_report += interval;
        let Some(r) = rate(&intervals, samples) else {
            continue;
        };
        reports += 1;
        let line = if args.json {
            serde_json::to_string(&r).expect("numbers serialise")
        } else {
            format!(
                "rate {:.2} Hz  mean {}  min {}  max {}  std {}  window {}",
                r.hz,
                ms(r.mean_s),
                ms(r.min_s),
                ms(r.max_s),
                ms(r.std_s),
                r.window
            )
        };
        let written = if in_place {
            write!(out, "\r\x1b[2K{line}")
        } else {
            writeln!(out, "{line}")
        };
        if written.is_err() {
            return Ok(0);
        }
        let _ = out.flush();
    }
    if in_place {
        let _ = writeln!(out);
    }
    Ok(0)
}
