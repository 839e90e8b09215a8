//! The tools on a service whose samples carry a user header: `iox show` prints the
//! header type and its fields, `iox echo` prints each sample's header beside its
//! payload, `iox pub --header` writes one, and `iox record` / `iox replay` carry it
//! into a fresh root. Each tool runs as its own process against Rust ports here.

use std::path::Path;
use std::time::Duration;

use iox_service::{PubSubService, Service, ZeroCopySafe};
use iox_testkit::wait_until;

mod common;
use common::{code, iox, spawn, text};

const LIMIT: Duration = Duration::from_secs(60);

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[iox(type_name = "ScanHeader")]
struct ScanHeader {
    stamp: u64,
    width: u32,
    height: u32,
}

fn scans(root: &Path) -> PubSubService<[u16], ScanHeader> {
    Service::named("cam/scan")
        .unwrap()
        .root(root)
        .publish_subscribe::<[u16]>()
        .user_header::<ScanHeader>()
        .max_slice_len(64)
        .subscriber_buffer(8)
        .open_or_create()
        .unwrap()
}

fn send(svc: &PubSubService<[u16], ScanHeader>, i: u64) {
    let p = svc.publisher_builder().create().unwrap();
    p.loan_slice_uninit(3)
        .unwrap()
        .write_header(ScanHeader {
            stamp: 100 + i,
            width: 3,
            height: 1,
        })
        .write_from_slice(&[i as u16, 7, 9])
        .send()
        .unwrap();
}

#[test]
fn show_echo_and_pub_handle_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let svc = scans(dir.path());

    let out = iox(dir.path(), &["show", "cam/scan"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let shown = text(&out);
    assert!(
        shown.contains("header    ScanHeader")
            && shown.contains("payload at offset 16")
            && shown.contains("width"),
        "{shown}"
    );

    let echo = spawn(
        dir.path(),
        &["echo", "cam/scan", "--count", "1", "--json", "--timeout", "60s"],
    );
    assert!(
        wait_until(LIMIT, || svc.port_counts().1 == 1),
        "iox echo never subscribed"
    );
    send(&svc, 1);
    let out = echo.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["header"]["stamp"], 101, "{v}");
    assert_eq!(v["header"]["width"], 3, "{v}");
    assert_eq!(v["payload"], serde_json::json!([1, 7, 9]), "{v}");

    let s = svc.subscriber_builder().create().unwrap();
    let out = iox(
        dir.path(),
        &[
            "pub",
            "cam/scan",
            "[4, 5]",
            "--header",
            "(stamp: 55, width: 2, height: 1)",
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let got = s.receive_timeout(LIMIT).unwrap().expect("the published sample");
    assert_eq!(
        (*got.user_header(), &got[..]),
        (
            ScanHeader {
                stamp: 55,
                width: 2,
                height: 1
            },
            &[4u16, 5][..]
        )
    );
    // A header service needs --header, and a field the header lacks is named.
    let out = iox(dir.path(), &["pub", "cam/scan", "[4, 5]"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        text(&out).contains("--header") && text(&out).contains("ScanHeader"),
        "{}",
        text(&out)
    );
    let out = iox(
        dir.path(),
        &[
            "pub",
            "cam/scan",
            "[4]",
            "--header",
            "(stamp: 1, width: 2, height: 1, depth: 3)",
        ],
    );
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("depth"), "{}", text(&out));
    // And a service without one refuses it.
    let _plain = Service::named("plain")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u32>()
        .create()
        .unwrap();
    let out = iox(dir.path(), &["pub", "plain", "3", "--header", "(stamp: 1)"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("no user header"), "{}", text(&out));
}

#[test]
fn record_and_replay_carry_the_header() {
    let (recorded, replayed, files) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let file = files.path().join("scan.mcap");
    let svc = scans(recorded.path());
    let recorder = spawn(
        recorded.path(),
        &["record", "-o", file.to_str().unwrap(), "cam/*", "--count", "3"],
    );
    assert!(
        wait_until(LIMIT, || svc.port_counts().1 == 1),
        "iox record never subscribed"
    );
    for i in 0..3 {
        send(&svc, i);
    }
    let out = recorder.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));

    // Each message is the header's 16 bytes, then the payload's.
    let buf = std::fs::read(&file).unwrap();
    let messages: Vec<Vec<u8>> = mcap::MessageStream::new(&buf)
        .unwrap()
        .map(|m| m.unwrap().data.into_owned())
        .collect();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[2].len(), 16 + 6);
    assert_eq!(u64::from_ne_bytes(messages[2][..8].try_into().unwrap()), 102);

    let player = spawn(
        replayed.path(),
        &[
            "replay",
            file.to_str().unwrap(),
            "--wait-for-subscribers",
            "--timeout",
            "60s",
        ],
    );
    let mut svc = None;
    assert!(wait_until(LIMIT, || {
        svc = Service::named("cam/scan")
            .unwrap()
            .root(replayed.path())
            .publish_subscribe::<[u16]>()
            .user_header::<ScanHeader>()
            .open()
            .ok();
        svc.is_some()
    }));
    let svc = svc.unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    for i in 0..3u64 {
        let got = s.receive_timeout(LIMIT).unwrap().expect("a replayed sample");
        assert_eq!(got.user_header().stamp, 100 + i);
        assert_eq!(&got[..], &[i as u16, 7, 9]);
    }
    let out = player.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
}
