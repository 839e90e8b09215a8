//! The measurements of `scripts/gpu-check.sh`: what pinning a `CudaPinned` service
//! costs and buys, on the device the driver reports (labelled with its name; against
//! the CUDA driver double every copy is a `memcpy`, so its figures say nothing about
//! a GPU).
//!
//! Prints one `measure KEY VALUE` line per figure:
//! - `h2d_pinned_gbs`, `h2d_pageable_gbs`, `h2d_ratio`: host-to-device copy rate of
//!   the same 16 MiB frames from a pinned service's pool and from an unpinned one's;
//! - `register_ms_per_gib`: the pinned `create()` of a 1 GiB pool, per GiB (the time
//!   over an unpinned `create()` of the same size);
//! - `first_sample_ratio`: loan-to-device latency of the first 16 MiB frame after a
//!   pinned `create()`, relative to the median of the next ones;
//! - `device_ptr_ns`, `driver_lookup_ns`: a sample's device address from the pool's
//!   base (no driver call) and asking the driver for it (what `device_ptr` did
//!   before), per sample.
//!
//! `cargo run --release -p iox_examples --features cuda --bin gpu_measure`

use std::process::ExitCode;
use std::time::{Duration, Instant};

use iox_service::{MemoryType, PubSubService, Service};

const FRAME: usize = 16 << 20;

/// A service of 16 MiB frames: as many as its limits need, or `frames`.
fn service(
    name: &str,
    memory_type: MemoryType,
    frames: Option<usize>,
) -> Result<PubSubService<[u8]>, Box<dyn std::error::Error>> {
    let builder = Service::named(name)?
        .publish_subscribe::<[u8]>()
        .memory_type(memory_type)
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(1);
    let builder = match frames {
        Some(n) => builder.size_classes(&[(FRAME, n)]),
        None => builder.chunk_sizes(&[FRAME]),
    };
    Ok(builder.open_or_create()?)
}

/// GB/s of `rounds` copies of one 16 MiB frame of `svc`'s pool to the device.
fn copy_rate(svc: &PubSubService<[u8]>, pin: bool, rounds: u32) -> Result<f64, Box<dyn std::error::Error>> {
    let publisher = svc.publisher_builder().pin_memory(pin).create()?;
    let frame = publisher.loan_slice_uninit(FRAME)?.write_from_fn(|i| i as u8);
    let mut device = iox_cuda::DeviceBuffer::new(0, FRAME)?;
    device.copy_from_host(&frame)?; // warm-up
    let t = Instant::now();
    for _ in 0..rounds {
        device.copy_from_host(&frame)?;
    }
    Ok(rounds as f64 * FRAME as f64 / t.elapsed().as_secs_f64() / 1e9)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    iox_cuda::register(0).map_err(|e| format!("gpu_measure cannot run here: {e}"))?;
    let name = iox_cuda::device_name(0)?;
    println!("measure device {}", name.replace(' ', "_"));

    // Copy rates, pinned and pageable, the same frames.
    let pinned = copy_rate(
        &service("measure/pinned", MemoryType::CudaPinned, None)?,
        true,
        32,
    )?;
    let pageable = copy_rate(&service("measure/pageable", MemoryType::Cpu, None)?, false, 32)?;
    println!("measure h2d_pinned_gbs {pinned:.2}");
    println!("measure h2d_pageable_gbs {pageable:.2}");
    println!("measure h2d_ratio {:.2}", pinned / pageable);

    // Registration: a fresh 1 GiB pool (64 frames); what a pinned create() costs over
    // an unpinned one, the driver populating and locking the pages included (as a
    // user pays it).
    let big = service("measure/register", MemoryType::CudaPinned, Some(64))?;
    let gib = big.pool_info().len as f64 / (1u64 << 30) as f64;
    let t = Instant::now();
    let unpinned = big.subscriber_builder().create()?;
    let plain = t.elapsed();
    drop(unpinned);
    let t = Instant::now();
    let pinned_port = big.subscriber_builder().pin_memory(true).create()?;
    let register = t.elapsed().saturating_sub(plain);
    drop(pinned_port);
    println!(
        "measure register_ms_per_gib {:.2}",
        register.as_secs_f64() * 1e3 / gib
    );
    drop(big);

    // First sample after a pinned create() against the steady state.
    let svc = service("measure/first", MemoryType::CudaPinned, None)?;
    let publisher = svc.publisher_builder().pin_memory(true).create()?;
    let subscriber = svc.subscriber_builder().pin_memory(true).create()?;
    let mut device = iox_cuda::DeviceBuffer::new(0, FRAME)?;
    let mut latencies = Vec::new();
    for i in 0..16u8 {
        let t = Instant::now();
        publisher.loan_slice_uninit(FRAME)?.write_from_fn(|_| i).send()?;
        let frame = subscriber.receive()?.ok_or("no frame")?;
        device.copy_from_host(&frame)?;
        latencies.push(t.elapsed());
    }
    let first = latencies[0];
    let mut rest: Vec<Duration> = latencies[1..].to_vec();
    rest.sort();
    let steady = rest[rest.len() / 2];
    println!("measure first_sample_ms {:.3}", first.as_secs_f64() * 1e3);
    println!("measure steady_sample_ms {:.3}", steady.as_secs_f64() * 1e3);
    println!(
        "measure first_sample_ratio {:.2}",
        first.as_secs_f64() / steady.as_secs_f64()
    );

    // A sample's device address: from the pool's base, and from the driver.
    publisher.loan_slice_uninit(64)?.write_from_fn(|_| 1).send()?;
    let sample = subscriber.receive()?.ok_or("no sample")?;
    let n = 1_000_000u32;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(std::hint::black_box(&sample).device_ptr()?);
    }
    println!(
        "measure device_ptr_ns {:.2}",
        t.elapsed().as_secs_f64() * 1e9 / f64::from(n)
    );
    let m = 10_000u32;
    let t = Instant::now();
    for _ in 0..m {
        std::hint::black_box(iox_cuda::device_pointer(sample.as_ptr())?);
    }
    println!(
        "measure driver_lookup_ns {:.0}",
        t.elapsed().as_secs_f64() * 1e9 / f64::from(m)
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
