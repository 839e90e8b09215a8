//! A `CudaPinned` service used from two processes, both ports pinned: a child process
//! publishes 16 MiB frames; this process receives them, copies each one to the GPU
//! straight from the shared pool (registered with the driver once, when the port was
//! built), checks the device sees the frame's bytes in place, and prints the
//! host-to-device throughput. Without a CUDA driver or device it says why and exits
//! with status 1.
//!
//! `cargo run --release -p iox_examples --features cuda --bin gpu_pinned`

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use iox_service::{MemoryType, Overflow, PubSubService, SendError, Service};

const FRAME: usize = 16 << 20;

fn service() -> Result<PubSubService<[u8]>, iox_service::OpenOrCreateError> {
    Service::named("examples/gpu-frames")
        .expect("constant name is valid")
        .publish_subscribe::<[u8]>()
        // One frame class with as many chunks as these limits can occupy (7).
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(2)
        .max_slice_len(FRAME)
        .memory_type(MemoryType::CudaPinned)
        .overflow(Overflow::Reject)
        .open_or_create()
}

fn publish(count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let service = service()?;
    let publisher = service.publisher_builder().pin_memory(true).create()?;
    iox_examples::wait_for_subscriber(&service)?;
    for i in 0..count {
        loop {
            let frame = publisher
                .loan_slice_uninit(FRAME)?
                .write_from_fn(|j| (i + j) as u8);
            match frame.send() {
                Ok(_) => break,
                Err(SendError::QueueFull { .. }) => std::thread::yield_now(),
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let count = iox_examples::count_arg(32) as usize;
    if std::env::args().any(|a| a == "--publish") {
        return publish(count);
    }
    // Fail early and plainly where there is no GPU.
    iox_cuda::CudaPinner::new(0).map_err(|e| format!("gpu_pinned cannot run here: {e}"))?;
    let service = service()?;
    let subscriber = service.subscriber_builder().pin_memory(true).create()?;
    let mut device = iox_cuda::DeviceBuffer::new(0, FRAME)?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--publish", "--count", &count.to_string()])
        .spawn()?;
    let mut copying = Duration::ZERO;
    for i in 0..count {
        let frame = subscriber
            .receive_timeout(Duration::from_secs(30))?
            .ok_or("no frame within 30 s")?;
        let t = Instant::now();
        device.copy_from_host(&frame)?;
        copying += t.elapsed();
        // The device reads the frame in place through its mapped address.
        let mut head = [0u8; 8];
        device.copy_device_to_host(frame.device_ptr()?, &mut head)?;
        if head != std::array::from_fn::<u8, 8, _>(|j| (i + j) as u8) {
            return Err(format!("frame {i}: the device saw other bytes").into());
        }
    }
    if !child.wait()?.success() {
        return Err("publisher failed".into());
    }
    println!(
        "gpu_pinned: {count} x 16 MiB copied host-to-device from the pinned pool at {:.1} GiB/s",
        count as f64 * 16.0 / 1024.0 / copying.as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
