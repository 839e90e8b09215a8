//! Typed tensors in GPU memory between processes: a `CudaDevice` service of `f32`
//! elements, where each sample carries its shape and strides. A child process
//! publishes tensor `i` of shape `[i + 1, 8]` (element `k` holds `1000 i + k`, written
//! on its stream); this process receives each one, reads its type and shape from the
//! sample, copies it back and checks every element.
//!
//! `cargo run -p iox_examples --features cuda --bin gpu_tensors`
//!
//! The two halves run alone too, for programs in other languages on the same service
//! (`examples/typed-tensors`): `-- --publish [--count N]` and `-- --receive [--count N]`,
//! which prints one line per tensor: `float32 [2, 8] strides [8, 1] checked`.
//! Without a CUDA driver or device it says why and exits with status 1.

use std::process::{Command, ExitCode};
use std::time::Duration;

use iox_cuda::OwnedStream;
use iox_service::tensor::{DType, TensorLayout};
use iox_service::{Overflow, PubSubService, Service};

const WAIT: Duration = Duration::from_secs(30);
/// Columns of every tensor; rows grow with the tensor's index (at most [`ROWS`]).
const COLS: usize = 8;
const ROWS: usize = 64;

fn service() -> Result<PubSubService<[f32]>, iox_service::OpenOrCreateError> {
    Service::named("examples/typed-tensors")
        .expect("a constant name is valid")
        .publish_subscribe::<[f32]>()
        .memory_type(iox_service::MemoryType::CudaDevice)
        .max_slice_len(ROWS * COLS)
        .subscriber_buffer(ROWS as u32)
        .overflow(Overflow::Reject)
        .open_or_create()
}

/// Element `k` of tensor `i`.
fn value(i: usize, k: usize) -> f32 {
    (1000 * i + k) as f32
}

fn publish(count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let service = service()?;
    let publisher = service.device_publisher_builder().create()?;
    publisher.wait_for_subscribers(1, WAIT)?;
    let stream = OwnedStream::new(publisher.device_ordinal())?;
    for i in 0..count {
        let layout = TensorLayout::contiguous(DType::F32, &[i % ROWS + 1, COLS])?;
        let mut loan = publisher.loan_tensor_on(stream.stream(), &layout)?;
        let bytes: Vec<u8> = (0..loan.len() / 4)
            .flat_map(|k| value(i, k).to_ne_bytes())
            .collect();
        // SAFETY: the loan's chunk is ours until sent, on this stream after the copy;
        // `bytes` is pageable (staged before the call returns).
        unsafe {
            iox_cuda::copy_to_device(
                publisher.device_ordinal(),
                loan.device_ptr(),
                &bytes,
                stream.stream(),
            )
        }?;
        // The subscriber's buffer holds every tensor (`subscriber_buffer`), so no send
        // finds it full.
        loan.send_on(stream.stream())?;
    }
    // Until the reader is done: our events must outlive its waits.
    let deadline = std::time::Instant::now() + WAIT;
    while service.port_counts().1 > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn receive(count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let service = service()?;
    let subscriber = service.device_subscriber_builder().create()?;
    let stream = OwnedStream::new(0)?;
    for _ in 0..count {
        let mut sample = subscriber.receive_timeout(WAIT)?.ok_or("no tensor within 30 s")?;
        let tensor = sample.tensor()?;
        sample.wait_on(stream.stream())?;
        let mut bytes = vec![0u8; sample.len()];
        // SAFETY: the sample is held until this synchronous copy is done.
        unsafe {
            iox_cuda::copy_to_host(
                sample.device_ordinal(),
                sample.device_ptr(),
                &mut bytes,
                stream.stream(),
            )
        }?;
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        // The sender's index is the first element's thousands.
        let i = (values.first().copied().unwrap_or(0.0) / 1000.0) as usize;
        if values.iter().enumerate().any(|(k, &v)| v != value(i, k)) {
            return Err(format!("tensor {i} {tensor:?} read {:?}", &values[..values.len().min(8)]).into());
        }
        println!(
            "{} {:?} strides {:?} checked",
            tensor.dtype(),
            tensor.shape(),
            tensor.strides()
        );
    }
    Ok(())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let count = iox_examples::count_arg(16) as usize;
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--publish") {
        return publish(count);
    }
    if args.iter().any(|a| a == "--receive") {
        return receive(count);
    }
    iox_cuda::device_uuid(0).map_err(|e| format!("gpu_tensors cannot run here: {e}"))?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--publish", "--count", &count.to_string()])
        .spawn()?;
    let received = receive(count);
    let published = child.wait()?;
    received?;
    if !published.success() {
        return Err("the publisher failed".into());
    }
    println!("received {count} float32 tensors in GPU memory, each with its shape");
    Ok(())
}

fn main() -> ExitCode {
    iox_examples::exit_with(run())
}
