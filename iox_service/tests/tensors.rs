//! Host tensor services (`tensors(true)`) across processes: a tensor publisher in a
//! child process sends tensors of several shapes and strides; a tensor subscriber here
//! reads each one's layout and bytes, a plain subscriber the bytes; a plain publisher
//! is refused (it would send without a record); tensor ports of a service without
//! records are refused; bad layouts are refused at the loan naming the sizes; a record
//! damaged in the segment file is an error of the sample, not a view past it.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use iox_service::tensor::{DType, TensorError, TensorLayout};
use iox_service::{PortCreateError, PubSubService, Service, ServiceName, TensorLoanError};

const WAIT: Duration = Duration::from_secs(30);

fn service(root: &Path, name: &str) -> PubSubService<[f32]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[f32]>()
        .max_slice_len(64)
        .subscriber_buffer(8)
        .tensors(true)
        .open_or_create()
        .unwrap()
}

fn layouts() -> Vec<TensorLayout> {
    vec![
        TensorLayout::contiguous(DType::F32, &[4, 8]).unwrap(),
        TensorLayout::strided(DType::F32, &[8, 4], &[1, 8]).unwrap(),
        TensorLayout::contiguous(DType::F32, &[]).unwrap(),
        TensorLayout::contiguous(DType::F32, &[0, 3]).unwrap(),
    ]
}

fn values(i: usize, bytes: usize) -> Vec<u8> {
    (0..bytes / 4)
        .flat_map(|k| ((100 * i + k) as f32).to_ne_bytes())
        .collect()
}

#[test]
fn tensors_cross_processes_with_their_layouts() {
    const TEST: &str = "tensors_cross_processes_with_their_layouts";
    let root = std::env::var("IOX_ROOT").ok();
    if iox_testkit::role().as_deref() == Some("publisher") {
        let svc = service(Path::new(&root.unwrap()), "tensors/cross");
        let publisher = svc.tensor_publisher_builder().create().unwrap();
        assert_eq!(publisher.element_type(), DType::F32);
        publisher.wait_for_subscribers(2, WAIT).unwrap();
        for (i, layout) in layouts().iter().enumerate() {
            let loan = publisher.loan_tensor(layout).unwrap();
            let bytes = values(i, loan.len());
            assert_eq!(loan.send_bytes(&bytes).unwrap(), 2);
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path(), "tensors/cross");
    let tensors = svc.tensor_subscriber_builder().create().unwrap();
    let plain = svc.subscriber_builder().create().unwrap();
    // A plain publisher would send samples without records: refused, naming the way.
    match svc.publisher_builder().create() {
        Err(e @ PortCreateError::TensorService { .. }) => {
            assert!(e.to_string().contains("tensor_publisher_builder"), "{e}")
        }
        other => panic!("a plain publisher of a tensor service: {other:?}"),
    }
    let child = iox_testkit::spawn_self(
        TEST,
        "publisher",
        &[("IOX_ROOT", dir.path().display().to_string())],
    );
    for (i, layout) in layouts().iter().enumerate() {
        let sample = tensors.receive_timeout(WAIT).unwrap().expect("a tensor in time");
        assert_eq!(sample.tensor(), Ok(*layout), "tensor {i}");
        assert_eq!(sample.len() as u64, layout.span_bytes().unwrap());
        // SAFETY: the sample's bytes, all written by the publisher, held meanwhile.
        let got = unsafe { std::slice::from_raw_parts(sample.as_ptr(), sample.len()) };
        assert_eq!(got, values(i, sample.len()), "tensor {i}");
        // The plain subscriber gets the same bytes, as a slice of floats.
        let floats = plain.receive().unwrap().expect("the plain subscriber's copy");
        assert_eq!(floats.len() * 4, sample.len());
    }
    iox_testkit::wait_ok(child, WAIT);
}

#[test]
fn bad_layouts_and_services_without_records_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path(), "tensors/bad");
    let publisher = svc.tensor_publisher_builder().create().unwrap();
    let refused = |layout: TensorLayout| match publisher.loan_tensor(&layout) {
        Err(TensorLoanError::Tensor(e)) => e,
        other => panic!("{layout:?} was loaned: {other:?}"),
    };
    assert_eq!(
        refused(TensorLayout::contiguous(DType::F32, &[65]).unwrap()),
        TensorError::TooLarge {
            needed: 260,
            capacity: 256
        }
    );
    assert!(matches!(
        refused(TensorLayout::contiguous(DType::I32, &[2]).unwrap()),
        TensorError::DType { .. }
    ));
    assert!(matches!(
        refused(TensorLayout::strided(DType::F32, &[3], &[40]).unwrap()),
        TensorError::TooLarge { needed: 324, .. }
    ));
    // A loan's bytes of another length are not sent.
    let loan = publisher
        .loan_tensor(&TensorLayout::contiguous(DType::F32, &[2]).unwrap())
        .unwrap();
    assert!(loan.send_bytes(&[0; 4]).is_err());

    let plain: PubSubService<[f32]> = Service::named("tensors/plain")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[f32]>()
        .max_slice_len(8)
        .create()
        .unwrap();
    for e in [
        plain.tensor_publisher_builder().create().err(),
        plain.tensor_subscriber_builder().create().err(),
    ] {
        let e = e.expect("a tensor port of a service without records");
        assert!(matches!(e, PortCreateError::NotATensorService { .. }), "{e}");
        assert!(e.to_string().contains(".tensors(true)"), "{e}");
    }
    // An opener asking for records of a service without them is told so.
    let err = Service::named("tensors/plain")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[f32]>()
        .tensors(true)
        .open()
        .expect_err("opened without records");
    assert!(err.to_string().contains("tensor records"), "{err}");
}

#[test]
fn a_damaged_record_is_an_error_of_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let svc = service(dir.path(), "tensors/damaged");
    let subscriber = svc.tensor_subscriber_builder().create().unwrap();
    let publisher = svc.tensor_publisher_builder().create().unwrap();
    let layout = TensorLayout::contiguous(DType::F32, &[3, 5]).unwrap();
    let loan = publisher.loan_tensor(&layout).unwrap();
    loan.send_bytes(&[0; 60]).unwrap();
    // Find the record (the type word, sizes 3 and 5) in the segment file; make it say
    // 2^40 rows.
    let needle: Vec<u8> = layout.to_words()[..3]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .collect();
    let stem = ServiceName::new("tensors/damaged").unwrap().stem();
    let segment = dir.path().join(format!("{stem}.dynamic"));
    let bytes = std::fs::read(&segment).unwrap();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .expect("the record in the segment");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .write_all_at(&(1u64 << 40).to_ne_bytes(), at as u64 + 8)
        .unwrap();
    let sample = subscriber.receive().unwrap().expect("sent above");
    assert!(
        matches!(sample.tensor(), Err(TensorError::TooLarge { capacity: 60, .. })),
        "{:?}",
        sample.tensor()
    );
    assert_eq!(sample.len(), 60);
}
