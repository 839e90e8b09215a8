//! 16 MiB frames through a slice service: a child process publishes `--count N`
//! frames (default 50); this process receives them, checks the first and last byte of
//! each, and prints the throughput. Only a handle crosses between the processes.

use std::process::Command;
use std::time::{Duration, Instant};

use iox_service::{Overflow, PubSubService, SendError, Service};

const FRAME: usize = 16 << 20;

fn frames() -> Result<PubSubService<[u8]>, iox_service::OpenOrCreateError> {
    Service::named("examples/frames")
        .expect("constant name is valid")
        .publish_subscribe::<[u8]>()
        // One frame class with as many chunks as these limits can occupy (7).
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(2)
        .max_slice_len(FRAME)
        .overflow(Overflow::Reject)
        .open_or_create()
}

fn publish(count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let service = frames()?;
    let publisher = service.publisher_builder().create()?;
    iox_examples::wait_for_subscriber(&service)?;
    for i in 0..count {
        loop {
            let mut frame = publisher.loan_slice_uninit(FRAME)?;
            // Write only what the receiver checks: the frame is never zero-filled.
            let payload = frame.payload_mut();
            payload[0].write(i as u8);
            for b in &mut payload[1..] {
                b.write(0xAB);
            }
            payload[FRAME - 1].write(!(i as u8));
            // SAFETY: every byte was written above.
            match unsafe { frame.assume_init() }.send() {
                Ok(_) => break,
                Err(SendError::QueueFull { .. }) => std::thread::yield_now(),
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    iox_examples::exit_with(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let count = iox_examples::count_arg(50);
    if std::env::args().any(|a| a == "--publish") {
        return publish(count);
    }
    let service = frames()?;
    let subscriber = service.subscriber_builder().create()?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--publish", "--count", &count.to_string()])
        .spawn()?;
    let start = Instant::now();
    for i in 0..count {
        let frame = subscriber
            .receive_timeout(Duration::from_secs(30))?
            .ok_or("no frame within 30 s")?;
        if frame.len() != FRAME || frame[0] != i as u8 || frame[FRAME - 1] != !(i as u8) {
            return Err(format!("frame {i} is wrong").into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if !child.wait()?.success() {
        return Err("publisher failed".into());
    }
    println!(
        "frames: {count} x 16 MiB in {secs:.3} s = {:.0} frames/s, {:.1} GiB/s of payload written by the publisher",
        count as f64 / secs,
        count as f64 * 16.0 / 1024.0 / secs
    );
    Ok(())
}
