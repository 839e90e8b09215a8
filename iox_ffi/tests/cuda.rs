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

/// Device tensors through the C API, against the double: a C program's device
/// publisher and subscriber of a `CudaDevice` service of f32 send tensors with their
/// shapes and strides, and bad tensors and stale ids are refused with their statuses
/// and messages (see the program's comment).
#[test]
fn device_tensors_travel_through_the_c_api_and_bad_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let driver = Driver::new(dir.path());
    if !driver.is_double() {
        iox_testkit::skip(
            "device_tensors_travel_through_the_c_api_and_bad_ones_are_refused",
            iox_testkit::REQUIRE_GPU,
            "runs against the double only",
        );
        return;
    }
    let exe = build("tests/programs/c_device_tensors.c", "c_device_tensors", &[]);
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
    assert_eq!(String::from_utf8_lossy(&out.stdout), "device tensors ok\n");
}
