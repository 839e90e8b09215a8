//! libFuzzer entry of the `static_config` target (see `iox_fuzz::targets::static_config`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| iox_fuzz::targets::static_config(data));
