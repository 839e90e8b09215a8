//! libFuzzer entry of the `tensor_record` target (see `iox_fuzz::targets::tensor_record`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| iox_fuzz::targets::tensor_record(data));
