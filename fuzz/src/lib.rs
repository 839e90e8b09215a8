//! Fuzz targets for every decoder of bytes that a file or another process controls,
//! and the corpora committed with them (`fuzz/corpus/<target>/`).
//!
//! Each target takes any bytes and must return: no panic, no stack overflow, no hang,
//! no allocation its input asks for (libFuzzer runs with a memory limit). Where a
//! decoder can write what it read, the target also checks that what it writes reads
//! back the same. Two ways they run:
//! - `scripts/fuzz.sh SECONDS` builds them with libFuzzer (coverage-guided, the stable
//!   toolchain's coverage instrumentation) and runs each for SECONDS from its corpus,
//!   reporting executions per target; CI runs it on every run;
//! - `tests/corpus.rs` runs every committed input through its target in a plain
//!   `cargo test`, so an input that once crashed a decoder (the reported ones are in
//!   the corpus as `crash-*`) stays fixed without a fuzzer.
//!
//! The decoders' own limits are documented where they live: MCAP in
//! `iox_cli::mcap_read`, ROS definitions in `iox_ros2::library` (`MAX_DEPTH`), CDR in
//! `iox_ros2::cdr`, static configs in `iox_core::static_config` (its size limit and
//! RON's nesting limit), the hand-over messages in `iox_core::handover::wire`, tensor
//! records in `iox_core::tensor`.

pub mod targets;

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest single allocation a target may make (its inputs are small; a decoder
/// that allocates what its input says is found by this).
pub const MAX_ALLOCATION: usize = 64 << 20;

/// The allocator of the fuzz binaries and the corpus test: the system's, but a single
/// allocation above [`MAX_ALLOCATION`] aborts the process (libFuzzer saves the input as
/// a crash). A memory limit on the process would miss an allocation that is reserved
/// and never touched (a `Vec::with_capacity` of a length read from the input).
pub struct LimitedAlloc;

// SAFETY: every call is passed to `System` unchanged, except that a request above the
// limit aborts the process before anything is allocated.
unsafe impl GlobalAlloc for LimitedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        refuse_above_limit(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        refuse_above_limit(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        refuse_above_limit(new_size);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Aborts (saying why on standard error, without allocating) when `size` is above the
/// limit.
fn refuse_above_limit(size: usize) {
    if size > MAX_ALLOCATION {
        const SAID: &[u8] =
            b"iox_fuzz: an allocation above MAX_ALLOCATION: a decoder allocates what its input asks for\n";
        // SAFETY: writes a static buffer to standard error; no allocation.
        unsafe { libc::write(2, SAID.as_ptr().cast(), SAID.len()) };
        std::process::abort();
    }
}

/// A target: takes any bytes, returns or panics.
pub type Target = fn(&[u8]);

/// Every target by name (the corpus directory's and the fuzz binary's suffix).
pub const TARGETS: &[(&str, Target)] = &[
    ("mcap", targets::mcap),
    ("ros2msg", targets::ros2msg),
    ("cdr", targets::cdr),
    ("static_config", targets::static_config),
    ("attributes", targets::attributes),
    ("handover", targets::handover),
    ("tensor_record", targets::tensor_record),
    ("smaps", targets::smaps),
    ("foxglove_sample", targets::foxglove_sample),
    ("foxglove_client", targets::foxglove_client),
];
