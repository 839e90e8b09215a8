//! Device pointers through the C API, against the CUDA driver double (the `cuda`
//! feature; CI runs it in its `cuda` pass): a C program pins a `CudaPinned` pool from a
//! publisher and a subscriber, and every sample's device pointer lies at the sample's
//! offset in the pool. The pool is registered with the driver once for the process.
#![cfg(feature = "cuda")]

use std::process::Command;

use iox_testkit::cuda_double::{Driver, names};

mod common;
use common::build;

#[test]
fn loans_and_samples_of_a_pinned_service_give_device_pointers_in_c() {
    let dir = tempfile::tempdir().unwrap();
    let driver = Driver::new(dir.path());
    if !driver.is_double() {
        iox_testkit::skip(
            "samples_of_a_pinned_service_give_device_pointers_in_c",
            iox_testkit::REQUIRE_GPU,
            "runs against the double only",
        );
        return;
    }
    let exe = build("tests/programs/c_device.c", "c_device", &[]);
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let out = Command::new(&exe)
        .arg(&root)
        .envs(driver.envs())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "device pointers ok\n");
    let calls = driver.calls().expect("the double logs its calls");
    let registered = names(&calls)
        .iter()
        .filter(|n| n.starts_with("cuMemHostRegister"))
        .count();
    assert_eq!(
        registered,
        1,
        "one registration for the process: {:?}",
        names(&calls)
    );
}
