//! Raw payload types (`pubsub/raw.rs`, for language bindings): a `[u8]` service that
//! records another type meets Rust ports of that type, both ways, with the user word
//! in the type's units; mismatches are refused on open.

use iox_service::{OpenError, OpenOrCreateError, PayloadType, Service, ZeroCopySafe};

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[iox(type_name = "Pose")]
struct Pose {
    x: f64,
    y: f64,
    yaw: f32,
    seq: u32,
}

fn pose_type() -> PayloadType {
    PayloadType::Typed {
        type_name: "Pose".into(),
        size: 24,
        alignment: 8,
        invalid_bit_patterns: false,
    }
}

#[test]
fn typed_raw_meets_rust_type_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let named = || Service::named("raw/pose").unwrap().root(dir.path());
    let rust = named().publish_subscribe::<Pose>().open_or_create().unwrap();
    // SAFETY: the ports below use loan_raw/receive_raw and addresses only.
    let raw = unsafe { named().publish_subscribe::<[u8]>().raw_payload_type(pose_type()) }
        .open()
        .unwrap();
    let (rust_pub, rust_sub) = (
        rust.publisher_builder().create().unwrap(),
        rust.subscriber_builder().create().unwrap(),
    );
    let (raw_pub, raw_sub) = (
        raw.publisher_builder().create().unwrap(),
        raw.subscriber_builder().create().unwrap(),
    );
    let pose = Pose {
        x: 1.0,
        y: 2.0,
        yaw: 0.5,
        seq: 7,
    };
    rust_pub
        .loan_uninit()
        .unwrap()
        .write_payload(pose)
        .send()
        .unwrap();
    let got = raw_sub.receive_raw().unwrap().unwrap();
    assert_eq!((got.len(), got.len_bytes()), (1, 24));
    // SAFETY: 24 bytes of a Pose (no padding), held by `got`, aligned for Pose.
    assert_eq!(unsafe { *got.as_ptr().cast::<Pose>() }, pose);
    let _ = rust_sub.receive().unwrap(); // the Rust subscriber got it too

    assert!(
        raw_pub.loan_raw(23).is_err(),
        "a typed payload's loan is its size"
    );
    let mut loan = raw_pub.loan_raw(24).unwrap();
    let other = Pose { seq: 8, ..pose };
    // SAFETY: the loan holds 24 bytes aligned for Pose; we write all of them, then send.
    unsafe {
        loan.as_mut_ptr().cast::<Pose>().write(other);
        loan.send().unwrap();
    }
    assert_eq!(*rust_sub.receive().unwrap().unwrap(), other);
}

#[test]
fn slice_raw_counts_elements_and_mismatches_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let named = || Service::named("raw/f32").unwrap().root(dir.path());
    let f32s = PayloadType::Slice {
        element: "f32".into(),
        size: 4,
        alignment: 4,
        invalid_bit_patterns: false,
    };
    // SAFETY: as above.
    let raw = unsafe { named().publish_subscribe::<[u8]>().raw_payload_type(f32s) }
        .max_slice_len(64)
        .create()
        .unwrap();
    let rust = named().publish_subscribe::<[f32]>().open().unwrap();
    let rust_sub = rust.subscriber_builder().create().unwrap();
    let raw_pub = raw.publisher_builder().create().unwrap();
    assert!(raw_pub.loan_raw(6).is_err(), "not a whole number of f32");
    let mut loan = raw_pub.loan_raw(12).unwrap();
    // SAFETY: 12 bytes, aligned for f32, all written before the send.
    unsafe {
        let p = loan.as_mut_ptr().cast::<f32>();
        for i in 0..3 {
            p.add(i).write(i as f32 + 0.5);
        }
        loan.send().unwrap();
    }
    assert_eq!(&*rust_sub.receive().unwrap().unwrap(), &[0.5, 1.5, 2.5]);

    let err = named().publish_subscribe::<[f64]>().open().unwrap_err();
    assert!(matches!(err, OpenError::IncompatiblePayload { .. }), "{err}");
    // SAFETY: no ports are built.
    let err = unsafe { named().publish_subscribe::<[u8]>().raw_payload_type(pose_type()) }
        .open_or_create()
        .unwrap_err();
    assert!(
        matches!(
            err,
            OpenOrCreateError::Open(OpenError::IncompatiblePayload { .. })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("[f32]") && err.to_string().contains("Pose"),
        "{err}"
    );
}

#[test]
fn a_raw_sample_whose_length_does_not_fit_its_chunk_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let f32s = PayloadType::Slice {
        element: "f32".into(),
        size: 4,
        alignment: 4,
        invalid_bit_patterns: false,
    };
    // SAFETY: the subscriber uses receive_raw only; the publisher breaks the contract on
    // purpose (a length in bytes where the recorded type counts f32s), as a faulty or
    // hostile writer of the shared memory could.
    let raw = unsafe {
        Service::named("raw/liar")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<[u8]>()
            .raw_payload_type(f32s)
    }
    .max_slice_len(4)
    .create()
    .unwrap();
    let sub = raw.subscriber_builder().create().unwrap();
    let liar = raw.publisher_builder().create().unwrap();
    // The whole 64-byte chunk as 64 "elements": 256 bytes of f32.
    let loan = liar.loan_slice_uninit(64).unwrap();
    loan.write_from_fn(|i| i as u8).send().unwrap();
    let free = liar.pool_info().free_chunks();
    let err = sub.receive_raw().unwrap_err();
    assert!(err.to_string().contains("does not fit the chunk"), "{err}");
    assert!(sub.receive_raw().unwrap().is_none(), "nothing else queued");
    assert!(
        liar.pool_info().free_chunks() == free + 1,
        "the refused chunk went back to the pool"
    );
}
