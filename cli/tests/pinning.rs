//! `iox show` tells, per process of a service, whether it pinned the pool and how
//! many bytes (issue 18), in text and JSON.

use std::time::Duration;

use iox_service::{MemoryType, PubSubService, Service};
use iox_testkit::{Reaped, env, role, spawn_self, wait_until};
use serde_json::Value;

mod common;
use common::{code, iox, text};

fn open(root: &std::path::Path) -> PubSubService<u64> {
    Service::named("cli/pinned")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .memory_type(MemoryType::Locked)
        .open_or_create()
        .unwrap()
}

#[test]
fn show_lists_each_process_with_its_pinned_bytes() {
    const TEST: &str = "show_lists_each_process_with_its_pinned_bytes";
    if role().is_some() {
        // An unpinned subscriber, kept until the parent kills this process.
        let svc = open(std::path::Path::new(&env::<String>("IOX_ROOT")));
        let _s = svc.subscriber_builder().create().unwrap();
        loop {
            std::thread::park();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = open(root);
    let publisher = match svc.publisher_builder().pin_memory(true).create() {
        Ok(p) => p,
        Err(e) => {
            iox_testkit::skip(
                TEST,
                iox_testkit::REQUIRE_MLOCK,
                format!("cannot mlock here: {e}"),
            );
            return;
        }
    };
    assert!(publisher.is_pinned());
    let child = Reaped::new(spawn_self(
        TEST,
        "child",
        &[("IOX_ROOT", root.display().to_string())],
    ));
    assert!(wait_until(Duration::from_secs(30), || svc.port_counts().1 == 1));
    let pool_bytes = svc.pool_info().len;

    let out = iox(root, &["show", "cli/pinned", "--json"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let processes = v["processes"].as_array().unwrap();
    let of = |pid: u32| processes.iter().find(|p| p["pid"] == pid).unwrap();
    let me = of(std::process::id());
    assert_eq!(
        (me["pinned"].as_bool(), me["pinned_bytes"].as_u64()),
        (Some(true), Some(pool_bytes as u64)),
        "{v}"
    );
    let other = of(child.id());
    assert_eq!(
        (other["pinned"].as_bool(), other["pinned_bytes"].as_u64()),
        (Some(false), Some(0)),
        "{v}"
    );

    let t = text(&iox(root, &["show", "cli/pinned"]));
    assert!(t.contains("PINNED BYTES"), "{t}");
    let mine = t
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&std::process::id().to_string()))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(mine.contains("yes") && mine.contains("KiB"), "{mine}");
    child.kill();
}
