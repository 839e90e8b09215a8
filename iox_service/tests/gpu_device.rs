//! Device-memory services (`MemoryType::CudaDevice`) across processes, against the
//! driver double (`cuda_double/`): the pool is allocated with the driver's virtual
//! memory management, exported as a descriptor, handed over to other processes and
//! imported once per process; samples are ordered by inter-process events. Every
//! test runs its ports in child processes that load the double and checks their
//! calls in its log. With `IOX_CUDA_DRIVER=real` (scripts/gpu-check.sh on a GPU
//! machine) the same children run against the installed driver, and only behaviour
//! is checked. Needs the `cuda` feature.
#![cfg(feature = "cuda")]

use std::path::Path;
use std::time::Duration;

use iox_cuda::OwnedStream;
use iox_service::{DevicePublisher, MemoryType, OpenError, PortCreateError, PubSubService, Service};
use iox_testkit::cuda_double::{Call, Driver, names, test_dir};

const WAIT: Duration = Duration::from_secs(60);
/// Bytes per sample in these tests.
const LEN: usize = 4096;
/// Samples a pipeline sends.
const SAMPLES: u8 = 24;

/// The driver for `test`'s children, or `None` (after a skip line) when the real
/// driver was asked for and none is usable.
fn driver(test: &str, dir: &Path) -> Option<Driver> {
    Driver::for_test(test, dir, || iox_cuda::device_uuid(0).map(drop))
}

fn service(name: &str) -> Result<PubSubService<[u8]>, iox_service::OpenOrCreateError> {
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

fn of<'a>(calls: &'a [Call], name: &str) -> Vec<&'a Call> {
    calls.iter().filter(|c| c.name == name).collect()
}

/// Where (in the log's order) the first call named `name` is.
fn position(calls: &[Call], name: &str) -> usize {
    calls
        .iter()
        .position(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:#?}", names(calls)))
}

/// Sends `SAMPLES` samples, sample `i` all bytes `i`, written on a stream.
fn publish(publisher: &DevicePublisher) {
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
fn read_back(sample: &mut iox_service::DeviceSample, stream: &OwnedStream) -> Vec<u8> {
    sample.wait_on(stream.stream()).unwrap();
    let mut bytes = vec![0u8; sample.len()];
    // SAFETY: the sample's chunk, held (borrowed) until after this synchronous copy.
    unsafe { iox_cuda::copy_to_host(0, sample.device_ptr(), &mut bytes, stream.stream()) }.unwrap();
    bytes
}

/// Spawns `role` and waits until it wrote `created` under `dir` (it made the service).
fn spawn_creator(driver: &Driver, test: &str, role: &str, dir: &Path) -> std::process::Child {
    let child = driver.spawn(test, role, dir, &[]);
    assert!(
        iox_testkit::wait_until(WAIT, || dir.join("created").exists()),
        "{role} never created the service"
    );
    child
}

fn wait_for_file(name: &str) {
    let path = test_dir().join(name);
    assert!(
        iox_testkit::wait_until(WAIT, || path.exists()),
        "{name} never appeared"
    );
}

/// Two processes, one GPU: a publisher writes each sample with work on its stream
/// and sends it; a subscriber in another process waits on its own stream and reads
/// the bytes. Each process maps the pool once (one create and export, one import),
/// the reader's every wait is on an event the writer recorded before, nothing is
/// synchronised on the host per sample, and each process unmaps, frees the address
/// range and releases the allocation, in that order, when its last port goes.
#[test]
fn a_device_pipeline_hands_samples_between_processes_in_stream_order() {
    const TEST: &str = "a_device_pipeline_hands_samples_between_processes_in_stream_order";
    match iox_testkit::role().as_deref() {
        Some("publisher") => {
            let s = service("gpu/pipeline").unwrap();
            std::fs::write(test_dir().join("created"), b"").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            // A second handle and port of the same service in this process: no
            // second allocation or mapping.
            let again = service("gpu/pipeline").unwrap();
            let _second = again.device_publisher_builder().create().unwrap();
            // The subscriber's device port is made (its events published).
            wait_for_file("subscribed");
            publish(&publisher);
            wait_for_file("read");
            return;
        }
        Some("subscriber") => {
            let s = service("gpu/pipeline").unwrap();
            let again = service("gpu/pipeline").unwrap();
            let subscriber = s.device_subscriber_builder().create().unwrap();
            std::fs::write(test_dir().join("subscribed"), b"").unwrap();
            let stream = OwnedStream::new(0).unwrap();
            for i in 0..SAMPLES {
                let mut sample = subscriber
                    .receive_timeout(WAIT)
                    .unwrap()
                    .expect("a sample in time");
                assert_eq!(sample.len(), LEN);
                let bytes = read_back(&mut sample, &stream);
                assert!(bytes.iter().all(|&b| b == i), "sample {i} read {:?}", &bytes[..8]);
            }
            std::fs::write(test_dir().join("read"), b"").unwrap();
            drop((subscriber, s, again));
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    // The publisher's process creates the service; the subscriber's imports it.
    let publisher = spawn_creator(&driver, TEST, "publisher", dir.path());
    let subscriber = driver.spawn(TEST, "subscriber", dir.path(), &[]);
    let (p, s) = (publisher.id(), subscriber.id());
    iox_testkit::wait_ok(subscriber, Duration::from_secs(120));
    iox_testkit::wait_ok(publisher, Duration::from_secs(120));
    let Some(all) = driver.calls() else {
        return;
    };
    let calls = |pid| all.iter().filter(|c| c.pid == pid).cloned().collect::<Vec<_>>();
    let (pc, sc) = (calls(p), calls(s));
    // The creator made and exported one allocation; the other imported it once.
    assert_eq!(of(&pc, "cuMemCreate").len(), 1, "{:#?}", names(&pc));
    assert_eq!(of(&pc, "cuMemExportToShareableHandle").len(), 1);
    assert_eq!(of(&sc, "cuMemCreate").len(), 0);
    assert_eq!(
        of(&sc, "cuMemImportFromShareableHandle").len(),
        1,
        "{:#?}",
        names(&sc)
    );
    for c in [&pc, &sc] {
        assert_eq!(of(c, "cuMemMap").len(), 1);
        assert_eq!(of(c, "cuMemSetAccess").len(), 1);
        // Teardown in order, once.
        let (unmap, free, release) = (
            position(c, "cuMemUnmap"),
            position(c, "cuMemAddressFree"),
            position(c, "cuMemRelease"),
        );
        assert!(unmap < free && free < release, "{:#?}", names(c));
        // No host synchronisation per sample: iox's only ones are the ports'
        // retiring waits (at most one per event it made), after the last sample.
        let last_copy = c
            .iter()
            .rposition(|x| x.name.starts_with("cuMemcpy"))
            .expect("copies");
        let syncs: Vec<usize> = (0..c.len())
            .filter(|&i| c[i].name == "cuEventSynchronize")
            .collect();
        assert!(syncs.len() <= of(c, "cuEventCreate").len(), "{syncs:?}");
        assert!(
            syncs.iter().all(|&i| i > last_copy),
            "a host wait before the last sample: {:#?}",
            names(c)
        );
    }
    // The writer never waits on the host (the reader's stream syncs are the test's
    // own copies back to check the bytes).
    assert!(of(&pc, "cuStreamSynchronize").is_empty() && of(&pc, "cuCtxSynchronize").is_empty());
    // Every wait of the reader is on an event the writer recorded before it.
    let waits: Vec<_> = all
        .iter()
        .enumerate()
        .filter(|(_, c)| c.pid == s && c.name == "cuStreamWaitEvent")
        .collect();
    assert_eq!(waits.len(), SAMPLES as usize, "{:#?}", names(&sc));
    for (at, wait) in waits {
        let event = wait.get("event").expect("the double names the event waited on");
        assert!(
            all[..at]
                .iter()
                .any(|c| c.pid == p && c.name == "cuEventRecord" && c.get("event") == Some(event)),
            "the reader waited on {event} before the writer recorded it"
        );
    }
    // The writer recorded one write-done per sample.
    assert_eq!(of(&pc, "cuEventRecord").len(), SAMPLES as usize);
    // Each loan's stream waited on the chunk's last read (the reader's event; its
    // table was published before the first send) and last write (the publishers'
    // events, made in the writer's own process): one wait per published table.
    let loan_waits: Vec<&str> = pc
        .iter()
        .filter(|c| c.name == "cuStreamWaitEvent")
        .map(|c| c.get("event").expect("named"))
        .collect();
    let on_reader = loan_waits
        .iter()
        .filter(|e| e.starts_with(&format!("{s}:")))
        .count();
    let on_writers = loan_waits
        .iter()
        .filter(|e| e.starts_with(&format!("{p}:")))
        .count();
    assert_eq!(
        (on_reader, on_writers, loan_waits.len()),
        (SAMPLES as usize, 2 * SAMPLES as usize, 3 * SAMPLES as usize),
        "{loan_waits:?}"
    );
    let reader_records: Vec<_> = of(&sc, "cuEventRecord");
    assert_eq!(
        reader_records.len(),
        SAMPLES as usize,
        "one read-done per sample released"
    );
}

/// A device loan outlives its publisher, as a host loan does: dropped before the loan
/// is sent, the publisher's slot stays taken (a second publisher of a one-publisher
/// service does not fit) and the send still reaches the reader in another process,
/// ordered by its write-done event. The slot stays taken after the send until the
/// dropped port's events are retired: held at `device-sent-before-retire` (sent, not
/// yet retired), another process's publisher is refused; then the events are waited
/// for on the host before a new publisher publishes its own in the same slot, so no
/// reader waits on a table that changed under it. A process SIGKILLed at that point
/// has sent its sample; its slot and events are recovered as a dead port's.
#[test]
fn a_loan_sent_after_its_publisher_was_dropped_arrives_and_then_frees_the_slot() {
    const TEST: &str = "a_loan_sent_after_its_publisher_was_dropped_arrives_and_then_frees_the_slot";
    let one_publisher = || {
        Service::named("gpu/orphan-loan")
            .unwrap()
            .publish_subscribe::<[u8]>()
            .memory_type(MemoryType::CudaDevice)
            .max_slice_len(LEN)
            .max_publishers(1)
            .max_subscribers(1)
            .subscriber_buffer(4)
            .open_or_create()
            .unwrap()
    };
    match iox_testkit::role().as_deref() {
        Some("publisher") => {
            let s = one_publisher();
            let publisher = s.device_publisher_builder().create().unwrap();
            publisher.wait_for_subscribers(1, WAIT).unwrap();
            let stream = OwnedStream::new(0).unwrap();
            let mut loan = publisher.loan_on(stream.stream(), LEN).unwrap();
            // SAFETY: the loan's chunk, ours until sent on this stream after the copy;
            // the source is pageable (staged before the call returns).
            unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &[7; LEN], stream.stream()) }.unwrap();
            drop(publisher);
            let e = s.device_publisher_builder().create().unwrap_err();
            assert!(matches!(e, PortCreateError::TooManyPorts { .. }), "{e}");
            // The parent lets another process try for the slot while this send is
            // held between the send and the retiring.
            iox_service::testing::stall_at(iox_service::testing::Stall::DeviceSentBeforeRetire, &test_dir());
            assert_eq!(loan.send_on(stream.stream()).unwrap(), 1);
            // Sent, and the dropped port's events retired: the slot is free.
            let publisher = s.device_publisher_builder().create().unwrap();
            let mut loan = publisher.loan_on(stream.stream(), LEN).unwrap();
            // SAFETY: as above.
            unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &[8; LEN], stream.stream()) }.unwrap();
            assert_eq!(loan.send_on(stream.stream()).unwrap(), 1);
            wait_for_file("read");
        }
        Some("subscriber") => {
            let s = one_publisher();
            let subscriber = s.device_subscriber_builder().create().unwrap();
            let stream = OwnedStream::new(0).unwrap();
            for expected in [7u8, 8] {
                let mut sample = subscriber
                    .receive_timeout(WAIT)
                    .unwrap()
                    .expect("a sample in time");
                let bytes = read_back(&mut sample, &stream);
                assert!(bytes.iter().all(|&b| b == expected), "read {:?}", &bytes[..8]);
            }
            std::fs::write(test_dir().join("read"), b"").unwrap();
        }
        Some("intruder") => {
            let s = one_publisher();
            let e = s.device_publisher_builder().create().unwrap_err();
            assert!(matches!(e, PortCreateError::TooManyPorts { .. }), "{e}");
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = driver(TEST, dir.path()) else {
                return;
            };
            let subscriber = driver.spawn(TEST, "subscriber", dir.path(), &[]);
            let publisher = driver.spawn(TEST, "publisher", dir.path(), &[]);
            let p = publisher.id();
            assert!(
                iox_testkit::wait_until(WAIT, || dir.path().join("reached").exists()),
                "the publisher never reached device-sent-before-retire"
            );
            driver.run(TEST, "intruder", dir.path(), &[]);
            std::fs::write(dir.path().join("open"), b"").unwrap();
            iox_testkit::wait_ok(subscriber, Duration::from_secs(120));
            iox_testkit::wait_ok(publisher, Duration::from_secs(120));
            let Some(all) = driver.calls() else {
                return;
            };
            let pc: Vec<Call> = all.iter().filter(|c| c.pid == p).cloned().collect();
            // The first send recorded its write-done event; the host waited for it
            // (the retiring of the dropped port) before the second publisher made
            // its events.
            let first_record = position(&pc, "cuEventRecord");
            let recorded = pc[first_record].get("event").expect("named");
            let retired = pc
                .iter()
                .position(|c| c.name == "cuEventSynchronize" && c.get("event") == Some(recorded))
                .unwrap_or_else(|| panic!("{recorded} never waited for: {:#?}", names(&pc)));
            assert!(retired > first_record);
            let creates: Vec<usize> = (0..pc.len()).filter(|&i| pc[i].name == "cuEventCreate").collect();
            let (before, after) = creates.iter().partition::<Vec<usize>, _>(|&&i| i < retired);
            assert!(
                !before.is_empty() && before.len() == after.len(),
                "each publisher makes its own events, the second after the first's were retired: {:#?}",
                names(&pc)
            );
        }
    }
}

/// A host publisher or subscriber of a device service is refused with an error that
/// names device ports: its samples would be host addresses of GPU memory.
#[test]
fn host_ports_of_a_device_service_are_refused() {
    const TEST: &str = "host_ports_of_a_device_service_are_refused";
    if iox_testkit::role().is_some() {
        let s = service("gpu/host-ports").unwrap();
        let e = s.publisher_builder().create().unwrap_err();
        assert!(matches!(e, PortCreateError::DeviceMemory { .. }), "{e}");
        assert!(e.to_string().contains("device_publisher_builder"), "{e}");
        let e = s.subscriber_builder().create().unwrap_err();
        assert!(matches!(e, PortCreateError::DeviceMemory { .. }), "{e}");
        // The device ports of the same handle work.
        let _p = s.device_publisher_builder().create().unwrap();
        let _s = s.device_subscriber_builder().create().unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    driver.run(TEST, "child", dir.path(), &[]);
}

/// A process that cannot use the service's GPU gets a clear error naming it, and
/// nothing is copied: with no CUDA driver at all, and with a driver whose devices
/// are other GPUs (another UUID). The service and its creator are unaffected.
#[test]
fn a_process_without_the_gpu_gets_an_error_naming_it() {
    const TEST: &str = "a_process_without_the_gpu_gets_an_error_naming_it";
    match iox_testkit::role().as_deref() {
        Some("creator") => {
            let s = service("gpu/mixed").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            std::fs::write(test_dir().join("created"), b"").unwrap();
            wait_for_file("tried");
            // Still usable: one more sample goes out (to no one).
            publish_one(&publisher);
            return;
        }
        Some("opener") => {
            let e = Service::named("gpu/mixed")
                .unwrap()
                .publish_subscribe::<[u8]>()
                .open()
                .unwrap_err();
            assert!(matches!(e, OpenError::DeviceUnavailable { .. }), "{e}");
            let text = e.to_string();
            assert!(text.contains("GPU-"), "{text}");
            let expected: String = iox_testkit::env("EXPECT");
            assert!(text.contains(&expected), "{text}");
            // It speaks of this service's memory, not of another memory type's.
            assert!(!text.contains("CudaPinned"), "{text}");
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    if !driver.is_double() {
        return; // the other-GPU case needs the double's UUIDs
    }
    let creator = spawn_creator(&driver, TEST, "creator", dir.path());
    // No driver: a plain child, without the double on its library path.
    let root = dir.path().join("root");
    let plain = iox_testkit::self_command(
        TEST,
        "opener",
        &[
            ("IOX_ROOT", root.display().to_string()),
            ("EXPECT", "no CUDA driver".into()),
        ],
    )
    // Not even one this process inherited (scripts/gpu-check.sh puts the double on
    // every process's path).
    .env_remove("LD_LIBRARY_PATH")
    .spawn()
    .unwrap();
    iox_testkit::wait_ok(plain, WAIT);
    // Another GPU: the double's device 0 has another UUID in that process.
    driver.run(
        TEST,
        "opener",
        dir.path(),
        &[
            ("IOX_CUDA_DOUBLE_UUIDS", "0123456789abcdef0123456789abcdef".into()),
            ("EXPECT", "no visible CUDA device has this UUID".into()),
        ],
    );
    std::fs::write(dir.path().join("tried"), b"").unwrap();
    iox_testkit::wait_ok(creator, WAIT);
}

fn publish_one(publisher: &DevicePublisher) {
    let stream = OwnedStream::new(0).unwrap();
    let mut loan = publisher.loan_on(stream.stream(), LEN).unwrap();
    // SAFETY: the loan's chunk, ours until sent (after this copy, on the same
    // stream); the source is pageable (staged before the call returns).
    unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &[7; LEN], stream.stream()) }.unwrap();
    loan.send_on(stream.stream()).unwrap();
}

/// The driver refusing the allocation (out of memory) or the export makes creation
/// fail with the driver's words and leaves no service behind; refusing the import
/// makes only that opener fail, and the creator's ports go on.
#[test]
fn refused_allocation_export_or_import_is_a_clear_error() {
    const TEST: &str = "refused_allocation_export_or_import_is_a_clear_error";
    match iox_testkit::role().as_deref() {
        Some("refused-create") => {
            let call: String = iox_testkit::env("CALL");
            let e = service("gpu/refused").map(|_| ()).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(&call), "{text}");
            assert!(!Service::exists("gpu/refused").unwrap(), "nothing left behind");
            return;
        }
        Some("creator") => {
            let s = service("gpu/refused").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            std::fs::write(test_dir().join("created"), b"").unwrap();
            wait_for_file("tried");
            publisher.wait_for_subscribers(1, WAIT).unwrap();
            publish(&publisher);
            wait_for_file("read");
            return;
        }
        Some("refused-open") => {
            let e = service("gpu/refused").map(|_| ()).unwrap_err();
            assert!(e.to_string().contains("cuMemImportFromShareableHandle"), "{e}");
            return;
        }
        Some("subscriber") => {
            let s = service("gpu/refused").unwrap();
            let subscriber = s.device_subscriber_builder().create().unwrap();
            let stream = OwnedStream::new(0).unwrap();
            for _ in 0..SAMPLES {
                let mut sample = subscriber
                    .receive_timeout(WAIT)
                    .unwrap()
                    .expect("a sample in time");
                sample.wait_on(stream.stream()).unwrap();
            }
            std::fs::write(test_dir().join("read"), b"").unwrap();
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    if !driver.is_double() {
        return; // refusals are the double's
    }
    for call in ["cuMemCreate", "cuMemExportToShareableHandle"] {
        driver.run(
            TEST,
            "refused-create",
            dir.path(),
            &[
                ("IOX_CUDA_DOUBLE_FAIL", format!("{call}:2")),
                ("CALL", call.into()),
            ],
        );
    }
    let creator = spawn_creator(&driver, TEST, "creator", dir.path());
    driver.run(
        TEST,
        "refused-open",
        dir.path(),
        &[("IOX_CUDA_DOUBLE_FAIL", "cuMemImportFromShareableHandle:1".into())],
    );
    std::fs::write(dir.path().join("tried"), b"").unwrap();
    driver.run(TEST, "subscriber", dir.path(), &[]);
    iox_testkit::wait_ok(creator, WAIT);
}

/// A publisher SIGKILLed with samples queued and a loan held, and a reader SIGKILLed
/// between `wait_on` and its release: the survivors recover every chunk (a new
/// publisher can loan the whole pool again). A third process holds the service (and
/// the export) throughout, so the survivor's memory is handed over by it.
#[test]
fn processes_killed_with_chunks_in_flight_lose_nothing() {
    const TEST: &str = "processes_killed_with_chunks_in_flight_lose_nothing";
    match iox_testkit::role().as_deref() {
        Some("publisher") => {
            let s = service("gpu/killed").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            publisher.wait_for_subscribers(1, WAIT).unwrap();
            let stream = OwnedStream::new(0).unwrap();
            for i in 0..3u8 {
                let mut loan = publisher.loan_on(stream.stream(), LEN).unwrap();
                // SAFETY: the loan's chunk, ours until sent (after this copy, on the same
                // stream); the source is pageable (staged before the call returns).
                unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &[i; LEN], stream.stream()) }
                    .unwrap();
                loan.send_on(stream.stream()).unwrap();
            }
            let _held = publisher.loan_on(stream.stream(), LEN).unwrap();
            std::fs::write(test_dir().join("sent"), b"").unwrap();
            loop {
                std::thread::park(); // until SIGKILL
            }
        }
        Some("reader") => {
            let s = service("gpu/killed").unwrap();
            let subscriber = s.device_subscriber_builder().create().unwrap();
            wait_for_file("sent");
            let stream = OwnedStream::new(0).unwrap();
            let mut sample = subscriber.receive_timeout(WAIT).unwrap().expect("a sample");
            sample.wait_on(stream.stream()).unwrap();
            std::fs::write(test_dir().join("waited"), b"").unwrap();
            loop {
                std::thread::park(); // until SIGKILL, sample held
            }
        }
        Some("keeper") => {
            // Creates the service and holds it (and its export) throughout.
            let _s = service("gpu/killed").unwrap();
            std::fs::write(test_dir().join("created"), b"").unwrap();
            wait_for_file("done");
            return;
        }
        Some("survivor") => {
            let s = service("gpu/killed").unwrap();
            // Recovery ran when this process opened the service: the pool is whole.
            let subscriber = s.device_subscriber_builder().create().unwrap();
            drop(subscriber);
            let publisher = s.device_publisher_builder().create().unwrap();
            let info = s.pool_info();
            let free: u32 = info.classes.iter().map(|c| c.free).sum();
            let total: u32 = info.classes.iter().map(|c| c.count).sum();
            assert_eq!(free, total, "{info:?}");
            let stream = OwnedStream::new(0).unwrap();
            // Every chunk can be loaned (the killed reader's events are not waited on).
            let loans: Vec<_> = (0..total)
                .map_while(|_| publisher.loan_on(stream.stream(), LEN).ok())
                .collect();
            assert!(loans.len() >= 2, "{} loans", loans.len());
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let keeper = spawn_creator(&driver, TEST, "keeper", dir.path());
    let publisher = iox_testkit::Reaped::new(driver.spawn(TEST, "publisher", dir.path(), &[]));
    let reader = iox_testkit::Reaped::new(driver.spawn(TEST, "reader", dir.path(), &[]));
    assert!(iox_testkit::wait_until(WAIT, || dir
        .path()
        .join("waited")
        .exists()));
    publisher.kill();
    reader.kill();
    driver.run(TEST, "survivor", dir.path(), &[]);
    std::fs::write(dir.path().join("done"), b"").unwrap();
    iox_testkit::wait_ok(keeper, WAIT);
}

/// A process SIGKILLed at each new step of the event protocol leaves nothing behind:
/// a writer stalled after recording its write-done event and before sending
/// (`device-recorded-before-send`) delivered nothing and its chunk comes back; a
/// reader stalled after recording its read-done event and before releasing
/// (`device-recorded-before-release`) gives its chunk back through recovery, and its
/// event table is unpublished, so the next loans wait on nothing of it; a writer whose
/// publisher was dropped before its loan's send, stalled after the send and before
/// retiring its events (`device-sent-before-retire`), delivered its sample (the reader
/// reads its bytes, waiting on nothing of the dead writer) and its slot comes back.
#[test]
fn processes_killed_between_a_record_and_the_hand_off_lose_nothing() {
    const TEST: &str = "processes_killed_between_a_record_and_the_hand_off_lose_nothing";
    match iox_testkit::role().as_deref() {
        Some("keeper") => {
            let _s = service("gpu/stalls").unwrap();
            std::fs::write(test_dir().join("created"), b"").unwrap();
            wait_for_file("done");
            return;
        }
        Some("stalled-writer") => {
            let s = service("gpu/stalls").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            publisher.wait_for_subscribers(1, WAIT).unwrap();
            publish_one(&publisher); // stalls after the record, until killed
            unreachable!("the stall point holds this process until it is killed");
        }
        Some("idle-reader") => {
            let s = service("gpu/stalls").unwrap();
            let subscriber = s.device_subscriber_builder().create().unwrap();
            wait_for_file("writer-killed");
            assert!(
                subscriber.receive().unwrap().is_none(),
                "a killed writer delivered"
            );
            return;
        }
        Some("sender") => {
            let s = service("gpu/stalls").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            publisher.wait_for_subscribers(1, WAIT).unwrap();
            publish_one(&publisher);
            wait_for_file("reader-killed");
            return;
        }
        Some("stalled-reader") => {
            let s = service("gpu/stalls").unwrap();
            let subscriber = s.device_subscriber_builder().create().unwrap();
            let stream = OwnedStream::new(0).unwrap();
            let mut sample = subscriber.receive_timeout(WAIT).unwrap().expect("a sample");
            sample.wait_on(stream.stream()).unwrap();
            drop(sample); // stalls after the record, until killed
            unreachable!("the stall point holds this process until it is killed");
        }
        Some("orphan-writer") => {
            let s = service("gpu/stalls").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            wait_for_file("subscribed");
            let stream = OwnedStream::new(0).unwrap();
            let mut loan = publisher.loan_on(stream.stream(), LEN).unwrap();
            // SAFETY: the loan's chunk, ours until sent (after this copy, on the same
            // stream); the source is pageable (staged before the call returns).
            unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &[9; LEN], stream.stream()) }.unwrap();
            drop(publisher);
            loan.send_on(stream.stream()).unwrap(); // stalls after the send, until killed
            unreachable!("the stall point holds this process until it is killed");
        }
        Some("delivered-reader") => {
            let s = service("gpu/stalls").unwrap();
            let subscriber = s.device_subscriber_builder().create().unwrap();
            std::fs::write(test_dir().join("subscribed"), b"").unwrap();
            wait_for_file("orphan-killed");
            let stream = OwnedStream::new(0).unwrap();
            let mut sample = subscriber
                .receive()
                .unwrap()
                .expect("the sample sent before the kill");
            let bytes = read_back(&mut sample, &stream);
            assert!(bytes.iter().all(|&b| b == 9), "read {:?}", &bytes[..8]);
            return;
        }
        Some("survivor") => {
            let s = service("gpu/stalls").unwrap();
            let publisher = s.device_publisher_builder().create().unwrap();
            let info = s.pool_info();
            let free: u32 = info.classes.iter().map(|c| c.free).sum();
            let total: u32 = info.classes.iter().map(|c| c.count).sum();
            assert_eq!(free, total, "{info:?}");
            let stream = OwnedStream::new(0).unwrap();
            // Loans as many as a publisher may hold (the killed ports' tables are
            // unpublished: nothing of theirs is waited on; checked in the log).
            let loans: Vec<_> = (0..total)
                .map_while(|_| publisher.loan_on(stream.stream(), LEN).ok())
                .collect();
            assert_eq!(loans.len(), 2, "max_loans");
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let keeper = spawn_creator(&driver, TEST, "keeper", dir.path());
    // The writer, stalled between its record and its send; then the reader, stalled
    // between its record and its release. Each is killed there; its peer then checks.
    let mut killed = Vec::new();
    for (role, point, peer, note) in [
        (
            "stalled-writer",
            "device-recorded-before-send",
            "idle-reader",
            "writer-killed",
        ),
        (
            "stalled-reader",
            "device-recorded-before-release",
            "sender",
            "reader-killed",
        ),
        (
            "orphan-writer",
            "device-sent-before-retire",
            "delivered-reader",
            "orphan-killed",
        ),
    ] {
        let gate = iox_testkit::Gate::new(dir.path(), role);
        let peer = driver.spawn(TEST, peer, dir.path(), &[]);
        let stalled = iox_testkit::Reaped::new(driver.spawn(TEST, role, dir.path(), &gate.env(point)));
        killed.push(stalled.id());
        assert!(gate.wait_reached(WAIT), "{role} never reached {point}");
        stalled.kill();
        std::fs::write(dir.path().join(note), b"").unwrap();
        iox_testkit::wait_ok(peer, WAIT);
    }
    let survivor = driver.run(TEST, "survivor", dir.path(), &[]);
    std::fs::write(dir.path().join("done"), b"").unwrap();
    iox_testkit::wait_ok(keeper, WAIT);
    if let Some(calls) = driver.calls_of(survivor) {
        let waits: Vec<_> = calls
            .iter()
            .filter(|c| c.name == "cuStreamWaitEvent" || c.name == "cuIpcOpenEventHandle")
            .collect();
        assert!(!waits.is_empty(), "the survivor's loans waited on nothing at all");
        for c in waits {
            let event = c.get("event").or(c.get("of")).unwrap_or_default();
            assert!(
                !killed.iter().any(|pid| event.starts_with(&format!("{pid}:"))),
                "the survivor used {event}, an event of a killed process"
            );
        }
    }
}
