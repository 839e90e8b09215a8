//! Recording throughput, side by side in one run: `iox record` (the tool, its own
//! process, writing MCAP) against an iceoryx2 recorder built as iceoryx2's CLI builds
//! `iox2 service record` (a subscriber and `iceoryx2-userland-record-and-replay`'s
//! `Recorder`, binary "iox2 dump" format, its own process), and the floor: one process
//! writing the same payloads to a file on the same filesystem, 64 KiB at a time.
//!
//! ```sh
//! cargo build --release -p iox_cli -p iox_benches
//! cargo run --release -p iox_benches --bin record            # ~1 min
//! cargo run --release -p iox_benches --bin record -- --rounds 1 --sizes 8
//! cargo run --release -p iox_benches --bin record -- --rounds 3 --sizes 8 --typed  # iox: a u64 service, ROS 2 profile
//! ```
//!
//! Each case: a publisher in this process sends `N` samples of `S` bytes as fast as
//! the recorder takes them (neither drops: iox's service rejects on a full queue and
//! the publisher retries, iceoryx2's publisher retries until delivered), timed from
//! the first send until the recorder process has written all `N` and exited. Files go
//! to `--dir` (default /dev/shm, so the filesystem is memory and the recorders, not a
//! disk, are measured). The table gives samples/s and MB/s per recorder and the
//! ratios, medians over `--rounds` rounds that rotate the order of the three.
//!
//! Differences that stay: iox's recorder sleeps in a WaitSet between samples and
//! copies each sample to a writing thread; the iceoryx2 recorder busy-polls its
//! subscriber and writes in the receiving thread, unbuffered, as the userland crate
//! does. The iceoryx2 CLI itself is not built here (its published version is not the
//! library version pinned for the other benchmarks, and two versions do not share
//! services).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Recording throughput: iox record against an iceoryx2 recorder and the floor")]
struct Args {
    /// Payload sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "8,4096,1048576")]
    sizes: Vec<usize>,
    /// Rounds, rotating the order of the recorders and the floor.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Bytes recorded per case (N = this / size, at least 100, at most 200,000).
    #[arg(long, default_value_t = 256 << 20)]
    bytes: usize,
    /// iox records a typed `u64` service instead of 8-byte slices (sizes other than 8
    /// are refused): its channel is in MCAP's ROS 2 profile, each sample converted to
    /// CDR, where a byte service's is copied as it is. Compare a run with and one
    /// without to see what the conversion costs.
    #[arg(long)]
    typed: bool,
    /// Directory of the recordings.
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Internal: run as the iceoryx2 recorder of service `--service`, `--count` samples.
    #[arg(long, hide = true)]
    iox2_recorder: Option<PathBuf>,
    #[arg(long, hide = true)]
    service: Option<String>,
    #[arg(long, hide = true)]
    count: Option<u64>,
}

const LIMIT: Duration = Duration::from_secs(120);

fn count_for(args: &Args, size: usize) -> u64 {
    (args.bytes / size).clamp(100, 200_000) as u64
}

fn payload(size: usize, i: u64) -> Vec<u8> {
    (0..size).map(|k| (i as usize + k) as u8).collect()
}

/// The `iox` tool next to this benchmark (built by the same `cargo build --release`).
fn iox_tool() -> PathBuf {
    let me = std::env::current_exe().expect("own path");
    let tool = me.with_file_name("iox");
    assert!(
        tool.exists(),
        "{} missing: cargo build --release -p iox_cli -p iox_benches",
        tool.display()
    );
    tool
}

fn wait_exit(child: &mut Child, what: &str) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{what} failed: {status}");
            return;
        }
        assert!(start.elapsed() < LIMIT, "{what} did not finish");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// iox: seconds to record `n` samples of `size` bytes with `iox record`.
fn iox_case(dir: &Path, size: usize, n: u64, round: u32, typed: bool) -> f64 {
    let root = tempfile::tempdir().expect("root");
    let named = || {
        iox_service::Service::named(&format!("bench/rec/{round}"))
            .expect("name")
            .root(root.path())
    };
    // The typed service (`--typed`): created so the recorder finds it, and sent to
    // below instead of the byte service.
    let typed_svc = typed.then(|| {
        named()
            .publish_subscribe::<u64>()
            .subscriber_buffer(256)
            .overflow(iox_service::Overflow::Reject)
            .create()
            .expect("service")
    });
    let svc = typed_svc.is_none().then(|| {
        named()
            .publish_subscribe::<[u8]>()
            .max_slice_len(size)
            .subscriber_buffer(256)
            .overflow(iox_service::Overflow::Reject)
            .create()
            .expect("service")
    });
    let subscribers = || match (&svc, &typed_svc) {
        (Some(s), _) => s.port_counts().1,
        (None, Some(t)) => t.port_counts().1,
        (None, None) => unreachable!("one of them is made"),
    };
    let file = dir.join(format!("iox-bench-{round}.mcap"));
    let recorder = Command::new(iox_tool())
        .arg("--root")
        .arg(root.path())
        .args([
            "record",
            "-o",
            file.to_str().expect("utf-8 path"),
            "bench/rec/*",
            "--count",
            &n.to_string(),
            // Room for every sample: a dropped one would count toward --count unwritten.
            "--queue",
            "1000000",
            "--queue-bytes",
            "64G",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("iox record");
    let start = Instant::now();
    while subscribers() == 0 {
        assert!(start.elapsed() < LIMIT, "iox record never subscribed");
        std::thread::sleep(Duration::from_micros(200));
    }
    if let Some(t) = &typed_svc {
        let publisher = t.publisher_builder().create().expect("publisher");
        let start = Instant::now();
        for i in 0..n {
            loop {
                match publisher.loan_uninit().expect("loan").write_payload(i).send() {
                    Ok(_) => break,
                    Err(iox_service::SendError::QueueFull { .. }) => std::thread::yield_now(),
                    Err(e) => panic!("send: {e}"),
                }
            }
        }
        return finish(recorder, start, n, &file);
    }
    let publisher = svc
        .as_ref()
        .expect("the byte service")
        .publisher_builder()
        .create()
        .expect("publisher");
    let data = payload(size, u64::from(round));
    let start = Instant::now();
    for _ in 0..n {
        loop {
            let loan = publisher
                .loan_slice_uninit(size)
                .expect("loan")
                .write_from_slice(&data);
            match loan.send() {
                Ok(_) => break,
                Err(iox_service::SendError::QueueFull { .. }) => std::thread::yield_now(),
                Err(e) => panic!("send: {e}"),
            }
        }
    }
    finish(recorder, start, n, &file)
}

/// Waits for `iox record` to have written all `n` samples; the seconds since `start`.
fn finish(mut recorder: Child, start: Instant, n: u64, file: &Path) -> f64 {
    wait_exit(&mut recorder, "iox record");
    let secs = start.elapsed().as_secs_f64();
    let mut said = String::new();
    let _ = recorder.stderr.take().expect("piped").read_to_string(&mut said);
    assert!(
        said.contains(&format!("recorded {n} sample(s)")) && !said.contains("dropped"),
        "iox record did not write every sample: {said}"
    );
    let _ = std::fs::remove_file(file);
    secs
}

/// iceoryx2: seconds to record `n` samples of `size` bytes with the userland recorder.
fn iox2_case(dir: &Path, size: usize, n: u64, round: u32) -> f64 {
    use iceoryx2::port::backpressure_strategy::BackpressureStrategy;
    use iceoryx2::prelude::*;
    set_log_level(LogLevel::Error);
    let name = format!("iox-bench/rec/{}/{round}", std::process::id());
    let node = iox_benches::iceoryx2_files::node_builder()
        .create::<ipc::Service>()
        .expect("node");
    let svc = node
        .service_builder(&name.as_str().try_into().expect("name"))
        .publish_subscribe::<[u8]>()
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_max_buffer_size(256)
        .enable_safe_overflow(false)
        .history_size(0)
        .create()
        .expect("iceoryx2 service");
    let publisher = svc
        .publisher_builder()
        .initial_max_slice_len(size)
        .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
        .create()
        .expect("publisher");
    let file = dir.join(format!("iox2-bench-{round}.iox2"));
    let _ = std::fs::remove_file(&file);
    let mut recorder = Command::new(std::env::current_exe().expect("own path"))
        .arg("--iox2-recorder")
        .arg(&file)
        .args(["--service", &name, "--count", &n.to_string()])
        .spawn()
        .expect("iceoryx2 recorder");
    let start = Instant::now();
    while svc.dynamic_config().number_of_subscribers() == 0 {
        assert!(start.elapsed() < LIMIT, "the iceoryx2 recorder never subscribed");
        std::thread::sleep(Duration::from_micros(200));
    }
    let data = payload(size, u64::from(round));
    let start = Instant::now();
    for _ in 0..n {
        let loan = publisher.loan_slice_uninit(size).expect("loan");
        loan.write_from_slice(&data).send().expect("send");
    }
    wait_exit(&mut recorder, "the iceoryx2 recorder");
    let secs = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(file);
    secs
}

/// The iceoryx2 recorder process: what `iox2 service record` does with the userland
/// crate, for one service and `count` samples.
fn iox2_recorder(file: &Path, service: &str, count: u64) {
    use iceoryx2::prelude::*;
    use iceoryx2_userland_record_and_replay::prelude::*;
    set_log_level(LogLevel::Error);
    let node = iox_benches::iceoryx2_files::node_builder()
        .create::<ipc::Service>()
        .expect("node");
    let svc = node
        .service_builder(&service.try_into().expect("name"))
        .publish_subscribe::<[u8]>()
        .open()
        .expect("iceoryx2 service");
    let details = *svc.static_config().message_type_details();
    let types = ServiceTypes {
        payload: details.payload,
        user_header: details.user_header,
        system_header: details.header,
    };
    let path = FilePath::new(file.to_str().expect("utf-8 path").as_bytes()).expect("file path");
    let mut recorder = RecorderBuilder::new(&types)
        .data_representation(DataRepresentation::Iox2Dump)
        .messaging_pattern(MessagingPattern::PublishSubscribe)
        .create(&path, &service.try_into().expect("name"))
        .expect("recorder");
    let subscriber = svc
        .subscriber_builder()
        .buffer_size(256)
        .create()
        .expect("subscriber");
    let start = Instant::now();
    let mut seen = 0;
    while seen < count {
        let Some(sample) = subscriber.receive().expect("receive") else {
            std::thread::yield_now();
            continue;
        };
        let header = sample.header();
        // SAFETY: the header is a plain `repr(C)` value of `size_of_val` bytes, read
        // as bytes for the record (what the recorder stores as the system header).
        let header_bytes = unsafe {
            std::slice::from_raw_parts((header as *const _) as *const u8, std::mem::size_of_val(header))
        };
        recorder
            .write(RawRecord {
                timestamp: start.elapsed(),
                system_header: header_bytes,
                user_header: &[],
                payload: sample.payload(),
            })
            .expect("record");
        seen += 1;
    }
}

/// The floor: seconds for one process to write `n` payloads of `size` bytes to a file
/// in `dir`, 64 KiB at a time.
fn floor_case(dir: &Path, size: usize, n: u64, round: u32) -> f64 {
    let path = dir.join(format!("floor-bench-{round}.bin"));
    let data = payload(size, u64::from(round));
    let start = Instant::now();
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::fs::File::create(&path).expect("file"));
    for _ in 0..n {
        out.write_all(&data).expect("write");
    }
    out.into_inner().expect("flush").sync_data().ok();
    let secs = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    secs
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    if let Some(file) = &args.iox2_recorder {
        iox2_recorder(
            file,
            args.service.as_deref().expect("--service"),
            args.count.expect("--count"),
        );
        return;
    }
    if args.typed && args.sizes.iter().any(|&s| s != 8) {
        eprintln!("--typed records a u64 service: give --sizes 8");
        std::process::exit(2);
    }
    println!(
        "recording throughput, median of {} rounds (files in {})",
        args.rounds,
        args.dir.display()
    );
    println!(
        "{:>9} {:>8} | {:>14} {:>14} {:>14} | {:>9} {:>10}",
        "size", "N", "iox samples/s", "iceoryx2", "floor", "iox/iox2", "iox/floor"
    );
    for &size in &args.sizes {
        let n = count_for(&args, size);
        let (mut a, mut b, mut f) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..args.rounds {
            // Rotate the order each round: whichever runs first after a file was freed
            // may pay for the memory (this VM's fresh pages vary a lot in cost).
            for k in 0..3 {
                match (round + k) % 3 {
                    0 => a.push(iox_case(&args.dir, size, n, round, args.typed)),
                    1 => b.push(iox2_case(&args.dir, size, n, round)),
                    _ => f.push(floor_case(&args.dir, size, n, round)),
                }
            }
        }
        let rate = |secs: f64| n as f64 / secs;
        let (ra, rb, rf) = (rate(median(&mut a)), rate(median(&mut b)), rate(median(&mut f)));
        let mb = |r: f64| r * size as f64 / 1e6;
        println!(
            "{:>9} {:>8} | {:>14} {:>14} {:>14} | {:>9.2} {:>10.2}",
            size,
            n,
            format!("{ra:.0} ({:.0} MB/s)", mb(ra)),
            format!("{rb:.0} ({:.0} MB/s)", mb(rb)),
            format!("{rf:.0} ({:.0} MB/s)", mb(rf)),
            ra / rb,
            ra / rf
        );
    }
}
