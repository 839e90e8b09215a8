//! The blackboard against iceoryx2's, side by side in one run: read latency of one key
//! (a copy) of 8 B and 4 KiB, update latency of the same, and reads per second with 8
//! concurrent readers while a writer updates, each beside its floor: a plain copy of
//! the value out of (or into) shared memory with no protocol at all.
//!
//! ```sh
//! cargo run --release -p iox_benches --bin blackboard_bench            # ~30 s
//! cargo run --release -p iox_benches --bin blackboard_bench -- --rounds 1
//! ```
//!
//! Latencies: a round times batches of 1,000 operations in one thread (reader and
//! writer in the same process) and keeps the median batch; the report takes the median
//! over rounds, which alternate the libraries. Scaling: 8 reader threads (each with its
//! own port, as ports are per thread) and one writer thread for `--seconds`; reads
//! summed over the readers. On a machine with fewer cores than threads, scaling says
//! how the libraries share the cores, not how they scale.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;

/// 4 KiB.
type Big = [u64; 512];

#[derive(Parser, Debug)]
#[command(about = "The blackboard against iceoryx2's: read and update latency, read scaling")]
struct Args {
    /// Rounds, alternating the libraries.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Seconds of each scaling run.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Only run N 8-byte updates of iox's blackboard, then N reads (to count
    /// instructions with callgrind, two N apart).
    #[arg(long, hide = true)]
    loop_only: Option<u64>,
}

/// Median of `batches` timed batches of 1,000 calls of `op`: ns per call.
fn per_op(mut op: impl FnMut(u64)) -> f64 {
    const BATCH: u64 = 1_000;
    for i in 0..BATCH * 10 {
        op(i); // warm up
    }
    let mut batches: Vec<f64> = (0..200)
        .map(|b| {
            let start = Instant::now();
            for i in 0..BATCH {
                op(b * BATCH + i);
            }
            start.elapsed().as_nanos() as f64 / BATCH as f64
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches[batches.len() / 2]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One library's latencies: (read 8 B, read 4 KiB, update 8 B, update 4 KiB) ns.
type Latencies = [f64; 4];

fn iox_latencies(root: &std::path::Path, round: u32) -> Latencies {
    let board = iox_service::Service::named(&format!("bench/bb/{round}"))
        .expect("a name")
        .root(root)
        .blackboard::<u32>()
        .add::<u64>(0, 0)
        .add::<Big>(1, [0; 512])
        .create()
        .expect("the blackboard");
    let writer = board.writer_builder().create().expect("a writer");
    let reader = board.reader_builder().create().expect("a reader");
    let (r8, r4k) = (reader.entry::<u64>(&0).unwrap(), reader.entry::<Big>(&1).unwrap());
    let (w8, w4k) = (writer.entry::<u64>(&0).unwrap(), writer.entry::<Big>(&1).unwrap());
    [
        per_op(|_| {
            black_box(r8.get().unwrap());
        }),
        per_op(|_| {
            black_box(r4k.get().unwrap());
        }),
        per_op(|i| {
            w8.update_with_copy(i).unwrap();
        }),
        per_op(|i| {
            w4k.update_with_copy([i; 512]).unwrap();
        }),
    ]
}

fn iceoryx2_latencies(round: u32) -> Latencies {
    use iceoryx2::prelude::*;
    let node = iox_benches::iceoryx2_files::node_builder()
        .create::<ipc::Service>()
        .expect("iceoryx2 node");
    let name = format!("iox-bench-bb/{}/{round}", std::process::id());
    let service = node
        .service_builder(&name.as_str().try_into().expect("a name"))
        .blackboard_creator::<u32>()
        .add::<u64>(0, 0)
        .add::<Big>(1, [0; 512])
        .create()
        .expect("the iceoryx2 blackboard");
    let writer = service.writer_builder().create().expect("a writer");
    let reader = service.reader_builder().create().expect("a reader");
    let (r8, r4k) = (reader.entry::<u64>(&0).unwrap(), reader.entry::<Big>(&1).unwrap());
    let (w8, w4k) = (writer.entry::<u64>(&0).unwrap(), writer.entry::<Big>(&1).unwrap());
    [
        per_op(|_| {
            black_box(*r8.get());
        }),
        per_op(|_| {
            black_box(*r4k.get());
        }),
        per_op(|i| w8.update_with_copy(i)),
        per_op(|i| w4k.update_with_copy([i; 512])),
    ]
}

/// The floor: the same copies out of and into a shared mapping, no protocol (the
/// addresses pass through `black_box`, so every copy is made).
fn floor_latencies() -> Latencies {
    let mut map = memmap2::MmapMut::map_anon(2 * size_of::<Big>()).expect("a mapping");
    let small = map.as_mut_ptr().cast::<u64>();
    let big = small.wrapping_byte_add(size_of::<Big>()).cast::<Big>();
    [
        per_op(|_| {
            // SAFETY: inside the mapping (page-aligned, so aligned), used by this
            // thread alone.
            let _ = black_box(unsafe { black_box(small).read() });
        }),
        per_op(|_| {
            // SAFETY: as above.
            let _ = black_box(unsafe { black_box(big).read() });
        }),
        // SAFETY: as above.
        per_op(|i| unsafe { black_box(small).write(i) }),
        // SAFETY: as above.
        per_op(|i| unsafe { black_box(big).write([i; 512]) }),
    ]
}

/// Reads per second of 8 reader threads of key 1 (4 KiB) while a writer updates it.
fn scaling(
    seconds: f64,
    reader: impl Fn(&AtomicBool) -> u64 + Sync,
    writer: impl Fn(&AtomicBool) + Sync,
) -> f64 {
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| writer(&stop));
        let readers: Vec<_> = (0..8)
            .map(|_| s.spawn(|| total.fetch_add(reader(&stop), Ordering::Relaxed)))
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("a reader thread");
        }
    });
    total.load(Ordering::Relaxed) as f64 / seconds
}

fn iox_scaling(root: &std::path::Path, round: u32, seconds: f64) -> f64 {
    let open = || {
        iox_service::Service::named(&format!("bench/bb-scale/{round}"))
            .expect("a name")
            .root(root)
            .blackboard::<u32>()
            .max_readers(8)
            .add::<Big>(1, [0; 512])
            .open_or_create()
            .expect("the blackboard")
    };
    let board = Arc::new(open());
    scaling(
        seconds,
        |stop| {
            let r = board.reader_builder().create().expect("a reader");
            let e = r.entry::<Big>(&1).unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                black_box(e.get().unwrap());
                n += 1;
            }
            n
        },
        |stop| {
            let w = board.writer_builder().create().expect("a writer");
            let e = w.entry::<Big>(&1).unwrap();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                e.update_with_copy([i; 512]).unwrap();
            }
        },
    )
}

fn iceoryx2_scaling(round: u32, seconds: f64) -> f64 {
    use iceoryx2::prelude::*;
    let name = format!("iox-bench-bb-scale/{}/{round}", std::process::id());
    let node = iox_benches::iceoryx2_files::node_builder()
        .create::<ipc::Service>()
        .expect("iceoryx2 node");
    let _service = node
        .service_builder(&name.as_str().try_into().expect("a name"))
        .blackboard_creator::<u32>()
        .max_readers(8)
        .add::<Big>(1, [0; 512])
        .create()
        .expect("the iceoryx2 blackboard");
    let open = || {
        let node = iox_benches::iceoryx2_files::node_builder()
            .create::<ipc::Service>()
            .expect("iceoryx2 node");
        let service = node
            .service_builder(&name.as_str().try_into().expect("a name"))
            .blackboard_opener::<u32>()
            .open()
            .expect("the iceoryx2 blackboard");
        (node, service)
    };
    scaling(
        seconds,
        |stop| {
            let (_node, service) = open();
            let r = service.reader_builder().create().expect("a reader");
            let e = r.entry::<Big>(&1).unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                black_box(*e.get());
                n += 1;
            }
            n
        },
        |stop| {
            let (_node, service) = open();
            let w = service.writer_builder().create().expect("a writer");
            let e = w.entry::<Big>(&1).unwrap();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                e.update_with_copy([i; 512]);
            }
        },
    )
}

/// `--loop-only N`: N updates and N reads of an 8-byte key, nothing else timed.
fn loop_only(n: u64) {
    let dir = tempfile::tempdir().expect("a temporary root");
    let board = iox_service::Service::named("bench/bb-loop")
        .expect("a name")
        .root(dir.path())
        .blackboard::<u32>()
        .add::<u64>(0, 0)
        .create()
        .expect("the blackboard");
    let writer = board.writer_builder().create().expect("a writer");
    let reader = board.reader_builder().create().expect("a reader");
    let (w, r) = (writer.entry::<u64>(&0).unwrap(), reader.entry::<u64>(&0).unwrap());
    let mut sum = 0u64;
    for i in 0..n {
        w.update_with_copy(i).unwrap();
        sum = sum.wrapping_add(r.get().unwrap());
    }
    println!("{n} updates and reads, checksum {sum}");
}

fn main() {
    let args = Args::parse();
    if let Some(n) = args.loop_only {
        return loop_only(n);
    }
    iceoryx2::prelude::set_log_level(iceoryx2::prelude::LogLevel::Error);
    let dir = tempfile::tempdir().expect("a temporary root");
    let (mut iox, mut ice, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    let (mut iox_scale, mut ice_scale) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        eprintln!("round {}/{}", round + 1, args.rounds);
        iox.push(iox_latencies(dir.path(), round));
        ice.push(iceoryx2_latencies(round));
        floor.push(floor_latencies());
        iox_scale.push(iox_scaling(dir.path(), round, args.seconds));
        ice_scale.push(iceoryx2_scaling(round, args.seconds));
    }
    let col = |v: &[Latencies], i: usize| median(&mut v.iter().map(|l| l[i]).collect::<Vec<_>>());
    println!(
        "## Blackboard: iox against iceoryx2 ({} rounds, medians)\n",
        args.rounds
    );
    println!("| operation | iox ns | iceoryx2 ns | floor ns | iox/iceoryx2 | iox/floor |");
    println!("|---|---:|---:|---:|---:|---:|");
    let names = [
        "read 8 B (copy)",
        "read 4 KiB (copy)",
        "update 8 B",
        "update 4 KiB",
    ];
    for (i, name) in names.iter().enumerate() {
        let (a, b, f) = (col(&iox, i), col(&ice, i), col(&floor, i));
        println!(
            "| {name} | {a:.1} | {b:.1} | {f:.1} | {:.2} | {:.2} |",
            a / b,
            a / f
        );
    }
    let (a, b) = (median(&mut iox_scale), median(&mut ice_scale));
    println!(
        "\nReads of 4 KiB per second, 8 reader threads and a writer ({} s): iox {:.2} M, iceoryx2 {:.2} M ({:.2}x); {} cores",
        args.seconds,
        a / 1e6,
        b / 1e6,
        a / b,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
