//! What a typed reader's check of values costs (readers never trust writers: a type
//! with bytes that are no value, `bool`, is checked at receive): checking 1 MiB of
//! `bool`s, beside copying that MiB (a scale everyone knows), and a receive of a 1 MiB
//! `[bool]` sample against a receive of a 1 MiB `[u8]` sample (checked, and not: a
//! pointer handed out) through a real service in one process, the send of each
//! iteration timed apart.
//!
//! ```sh
//! cargo bench -p iox_benches --bench validate
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use iox_service::{Payload, Service, ZeroCopySafe};

const MIB: usize = 1 << 20;

fn check_and_copy(c: &mut Criterion) {
    let mut group = c.benchmark_group("bool 1 MiB");
    let bools = vec![true; MIB];
    group.bench_function("check", |b| {
        b.iter(|| {
            // SAFETY: `bools` is MIB initialised bools.
            assert!(unsafe { <bool as ZeroCopySafe>::all_valid(black_box(bools.as_ptr()), MIB) })
        })
    });
    let (from, mut to) = (vec![7u8; MIB], vec![0u8; MIB]);
    group.bench_function("memcpy (for scale)", |b| {
        b.iter(|| to.copy_from_slice(black_box(&from)))
    });
    group.finish();
}

/// Receives of 1 MiB samples of `[T]` (each sent by the same process just before,
/// outside the timing), every byte `value`.
fn receive_of<T: ZeroCopySafe>(c: &mut Criterion, label: &str, value: T)
where
    [T]: Payload,
{
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("bench/validate")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[T]>()
        .max_slice_len(MIB)
        .subscriber_buffer(2)
        .create()
        .unwrap();
    let publisher = svc.publisher_builder().create().unwrap();
    let subscriber = svc.subscriber_builder().create().unwrap();
    let mut group = c.benchmark_group("receive 1 MiB");
    group.bench_function(label, |b| {
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let loan = publisher.loan_slice_uninit(MIB).unwrap();
                loan.write_from_fn(|_| value).send().unwrap();
                let start = Instant::now();
                let sample = subscriber.receive().unwrap().unwrap();
                black_box(sample.len());
                took += start.elapsed();
            }
            took
        })
    });
    group.finish();
}

fn receives(c: &mut Criterion) {
    receive_of(c, "[bool] (checked)", true);
    receive_of(c, "[u8] (not checked)", 1u8);
}

criterion_group!(benches, check_and_copy, receives);
criterion_main!(benches);
