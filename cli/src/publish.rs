//! `iox pub NAME VALUE`: publishes a value written as RON or JSON, checked against the
//! service's recorded schema (see `value` for what is accepted), once or `--count`
//! times at `--rate` Hz.
//!
//! The service must exist and record a schema: the schema is what says how the text
//! becomes bytes, so a service without one is refused (exit 2) rather than written
//! blindly, and so is one whose payload has padding or a `bool` while its schema has
//! bytes of unknown layout (a field of a hand-written `ZeroCopySafe` type): those bytes
//! might have to be 0 or 1. Bad input (a field the schema does not have, a missing field, a value of
//! the wrong kind, a number out of range) is refused before anything is published, with
//! the field named (exit 2). `--wait-for-subscribers` first waits (within `--timeout`)
//! until the service has a subscriber, so a single value is not sent to nobody.
//!
//! A service with a user header takes its value with `--header VALUE`, encoded by the
//! header's recorded schema under the same rules (required for such a service, refused
//! for one without).
//!
//! At a rate, sends are scheduled on absolute times (`start + i / rate`), so the rate
//! does not drift with the time each send takes; a send that is late is made at once.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::topic::{Topic, by_schema_or_bytes, header_by_schema_or_bytes, sleep_until};
use crate::value;
use crate::{Failure, fail};

/// Longest time between two sends at a `--rate`.
const MAX_PERIOD: Duration = Duration::from_secs(86_400);

/// What `iox pub` was asked for (its command-line arguments).
#[derive(clap::Args)]
pub struct PubArgs {
    /// The service name.
    pub name: String,
    /// The value: `(x: 1.0, y: 2.0)` or `{"x": 1.0, "y": 2.0}`; an array for a
    /// slice service. Fields named `_...` (padding) may be left out.
    pub value: String,
    /// The user header's value, for a service that declares one (same syntax).
    #[arg(long)]
    pub header: Option<String>,
    /// Publish at this many Hz (default: once, or until --count/--timeout).
    #[arg(long)]
    pub rate: Option<f64>,
    /// How many times to publish (default 1, or unlimited with --rate).
    #[arg(long)]
    pub count: Option<u64>,
    /// Wait until the service has a subscriber before the first send.
    #[arg(long)]
    pub wait_for_subscribers: bool,
    /// Wait for the service to be created instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Stop waiting or publishing after this long (10, 2.5s, 500ms, 1m).
    #[arg(long, value_parser = crate::events::parse_duration)]
    pub timeout: Option<Duration>,
}

/// `iox pub NAME VALUE`.
pub fn publish(root: &Path, args: PubArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    let period = match args.rate {
        None => None,
        Some(r) => match Duration::try_from_secs_f64(1.0 / r) {
            Ok(p) if r.is_finite() && r > 0.0 && p <= MAX_PERIOD => Some(p),
            _ => {
                return Err(fail(
                    2,
                    format!("--rate {r}: give a rate in Hz, at least one a day"),
                ));
            }
        },
    };
    let count = args.count.unwrap_or(if period.is_some() { u64::MAX } else { 1 });
    let deadline = args.timeout.and_then(|t| Instant::now().checked_add(t));
    let topic = Topic::open(root, name, args.wait, deadline)?;
    let Some(schema) = topic.schema().filter(|_| by_schema_or_bytes(&topic.config)) else {
        return Err(fail(
            2,
            format!(
                "service {name:?} records no schema that describes every byte of its payload {}, so iox cannot tell how to write {:?} (services created by a Rust type with #[derive(ZeroCopySafe)] throughout, a built-in type or a Python dtype record one)",
                topic.config.payload, args.value
            ),
        ));
    };
    let bytes = if topic.is_slice() {
        value::encode_slice_text(schema, &args.value)
    } else {
        let mut out = vec![0u8; topic.config.payload.element_size()];
        value::encode_text(schema, &args.value, &mut out).map(|()| out)
    }
    .map_err(|e| fail(2, format!("{name}: {e}")))?;
    let header = header_bytes(&topic, args.header.as_deref())?;
    let publisher = topic.publisher()?;
    if args.wait_for_subscribers {
        let limit = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
        let found = publisher
            .wait_for_subscribers(1, limit)
            .map_err(|e| fail(crate::CORRUPT, format!("{name}: {e}")))?;
        if found == 0 {
            return Err(fail(
                crate::NOT_FOUND,
                format!("no subscriber on {name} within --timeout"),
            ));
        }
    }
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < count {
        if let Some(p) = period {
            sleep_until(start + p.mul_f64(sent as f64));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let mut loan = publisher
            .loan_raw(bytes.len())
            .map_err(|e| fail(crate::REFUSED, format!("{name}: {e}")))?;
        // SAFETY: the loan holds `bytes.len()` bytes (loan_raw's length) that do not
        // overlap `bytes`, and `header_len` header bytes (the recorded header's size,
        // which `header` is: `header_bytes` encoded it by that header's schema).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), loan.as_mut_ptr(), bytes.len());
            std::ptr::copy_nonoverlapping(
                header.as_ptr(),
                loan.header_ptr(),
                loan.header_len().min(header.len()),
            );
        }
        // SAFETY: every byte was written just above (the header's too). Either every
        // byte string is a value of the payload type (and header type), or (`by_schema_or_bytes`) the service's schema
        // describes every byte and the text was encoded by it: each number from the
        // text, each `bool` as 0 or 1, padding zero. The schema is the service's own,
        // compared with the type's by every typed opener, so this is a valid value.
        let reached = unsafe { loan.send() }.map_err(|e| fail(crate::REFUSED, format!("{name}: {e}")))?;
        sent += 1;
        if period.is_none() {
            println!("published to {reached} subscriber(s)");
        }
    }
    if period.is_some() {
        println!("published {sent} sample(s)");
    }
    Ok(0)
}

/// The user header's bytes from `--header` (empty for a service without one), encoded by
/// the header's schema under the payload's rules.
fn header_bytes(topic: &Topic, text: Option<&str>) -> Result<Vec<u8>, Failure> {
    let name = &topic.name;
    let Some(header) = &topic.config.user_header else {
        return match text {
            Some(_) => Err(fail(
                2,
                format!("service {name:?} has no user header; leave out --header"),
            )),
            None => Ok(Vec::new()),
        };
    };
    let Some(text) = text else {
        return Err(fail(
            2,
            format!(
                "service {name:?} carries a user header {} with every sample: give its value with --header",
                header.identity
            ),
        ));
    };
    let Some(schema) = topic
        .header_schema()
        .filter(|_| header_by_schema_or_bytes(&topic.config))
    else {
        return Err(fail(
            2,
            format!(
                "service {name:?} records no schema that describes every byte of its user header {}, so iox cannot tell how to write {text:?}",
                header.identity
            ),
        ));
    };
    let mut out = vec![0u8; header.size()];
    value::encode_text(schema, text, &mut out).map_err(|e| fail(2, format!("{name}: --header: {e}")))?;
    Ok(out)
}
