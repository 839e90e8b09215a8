//! Device services as tensor channels, across processes, against the driver double
//! (`cuda_double/`; the real driver with `IOX_CUDA_DRIVER=real`): each sample carries
//! its element type, shape and strides (the chunk's tensor record, in host memory), the
//! subscriber reads them back checked against the service and the sample's bytes, and
//! bad layouts are refused at the loan with the sizes named. Needs the `cuda` feature.
#![cfg(feature = "cuda")]

mod gpu_common;

use std::os::unix::fs::FileExt;
use std::time::Duration;

use gpu_common::{WAIT, driver, wait_for_file};
use iox_cuda::OwnedStream;
use iox_service::tensor::{DType, TensorError, TensorLayout};
use iox_service::{DeviceLoanError, MemoryType, PubSubService, Service, ZeroCopySafe};
use iox_testkit::cuda_double::test_dir;

/// Largest sample: 64 floats.
const MAX: usize = 64;

fn tensor_service<T: ZeroCopySafe>(name: &str) -> PubSubService<[T]> {
    Service::named(name)
        .unwrap()
        .publish_subscribe::<[T]>()
        .memory_type(MemoryType::CudaDevice)
        .max_slice_len(MAX)
        .subscriber_buffer(4)
        .open_or_create()
        .unwrap()
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// The layouts the publisher sends, in order: a 4x8 matrix, its transpose (a strided
/// view of the same 32 floats), a plain loan of 12 floats (1-D), an empty 0x5.
fn layouts() -> Vec<TensorLayout> {
    vec![
        TensorLayout::contiguous(DType::F32, &[4, 8]).unwrap(),
        TensorLayout::strided(DType::F32, &[8, 4], &[1, 8]).unwrap(),
        TensorLayout::contiguous(DType::F32, &[12]).unwrap(),
        TensorLayout::contiguous(DType::F32, &[0, 5]).unwrap(),
    ]
}

/// A publisher sends tensors of several layouts; a subscriber in another process gets
/// each one's type, shape and strides and its bytes.
#[test]
fn tensors_arrive_with_their_type_shape_and_strides() {
    const TEST: &str = "tensors_arrive_with_their_type_shape_and_strides";
    match iox_testkit::role().as_deref() {
        Some("publisher") => {
            let s = tensor_service::<f32>("gpu/tensors");
            let publisher = s.device_publisher_builder().create().unwrap();
            assert_eq!(publisher.element_type(), Some(DType::F32));
            assert_eq!(publisher.max_bytes(), MAX * 4);
            publisher.wait_for_subscribers(1, WAIT).unwrap();
            let stream = OwnedStream::new(0).unwrap();
            // Bytes that are no whole number of elements are refused, saying so in bytes.
            let e = publisher.loan_on(stream.stream(), 6).unwrap_err().to_string();
            assert!(e.contains("6 bytes") && e.contains("4-byte elements"), "{e}");
            for (i, layout) in layouts().into_iter().enumerate() {
                let mut loan = if i == 2 {
                    publisher.loan_on(stream.stream(), 48).unwrap()
                } else {
                    publisher.loan_tensor_on(stream.stream(), &layout).unwrap()
                };
                assert_eq!(loan.tensor(), Some(&layout));
                assert_eq!(loan.len() as u64, layout.span_bytes().unwrap());
                let values: Vec<u8> = (0..loan.len() / 4)
                    .flat_map(|k| ((i * 100 + k) as f32).to_ne_bytes())
                    .collect();
                // SAFETY: the loan's chunk, ours until sent on this stream after the
                // copy; the source is pageable (staged before the call returns).
                unsafe { iox_cuda::copy_to_device(0, loan.device_ptr(), &values, stream.stream()) }.unwrap();
                loan.send_on(stream.stream()).unwrap();
            }
            wait_for_file("read");
        }
        Some("subscriber") => {
            let s = tensor_service::<f32>("gpu/tensors");
            let subscriber = s.device_subscriber_builder().create().unwrap();
            let stream = OwnedStream::new(0).unwrap();
            for (i, layout) in layouts().into_iter().enumerate() {
                let mut sample = subscriber
                    .receive_timeout(WAIT)
                    .unwrap()
                    .expect("a tensor in time");
                assert_eq!(sample.tensor(), Ok(layout), "tensor {i}");
                sample.wait_on(stream.stream()).unwrap();
                let mut bytes = vec![0u8; sample.len()];
                // SAFETY: the sample's chunk, held until after this synchronous copy.
                unsafe { iox_cuda::copy_to_host(0, sample.device_ptr(), &mut bytes, stream.stream()) }
                    .unwrap();
                let expected: Vec<f32> = (0..sample.len() / 4).map(|k| (i * 100 + k) as f32).collect();
                assert_eq!(floats(&bytes), expected, "tensor {i}");
            }
            std::fs::write(test_dir().join("read"), b"").unwrap();
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = driver(TEST, dir.path()) else {
                return;
            };
            let subscriber = driver.spawn(TEST, "subscriber", dir.path(), &[]);
            let publisher = driver.spawn(TEST, "publisher", dir.path(), &[]);
            iox_testkit::wait_ok(subscriber, Duration::from_secs(120));
            iox_testkit::wait_ok(publisher, Duration::from_secs(120));
        }
    }
}

/// A tensor larger than the service's largest sample, one of another element type,
/// one whose strides reach past the largest sample, and a tensor loan on a service of
/// structs are refused at the loan, naming the sizes; nothing is loaned.
#[test]
fn bad_tensor_layouts_are_refused_at_the_loan_naming_the_sizes() {
    const TEST: &str = "bad_tensor_layouts_are_refused_at_the_loan_naming_the_sizes";
    if iox_testkit::role().as_deref() == Some("loaner") {
        let s = tensor_service::<f32>("gpu/bad-tensors");
        let publisher = s.device_publisher_builder().create().unwrap();
        let owned = OwnedStream::new(0).unwrap();
        let stream = owned.stream();
        let refused = |layout: TensorLayout| match publisher.loan_tensor_on(stream, &layout) {
            Err(DeviceLoanError::Tensor(e)) => e,
            other => panic!("{layout:?} was not refused: {other:?}"),
        };
        let large = refused(TensorLayout::contiguous(DType::F32, &[65]).unwrap());
        assert_eq!(
            large,
            TensorError::TooLarge {
                needed: 260,
                capacity: 256
            }
        );
        assert_eq!(large.to_string(), "the tensor reaches 260 bytes; 256 bytes fit");
        let typed = refused(TensorLayout::contiguous(DType::F16, &[4]).unwrap());
        assert_eq!(
            typed.to_string(),
            "a tensor of float16 on a service of float32 elements"
        );
        // 4 elements, but 100 apart: they reach 301 floats.
        let strided = refused(TensorLayout::strided(DType::F32, &[4], &[100]).unwrap());
        assert_eq!(
            strided,
            TensorError::TooLarge {
                needed: 1204,
                capacity: 256
            }
        );
        let info = s.pool_info();
        let free: u32 = info.classes.iter().map(|c| c.free).sum();
        let total: u32 = info.classes.iter().map(|c| c.count).sum();
        assert_eq!(free, total, "a refused loan holds no chunk");

        #[derive(Clone, Copy, ZeroCopySafe)]
        #[repr(C)]
        struct Pair {
            a: f32,
            b: f32,
        }
        let pairs = tensor_service::<Pair>("gpu/pairs");
        let publisher = pairs.device_publisher_builder().create().unwrap();
        assert_eq!(publisher.element_type(), None);
        match publisher.loan_tensor_on(stream, &TensorLayout::contiguous(DType::F32, &[2]).unwrap()) {
            Err(DeviceLoanError::Tensor(TensorError::NotATensorService { payload })) => {
                assert!(payload.contains("Pair"), "{payload}")
            }
            other => panic!("a struct service loaned a tensor: {other:?}"),
        }
        // Its bytes still move.
        assert_eq!(publisher.loan_on(stream, 16).unwrap().tensor(), None);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    driver.run(TEST, "loaner", dir.path(), &[]);
}

/// A tensor record damaged in shared memory while a subscriber holds the sample (here
/// a size of 2^40 written into the segment file) is an error of `tensor()`, not a
/// view past the sample; the bytes and the next samples are unaffected.
#[test]
fn a_damaged_tensor_record_is_an_error_not_a_view_past_the_sample() {
    const TEST: &str = "a_damaged_tensor_record_is_an_error_not_a_view_past_the_sample";
    let shape = [3usize, 5];
    match iox_testkit::role().as_deref() {
        Some("publisher") => {
            let s = tensor_service::<f32>("gpu/damaged");
            let publisher = s.device_publisher_builder().create().unwrap();
            publisher.wait_for_subscribers(1, WAIT).unwrap();
            let stream = OwnedStream::new(0).unwrap();
            let layout = TensorLayout::contiguous(DType::F32, &shape).unwrap();
            for _ in 0..2 {
                let loan = publisher.loan_tensor_on(stream.stream(), &layout).unwrap();
                loan.send_on(stream.stream()).unwrap();
            }
            wait_for_file("checked");
        }
        Some("subscriber") => {
            let s = tensor_service::<f32>("gpu/damaged");
            let subscriber = s.device_subscriber_builder().create().unwrap();
            let first = subscriber.receive_timeout(WAIT).unwrap().expect("a tensor");
            let second = subscriber.receive_timeout(WAIT).unwrap().expect("a tensor");
            assert_eq!(first.tensor().unwrap().shape(), [3, 5]);
            std::fs::write(test_dir().join("held"), b"").unwrap();
            wait_for_file("damaged");
            // One of the two records now says 2^40 rows.
            let results = [first.tensor(), second.tensor()];
            assert!(
                results
                    .iter()
                    .any(|r| matches!(r, Err(TensorError::TooLarge { capacity: 60, .. }))),
                "{results:?}"
            );
            assert!(results.iter().any(|r| r.is_ok()), "{results:?}");
            assert_eq!(first.len(), 60, "the sample's bytes are its own");
            std::fs::write(test_dir().join("checked"), b"").unwrap();
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = driver(TEST, dir.path()) else {
                return;
            };
            let subscriber = driver.spawn(TEST, "subscriber", dir.path(), &[]);
            let publisher = driver.spawn(TEST, "publisher", dir.path(), &[]);
            assert!(iox_testkit::wait_until(WAIT, || dir.path().join("held").exists()));
            // The record's words: the type word, then sizes 3 and 5.
            let layout = TensorLayout::contiguous(DType::F32, &shape).unwrap();
            let needle: Vec<u8> = layout.to_words()[..3]
                .iter()
                .flat_map(|w| w.to_ne_bytes())
                .collect();
            let stem = iox_service::ServiceName::new("gpu/damaged").unwrap().stem();
            let segment = dir.path().join("root").join(format!("{stem}.dynamic"));
            let bytes = std::fs::read(&segment).unwrap();
            let at = bytes
                .windows(needle.len())
                .position(|w| w == needle.as_slice())
                .expect("a tensor record of 3x5 floats in the segment");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&segment)
                .unwrap()
                .write_all_at(&(1u64 << 40).to_ne_bytes(), at as u64 + 8)
                .unwrap();
            std::fs::write(dir.path().join("damaged"), b"").unwrap();
            iox_testkit::wait_ok(subscriber, Duration::from_secs(120));
            iox_testkit::wait_ok(publisher, Duration::from_secs(120));
        }
    }
}
