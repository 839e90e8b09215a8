//! Device pointers through the C API, against the CUDA driver double (the `cuda`
//! feature; CI runs it in its `cuda` pass): a C program pins a `CudaPinned` pool from a
//! publisher and a subscriber, and every sample's device pointer lies at the sample's
//! offset in the pool. The pool is registered with the driver once for the process.
#![cfg(feature = "cuda")]

use std::path::Path;
use std::process::Command;

use iox_testkit::cuda_double::{Driver, names};

mod common;
use common::build;

/// Builds the C program `source` as `name` and runs it against the double with a root
/// under `dir`; the double and the program's standard output (it must exit 0), or
/// `None` after a skip line when the real driver was asked for (these programs check
/// the double's behaviour).
fn run_on_double(test: &str, dir: &Path, source: &str, name: &str) -> Option<(Driver, String)> {
    let driver = Driver::new(dir);
    if !driver.is_double() {
        iox_testkit::skip(test, iox_testkit::REQUIRE_GPU, "runs against the double only");
        return None;
    }
    let exe = build(source, name, &[]);
    let root = dir.join("root");
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
    Some((driver, String::from_utf8_lossy(&out.stdout).into_owned()))
}

#[test]
fn loans_and_samples_of_a_pinned_service_give_device_pointers_in_c() {
    let dir = tempfile::tempdir().unwrap();
    let Some((driver, out)) = run_on_double(
        "loans_and_samples_of_a_pinned_service_give_device_pointers_in_c",
        dir.path(),
        "tests/programs/c_device.c",
        "c_device",
    ) else {
        return;
    };
    assert_eq!(out, "device pointers ok\n");
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
    let Some((_, out)) = run_on_double(
        "device_tensors_travel_through_the_c_api_and_bad_ones_are_refused",
        dir.path(),
        "tests/programs/c_device_tensors.c",
        "c_device_tensors",
    ) else {
        return;
    };
    assert_eq!(out, "device tensors ok\n");
}
