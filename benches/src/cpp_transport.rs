//! The ping-pong over iox from C++ (`iox_ffi/bench/pingpong.cpp`, on the C++ layer
//! `iox_ffi/include/iox.hpp` over the C ABI): both sides are C++ processes; the leader
//! prints its one-way latencies, which land in the same histogram type as the Rust
//! transports' so the report compares them in one run.
//!
//! The program is compiled here with the system's `g++ -O2` against the
//! `libiox_ffi.so` cargo built beside this benchmark (`iox_ffi` is a dependency of this
//! crate for that reason). Without g++ the transport is left out, and `build` says why.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::endpoint::PingPong;

/// The report's name of this transport.
pub const NAME: &str = "iox from C++";

/// Compiles the C++ ping-pong into `target/<profile>/cpp_pingpong`; its path, or why
/// it could not be built.
pub fn build() -> Result<PathBuf, String> {
    compile("bench/pingpong.cpp", "cpp_pingpong")
}

/// Compiles the C++ counterpart of the `msgloop` binary (`iox_ffi/bench/msgloop.cpp`,
/// for instruction counts) into `target/<profile>/cpp_msgloop`.
pub fn build_msgloop() -> Result<PathBuf, String> {
    compile("bench/msgloop.cpp", "cpp_msgloop")
}

/// Compiles `iox_ffi/<source>` with `g++ -O2` against the `libiox_ffi.so` beside this
/// program into `target/<profile>/<name>`.
fn compile(source: &str, name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = exe.parent().ok_or("no directory of the benchmark program")?;
    let lib = dir.join("deps");
    if !lib.join("libiox_ffi.so").exists() {
        return Err(format!("{} has no libiox_ffi.so", lib.display()));
    }
    let ffi = Path::new(env!("CARGO_MANIFEST_DIR")).join("../iox_ffi");
    let out = dir.join(name);
    let status = Command::new("g++")
        .args(["-std=c++17", "-O2", "-DNDEBUG"])
        .arg("-I")
        .arg(ffi.join("include"))
        .arg(ffi.join(source))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        // DT_RPATH: before the LD_LIBRARY_PATH `cargo run` sets, which may name another
        // build's libiox_ffi.so.
        .arg(format!("-Wl,--disable-new-dtags,-rpath,{}", lib.display()))
        .arg("-liox_ffi")
        .status()
        .map_err(|e| format!("g++ not found ({e}): install g++ to measure iox from C++"))?;
    if !status.success() {
        return Err(format!("g++ failed on {source} ({status})"));
    }
    Ok(out)
}

/// One ping-pong between two C++ processes: `len`-byte payloads, `warmup` untimed and up
/// to `iters` timed round trips (stopping after `budget`).
pub fn round(exe: &Path, id: &str, len: usize, warmup: u64, iters: u64, budget: Duration) -> PingPong {
    let len_arg = len.to_string();
    let mut follower = Command::new(exe)
        .args(["follower", id, &len_arg])
        .spawn()
        .expect("start the C++ follower");
    let leader = Command::new(exe)
        .args([
            "leader",
            id,
            &len_arg,
            &warmup.to_string(),
            &iters.to_string(),
            &budget.as_millis().to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the C++ leader");
    let mut one_way = Histogram::<u64>::new_with_bounds(1, 120_000_000_000, 3).expect("valid bounds");
    let mut first = 0;
    let mut leader = leader;
    for line in BufReader::new(leader.stdout.take().expect("piped")).lines() {
        let line = line.expect("the leader's output");
        match line.strip_prefix("first ") {
            Some(n) => first = n.parse().expect("a number"),
            None => one_way
                .record(line.parse().expect("one-way ns"))
                .expect("within bounds"),
        }
    }
    assert!(leader.wait().expect("wait").success(), "the C++ leader failed");
    assert!(
        follower.wait().expect("wait").success(),
        "the C++ follower failed"
    );
    PingPong { one_way, first }
}
