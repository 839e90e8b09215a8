//! Pool loan + release: one thread alone, and one thread while another thread
//! loans and releases on the same pool (both on the same size class, so they contend
//! for the class's loan cursor and neighbouring chunk words).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use iox_mempool::{MemoryType, Owner, Pool, PoolLayout};

fn pool(dir: &std::path::Path) -> Arc<Pool> {
    let layout = PoolLayout::new(&[(64, 1024), (4096, 256), (1 << 20, 8)]).unwrap();
    Arc::new(Pool::create(dir, "bench", &layout, MemoryType::Cpu, 0o600).unwrap())
}

fn loan_release(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(dir.path());
    let mut group = c.benchmark_group("pool");
    group.bench_function("loan+release/uncontended", |b| {
        let mut hint = 0;
        let me = Owner::new(0).unwrap();
        b.iter(|| {
            let h = pool.loan(black_box(100), &mut hint, me).unwrap();
            pool.book().release(black_box(h), me).unwrap();
        })
    });
    group.bench_function("loan+release/two-threads", |b| {
        let stop = Arc::new(AtomicBool::new(false));
        let other = {
            let (pool, stop) = (pool.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut hint = 0;
                let other = Owner::new(1).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let h = pool.loan(100, &mut hint, other).unwrap();
                    pool.book().release(h, other).unwrap();
                }
            })
        };
        b.iter_custom(|iters| {
            let mut hint = 0;
            let me = Owner::new(0).unwrap();
            let start = Instant::now();
            for _ in 0..iters {
                let h = pool.loan(black_box(100), &mut hint, me).unwrap();
                pool.book().release(black_box(h), me).unwrap();
            }
            start.elapsed()
        });
        stop.store(true, Ordering::Relaxed);
        other.join().unwrap();
    });
    group.finish();
}

criterion_group!(benches, loan_release);
criterion_main!(benches);
