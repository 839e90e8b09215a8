//! A program of a crate outside the iox repository, which depends on iox by git as the
//! guide's set-up page shows (`examples/tests/git_dependency.rs` builds and runs it):
//! the derive, a service and two processes. Run plainly it creates the service and a
//! subscriber, starts itself again with `--publish`, and prints what it receives.

use iox_service::{Service, ZeroCopySafe};
use std::time::Duration;

#[derive(ZeroCopySafe, Clone, Copy, Debug)]
#[repr(C)]
struct Reading {
    seq: u64,
    value: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = Service::named("outside/readings")?
        .publish_subscribe::<Reading>()
        .open_or_create()?;
    if std::env::args().any(|a| a == "--publish") {
        let publisher = service.publisher_builder().create()?;
        let reached = publisher
            .loan_uninit()?
            .write_payload(Reading { seq: 7, value: 2.5 })
            .send()?;
        println!("sent to {reached} subscriber(s)");
        return Ok(());
    }
    // The subscriber exists before the publisher's process starts, so its one send
    // reaches it.
    let subscriber = service.subscriber_builder().create()?;
    let status = std::process::Command::new(std::env::current_exe()?)
        .arg("--publish")
        .status()?;
    if !status.success() {
        return Err(format!("the publisher process: {status}").into());
    }
    let reading = subscriber
        .receive_timeout(Duration::from_secs(10))?
        .ok_or("no reading within 10 s")?;
    println!("received {} {}", reading.seq, reading.value);
    Ok(())
}
