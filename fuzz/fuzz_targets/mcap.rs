//! libFuzzer entry of the `mcap` target (see `iox_fuzz::targets::mcap`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| iox_fuzz::targets::mcap(data));
