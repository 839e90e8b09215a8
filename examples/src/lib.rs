//! Shared bits of the iox examples: the service they talk over, and the publisher's
//! and subscriber's event loops.
//!
//! The publisher and the subscriber each sleep in a [`WaitSet`] (the publisher on an
//! interval that paces it, the subscriber on its subscriber with a 30 s deadline), so
//! they use no CPU between samples, and Ctrl-C (SIGINT) or SIGTERM ends the wait with
//! a termination request: they return, their ports and service handles drop, and the
//! service's files under the root go (the last handle removes them).
//!
//! Binaries:
//! - `publisher` / `subscriber`: run each in its own terminal.
//! - `pubsub`: starts `publisher` and `subscriber` as two processes and prints what
//!   arrives (the README's main command).
//! - `frames`: 16 MiB frames through a slice service, with throughput.
//! - `schema_peer`: a nested derived struct for the Python schema tests
//!   (`iox_python/tests/test_schema.py`): publishes it, or checks what Python recorded.
//! - `attribute_peer`: service attributes for the Python attribute tests
//!   (`iox_python/tests/test_attributes.py`): records them, or requires and prints
//!   what Python recorded.
//! - `reqres_peer`: request-response with derived structs for the Python tests
//!   (`iox_python/tests/test_request_response.py`): serves a stream of waypoints per
//!   goal, or asks and prints them.
//! - `camera`: frames with a per-sample user header ([`FrameHeader`] in front of the
//!   pixels), published or received and checked; shared with the C++ example
//!   `iox_ffi/examples/camera.cpp` and the Python tests
//!   (`iox_python/tests/test_user_header.py`).

use std::time::{Duration, Instant};

use iox_service::{
    CallbackProgression, OpenOrCreateError, PubSubService, Service, WaitSet, WaitSetRunResult, ZeroCopySafe,
};

/// The payload of the `publisher`/`subscriber` examples. Derived, so iox knows every bit
/// pattern of it is a value (two plain numbers, no padding): Python's matching dtype
/// (`iox_python/tests`) records the same identity, and a bridge may carry it.
#[derive(Debug, Clone, Copy, ZeroCopySafe)]
#[repr(C)]
pub struct Reading {
    /// Sequence number.
    pub seq: u64,
    /// A value that changes with it.
    pub value: f64,
}

/// The service name the examples use.
pub const SERVICE: &str = "examples/readings";

/// The user header of the `camera` example's frames, in front of their pixels (as a
/// ROS image carries its stamp and geometry): 32 bytes, no padding. The C++ example
/// and the Python tests declare the same fields under the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ZeroCopySafe)]
#[repr(C)]
#[iox(type_name = "FrameHeader")]
pub struct FrameHeader {
    /// When the frame was taken.
    pub stamp_ns: u64,
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Bytes per row.
    pub step: u32,
    /// The pixel encoding, NUL-padded ASCII (`mono8`).
    pub encoding: [u8; 12],
}

/// The `camera` example's service: `[u8]` frames of at most [`CAMERA_MAX_PIXELS`]
/// bytes, each with a [`FrameHeader`].
pub const CAMERA_SERVICE: &str = "examples/camera";

/// The largest frame of the `camera` example, in bytes (64 x 48, one byte a pixel).
pub const CAMERA_MAX_PIXELS: usize = 64 * 48;

/// The queue of the `camera` example's subscribers (every program of the service asks
/// the same).
pub const CAMERA_BUFFER: u32 = 8;

/// The header of the `camera` example's frame `i` (`i < 48`): stamp `1_000_000 + i`,
/// 64 pixels wide, `48 - i` rows, `mono8`.
pub fn frame_header(i: u64) -> FrameHeader {
    FrameHeader {
        stamp_ns: 1_000_000 + i,
        width: 64,
        height: 48 - (i % 48) as u32,
        step: 64,
        encoding: *b"mono8\0\0\0\0\0\0\0",
    }
}

/// Pixel `j` of the `camera` example's frame `i`: `(i + j) mod 256`.
pub fn frame_pixel(i: u64, j: usize) -> u8 {
    (i as usize + j) as u8
}

/// Opens (or creates) the examples' service.
pub fn readings() -> Result<PubSubService<Reading>, OpenOrCreateError> {
    Service::named(SERVICE)
        .expect("constant name is valid")
        .publish_subscribe::<Reading>()
        .subscriber_buffer(16)
        .open_or_create()
}

/// Waits (bounded polling, up to 30 s) until `service` has a subscriber.
pub fn wait_for_subscriber<P: ?Sized + iox_service::Payload>(
    service: &PubSubService<P>,
) -> Result<(), Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    while service.port_counts().1 == 0 {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            return Err("no subscriber connected within 30 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Ok(())
}

/// How long the examples wait for the other side (the subscriber's deadline, the
/// publisher's wait for a subscriber).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Publishes `count` readings, one per tick of a `period` interval in a WaitSet, once
/// a subscriber is connected (checked on each tick, for up to 30 s). Ctrl-C or SIGTERM
/// stops it cleanly.
pub fn run_publisher(count: u64, period: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let waitset = WaitSet::new()?;
    let service = readings()?;
    let publisher = service.publisher_builder().create()?;
    let tick = waitset.attach_interval(period)?;
    if service.port_counts().1 == 0 {
        println!("publisher: waiting up to 30 s for a subscriber (run `subscriber` in another terminal)");
    }
    let start = Instant::now();
    let mut seq = 0;
    let mut failure: Option<Box<dyn std::error::Error>> = None;
    let result = waitset.wait_and_process(|id| {
        if !id.has_event_from(&tick) {
            return CallbackProgression::Continue;
        }
        if seq == 0 && service.port_counts().1 == 0 {
            if start.elapsed() > PATIENCE {
                failure = Some("no subscriber connected within 30 s".into());
                return CallbackProgression::Stop;
            }
            return CallbackProgression::Continue; // not there yet: next tick
        }
        let reading = Reading {
            seq,
            value: seq as f64 * 0.5,
        };
        match publisher
            .loan_uninit()
            .map_err(Into::into)
            .and_then(|s| s.write_payload(reading).send().map_err(Into::into))
        {
            Ok(delivered) => println!("publisher: sent seq {seq} to {delivered} subscriber(s)"),
            Err(e) => {
                failure = Some(e);
                return CallbackProgression::Stop;
            }
        }
        seq += 1;
        if seq == count {
            CallbackProgression::Stop
        } else {
            CallbackProgression::Continue
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    if result == WaitSetRunResult::TerminationRequest {
        println!("publisher: termination requested, leaving after {seq} readings");
    }
    Ok(())
}

/// Receives `count` readings, sleeping in a WaitSet until each arrives (failing if
/// none comes for 30 s). Ctrl-C or SIGTERM stops it cleanly.
pub fn run_subscriber(count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let waitset = WaitSet::new()?;
    let service = readings()?;
    let subscriber = service.subscriber_builder().create()?;
    let guard = waitset.attach_deadline(&subscriber, PATIENCE)?;
    println!("subscriber: waiting for readings");
    let mut received = 0;
    let mut failure: Option<Box<dyn std::error::Error>> = None;
    let result = waitset.wait_and_process(|id| {
        if id.has_missed_deadline(&guard) {
            failure = Some("no sample within 30 s".into());
            return CallbackProgression::Stop;
        }
        // Readable: receive until None (a wake-up may find nothing).
        loop {
            match subscriber.receive() {
                Ok(Some(r)) => {
                    println!("subscriber: got seq {} value {}", r.seq, r.value);
                    received += 1;
                    if received == count {
                        return CallbackProgression::Stop;
                    }
                }
                Ok(None) => return CallbackProgression::Continue,
                Err(e) => {
                    failure = Some(e.into());
                    return CallbackProgression::Stop;
                }
            }
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    if result == WaitSetRunResult::TerminationRequest {
        println!("subscriber: termination requested, leaving after {received} readings");
    }
    Ok(())
}

/// How every example's `main` ends: an error is printed as its message, with the
/// causes that message does not already say, and the exit code is 1. (A `main`
/// returning `Result` would print the error's `Debug` form instead, the enum and its
/// fields, not what to do about it.)
pub fn exit_with(result: Result<(), Box<dyn std::error::Error>>) -> std::process::ExitCode {
    let Err(e) = result else {
        return std::process::ExitCode::SUCCESS;
    };
    let message = e.to_string();
    eprintln!("error: {message}");
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            eprintln!("  caused by: {cause_text}");
        }
        source = cause.source();
    }
    std::process::ExitCode::FAILURE
}

/// `--count N` from the command line, or `default`.
pub fn count_arg(default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .find(|w| w[0] == "--count")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(default)
}
