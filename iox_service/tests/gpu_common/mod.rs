//! What the device-memory tests share (`tests/gpu_device.rs`,
//! `tests/gpu_device_recovery.rs`, `tests/gpu_tensor.rs`): the driver double for a
//! test's children, a service of raw bytes in device memory, publishing and reading
//! samples back, and the double's call log.
#![allow(dead_code)] // each test file uses a part

use std::path::Path;
use std::time::Duration;

use iox_cuda::OwnedStream;
use iox_service::{DevicePublisher, MemoryType, PubSubService, Service};
use iox_testkit::cuda_double::{Call, Driver, names, test_dir};

pub const WAIT: Duration = Duration::from_secs(60);
/// Bytes per sample in these tests.
pub const LEN: usize = 4096;
/// Samples a pipeline sends.
pub const SAMPLES: u8 = 24;

/// The driver for `test`'s children, or `None` (after a skip line) when the real
/// driver was asked for and none is usable.
pub fn driver(test: &str, dir: &Path) -> Option<Driver> {
    Driver::for_test(test, dir, || iox_cuda::device_uuid(0).map(drop))
}

pub fn service(name: &str) -> Result<PubSubService<[u8]>, iox_service::OpenOrCreateError> {
    Service::named(name)
        .unwrap()
        .publish_subscribe::<[u8]>()
        .memory_type(MemoryType::CudaDevice)
        .max_slice_len(LEN)
        .max_publishers(2)
        .max_subscribers(2)
        // Every sample stays queued until read (none is dropped as the oldest).
        .subscriber_buffer(SAMPLES as u32)
        .open_or_create()
}

pub fn of<'a>(calls: &'a [Call], name: &str) -> Vec<&'a Call> {
    calls.iter().filter(|c| c.name == name).collect()
}

/// Where (in the log's order) the first call named `name` is.
pub fn position(calls: &[Call], name: &str) -> usize {
    calls
        .iter()
        .position(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:#?}", names(calls)))
}

/// Sends `SAMPLES` samples, sample `i` all bytes `i`, written on a stream.
pub fn publish(publisher: &DevicePublisher) {
    let stream = OwnedStream::new(0).unwrap();
    for i in 0..SAMPLES {
        let mut loan = publisher.loan_on(stream.stream(), LEN).unwrap();
        // SAFETY: the loan's chunk, ours until sent (after this copy, on the same
        // stream); the source is pageable (staged before the call returns).
        unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &[i; LEN], stream.stream()) }.unwrap();
        loan.send_on(stream.stream()).unwrap();
    }
}

/// Orders `stream` after the sample's write (`wait_on`) and copies its bytes back.
pub fn read_back(sample: &mut iox_service::DeviceSample, stream: &OwnedStream) -> Vec<u8> {
    sample.wait_on(stream.stream()).unwrap();
    let mut bytes = vec![0u8; sample.len()];
    // SAFETY: the sample's chunk, held (borrowed) until after this synchronous copy.
    unsafe { iox_cuda::copy_to_host(0, sample.device_ptr(), &mut bytes, stream.stream()) }.unwrap();
    bytes
}

/// Spawns `role` and waits until it wrote `created` under `dir` (it made the service).
pub fn spawn_creator(driver: &Driver, test: &str, role: &str, dir: &Path) -> std::process::Child {
    let child = driver.spawn(test, role, dir, &[]);
    assert!(
        iox_testkit::wait_until(WAIT, || dir.join("created").exists()),
        "{role} never created the service"
    );
    child
}

pub fn wait_for_file(name: &str) {
    let path = test_dir().join(name);
    assert!(
        iox_testkit::wait_until(WAIT, || path.exists()),
        "{name} never appeared"
    );
}

pub fn publish_one(publisher: &DevicePublisher) {
    let stream = OwnedStream::new(0).unwrap();
    let mut loan = publisher.loan_on(stream.stream(), LEN).unwrap();
    // SAFETY: the loan's chunk, ours until sent (after this copy, on the same
    // stream); the source is pageable (staged before the call returns).
    unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &[7; LEN], stream.stream()) }.unwrap();
    loan.send_on(stream.stream()).unwrap();
}
