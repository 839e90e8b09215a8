//! Per-sample user headers (`pubsub/user_header.rs`) across processes: a header plus
//! a byte slice (a camera frame) and a header plus a typed payload go from one process
//! to another in place; an opener with another header, none, or a header of the same
//! name with other fields is refused naming it; a publisher SIGKILLed with its header
//! half written delivers nothing and loses no chunk; damaged header records in the
//! static config are refused with `InvalidConfig`; bindings' byte ports find the header
//! and the payload where typed ports put them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::{
    ConfigError, CreateError, HeaderType, InvalidConfig, OpenError, Payload, Service, ServiceName,
    ZeroCopySafe,
};
use iox_testkit::{Reaped, env, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(10);

/// A camera frame's header, as a ROS `sensor_msgs/Image` carries it beside the pixels.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[iox(type_name = "FrameHeader")]
struct FrameHeader {
    stamp_ns: u64,
    width: u32,
    height: u32,
    step: u32,
    encoding: [u8; 12],
}

/// Same name, other fields: what a program built from other source would declare.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[iox(type_name = "FrameHeader")]
struct OtherFrameHeader {
    stamp_ns: u64,
    width: u32,
    height: u32,
    stride: u32,
    encoding: [u8; 12],
}

/// A 64-byte header with an alignment above the payload's.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
#[iox(type_name = "Wide")]
struct Wide {
    words: [u64; 8],
}

fn root_env(root: &Path) -> (&'static str, String) {
    ("IOX_ROOT", root.display().to_string())
}

fn root() -> PathBuf {
    PathBuf::from(env::<String>("IOX_ROOT"))
}

fn frames(root: &Path) -> iox_service::PubSubBuilder<[u8], FrameHeader> {
    Service::named("camera/front")
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .user_header::<FrameHeader>()
        .max_slice_len(64 * 48)
        .subscriber_buffer(8)
        .overflow(iox_service::Overflow::Reject)
        .timeout(LIMIT)
}

fn header(i: u64) -> FrameHeader {
    FrameHeader {
        stamp_ns: 1_000 + i,
        width: 64,
        height: 48 - i as u32,
        step: 64,
        encoding: *b"mono8\0\0\0\0\0\0\0",
    }
}

#[test]
fn frames_with_a_header_cross_processes_in_place() {
    const TEST: &str = "frames_with_a_header_cross_processes_in_place";
    if let Some(r) = role() {
        assert_eq!(r, "camera");
        let svc = frames(&root()).open().unwrap();
        let publisher = svc.publisher_builder().create().unwrap();
        assert_eq!(publisher.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        for i in 0..5u64 {
            let h = header(i);
            let len = (h.width * h.height) as usize;
            let mut loan = publisher.loan_slice_uninit(len).unwrap();
            // In place: the header through its uninitialised view, then the pixels.
            loan.user_header_mut().write(h);
            for (j, px) in loan.payload_mut().iter_mut().enumerate() {
                px.write((j as u64 + i) as u8);
            }
            // SAFETY: the header and every pixel were written above.
            let sample = unsafe { loan.assume_init() };
            assert_eq!(sample.user_header(), &h);
            sample.send().unwrap();
        }
        // A typed payload with the same header, through the safe writers.
        let typed = Service::named("camera/exposure")
            .unwrap()
            .root(root())
            .publish_subscribe::<[f64; 3]>()
            .user_header::<Wide>()
            .open()
            .unwrap();
        let p = typed.publisher_builder().create().unwrap();
        assert_eq!(p.wait_for_subscribers(1, LIMIT).unwrap(), 1);
        p.loan_uninit()
            .unwrap()
            .write_header(Wide { words: [7; 8] })
            .write_payload([0.5, 1.5, 2.5])
            .send()
            .unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = frames(dir.path()).create().unwrap();
    let config = svc.static_config();
    let recorded = config.user_header.as_ref().expect("the header is recorded");
    assert_eq!(recorded.type_name(), "FrameHeader");
    assert_eq!(recorded.size(), size_of::<FrameHeader>());
    assert!(recorded.schema.is_some(), "the derive's layout is recorded");
    let subscriber = svc.subscriber_builder().create().unwrap();
    let typed = Service::named("camera/exposure")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[f64; 3]>()
        .user_header::<Wide>()
        .create()
        .unwrap();
    let typed_sub = typed.subscriber_builder().create().unwrap();
    let child = spawn_self(TEST, "camera", &[root_env(dir.path())]);
    for i in 0..5u64 {
        let frame = subscriber
            .receive_timeout(LIMIT)
            .unwrap()
            .expect("a frame in time");
        assert_eq!(frame.user_header(), &header(i));
        let len = (64 * (48 - i)) as usize;
        assert_eq!(frame.len(), len);
        assert!(
            frame
                .iter()
                .enumerate()
                .all(|(j, &px)| px == (j as u64 + i) as u8)
        );
        // The payload starts after the header, aligned, inside the same chunk.
        let header_at = frame.user_header() as *const FrameHeader as usize;
        assert_eq!(frame.as_ptr() as usize - header_at, 32);
    }
    let sample = typed_sub
        .receive_timeout(LIMIT)
        .unwrap()
        .expect("a typed sample in time");
    assert_eq!(sample.user_header().words, [7; 8]);
    assert_eq!(*sample, [0.5, 1.5, 2.5]);
    assert_eq!(sample.as_ptr() as usize % 64, 0, "the header's alignment holds");
    wait_ok(child, LIMIT);
}

#[test]
fn openers_with_another_header_or_none_are_refused_naming_it() {
    const TEST: &str = "openers_with_another_header_or_none_are_refused_naming_it";
    if let Some(r) = role() {
        assert_eq!(r, "creator");
        // Holds the service until the parent's publisher appears.
        let svc = frames(&root()).create().unwrap();
        let s = svc.subscriber_builder().create().unwrap();
        assert_eq!(s.wait_for_publishers(1, LIMIT).unwrap(), 1);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_self(TEST, "creator", &[root_env(dir.path())]);
    let named = || Service::named("camera/front").unwrap().root(dir.path());
    assert!(wait_until(LIMIT, || frames(dir.path()).open().is_ok()));

    let none = named().publish_subscribe::<[u8]>().open().unwrap_err();
    let text = none.to_string();
    assert!(
        matches!(&none, OpenError::IncompatibleUserHeader(m) if m.requested.is_none() && m.found.is_some()),
        "{none:?}"
    );
    assert!(
        text.contains("FrameHeader") && text.contains("no user header"),
        "{text}"
    );

    let other = named()
        .publish_subscribe::<[u8]>()
        .user_header::<u64>()
        .open()
        .unwrap_err();
    assert!(
        matches!(other, OpenError::IncompatibleUserHeader { .. }),
        "{other}"
    );
    assert!(other.to_string().contains("u64"), "{other}");

    let fields = named()
        .publish_subscribe::<[u8]>()
        .user_header::<OtherFrameHeader>()
        .open()
        .unwrap_err();
    let text = fields.to_string();
    assert!(matches!(fields, OpenError::IncompatibleSchema(_)), "{fields}");
    assert!(text.contains("user header") && text.contains("stride"), "{text}");

    // And the reverse: a header where the service has none.
    let plain = Service::named("plain")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let err = Service::named("plain")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u64>()
        .user_header::<FrameHeader>()
        .open()
        .unwrap_err();
    assert!(
        matches!(&err, OpenError::IncompatibleUserHeader(m) if m.requested.is_some() && m.found.is_none()),
        "{err}"
    );
    // A service without a header records none: its config is what it was before
    // headers existed.
    assert!(!plain.static_config().to_ron().contains("user_header"));

    let svc = frames(dir.path()).open().unwrap();
    let _release = svc.publisher_builder().create().unwrap();
    wait_ok(child, LIMIT);
}

#[test]
fn a_publisher_killed_with_its_header_half_written_delivers_nothing() {
    const TEST: &str = "a_publisher_killed_with_its_header_half_written_delivers_nothing";
    if let Some(r) = role() {
        assert_eq!(r, "writer");
        let svc = frames(&root()).open().unwrap();
        let publisher = svc.publisher_builder().create().unwrap();
        let mut loan = publisher.loan_slice_uninit(16).unwrap();
        // Half the header: the stamp only; then the process is killed.
        // SAFETY: the header's first 8 bytes, inside the loaned chunk, aligned.
        unsafe { loan.user_header_mut().as_mut_ptr().cast::<u64>().write(42) };
        loop {
            std::thread::park();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = frames(dir.path()).create().unwrap();
    let subscriber = svc.subscriber_builder().create().unwrap();
    let total = svc.pool_info().free_chunks();
    let child = Reaped::new(spawn_self(TEST, "writer", &[root_env(dir.path())]));
    // The loan is out once the pool has one chunk less.
    assert!(wait_until(LIMIT, || svc.pool_info().free_chunks() == total - 1));
    child.kill();
    // Recovery runs at the next port creation; the loan comes back, nothing arrives.
    let publisher = svc.publisher_builder().create().unwrap();
    assert!(
        subscriber.receive().unwrap().is_none(),
        "a half-written header arrived"
    );
    assert_eq!(
        svc.pool_info().free_chunks(),
        total,
        "the dead loan's chunk was lost"
    );
    publisher
        .loan_slice_uninit(2)
        .unwrap()
        .write_header(header(1))
        .write_from_slice(&[1, 2])
        .send()
        .unwrap();
    let s = subscriber.receive().unwrap().unwrap();
    assert_eq!((s.user_header(), &s[..]), (&header(1), &[1u8, 2][..]));
}

fn config_path(root: &Path, name: &str) -> PathBuf {
    root.join(format!("{}.service", ServiceName::new(name).unwrap().stem()))
}

#[test]
fn damaged_header_records_are_refused_naming_what() {
    type Edit = fn(&str) -> String;
    let cases: [(&str, Edit, &str); 5] = [
        (
            "a schema of another size",
            |t| t.replacen("offset: 8", "offset: 80", 1),
            "user header schema",
        ),
        (
            "an alignment above the pool's",
            |t| t.replacen("alignment: 8", "alignment: 4096", 1),
            "user header: alignment 4096",
        ),
        (
            "a slice as a header",
            |t| {
                t.replacen(
                    "identity: Typed(\n            type_name",
                    "identity: Slice(\n            element",
                    1,
                )
            },
            "is a slice",
        ),
        (
            "a header larger than any chunk",
            |t| {
                let at = t.find("size: 32").expect("the header's size");
                format!("{}size: 1048576{}", &t[..at], &t[at + "size: 32".len()..])
            },
            "do not fit the largest chunk",
        ),
        (
            "a header whose size overflows the payload's offset",
            |t| {
                let at = t.find("size: 32").expect("the header's size");
                format!(
                    "{}size: 18446744073709551615{}",
                    &t[..at],
                    &t[at + "size: 32".len()..]
                )
            },
            "do not fit the largest chunk",
        ),
    ];
    for (what, edit, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let svc = frames(dir.path()).create().unwrap();
        let path = config_path(dir.path(), "camera/front");
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = edit(&text);
        assert_ne!(
            edited, text,
            "{what}: the edit found nothing to change in\n{text}"
        );
        std::fs::write(&path, edited).unwrap();
        let err = frames(dir.path())
            .timeout(Duration::from_millis(300))
            .open()
            .unwrap_err();
        let OpenError::Config(ConfigError::Invalid { what: reason, .. }) = &err else {
            panic!("{what}: {err:?}");
        };
        assert!(
            matches!(
                reason,
                InvalidConfig::UserHeader(_) | InvalidConfig::UserHeaderSchema(_)
            ),
            "{what}: {reason:?}"
        );
        assert!(err.to_string().contains(expected), "{what}: {err}");
        drop(svc);
    }
}

#[test]
fn headers_are_refused_where_they_cannot_be() {
    let dir = tempfile::tempdir().unwrap();
    // GPU memory: a host program could not read the header.
    let err = Service::named("gpu")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u8]>()
        .user_header::<FrameHeader>()
        .memory_type(iox_service::MemoryType::CudaDevice)
        .max_slice_len(16)
        .create()
        .unwrap_err();
    assert!(
        matches!(
            &err,
            CreateError::InvalidSetting {
                source: InvalidConfig::UserHeader(_),
                ..
            } | CreateError::DeviceMemory { .. }
        ),
        "{err}"
    );
    // A header with padding or a bool is not carried as bytes (the payload rules).
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Padded {
        flag: bool,
        value: u64,
    }
    let header = HeaderType::of::<Padded>();
    assert!(!header.identity.any_bit_pattern());
    // SAFETY: no ports are built.
    let err = unsafe {
        Service::named("carried")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<[u8]>()
            .carry_payload_type(<[u8] as Payload>::payload_type())
            .raw_user_header(header)
    }
    .max_slice_len(8)
    .create()
    .unwrap_err();
    assert!(matches!(err, CreateError::NotCarriable { .. }), "{err}");
    // A typed program may still use it, as it may a padded payload: only its own
    // writers store values in it.
    let svc = Service::named("typed-padded")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u32>()
        .user_header::<Padded>()
        .create()
        .unwrap();
    let (p, s) = (
        svc.publisher_builder().create().unwrap(),
        svc.subscriber_builder().create().unwrap(),
    );
    p.loan_uninit()
        .unwrap()
        .write_header(Padded { flag: true, value: 9 })
        .write_payload(3)
        .send()
        .unwrap();
    let got = s.receive().unwrap().unwrap();
    assert!(got.user_header().flag && got.user_header().value == 9 && *got == 3);
    assert_eq!(got.header_bytes(), None, "padding is never shown as bytes");
}

#[test]
fn byte_ports_find_the_header_where_typed_ports_put_it() {
    const TEST: &str = "byte_ports_find_the_header_where_typed_ports_put_it";
    if let Some(r) = role() {
        assert_eq!(r, "bridge");
        // A program that knows the service only from its config, as a bridge does.
        let (config, _) = iox_service::StaticConfig::read(&config_path(&root(), "camera/front")).unwrap();
        let recorded = config.user_header.clone().unwrap();
        // SAFETY: the ports below move bytes only (send_sample_bytes, header_bytes).
        let svc = unsafe {
            Service::named("camera/front")
                .unwrap()
                .root(root())
                .publish_subscribe::<[u8]>()
                .carry_payload_type(config.payload.clone())
                .raw_user_header(recorded)
        }
        .open()
        .unwrap();
        let publisher = svc.publisher_builder().create().unwrap();
        let subscriber = svc.subscriber_builder().create().unwrap();
        assert_eq!(publisher.wait_for_subscribers(2, LIMIT).unwrap(), 2);
        let h = header_bytes(&header(3));
        assert!(
            publisher.send_sample_bytes(&h[..4], &[b"x"]).is_err(),
            "a short header"
        );
        assert!(publisher.send_payload_bytes(&[b"x"]).is_err(), "no header at all");
        publisher.send_sample_bytes(&h, &[b"ab", b"c"]).unwrap();
        // Ours, and what the typed parent sends once it got ours, in either order.
        let first = subscriber.receive_timeout(LIMIT).unwrap().unwrap();
        let second = subscriber.receive_timeout(LIMIT).unwrap().unwrap();
        let (own, typed) = if first.publisher_slot() == publisher.publisher_slot() {
            (first, second)
        } else {
            (second, first)
        };
        assert_eq!(own.header_bytes().unwrap(), &h[..]);
        assert_eq!(own.payload_bytes().unwrap(), b"abc");
        assert_eq!(typed.header_bytes().unwrap(), &header_bytes(&header(4))[..]);
        assert_eq!(typed.payload_bytes().unwrap(), &[9, 8, 7]);
        let raw = svc.subscriber_builder().create().unwrap();
        drop(raw);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = frames(dir.path()).create().unwrap();
    let subscriber = svc.subscriber_builder().create().unwrap();
    let publisher = svc.publisher_builder().create().unwrap();
    let child = spawn_self(TEST, "bridge", &[root_env(dir.path())]);
    let got = subscriber
        .receive_timeout(LIMIT)
        .unwrap()
        .expect("the bridge's frame");
    assert_eq!((got.user_header(), &got[..]), (&header(3), &b"abc"[..]));
    publisher
        .loan_slice_uninit(3)
        .unwrap()
        .write_header(header(4))
        .write_from_slice(&[9, 8, 7])
        .send()
        .unwrap();
    wait_ok(child, LIMIT);
}

fn header_bytes(h: &FrameHeader) -> Vec<u8> {
    // SAFETY: FrameHeader has no padding (the derive's stable name requires it).
    unsafe { std::slice::from_raw_parts((h as *const FrameHeader).cast::<u8>(), size_of::<FrameHeader>()) }
        .to_vec()
}

#[test]
fn byte_ports_refuse_what_would_overflow_or_misplace_the_payload() {
    let dir = tempfile::tempdir().unwrap();
    let svc = frames(dir.path()).create().unwrap();
    let header = svc.static_config().user_header.clone().unwrap();
    // SAFETY: the ports below loan only with loan_raw.
    let raw = unsafe {
        Service::named("camera/front")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<[u8]>()
            .raw_payload_type(<[u8] as Payload>::payload_type())
            .raw_user_header(header)
    }
    .open()
    .unwrap();
    let publisher = raw.publisher_builder().create().unwrap();
    assert!(
        publisher.loan_raw(usize::MAX - 7).is_err(),
        "offset + bytes overflows"
    );
    assert!(publisher.loan_raw(1 << 20).is_err(), "past the largest chunk");
    let mut loan = publisher.loan_raw(16).unwrap();
    assert_eq!(loan.header_len(), size_of::<FrameHeader>());
    assert_eq!(loan.as_mut_ptr() as usize - loan.header_ptr() as usize, 32);

    // A typed header on a payload given at run time would place the payload by u8's
    // alignment while the service records the payload type's: refused both ways.
    let carried = || {
        Service::named("carried/u32")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<[u8]>()
            .carry_payload_type(<[u32] as Payload>::payload_type())
            .user_header::<[u16; 3]>()
            .max_slice_len(64)
    };
    let err = carried().create().unwrap_err();
    assert!(
        matches!(
            &err,
            CreateError::InvalidSetting {
                source: InvalidConfig::UserHeader(_),
                ..
            }
        ),
        "{err}"
    );
    let _typed = Service::named("carried/u32")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u32]>()
        .user_header::<[u16; 3]>()
        .max_slice_len(16)
        .create()
        .unwrap();
    let err = carried().open().unwrap_err();
    assert!(matches!(&err, OpenError::InvalidSetting { .. }), "{err}");
    assert!(err.to_string().contains("raw_user_header"), "{err}");
}
