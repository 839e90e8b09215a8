//! 16 MiB frames through a slice service: a child process publishes `--count N`
//! frames (default 50); this process receives them, checks the first and last byte of
//! each, and prints the throughput. Only a handle crosses between the processes.
//! `--pages 2m` (or `1g`, `thp`) puts the pool on huge pages (see the guide's "Huge
//! pages"): reserve them first (the pool is 56 pages of 2 MiB: `echo 64 >
//! /proc/sys/vm/nr_hugepages`);
//! without enough, the error says how many are needed and how to reserve them.

use std::process::Command;
use std::time::{Duration, Instant};

use iox_service::{Overflow, PageSize, PubSubService, SendError, Service};

const FRAME: usize = 16 << 20;

fn frames(pages: PageSize) -> Result<PubSubService<[u8]>, iox_service::OpenOrCreateError> {
    // One service per page size: a service's page size is fixed when it is created.
    Service::named(&format!("examples/frames-{}", pages.short()))
        .expect("constant name is valid")
        .publish_subscribe::<[u8]>()
        // One frame class with as many chunks as these limits can occupy (7).
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(2)
        .max_slice_len(FRAME)
        .overflow(Overflow::Reject)
        .page_size(pages) // 7 x 16 MiB = 112 MiB: 56 pages of 2 MiB
        .open_or_create()
}

/// The `--pages` argument (default 4 KiB pages).
fn pages_arg() -> Result<PageSize, iox_service::PageSizeError> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .find(|w| w[0] == "--pages")
        .map_or(Ok(PageSize::Base), |w| w[1].parse())
}

fn publish(count: u64, pages: PageSize) -> Result<(), Box<dyn std::error::Error>> {
    let service = frames(pages)?;
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
    let pages = pages_arg()?;
    if std::env::args().any(|a| a == "--publish") {
        return publish(count, pages);
    }
    let service = frames(pages)?;
    let subscriber = service.subscriber_builder().create()?;
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "--publish",
            "--count",
            &count.to_string(),
            "--pages",
            pages.short(),
        ])
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
        "frames: {count} x 16 MiB in {secs:.3} s = {:.0} frames/s, {:.1} GiB/s of payload written by the publisher, pool on {}",
        count as f64 / secs,
        count as f64 * 16.0 / 1024.0 / secs,
        service.pool_info().page_size,
    );
    Ok(())
}
