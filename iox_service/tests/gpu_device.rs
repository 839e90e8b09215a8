//! Device-memory services (`MemoryType::CudaDevice`) across processes, against the
//! driver double (`cuda_double/`): the pool is allocated with the driver's virtual
//! memory management, exported as a descriptor, handed over to other processes and
//! imported once per process; samples are ordered by inter-process events. Every
//! test runs its ports in child processes that load the double and checks their
//! calls in its log. With `IOX_CUDA_DRIVER=real` (scripts/gpu-check.sh on a GPU
//! machine) the same children run against the installed driver, and only behaviour
//! is checked. Ports that go while chunks are in flight (dropped or killed):
//! `tests/gpu_device_recovery.rs`. Needs the `cuda` feature.
#![cfg(feature = "cuda")]

mod gpu_common;

use std::time::Duration;

use gpu_common::*;
use iox_cuda::OwnedStream;
use iox_service::{OpenError, PortCreateError, Service};
use iox_testkit::cuda_double::{names, test_dir};

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
