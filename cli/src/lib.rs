//! The parts of the `iox` tool that are tested from outside it: the decoders of bytes
//! from files and from other processes' samples, which `iox_fuzz` fuzzes (the tool
//! itself is `src/main.rs`, which uses these modules as its own).

pub mod foxglove_form;
pub mod mcap_read;
pub mod readable;
pub mod ros_form;
pub mod value;
