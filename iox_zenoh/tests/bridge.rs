//! Two bridges in one test, "host A" and "host B" as two IOX_ROOTs, Zenoh over TCP on
//! 127.0.0.1 (real sessions, explicit endpoints, no multicast scouting).

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use iox_service::Service;
use zenoh::Wait;

const PROBE: u64 = u64::MAX;

#[test]
fn typed_and_slice_samples_cross_exactly_once_in_order() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let typed = |root: &std::path::Path| {
        Service::named("camera/pose")
            .unwrap()
            .root(root)
            .publish_subscribe::<[u64; 2]>()
            .subscriber_buffer(64)
            .max_subscribers(2)
            .open_or_create()
            .unwrap()
    };
    // Created before the bridges start.
    let typed_a = typed(a.path());
    let (ba, bb) = pair(a.path(), &["camera/*"], &[], b.path(), &[], &["camera/*"]);
    let typed_b = typed(b.path());
    let sub_t = typed_b.subscriber_builder().create().unwrap();
    let pub_t = typed_a.publisher_builder().create().unwrap();
    warm_up(
        || {
            pub_t
                .loan_uninit()
                .unwrap()
                .write_payload([PROBE, 0])
                .send()
                .unwrap();
        },
        &sub_t,
    );
    for i in 0..50u64 {
        pub_t
            .loan_uninit()
            .unwrap()
            .write_payload([i, i * i])
            .send()
            .unwrap();
    }
    let mut want = 0u64;
    while want < 50 {
        let s = next(&sub_t, Duration::from_secs(20)).expect("typed sample arrives");
        if s[0] == PROBE {
            continue;
        }
        assert_eq!(*s, [want, want * want], "in order, exactly once");
        want += 1;
    }
    assert_eq!(quiet_for(&sub_t, Duration::from_millis(500)), 0, "no duplicates");

    // A service created after the bridges started, slices up to 16 MiB.
    let img_a = bytes_service(a.path(), "camera/image");
    let img_b = bytes_service(b.path(), "camera/image");
    let sub_i = img_b.subscriber_builder().create().unwrap();
    let pub_i = img_a.publisher_builder().create().unwrap();
    let send = |seq: u64, len: usize| {
        let p = payload(seq, len);
        pub_i
            .loan_slice_uninit(len)
            .unwrap()
            .write_from_slice(&p)
            .send()
            .unwrap();
    };
    warm_up(|| send(PROBE, 8), &sub_i);
    let sizes = [1usize, 8, 100, 4096, 65536, 65537, 1 << 20, 16 << 20, 3, 16 << 20];
    for (i, &len) in sizes.iter().enumerate() {
        send(i as u64, len);
        let s = loop {
            let s = next(&sub_i, Duration::from_secs(30)).expect("slice sample arrives");
            if s.len() == 8 && seq_of(&s) == PROBE {
                continue;
            }
            break s;
        };
        assert_eq!(s.len(), len, "sample {i}");
        assert_eq!(
            checksum(&s),
            checksum(&payload(i as u64, len)),
            "sample {i} of {len} bytes"
        );
    }
    assert_eq!(quiet_for(&sub_i, Duration::from_millis(500)), 0, "no duplicates");

    let status = ba.status();
    assert_eq!(status.exported.len(), 2, "{status}");
    assert!(
        status.exported.iter().all(|e| e.2 == 0),
        "nothing dropped: {status}"
    );
    let status = bb.status();
    assert_eq!(status.imported.len(), 2, "{status}");
    ba.stop();
    bb.stop();
}

#[test]
fn publishers_on_both_sides_no_duplicates() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (sa_svc, sb_svc) = (
        bytes_service(a.path(), "chat/room"),
        bytes_service(b.path(), "chat/room"),
    );
    let (ba, bb) = pair(
        a.path(),
        &["chat/*"],
        &["chat/*"],
        b.path(),
        &["chat/*"],
        &["chat/*"],
    );
    let (sa, sb) = (
        sa_svc.subscriber_builder().create().unwrap(),
        sb_svc.subscriber_builder().create().unwrap(),
    );
    let (pa, pb) = (
        sa_svc.publisher_builder().create().unwrap(),
        sb_svc.publisher_builder().create().unwrap(),
    );
    let probe = |p: &iox_service::Publisher<[u8]>| {
        p.loan_slice_uninit(8)
            .unwrap()
            .write_from_slice(&payload(PROBE, 8))
            .send()
            .unwrap();
    };
    warm_up(|| probe(&pa), &sb);
    warm_up(|| probe(&pb), &sa);
    quiet_for(&sa, Duration::from_millis(300));
    quiet_for(&sb, Duration::from_millis(300));

    let collect = |sub: iox_service::Subscriber<[u8]>| {
        std::thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(s) = next(&sub, Duration::from_secs(3)) {
                let seq = seq_of(&s);
                if seq != PROBE {
                    assert_eq!(checksum(&s), checksum(&payload(seq, s.len())));
                    got.push(seq);
                }
            }
            got
        })
    };
    let (ta, tb) = (collect(sa), collect(sb));
    for i in 0..20u64 {
        for (p, base) in [(&pa, 1000), (&pb, 2000)] {
            let data = payload(base + i, 256);
            p.loan_slice_uninit(256)
                .unwrap()
                .write_from_slice(&data)
                .send()
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (host, got) in [("A", ta.join().unwrap()), ("B", tb.join().unwrap())] {
        let unique: HashSet<u64> = got.iter().copied().collect();
        assert_eq!(unique.len(), got.len(), "host {host}: duplicates in {got:?}");
        let want: HashSet<u64> = (1000..1020).chain(2000..2020).collect();
        assert_eq!(unique, want, "host {host}: every sample of both publishers, once");
        for base in [1000, 2000] {
            let of: Vec<u64> = got.iter().copied().filter(|s| s / 1000 == base / 1000).collect();
            assert!(
                of.windows(2).all(|w| w[0] < w[1]),
                "host {host}: in order per publisher: {of:?}"
            );
        }
    }
    for bridge in [&ba, &bb] {
        let status = bridge.status();
        assert!(
            status.exported.iter().any(|e| e.3 > 0),
            "own samples were not echoed: {status}"
        );
    }
    ba.stop();
    bb.stop();
}

#[test]
fn plain_zenoh_subscriber_and_publisher_interop() {
    let a = tempfile::tempdir().unwrap();
    let port = free_port();
    let ba = bridge(a.path(), &["cam/*"], &["cmd/*"], Some(port), None);
    let mut config = zenoh::Config::default();
    config
        .insert_json5("scouting/multicast/enabled", "false")
        .unwrap();
    config
        .insert_json5("connect/endpoints", &format!("[\"tcp/127.0.0.1:{port}\"]"))
        .unwrap();
    let session = zenoh::open(config).wait().unwrap();

    // iox publisher -> plain Zenoh subscriber.
    let zsub = session.declare_subscriber("iox/cam/front").wait().unwrap();
    let cam = bytes_service(a.path(), "cam/front");
    let publisher = cam.publisher_builder().create().unwrap();
    let mut seq = 0;
    let got = loop {
        assert!(seq < 300, "no sample reached the plain Zenoh subscriber");
        let data = payload(seq, 1000);
        publisher
            .loan_slice_uninit(1000)
            .unwrap()
            .write_from_slice(&data)
            .send()
            .unwrap();
        seq += 1;
        if let Some(s) = zsub.recv_timeout(Duration::from_millis(100)).unwrap() {
            break s.payload().to_bytes().into_owned();
        }
    };
    assert_eq!(got, payload(seq_of(&got), 1000), "the payload bytes, as sent");

    // Plain Zenoh publisher -> local `[u8]` service with the documented defaults.
    let data = payload(7, 5000);
    let mut subscriber = None;
    for _ in 0..300 {
        session.put("iox/cmd/go", data.clone()).wait().unwrap();
        if subscriber.is_none()
            && let Ok(svc) = Service::named("cmd/go")
                .unwrap()
                .root(a.path())
                .publish_subscribe::<[u8]>()
                .open()
        {
            let classes: Vec<(usize, usize)> = svc
                .static_config()
                .layout
                .classes()
                .iter()
                .map(|c| (c.chunk_size, c.count as usize))
                .collect();
            assert_eq!(classes, iox_zenoh::local::DEFAULT_CLASSES);
            subscriber = Some((svc.subscriber_builder().create().unwrap(), svc));
        }
        if let Some((sub, _)) = &subscriber
            && let Some(s) = sub.receive_timeout(Duration::from_millis(100)).unwrap()
        {
            assert_eq!(&*s, &data[..]);
            ba.stop();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the plain Zenoh publisher's samples never reached a local subscriber");
}

#[test]
fn incompatible_remote_config_is_skipped_and_others_flow() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let bad_a = Service::named("svc/bad")
        .unwrap()
        .root(a.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    // Host B has its own, incompatible, service of that name.
    let _bad_b = Service::named("svc/bad")
        .unwrap()
        .root(b.path())
        .publish_subscribe::<u32>()
        .create()
        .unwrap();
    let good_a = bytes_service(a.path(), "svc/good");
    let good_b = bytes_service(b.path(), "svc/good");
    let (ba, bb) = pair(a.path(), &["svc/*"], &[], b.path(), &[], &["svc/*"]);
    let sub = good_b.subscriber_builder().create().unwrap();
    let (pbad, pgood) = (
        bad_a.publisher_builder().create().unwrap(),
        good_a.publisher_builder().create().unwrap(),
    );
    let send = |seq: u64| {
        pgood
            .loan_slice_uninit(64)
            .unwrap()
            .write_from_slice(&payload(seq, 64))
            .send()
            .unwrap();
    };
    warm_up(
        || {
            pbad.loan_uninit().unwrap().write_payload(1).send().unwrap();
            send(PROBE);
        },
        &sub,
    );
    assert!(
        iox_testkit::wait_until(Duration::from_secs(10), || {
            pbad.loan_uninit().unwrap().write_payload(1).send().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            bb.status()
                .skipped
                .iter()
                .any(|(n, why)| n == "svc/bad" && why.contains("svc/bad"))
        }),
        "svc/bad is skipped, naming it: {}",
        bb.status()
    );
    let why = bb
        .status()
        .skipped
        .into_iter()
        .find(|(n, _)| n == "svc/bad")
        .unwrap()
        .1;
    assert!(why.contains("incompatible"), "{why}");
    for i in 0..10 {
        send(i);
        let s = loop {
            let s = next(&sub, Duration::from_secs(10)).expect("good samples keep flowing");
            if seq_of(&s) != PROBE {
                break s;
            }
        };
        assert_eq!(seq_of(&s), i);
    }
    ba.stop();
    bb.stop();
}

#[test]
fn malformed_config_and_oversized_payload_are_logged_and_skipped() {
    let a = tempfile::tempdir().unwrap();
    let port = free_port();
    let ba = bridge(a.path(), &[], &["in/*"], Some(port), None);
    let mut config = zenoh::Config::default();
    config
        .insert_json5("scouting/multicast/enabled", "false")
        .unwrap();
    config
        .insert_json5("connect/endpoints", &format!("[\"tcp/127.0.0.1:{port}\"]"))
        .unwrap();
    let session = zenoh::open(config).wait().unwrap();
    // A "bridge" that answers with a config that is not one.
    let _q = session
        .declare_queryable("iox-config/in/bad")
        .callback(|q| {
            q.reply(q.key_expr().clone(), "StaticConfig(version: 3, nonsense")
                .wait()
                .unwrap();
        })
        .wait()
        .unwrap();
    let ok = iox_testkit::wait_until(Duration::from_secs(20), || {
        session.put("iox/in/bad", vec![1u8; 16]).wait().unwrap();
        // Oversized for the default classes (16 MiB at most).
        session
            .put("iox/in/big", vec![2u8; (16 << 20) + 1])
            .wait()
            .unwrap();
        session.put("iox/in/ok", vec![3u8; 16]).wait().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let s = ba.status();
        let bad = s
            .skipped
            .iter()
            .any(|(n, why)| n == "in/bad" && why.contains("malformed") && why.contains("in/bad"));
        let big = s
            .imported
            .iter()
            .any(|(n, _, _, failed)| n == "in/big" && *failed > 0);
        let good = s
            .imported
            .iter()
            .any(|(n, _, published, _)| n == "in/ok" && *published > 0);
        bad && big && good
    });
    assert!(
        ok,
        "malformed config skipped, oversized payload counted, the rest flows: {}",
        ba.status()
    );
    ba.stop();
}

/// A service whose payload is not valid for every bit pattern (here `bool`) is not
/// bridged: bytes from the network could be no value of it. Refused on both ends with
/// an error that says why; a `u8` service of the same shape is bridged.
#[test]
fn payloads_not_valid_for_every_bit_pattern_are_not_bridged() {
    let dir = tempfile::tempdir().unwrap();
    let svc = iox_service::Service::named("bridge/flag")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<bool>()
        .create()
        .unwrap();
    let config = svc.static_config().clone();
    for result in [
        iox_zenoh::local::open_for_export(dir.path(), &config),
        iox_zenoh::local::open_like(dir.path(), &config),
    ] {
        match result {
            Err(e @ iox_zenoh::local::LocalError::NotBridgeable { .. }) => {
                assert!(e.to_string().contains("bool"), "{e}")
            }
            other => panic!("a bool service was bridged: {other:?}"),
        }
    }
    let bytes = iox_service::Service::named("bridge/byte")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u8>()
        .create()
        .unwrap();
    let config = bytes.static_config().clone();
    assert!(iox_zenoh::local::open_for_export(dir.path(), &config).is_ok());
}

/// A frame's header, as a camera service declares it.
#[derive(iox_service::ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[iox(type_name = "BridgedFrame")]
struct Frame {
    stamp_ns: u64,
    width: u32,
    height: u32,
}

#[test]
fn user_headers_cross_with_their_samples_and_are_declared_on_the_far_side() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let frames = |root: &std::path::Path| {
        Service::named("cam/frames")
            .unwrap()
            .root(root)
            .publish_subscribe::<[u8]>()
            .user_header::<Frame>()
            .max_slice_len(1 << 16)
            .subscriber_buffer(16)
    };
    let frames_a = frames(a.path()).create().unwrap();
    let (ba, bb) = pair(a.path(), &["cam/*"], &[], b.path(), &[], &["cam/*"]);
    let publisher = frames_a.publisher_builder().create().unwrap();
    // Host B's service is created by its bridge from A's config: wait for it.
    let frames_b = {
        let mut opened = None;
        for _ in 0..400 {
            let frame = Frame {
                stamp_ns: u64::MAX,
                width: 0,
                height: 0,
            };
            publisher
                .loan_slice_uninit(1)
                .unwrap()
                .write_header(frame)
                .write_from_slice(&[0])
                .send()
                .unwrap();
            if let Ok(s) = frames(b.path()).open() {
                opened = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        opened.expect("the importer created the header service on host B")
    };
    let recorded = frames_b.static_config().user_header.clone().unwrap();
    assert_eq!(recorded, frames_a.static_config().user_header.clone().unwrap());
    let subscriber = frames_b.subscriber_builder().create().unwrap();
    let mut got = Vec::new();
    for sent in 0..400u64 {
        let len = 100 + sent as usize;
        let frame = Frame {
            stamp_ns: sent,
            width: 10,
            height: len as u32 / 10,
        };
        publisher
            .loan_slice_uninit(len)
            .unwrap()
            .write_header(frame)
            .write_from_fn(|i| (i as u64 + sent) as u8)
            .send()
            .unwrap();
        while let Some(s) = subscriber.receive_timeout(Duration::from_millis(25)).unwrap() {
            if s.user_header().stamp_ns == u64::MAX {
                continue;
            }
            let h = *s.user_header();
            assert_eq!(s.len(), 100 + h.stamp_ns as usize, "the payload's length");
            assert_eq!(h.height, s.len() as u32 / 10);
            assert!(
                s.iter()
                    .enumerate()
                    .all(|(i, &v)| v == (i as u64 + h.stamp_ns) as u8)
            );
            got.push(h.stamp_ns);
        }
        if got.len() >= 5 {
            break;
        }
    }
    assert!(got.len() >= 5, "frames with headers arrived on host B: {got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order: {got:?}");
    ba.stop();
    bb.stop();
}
