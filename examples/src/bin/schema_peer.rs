//! The Rust side of the Python schema tests (`iox_python/tests/test_schema.py`): a
//! nested derived struct, `Sensor`, on the service `examples/sensors`.
//!
//! - `schema_peer publish --count N`: creates the service, waits up to 30 s for a
//!   subscriber, sends N samples (sample `i` from [`sensor`]), then waits (up to 30 s)
//!   until no subscriber is connected, so the reader gets them all.
//! - `schema_peer check`: opens the service as `Sensor` (a recorded schema with other
//!   fields is refused, naming the field), prints `schema equal: true` if the recorded
//!   schema is exactly `Sensor::schema()` (else both), prints `ready`, then the first
//!   sample it receives (within 30 s) as `got {:?}`; a sample whose bytes are no
//!   `Sensor` (its `bool` neither 0 nor 1) is refused by the subscriber, printed as
//!   `refused: ...`, and the wait goes on.

use std::time::{Duration, Instant};

use iox_service::{ReceiveError, Service, ZeroCopySafe};

/// A nested struct (padding after `ok` and `hist`: not valid for every bit pattern).
#[derive(Debug, Clone, Copy, ZeroCopySafe)]
#[repr(C)]
struct Pose {
    x: f64,
    y: f64,
}

/// The payload: numbers, a `bool`, a nested struct, arrays of numbers and structs.
#[derive(Debug, Clone, Copy, ZeroCopySafe)]
#[repr(C)]
struct Sensor {
    id: u32,
    ok: bool,
    pose: Pose,
    hist: [u16; 3],
    corners: [Pose; 2],
    grid: [[f32; 3]; 2],
}

const SERVICE: &str = "examples/sensors";

/// Sample `i` of `publish`.
fn sensor(i: u32) -> Sensor {
    let f = f64::from(i);
    let g = i as f32;
    Sensor {
        id: i,
        ok: i.is_multiple_of(2),
        pose: Pose { x: f, y: -f / 2.0 },
        hist: [i as u16, i as u16 + 1, i as u16 + 2],
        corners: [Pose { x: 1.0, y: 2.0 }, Pose { x: 3.0, y: f }],
        grid: [[g, g + 1.0, g + 2.0], [g + 3.0, g + 4.0, g + 5.0]],
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > iox_examples::PATIENCE {
            return Err(format!("{what} within 30 s").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn publish(count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let svc = Service::named(SERVICE)?
        .publish_subscribe::<Sensor>()
        .subscriber_buffer(16)
        .create()?;
    let publisher = svc.publisher_builder().create()?;
    wait_until("no subscriber connected", || svc.port_counts().1 > 0)?;
    for i in 0..count {
        publisher.loan_uninit()?.write_payload(sensor(i as u32)).send()?;
    }
    wait_until("the subscriber did not leave", || svc.port_counts().1 == 0)
}

fn check() -> Result<(), Box<dyn std::error::Error>> {
    let svc = Service::named(SERVICE)?.publish_subscribe::<Sensor>().open()?;
    let recorded = &svc.static_config().schema;
    if recorded.as_ref() == Some(&Sensor::schema()) {
        println!("schema equal: true");
    } else {
        println!(
            "schema equal: false\nrecorded: {recorded:?}\nSensor:   {:?}",
            Sensor::schema()
        );
    }
    let subscriber = svc.subscriber_builder().create()?;
    println!("ready");
    let start = Instant::now();
    loop {
        let left = iox_examples::PATIENCE.saturating_sub(start.elapsed());
        match subscriber.receive_timeout(left) {
            Ok(Some(sample)) => {
                println!("got {:?}", *sample);
                return Ok(());
            }
            Ok(None) => return Err("no sample within 30 s".into()),
            // Bytes that are no `Sensor` (an `ok` other than 0 or 1): refused unread.
            Err(e @ ReceiveError::InvalidValue { .. }) => println!("refused: {e}"),
            Err(e) => return Err(e.into()),
        }
    }
}

fn main() -> std::process::ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    iox_examples::exit_with(match mode.as_str() {
        "publish" => publish(iox_examples::count_arg(3)),
        "check" => check(),
        _ => Err("usage: schema_peer publish [--count N] | schema_peer check".into()),
    })
}
