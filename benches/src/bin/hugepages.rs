//! Pools on huge pages against pools on 4 KiB pages, side by side in one run: for a
//! 256 MiB pool, on each page size the machine can give (4 KiB, transparent huge pages,
//! reserved 2 MiB and 1 GiB pages; a size it cannot give is listed as skipped, with
//! why):
//!
//! - **create + pin**: a fresh `Locked` service created and a subscriber built with
//!   `pin_memory(true)` (its `mlock` of the whole pool), as a user's process starts;
//! - **create + first touch**: a fresh `Cpu` service, a publisher, and one write per
//!   4 KiB of the whole pool (the page faults a process pays before its first frames
//!   have been written everywhere);
//! - **copy**: frames of 8 and 64 MiB copied (`copy_from_slice`) into loans of a warm
//!   pool and sent, in GB/s;
//! - **dTLB misses** per copied frame, from `perf stat` around a child that only copies,
//!   where the machine's counters can be read (a VM often has none: then "n/a").
//!
//! Cases alternate within each round (4 KiB, then each huge size), so drift hits all
//! alike; the table gives medians over rounds and each size's ratio to 4 KiB. No peer
//! offers pools on huge pages (iceoryx2, iceoryx and Zenoh map 4 KiB shared memory):
//! the 4 KiB rows are what they pay, their own creation costs aside.
//!
//! `cargo run --release -p iox_benches --bin hugepages -- [--rounds 5] [--pool-mib 256]`
//! (as root, or with `ulimit -l` at least the pool's size for the pin; reserve 2 MiB
//! pages first: `echo 300 > /proc/sys/vm/nr_hugepages`).

use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use iox_service::{MemoryType, PageSize, PubSubService, Service};

#[derive(Parser, Debug)]
#[command(about = "Pools on huge pages vs 4 KiB pages: create + pin, first touch, copy, dTLB misses")]
struct Args {
    /// Rounds (each: every case on every page size).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Pool size in MiB (a multiple of 256).
    #[arg(long, default_value_t = 256)]
    pool_mib: usize,
    /// Frames copied per frame size and round.
    #[arg(long, default_value_t = 40)]
    frames: u32,
    /// Internal: only copy frames of this many MiB on `--pages` (for perf stat).
    #[arg(long, hide = true)]
    copy_only: Option<usize>,
    /// Internal: the page size of `--copy-only` (4k, thp, 2m, 1g).
    #[arg(long, hide = true, default_value = "4k")]
    pages: String,
}

const MIB: usize = 1 << 20;
const CHUNK: usize = 64 * MIB;

fn service(
    root: &std::path::Path,
    name: &str,
    pages: PageSize,
    memory: MemoryType,
    pool: usize,
) -> PubSubService<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .size_classes(&[(8 * MIB, pool / (8 * MIB) / 2), (CHUNK, pool / CHUNK / 2)])
        .allow_pool_exhaustion(true)
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(1)
        .max_loans(4)
        .max_held(1)
        .memory_type(memory)
        .page_size(pages)
        .create()
        .unwrap_or_else(|e| panic!("{pages}: {e}"))
}

/// Why the machine cannot give a pool of `bytes` on `pages` now, if it cannot.
fn unavailable(pages: PageSize, bytes: usize) -> Option<String> {
    if !pages.is_hugetlb() {
        return None;
    }
    let need = bytes.div_ceil(pages.bytes()) as u64;
    match pages.reserve() {
        None => Some(format!("this kernel has no {pages} pages")),
        Some(r) if r.available() < need => Some(format!(
            "needs {need} free pages, {} are (reserve: echo {} > {})",
            r.available(),
            r.total + need - r.available(),
            pages.sysfs_dir().unwrap().join("nr_hugepages").display()
        )),
        Some(_) => None,
    }
}

/// (create, pin): a fresh `Locked` service created, then a subscriber built with
/// `pin_memory(true)` (the `mlock` of the whole pool).
fn create_and_pin(root: &std::path::Path, name: &str, pages: PageSize, pool: usize) -> (Duration, Duration) {
    let t = Instant::now();
    let svc = service(root, name, pages, MemoryType::Locked, pool);
    let created = t.elapsed();
    let t = Instant::now();
    let sub = svc.subscriber_builder().pin_memory(true).create().unwrap();
    let pinned = t.elapsed();
    drop((sub, svc));
    (created, pinned)
}

fn create_and_touch(root: &std::path::Path, name: &str, pages: PageSize, pool: usize) -> Duration {
    let t = Instant::now();
    let svc = service(root, name, pages, MemoryType::Cpu, pool);
    // A publisher makes the payload writable in this process.
    let publisher = svc.publisher_builder().create().unwrap();
    let info = svc.pool_info();
    for offset in (0..info.len).step_by(4096) {
        // SAFETY: inside this process's writable mapping of the payload (`info.base`,
        // `info.len`); the service is this benchmark's alone and no chunk is loaned or
        // sent, so nothing else reads or writes these bytes.
        unsafe { std::ptr::write_volatile((info.base as *mut u8).add(offset), 1) };
    }
    let took = t.elapsed();
    drop((publisher, svc));
    took
}

/// GB/s copying `frames` frames of `frame` bytes into loans and sending them.
fn copy(svc: &PubSubService<[u8]>, frame: usize, frames: u32) -> f64 {
    let publisher = svc.publisher_builder().create().unwrap();
    let _sub = svc.subscriber_builder().create().unwrap();
    let source = vec![7u8; frame];
    // Warm: the chunks the copies cycle through faulted in once.
    for _ in 0..frames.min(8) {
        let loan = publisher.loan_slice_uninit(frame).unwrap();
        loan.write_from_slice(&source).send().unwrap();
    }
    let t = Instant::now();
    for _ in 0..frames {
        let loan = publisher.loan_slice_uninit(frame).unwrap();
        loan.write_from_slice(&source).send().unwrap();
    }
    (frame as f64 * f64::from(frames)) / t.elapsed().as_secs_f64() / 1e9
}

/// dTLB load and store misses per frame for `frame_mib` frames on `pages`, from
/// `perf stat` around a child that only copies; `Err` says why there are none.
fn tlb_misses(pages: PageSize, frame_mib: usize, frames: u32, pool_mib: usize) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new("perf")
        .args(["stat", "-x,", "-e", "dTLB-load-misses,dTLB-store-misses", "--"])
        .arg(exe)
        .args(["--copy-only", &frame_mib.to_string(), "--pages", pages.short()])
        .args([
            "--frames",
            &frames.to_string(),
            "--pool-mib",
            &pool_mib.to_string(),
        ])
        .output()
        .map_err(|e| format!("no perf ({e})"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    let mut total = 0u64;
    for line in text.lines().filter(|l| l.contains("dTLB")) {
        let count = line.split(',').next().unwrap_or("");
        match count.parse::<u64>() {
            Ok(n) => total += n,
            Err(_) => return Err(format!("counters not readable here ({})", count.trim())),
        }
    }
    if !out.status.success() {
        return Err(format!("perf failed: {}", text.lines().last().unwrap_or("")));
    }
    // The child copies `frames` frames after as many (at most 8) to warm up.
    Ok(total as f64 / f64::from(frames + frames.min(8)))
}

/// Why this machine's dTLB counters cannot be read, if they cannot (`perf stat` on
/// `true`: a VM often exposes none).
fn no_tlb_counters() -> Option<String> {
    let out = Command::new("perf")
        .args(["stat", "-x,", "-e", "dTLB-load-misses", "--", "true"])
        .output();
    match out {
        Err(e) => Some(format!("no perf ({e})")),
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stderr);
            let count = text
                .lines()
                .find(|l| l.contains("dTLB"))
                .and_then(|l| l.split(',').next());
            match count {
                Some(c) if c.parse::<u64>().is_ok() => None,
                Some(c) => Some(format!("counters not readable here ({})", c.trim())),
                None => Some(format!("perf said: {}", text.trim())),
            }
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    assert!(
        args.pool_mib.is_multiple_of(256) && args.pool_mib >= 256,
        "--pool-mib: a multiple of 256 (half of it in 64 MiB chunks, at least two)"
    );
    let pool = args.pool_mib * MIB;
    let dir = tempfile::Builder::new()
        .prefix("iox-hugepages")
        .tempdir_in("/dev/shm")
        .unwrap();
    let root = dir.path();
    if let Some(frame_mib) = args.copy_only {
        let pages: PageSize = args.pages.parse().unwrap();
        let svc = service(root, "bench/copy", pages, MemoryType::Cpu, pool);
        copy(&svc, frame_mib * MIB, args.frames);
        return;
    }
    let sizes: Vec<PageSize> = [
        PageSize::Base,
        PageSize::Transparent,
        PageSize::Huge2MiB,
        PageSize::Huge1GiB,
    ]
    .into_iter()
    .filter(|&p| match unavailable(p, pool) {
        None => true,
        Some(why) => {
            println!("# {p}: skipped, {why}");
            false
        }
    })
    .collect();
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").unwrap_or_default();
    println!(
        "# {} MiB pool, {} rounds, {} frames per copy; shmem_enabled: {}",
        args.pool_mib,
        args.rounds,
        args.frames,
        thp.trim()
    );
    const CASES: usize = 6;
    let mut results = vec![vec![Vec::<f64>::new(); CASES]; sizes.len()];
    for round in 0..args.rounds {
        for (i, &pages) in sizes.iter().enumerate() {
            let name = |case: &str| format!("bench/{case}-{}-{round}", pages.short());
            let (created, pinned) = create_and_pin(root, &name("pin"), pages, pool);
            results[i][0].push(created.as_secs_f64() * 1e3);
            results[i][1].push(pinned.as_secs_f64() * 1e3);
            results[i][2].push((created + pinned).as_secs_f64() * 1e3);
            results[i][3].push(create_and_touch(root, &name("touch"), pages, pool).as_secs_f64() * 1e3);
            let svc = service(root, &name("copy"), pages, MemoryType::Cpu, pool);
            results[i][4].push(copy(&svc, 8 * MIB, args.frames));
            results[i][5].push(copy(&svc, 64 * MIB, (args.frames / 4).max(1)));
        }
    }
    let no_counters = no_tlb_counters();
    if let Some(why) = &no_counters {
        println!("# dTLB misses: n/a, {why}");
    }
    let base: Vec<f64> = (0..CASES).map(|c| median(&mut results[0][c].clone())).collect();
    println!(
        "\n| pages | create ms | pin (mlock) ms | create + pin ms | create + first touch ms | copy 8 MiB GB/s | copy 64 MiB GB/s | dTLB misses / 8 MiB | dTLB misses / 64 MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, &pages) in sizes.iter().enumerate() {
        let m: Vec<f64> = (0..CASES).map(|c| median(&mut results[i][c])).collect();
        let tlb = |mib: usize, frames: u32| {
            if no_counters.is_some() {
                return "n/a".to_string();
            }
            match tlb_misses(pages, mib, frames, args.pool_mib) {
                Ok(n) => format!("{n:.0}"),
                Err(why) => {
                    println!("# dTLB misses, {pages}, {mib} MiB: n/a: {why}");
                    "n/a".into()
                }
            }
        };
        // Times: how many times faster than 4 KiB; rates: how many times higher.
        let faster = |c: usize| format!("{:.1} ({:.1}x)", m[c], base[c] / m[c]);
        let higher = |c: usize| format!("{:.1} ({:.2}x)", m[c], m[c] / base[c]);
        println!(
            "| {pages} | {} | {} | {} | {} | {} | {} | {} | {} |",
            faster(0),
            faster(1),
            faster(2),
            faster(3),
            higher(4),
            higher(5),
            tlb(8, args.frames),
            tlb(64, (args.frames / 4).max(1)),
        );
    }
    println!("\n(in brackets: times as fast as on 4 KiB pages; medians over the rounds)");
}
