//! libFuzzer entry of the `foxglove_sample` target (see `iox_fuzz::targets::foxglove_sample`).
#![no_main]

#[global_allocator]
static ALLOC: iox_fuzz::LimitedAlloc = iox_fuzz::LimitedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| iox_fuzz::targets::foxglove_sample(data));
