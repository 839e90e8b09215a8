//! Shared bits of the iox examples: the service they talk over.
//!
//! Binaries:
//! - `publisher` / `subscriber`: run each in its own terminal.
//! - `pubsub`: starts `publisher` and `subscriber` as two processes and prints what
//!   arrives (the README's main command).
//! - `frames`: 16 MiB frames through a slice service, with throughput.

use iox_service::{OpenOrCreateError, PubSubService, Service, ZeroCopySafe};

/// The payload of the `publisher`/`subscriber` examples.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Reading {
    /// Sequence number.
    pub seq: u64,
    /// A value that changes with it.
    pub value: f64,
}

// SAFETY: repr(C), plain numbers only.
unsafe impl ZeroCopySafe for Reading {}

/// The service name the examples use.
pub const SERVICE: &str = "examples/readings";

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

/// Publishes `count` readings, one every `period`, once a subscriber is connected
/// (waiting up to 30 s for one; bounded polling of the service's port count).
pub fn run_publisher(count: u64, period: std::time::Duration) -> Result<(), Box<dyn std::error::Error>> {
    let service = readings()?;
    let publisher = service.publisher_builder().create()?;
    wait_for_subscriber(&service)?;
    for seq in 0..count {
        let reading = Reading {
            seq,
            value: seq as f64 * 0.5,
        };
        let delivered = publisher.loan_uninit()?.write_payload(reading).send()?;
        println!("publisher: sent seq {seq} to {delivered} subscriber(s)");
        std::thread::sleep(period);
    }
    Ok(())
}

/// Receives `count` readings, blocking (no busy-wait) up to 30 s for each.
pub fn run_subscriber(count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let service = readings()?;
    let subscriber = service.subscriber_builder().create()?;
    for _ in 0..count {
        match subscriber.receive_timeout(std::time::Duration::from_secs(30))? {
            Some(r) => println!("subscriber: got seq {} value {}", r.seq, r.value),
            None => return Err("no sample within 30 s".into()),
        }
    }
    Ok(())
}

/// `--count N` from the command line, or `default`.
pub fn count_arg(default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .find(|w| w[0] == "--count")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(default)
}
