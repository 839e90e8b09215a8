//! libFuzzer entry of the `foxglove_client` target (see `iox_fuzz::targets::foxglove_client`).
#![no_main]

#[global_allocator]
static ALLOC: iox_fuzz::LimitedAlloc = iox_fuzz::LimitedAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| iox_fuzz::targets::foxglove_client(data));
