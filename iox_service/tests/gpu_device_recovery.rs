//! Device ports that go while their chunks are in flight, across processes against the
//! driver double (`cuda_double/`; the real driver with `IOX_CUDA_DRIVER=real`): a
//! publisher dropped before its loan's send (the loan keeps its slot until its events
//! are retired), and processes SIGKILLed with chunks queued, held or between the steps
//! of the event protocol (held there by stall points). The survivors lose no chunk and
//! wait on no event of a dead process. Needs the `cuda` feature.
#![cfg(feature = "cuda")]

mod gpu_common;

use std::time::Duration;

use gpu_common::*;
use iox_cuda::OwnedStream;
use iox_service::{MemoryType, PortCreateError, Service};
use iox_testkit::cuda_double::{Call, names, test_dir};

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
