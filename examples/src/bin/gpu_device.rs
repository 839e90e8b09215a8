//! A device-memory pipeline between two processes: a `CudaDevice` service keeps its
//! pool in GPU memory; a child process publishes 16 MiB tensors written on its CUDA
//! stream; this process receives each one, makes its own stream wait for the write,
//! reads it on the GPU (a device-to-device copy into a buffer of its own) and checks
//! the bytes of the last one on the host. No sample touches host memory.
//!
//! `cargo run --release -p iox_examples --features cuda --bin gpu_device`
//! `... --bin gpu_device -- --measure` prints hand-off latency and throughput against a
//! device-to-device copy in one process and against the `CudaPinned` host path.
//!
//! Without a CUDA driver or device it says why and exits with status 1.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use iox_cuda::{DeviceBuffer, OwnedStream};
use iox_service::{MemoryType, Overflow, PubSubService, Service, Subscriber};

const TENSOR: usize = 16 << 20;
const WAIT: Duration = Duration::from_secs(30);

fn service(name: &str, memory: MemoryType) -> Result<PubSubService<[u8]>, iox_service::OpenOrCreateError> {
    Service::named(name)
        .expect("constant names are valid")
        .publish_subscribe::<[u8]>()
        .memory_type(memory)
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(2)
        .max_slice_len(TENSOR)
        .overflow(Overflow::Reject)
        .open_or_create()
}

/// Acknowledgements (host memory): the reader sends one per tensor it took, and the
/// writer keeps at most [`WINDOW`] tensors unacknowledged, so a send never finds the
/// reader's queue full and no tensor is written twice.
fn acks(name: &str) -> Result<PubSubService<u64>, iox_service::OpenOrCreateError> {
    Service::named(name)
        .expect("constant names are valid")
        .publish_subscribe::<u64>()
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(64)
        .open_or_create()
}

/// The publishing child: `count` tensors, tensor `i` all bytes `i`, each written on
/// the stream (a host-to-device copy here; a kernel in a real pipeline). At most
/// [`WINDOW`] unacknowledged: every send finds room in the reader's queue, so no
/// tensor is written twice.
fn publish(count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let service = service("examples/gpu-tensors", MemoryType::CudaDevice)?;
    let publisher = service.device_publisher_builder().create()?;
    let acks = acks("examples/gpu-acks")?.subscriber_builder().create()?;
    publisher.wait_for_subscribers(1, WAIT)?;
    let stream = OwnedStream::new(0)?;
    let mut pattern = vec![0u8; TENSOR];
    let mut in_flight = 0;
    for i in 0..count {
        pattern.fill(i as u8);
        wait_for_room(&acks, &mut in_flight)?;
        let mut loan = publisher.loan_on(stream.stream(), TENSOR)?;
        // SAFETY: the loan's chunk is ours until sent, on this stream, after the
        // copy; `pattern` is pageable (staged before the call returns).
        unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &pattern, stream.stream()) }?;
        loan.send_on(stream.stream())?;
        in_flight += 1;
    }
    // Until the reader is done (at most 30 s): our events must outlive its waits.
    until_gone(|| service.port_counts().1)
}

/// Tensors in flight at most between a writer and its reader: the reader's queue
/// depth (`subscriber_buffer(2)`).
const WINDOW: usize = 2;

/// Takes acknowledgements from `acks` until fewer than [`WINDOW`] tensors are in
/// flight.
fn wait_for_room(acks: &Subscriber<u64>, in_flight: &mut usize) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + WAIT;
    while *in_flight >= WINDOW {
        match acks.receive()? {
            Some(_) => *in_flight -= 1,
            None if Instant::now() > deadline => return Err("no acknowledgement within 30 s".into()),
            None => std::thread::yield_now(),
        }
    }
    Ok(())
}

/// Polls `ports` until it is 0, for at most [`WAIT`].
fn until_gone(ports: impl Fn() -> usize) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + WAIT;
    while ports() > 0 {
        if Instant::now() > deadline {
            return Err("the other process did not finish within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn pipeline(count: usize) -> Result<(), Box<dyn std::error::Error>> {
    let service = service("examples/gpu-tensors", MemoryType::CudaDevice)?;
    let subscriber = service.device_subscriber_builder().create()?;
    let ack = acks("examples/gpu-acks")?.publisher_builder().create()?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--publish", "--count", &count.to_string()])
        .spawn()?;
    let stream = OwnedStream::new(0)?;
    let mine = DeviceBuffer::new(0, TENSOR)?;
    let start = Instant::now();
    for _ in 0..count {
        let mut tensor = subscriber.receive_timeout(WAIT)?.ok_or("no tensor within 30 s")?;
        tensor.wait_on(stream.stream())?;
        // Work on the tensor, ordered after the write: here a copy on the GPU.
        // SAFETY: `mine` is ours; the tensor is held until its drop records the end of
        // this copy on the same stream.
        unsafe {
            iox_cuda::copy_device_to_device(
                0,
                mine.device_ptr(),
                tensor.device_ptr(),
                TENSOR,
                stream.stream(),
            )
        }?;
        // Dropping it records the end of that work; the chunk's next writer waits for it.
        drop(tensor);
        ack.loan_uninit()?.write_payload(1).send()?;
    }
    stream.synchronize()?;
    let took = start.elapsed();
    let mut head = [0u8; 64];
    mine.copy_device_to_host(mine.device_ptr(), &mut head)?;
    let last = (count - 1) as u8;
    if head.iter().any(|&b| b != last) {
        return Err(format!("the last tensor read {:?}, not all {last}", &head[..8]).into());
    }
    drop(subscriber);
    if !child.wait()?.success() {
        return Err("the publisher failed".into());
    }
    println!(
        "received {count} tensors of 16 MiB in GPU memory on {} in {took:.2?}; the last one checked on the host",
        iox_cuda::device_name(0)?
    );
    Ok(())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let count = iox_examples::count_arg(32) as usize;
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--publish") {
        return publish(count);
    }
    if args.iter().any(|a| a == "--measure-peer") {
        return measure::peer(count);
    }
    // Fail early and plainly where there is no GPU.
    iox_cuda::device_uuid(0).map_err(|e| format!("gpu_device cannot run here: {e}"))?;
    if args.iter().any(|a| a == "--measure") {
        return measure::run(count);
    }
    pipeline(count)
}

fn main() -> ExitCode {
    iox_examples::exit_with(run())
}

/// The measurements `scripts/gpu-check.sh` prints (see `run`).
mod measure {
    use super::*;

    /// The peer process: answers each ping on `pong` (device hand-off, no work),
    /// then reads `count` tensors for the throughput run, then the pinned ones,
    /// acknowledging each tensor it took.
    pub(super) fn peer(count: usize) -> Result<(), Box<dyn std::error::Error>> {
        let ping = service("measure/ping", MemoryType::CudaDevice)?;
        let pong = service("measure/pong", MemoryType::CudaDevice)?;
        let sub = ping.device_subscriber_builder().create()?;
        let publisher = pong.device_publisher_builder().create()?;
        let ack = acks("measure/ack")?.publisher_builder().create()?;
        let stream = OwnedStream::new(0)?;
        let mine = DeviceBuffer::new(0, TENSOR)?;
        // Latency: one round trip per ping.
        for _ in 0..count {
            let mut s = sub.receive_timeout(WAIT)?.ok_or("no ping")?;
            s.wait_on(stream.stream())?;
            drop(s);
            publisher.loan_on(stream.stream(), 8)?.send_on(stream.stream())?;
        }
        // Throughput: read every tensor on the GPU.
        for _ in 0..count {
            let mut s = sub.receive_timeout(WAIT)?.ok_or("no tensor")?;
            s.wait_on(stream.stream())?;
            // SAFETY: as in `pipeline`: our buffer, a held sample, one stream.
            unsafe {
                iox_cuda::copy_device_to_device(0, mine.device_ptr(), s.device_ptr(), TENSOR, stream.stream())
            }?;
            drop(s); // records the end of the copy: the chunk's next write waits for it
            ack.loan_uninit()?.write_payload(1).send()?;
        }
        stream.synchronize()?;
        // The CudaPinned host path: copy each tensor host-to-device from the pool. The
        // subscriber (pinning the pool takes a while on a GPU) exists before the pong
        // that starts the run, and the publisher waits for it too.
        let pinned = service("measure/pinned", MemoryType::CudaPinned)?;
        let psub = pinned.subscriber_builder().pin_memory(true).create()?;
        let mut dev = DeviceBuffer::new(0, TENSOR)?;
        publisher.loan_on(stream.stream(), 8)?.send_on(stream.stream())?;
        for _ in 0..count {
            let s = psub.receive_timeout(WAIT)?.ok_or("no pinned tensor")?;
            dev.copy_from_host(&s)?;
            drop(s);
            ack.loan_uninit()?.write_payload(1).send()?;
        }
        publisher.loan_on(stream.stream(), 8)?.send_on(stream.stream())?;
        until_gone(|| ping.port_counts().0)
    }

    fn row(what: &str, value: String) {
        println!("{what:<48} {value}");
    }

    pub(super) fn run(count: usize) -> Result<(), Box<dyn std::error::Error>> {
        let ping = service("measure/ping", MemoryType::CudaDevice)?;
        let pong = service("measure/pong", MemoryType::CudaDevice)?;
        let publisher = ping.device_publisher_builder().create()?;
        let sub = pong.device_subscriber_builder().create()?;
        let pinned = service("measure/pinned", MemoryType::CudaPinned)?;
        let ppub = pinned.publisher_builder().pin_memory(true).create()?;
        let acks = acks("measure/ack")?.subscriber_builder().create()?;
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--measure-peer", "--count", &count.to_string()])
            .spawn()?;
        publisher.wait_for_subscribers(1, WAIT)?;
        let stream = OwnedStream::new(0)?;
        let source = DeviceBuffer::new(0, TENSOR)?;
        // 1. Hand-off latency: ping-pong of a device sample, no work on it.
        let t = Instant::now();
        for _ in 0..count {
            publisher
                .loan_on(stream.stream(), TENSOR)?
                .send_on(stream.stream())?;
            let mut s = sub.receive_timeout(WAIT)?.ok_or("no pong")?;
            s.wait_on(stream.stream())?;
        }
        let handoff = t.elapsed() / (2 * count as u32);
        // 2. Throughput: write each tensor on the GPU (a device-to-device copy), send;
        // at most WINDOW unacknowledged, so every send finds room and every write
        // counts.
        let mut in_flight = 0;
        let t = Instant::now();
        for _ in 0..count {
            wait_for_room(&acks, &mut in_flight)?;
            let mut loan = publisher.loan_on(stream.stream(), TENSOR)?;
            // SAFETY: the loan is ours until sent after this copy, on this stream;
            // `source` is our buffer.
            unsafe {
                iox_cuda::copy_device_to_device(
                    0,
                    loan.device_ptr(),
                    source.device_ptr(),
                    TENSOR,
                    stream.stream(),
                )
            }?;
            loan.send_on(stream.stream())?;
            in_flight += 1;
        }
        sub.receive_timeout(WAIT)?.ok_or("no end of throughput run")?;
        let device_rate = count as f64 / t.elapsed().as_secs_f64();
        // 3. One process, no iox: a device-to-device copy of 16 MiB.
        let target = DeviceBuffer::new(0, TENSOR)?;
        let t = Instant::now();
        for _ in 0..count {
            // SAFETY: both are our own buffers, alive past the synchronisation below.
            unsafe {
                iox_cuda::copy_device_to_device(
                    0,
                    target.device_ptr(),
                    source.device_ptr(),
                    TENSOR,
                    stream.stream(),
                )
            }?;
        }
        stream.synchronize()?;
        let d2d = t.elapsed() / count as u32;
        // 4. The CudaPinned host path: the GPU writes the pool (device-to-host), the
        // peer copies it to its GPU (host-to-device).
        ppub.wait_for_subscribers(1, WAIT)?;
        let t = Instant::now();
        for _ in 0..count {
            wait_for_room(&acks, &mut in_flight)?;
            let mut loan = ppub.loan_slice_uninit(TENSOR)?;
            let host = loan.payload_mut().as_mut_ptr().cast::<u8>();
            // SAFETY: the loan is ours, TENSOR bytes, writable; filled in full by the
            // copy before it is declared initialised.
            let bytes = unsafe { std::slice::from_raw_parts_mut(host, TENSOR) };
            source.copy_device_to_host(source.device_ptr(), bytes)?;
            // SAFETY: every byte was just written.
            unsafe { loan.assume_init() }.send()?;
            in_flight += 1;
        }
        sub.receive_timeout(WAIT)?.ok_or("no end of pinned run")?;
        let pinned_rate = count as f64 / t.elapsed().as_secs_f64();
        drop((publisher, sub, ppub));
        if !child.wait()?.success() {
            return Err("the measuring peer failed".into());
        }
        let gbs = |rate: f64| rate * TENSOR as f64 / 1e9;
        println!("measure device {}", iox_cuda::device_name(0)?.replace(' ', "_"));
        row(
            "device hand-off, one way (16 MiB sample)",
            format!("{handoff:.2?}"),
        );
        row(
            "device pipeline, written + read on GPU",
            format!("{device_rate:.0} tensors/s ({:.1} GB/s)", gbs(device_rate)),
        );
        row(
            "cuMemcpyDtoD 16 MiB, one process",
            format!("{d2d:.2?} ({:.1} GB/s)", TENSOR as f64 / d2d.as_secs_f64() / 1e9),
        );
        row(
            "CudaPinned host path (D2H + H2D)",
            format!("{pinned_rate:.0} tensors/s ({:.1} GB/s)", gbs(pinned_rate)),
        );
        Ok(())
    }
}
