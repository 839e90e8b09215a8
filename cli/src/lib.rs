//! The parts of the `iox` tool that are tested from outside it: the decoders of files
//! the tool reads, which `iox_fuzz` fuzzes (the tool itself is `src/main.rs`).

pub mod mcap_read;
