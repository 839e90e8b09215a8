//! In-process behaviour of ports on one service: limits, overflow, reject, pinning
//! counts, errors. (Cross-process behaviour is in `processes.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use iox_service::{
    CreateError, InvalidConfig, LoanError, MemoryType, OpenError, OpenOrCreateError, Overflow, Payload,
    PinError, Pinner, PortCreateError, Region, SendError, Service, register_pinner,
};

fn service(dir: &tempfile::TempDir, name: &str) -> Service {
    Service::named(name).unwrap().root(dir.path())
}

#[test]
fn typed_and_slice_round_trip_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "t")
        .publish_subscribe::<[u64; 4]>()
        .open_or_create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    assert_eq!(
        p.loan_uninit()
            .unwrap()
            .write_payload([1, 2, 3, 4])
            .send()
            .unwrap(),
        1
    );
    assert_eq!(*s.receive().unwrap().unwrap(), [1, 2, 3, 4]);
    assert!(s.receive().unwrap().is_none());

    let bytes = service(&dir, "b")
        .publish_subscribe::<[u8]>()
        .size_classes(&[(4096, 64), (1 << 20, 16), (16 << 20, 4)])
        .allow_pool_exhaustion(true)
        .open_or_create()
        .unwrap();
    let p = bytes.publisher_builder().create().unwrap();
    let s = bytes.subscriber_builder().create().unwrap();
    for len in [0, 1, 4096, 4097, 300_000, 16 << 20] {
        p.loan_slice_uninit(len)
            .unwrap()
            .write_from_fn(|i| (i * 7) as u8)
            .send()
            .unwrap();
        let got = s.receive().unwrap().unwrap();
        assert_eq!(got.len(), len);
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i * 7) as u8));
    }
    assert_eq!(
        p.loan_slice_uninit((16 << 20) + 1).unwrap_err(),
        LoanError::SliceTooLong {
            len: (16 << 20) + 1,
            max: 16 << 20
        }
    );
    // The publisher holds one spare chunk, loaned ahead after its last send.
    let info = p.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks() - 1);
    drop(p);
    let info = bytes.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks());
}

#[test]
fn overflow_drops_oldest_and_reject_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "o")
        .publish_subscribe::<u32>()
        .subscriber_buffer(3)
        .open_or_create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    for i in 0..10 {
        assert_eq!(p.loan_uninit().unwrap().write_payload(i).send().unwrap(), 1);
    }
    let got: Vec<u32> = std::iter::from_fn(|| s.receive().unwrap().map(|x| *x)).collect();
    assert_eq!(got, vec![7, 8, 9]);
    drop(p);
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks());

    let svc = service(&dir, "r")
        .publish_subscribe::<u32>()
        .subscriber_buffer(2)
        .overflow(Overflow::Reject)
        .open_or_create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let s2 = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(1).send().unwrap();
    p.loan_uninit().unwrap().write_payload(2).send().unwrap();
    assert_eq!(*s2.receive().unwrap().unwrap(), 1);
    let e = p.loan_uninit().unwrap().write_payload(3).send().unwrap_err();
    assert_eq!(
        e,
        SendError::QueueFull {
            delivered: 1,
            rejected: 1
        }
    );
    let got: Vec<u32> = std::iter::from_fn(|| s.receive().unwrap().map(|x| *x)).collect();
    assert_eq!(got, vec![1, 2]);
    drop((s, s2, p));
    let info = svc.pool_info();
    assert_eq!(info.free_chunks(), info.total_chunks());
}

#[test]
fn limits_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "l")
        .publish_subscribe::<u8>()
        .max_publishers(1)
        .max_subscribers(1)
        .max_loans(2)
        .max_held(1)
        .open_or_create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    assert!(matches!(
        svc.publisher_builder().create(),
        Err(PortCreateError::TooManyPorts {
            kind: "publisher",
            max: 1,
            ..
        })
    ));
    let s = svc.subscriber_builder().create().unwrap();
    assert!(matches!(
        svc.subscriber_builder().create(),
        Err(PortCreateError::TooManyPorts { .. })
    ));
    let a = p.loan_uninit().unwrap();
    let b = p.loan_uninit().unwrap();
    assert_eq!(p.loan_uninit().unwrap_err(), LoanError::TooManyLoans { max: 2 });
    a.write_payload(1).send().unwrap();
    b.write_payload(2).send().unwrap();
    let first = s.receive().unwrap().unwrap();
    assert!(matches!(
        s.receive(),
        Err(iox_service::ReceiveError::TooManyHeld { max: 1 })
    ));
    drop(first);
    assert_eq!(*s.receive().unwrap().unwrap(), 2);
    drop(p);
    // A slot freed by a dropped port can be claimed again.
    let _p2 = svc.publisher_builder().create().unwrap();
}

#[test]
fn bad_settings_and_mismatches_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Service::named("").is_err());
    assert!(Service::named("a\nb").is_err());
    assert!(Service::named(&"x".repeat(256)).is_err());
    // The grammar, refused where the name is written, with the rule in the message.
    for bad in [
        "bad name!",
        "-x",
        "~a",
        "a//b",
        "x*y",
        "/leading",
        "trailing/",
        "camera front",
        "a$b",
        "q?",
        "#",
    ] {
        let e = Service::named(bad)
            .err()
            .unwrap_or_else(|| panic!("{bad:?} accepted"));
        let m = e.to_string();
        assert!(
            m.contains(&format!("{bad:?}")) && m.contains("segments separated by single '/'"),
            "{m}"
        );
    }
    for good in ["camera/front", "robot1/arm/joint_states", "a.b-c~d:e+f=g,h", "X"] {
        assert!(Service::named(good).is_ok(), "{good:?}");
    }
    let e = service(&dir, "z")
        .publish_subscribe::<u8>()
        .max_subscribers(0)
        .create()
        .unwrap_err();
    assert!(matches!(e, CreateError::InvalidSetting { .. }), "{e}");
    let e = service(&dir, "z")
        .publish_subscribe::<u8>()
        .max_publishers(100_000)
        .create()
        .unwrap_err();
    assert!(
        matches!(
            &e,
            CreateError::InvalidSetting {
                source: InvalidConfig::Limit {
                    what: "max_publishers",
                    ..
                },
                ..
            }
        ),
        "{e}"
    );
    let e = service(&dir, "z")
        .publish_subscribe::<[u8]>()
        .create()
        .unwrap_err();
    assert!(matches!(e, CreateError::MissingSliceSize(..)), "{e}");
    let e = service(&dir, "z")
        .publish_subscribe::<[u8]>()
        .size_classes(&[(64, 0)])
        .create()
        .unwrap_err();
    assert!(matches!(e, CreateError::Layout { .. }), "{e}");
    // An invalid user memory type cannot even be made.
    assert!(matches!(
        MemoryType::user(3),
        Err(iox_service::MemoryTypeError::ReservedUserCode(3))
    ));
    assert!(matches!(
        service(&dir, "z").publish_subscribe::<u8>().open(),
        Err(OpenError::DoesNotExist(_))
    ));

    let _svc = service(&dir, "m")
        .publish_subscribe::<u64>()
        .max_publishers(2)
        .create()
        .unwrap();
    let e = service(&dir, "m")
        .publish_subscribe::<u64>()
        .create()
        .unwrap_err();
    assert!(matches!(e, CreateError::AlreadyExists(_)));
    let e = service(&dir, "m").publish_subscribe::<u32>().open().unwrap_err();
    assert!(matches!(e, OpenError::IncompatiblePayload { .. }), "{e}");
    assert!(
        matches!(
            &e,
            OpenError::IncompatiblePayload { requested, found, .. }
                if *requested == <u32 as Payload>::payload_type()
                    && *found == <u64 as Payload>::payload_type()
        ),
        "names both sides: {e}"
    );
    let e = service(&dir, "m")
        .publish_subscribe::<u64>()
        .memory_type(MemoryType::Locked)
        .open()
        .unwrap_err();
    assert!(matches!(e, OpenError::IncompatibleMemoryType { .. }), "{e}");
    let e = service(&dir, "m")
        .publish_subscribe::<u64>()
        .max_publishers(3)
        .open_or_create()
        .unwrap_err();
    assert!(
        matches!(
            e,
            OpenOrCreateError::Open(OpenError::IncompatibleLimit {
                what: "max_publishers",
                ..
            })
        ),
        "{e}"
    );
    assert!(
        service(&dir, "m")
            .publish_subscribe::<u64>()
            .max_publishers(1)
            .open()
            .is_ok()
    );
}

#[derive(Default)]
struct Counting {
    pins: AtomicUsize,
    unpins: AtomicUsize,
}

impl Pinner for Counting {
    fn pin(&self, _: &Region) -> Result<(), PinError> {
        self.pins.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn unpin(&self, _: &Region) -> Result<(), PinError> {
        self.unpins.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn four_pinned_ports_pin_once_and_unpin_once() {
    let code = MemoryType::user(0x0200).unwrap();
    let pinner = Arc::new(Counting::default());
    register_pinner(code, pinner.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "pins")
        .publish_subscribe::<u64>()
        .memory_type(code)
        .open_or_create()
        .unwrap();
    let unpinned = svc.subscriber_builder().create().unwrap();
    assert_eq!(
        pinner.pins.load(Ordering::SeqCst),
        0,
        "ports that do not opt in never pin"
    );
    let ports = (
        svc.publisher_builder().pin_memory(true).create().unwrap(),
        svc.publisher_builder().pin_memory(true).create().unwrap(),
        svc.subscriber_builder().pin_memory(true).create().unwrap(),
        svc.subscriber_builder().pin_memory(true).create().unwrap(),
    );
    assert!(ports.0.is_pinned() && ports.3.is_pinned() && !unpinned.is_pinned());
    assert_eq!(pinner.pins.load(Ordering::SeqCst), 1);
    drop(ports);
    assert_eq!(pinner.unpins.load(Ordering::SeqCst), 1);
    assert_eq!(pinner.pins.load(Ordering::SeqCst), 1);
}

#[test]
fn cuda_pinned_pinning_fails_clearly_without_cuda_but_unpinned_ports_work() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "gpu")
        .publish_subscribe::<u64>()
        .memory_type(MemoryType::CudaPinned)
        .create()
        .unwrap();
    match svc.subscriber_builder().pin_memory(true).create() {
        Err(e) => {
            assert!(matches!(e, PortCreateError::CudaUnavailable { .. }), "{e}");
            // Without the feature the message says so; with it (and no GPU), it names
            // the missing driver.
            let expected = if cfg!(feature = "cuda") {
                "CUDA"
            } else {
                "`cuda` feature"
            };
            assert!(e.to_string().contains(expected), "{e}");
        }
        Ok(s) if cfg!(feature = "cuda") => {
            println!("a CUDA device is present: the pinned port works");
            assert!(s.is_pinned());
        }
        Ok(_) => panic!("pinned a CudaPinned pool without the cuda feature"),
    }
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    p.loan_uninit().unwrap().write_payload(5).send().unwrap();
    assert_eq!(*s.receive().unwrap().unwrap(), 5);
}

#[test]
fn receive_timeout_returns_none_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "idle")
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let start = Instant::now();
    assert!(s.receive_timeout(Duration::from_millis(100)).unwrap().is_none());
    assert!(start.elapsed() >= Duration::from_millis(100));
}

#[test]
fn receive_timeout_accepts_duration_max() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "forever")
        .publish_subscribe::<u64>()
        .open_or_create()
        .unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let sender = {
        let svc = svc.clone();
        std::thread::spawn(move || {
            let p = svc.publisher_builder().create().unwrap();
            assert!(iox_testkit::wait_until(Duration::from_secs(60), || svc
                .waiting_subscribers()
                > 0));
            p.loan_uninit().unwrap().write_payload(8).send().unwrap();
        })
    };
    assert_eq!(*s.receive_timeout(Duration::MAX).unwrap().unwrap(), 8);
    sender.join().unwrap();
}

#[test]
fn publishers_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "turns")
        .publish_subscribe::<u64>()
        .subscriber_buffer(8)
        .open_or_create()
        .unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let (a, b) = (
        svc.publisher_builder().create().unwrap(),
        svc.publisher_builder().create().unwrap(),
    );
    for i in 0..3 {
        a.loan_uninit().unwrap().write_payload(i).send().unwrap();
        b.loan_uninit().unwrap().write_payload(100 + i).send().unwrap();
    }
    let got: Vec<u64> = std::iter::from_fn(|| s.receive().unwrap().map(|x| *x)).collect();
    assert_eq!(got, vec![0, 100, 1, 101, 2, 102]);
}

/// Loans and samples own a reference to their port: forgetting one leaks it (as
/// forgetting any owned value does) and keeps its port's slot, until the process ends
/// and recovery returns everything (the crash tests show that part).
#[test]
fn forgotten_samples_keep_their_port() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "forgotten")
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let total = svc.pool_info().total_chunks();
    {
        let p = svc.publisher_builder().create().unwrap();
        let s = svc.subscriber_builder().create().unwrap();
        std::mem::forget(p.loan_uninit().unwrap());
        p.loan_uninit().unwrap().write_payload(1).send().unwrap();
        std::mem::forget(s.receive().unwrap().unwrap());
        assert!(svc.pool_info().free_chunks() < total);
    }
    // The publisher's slot stays active (its forgotten loan could still be sent); the
    // subscriber's is closed (no deliveries) but kept for the forgotten sample.
    assert_eq!(svc.port_counts(), (1, 0));
    assert!(svc.pool_info().free_chunks() < total);
}

#[test]
fn samples_and_loans_outlive_their_ports_and_move_between_threads() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "owning")
        .publish_subscribe::<u64>()
        .max_held(4)
        .max_loans(2)
        .create()
        .unwrap();
    let total = svc.pool_info().total_chunks();
    let sub = svc.subscriber_builder().create().unwrap();
    // Loans are 'static: kept in a Vec, sent after the publisher handle is gone.
    let mut loans = Vec::new();
    {
        let publisher = svc.publisher_builder().create().unwrap();
        loans.push(publisher.loan_uninit().unwrap().write_payload(1));
        loans.push(publisher.loan_uninit().unwrap().write_payload(2));
        assert!(matches!(
            publisher.loan_uninit(),
            Err(iox_service::LoanError::TooManyLoans { max: 2 })
        ));
    }
    for loan in loans {
        loan.send().unwrap();
    }
    // Samples are 'static and Send: held in a struct, moved to another thread, and
    // kept after the subscriber handle is dropped.
    struct Held {
        samples: Vec<iox_service::Sample<u64>>,
    }
    let held = Held {
        samples: vec![sub.receive().unwrap().unwrap(), sub.receive().unwrap().unwrap()],
    };
    drop(sub);
    let sum = std::thread::spawn(move || held.samples.iter().map(|s| **s).sum::<u64>())
        .join()
        .unwrap();
    assert_eq!(sum, 3);
    // Everything is back once the last sample went (dropped in the other thread).
    assert_eq!(svc.pool_info().free_chunks(), total);
    assert_eq!(svc.port_counts(), (0, 0));
}

#[test]
fn max_held_counts_samples_wherever_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(&dir, "held")
        .publish_subscribe::<u64>()
        .max_held(2)
        .create()
        .unwrap();
    let publisher = svc.publisher_builder().create().unwrap();
    let sub = svc.subscriber_builder().create().unwrap();
    for i in 0..3 {
        publisher.loan_uninit().unwrap().write_payload(i).send().unwrap();
    }
    let a = sub.receive().unwrap().unwrap();
    let b = sub.receive().unwrap().unwrap();
    assert!(matches!(
        sub.receive(),
        Err(iox_service::ReceiveError::TooManyHeld { max: 2 })
    ));
    // Dropping one in another thread frees its place.
    std::thread::spawn(move || drop(a)).join().unwrap();
    assert_eq!(*sub.receive().unwrap().unwrap(), 2);
    drop(b);
}
