//! libFuzzer entry of the `handover` target (see `iox_fuzz::targets::handover`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| iox_fuzz::targets::handover(data));
