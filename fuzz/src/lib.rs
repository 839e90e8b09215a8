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
];
