//! `iox notify` and `iox listen`: a notifier or a listener on an event service, from
//! the shell. Both open the service (they never create it); with `--wait` they wait
//! for it to be created (polling every 20 ms, within `--timeout` if given), without
//! it a missing service fails at once, saying so. A service of another pattern exits
//! with [`crate::WRONG_PATTERN`], naming its pattern.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::{EventId, EventService, OpenError, Service};

use crate::{Failure, NOT_FOUND, fail, root_failure};

/// How often `--wait` looks for the service.
const WAIT_POLL: Duration = Duration::from_millis(20);

/// Opens event service `name` under `root`; with `wait`, polls until it exists or
/// `deadline` passes.
fn open(root: &Path, name: &str, wait: bool, deadline: Option<Instant>) -> Result<EventService, Failure> {
    let mut said = false;
    loop {
        let builder = Service::named(name).map_err(|e| fail(2, e.to_string()))?;
        match builder.root(root).event().open() {
            Ok(event) => return Ok(event),
            // Waiting: for the service, and for its root too (the program that
            // creates the service may create the root).
            Err(
                OpenError::DoesNotExist(_)
                | OpenError::Root {
                    source: iox_service::RootError::Missing { .. },
                    ..
                },
            ) if wait && deadline.is_none_or(|d| Instant::now() < d) => {
                if !said {
                    eprintln!(
                        "waiting for event service {name:?} to be created under {}",
                        root.display()
                    );
                    said = true;
                }
                std::thread::sleep(WAIT_POLL);
            }
            Err(e @ OpenError::DoesNotExist(_)) => {
                let hint = if wait {
                    "(not created within --timeout)"
                } else {
                    "(start the program that creates it first, or pass --wait)"
                };
                return Err(fail(NOT_FOUND, format!("{e} under {} {hint}", root.display())));
            }
            Err(OpenError::Root { source, .. }) => return Err(root_failure(source)),
            Err(e @ OpenError::WrongPattern { .. }) => {
                return Err(fail(
                    crate::WRONG_PATTERN,
                    format!(
                        "{e} (`iox notify` and `iox listen` work on event services; `iox show {name}` describes this one)"
                    ),
                ));
            }
            Err(e) => return Err(fail(2, e.to_string())),
        }
    }
}

/// `iox notify NAME [--id N] [--wait]`: one notification; prints how many listeners it
/// reached.
pub fn notify(root: &Path, name: &str, id: Option<u32>, wait: bool) -> Result<u8, Failure> {
    let event = open(root, name, wait, None)?;
    let notifier = event
        .notifier_builder()
        .default_event_id(EventId::new(id.unwrap_or(0)))
        .create()
        .map_err(|e| fail(crate::REFUSED, e.to_string()))?;
    let reached = notifier.notify().map_err(|e| fail(2, e.to_string()))?;
    println!(
        "notified event {} to {reached} listener(s)",
        notifier.default_event_id()
    );
    Ok(0)
}

/// `iox listen NAME [--timeout D] [--count N] [--wait]`: prints each event id as it
/// comes, one per line; stops after `timeout` (whole run, the wait for the service
/// included) or `count` ids, else runs until killed.
pub fn listen(
    root: &Path,
    name: &str,
    timeout: Option<Duration>,
    count: Option<u64>,
    wait: bool,
) -> Result<u8, Failure> {
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    let event = open(root, name, wait, deadline)?;
    let listener = event
        .listener_builder()
        .create()
        .map_err(|e| fail(crate::REFUSED, e.to_string()))?;
    let mut seen = 0u64;
    let mut out = std::io::stdout().lock();
    // Say we are listening (stderr, so stdout holds the ids alone).
    eprintln!("listening on {name}");
    loop {
        if count.is_some_and(|c| seen >= c) {
            return Ok(0);
        }
        let left = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => return Ok(0),
            },
            None => Duration::from_secs(3600),
        };
        let mut ids = Vec::new();
        listener
            .timed_wait_all(|id| ids.push(id), left)
            .map_err(|e| fail(2, e.to_string()))?;
        for id in ids {
            if count.is_some_and(|c| seen >= c) {
                break;
            }
            seen += 1;
            let _ = writeln!(out, "{id}");
        }
        let _ = out.flush();
    }
}

/// A duration: seconds (`2`, `0.5`), or a number with `ms`, `s` or `m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    number
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|n| Duration::try_from_secs_f64(n * scale).ok())
        .ok_or_else(|| format!("{text:?} is not a duration (e.g. 10, 2.5s, 500ms, 1m)"))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1").is_err());
    }
}
