//! `#[derive(ZeroCopySafe)]` and type identity across real processes: this test binary
//! re-executes itself as a child (see `iox_testkit`), each test with its own `IOX_ROOT`.
//! Two modules stand for two programs, each with its own `Pose`.

use std::time::{Duration, Instant};

use iox_service::{OpenError, Overflow, PayloadType, PubSubService, SendError, Service, ZeroCopySafe};
use iox_testkit::{role, root_env, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(120);

/// The publishing program's types.
mod posepub {
    use iox_service::ZeroCopySafe;

    #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    #[iox(type_name = "Pose")]
    pub struct Pose {
        pub x: f64,
        pub y: f64,
        pub yaw: f32,
        pub seq: u32,
    }

    /// The same fields, no stable name.
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    pub struct Plain {
        pub x: f64,
        pub y: f64,
    }
}

/// The subscribing program's types: the same definitions, another module path.
mod posesub {
    use iox_service::ZeroCopySafe;

    #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    #[iox(type_name = "Pose")]
    pub struct Pose {
        pub x: f64,
        pub y: f64,
        pub yaw: f32,
        pub seq: u32,
    }

    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    pub struct Plain {
        pub x: f64,
        pub y: f64,
    }
}

/// A third program that got `Pose` wrong.
mod posebad {
    use iox_service::ZeroCopySafe;

    /// One field more: another size.
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    #[iox(type_name = "Pose")]
    pub struct Pose {
        pub x: f64,
        pub y: f64,
        pub yaw: f32,
        pub seq: u32,
        pub z: f64,
    }

    /// The same fields, written by hand: claims nothing about bit patterns.
    #[derive(Clone, Copy)]
    #[repr(C)]
    pub struct PoseByHand {
        pub x: f64,
        pub y: f64,
        pub yaw: f32,
        pub seq: u32,
    }

    // SAFETY: repr(C), plain numbers; the same name as the derived `Pose` and its layout.
    unsafe impl ZeroCopySafe for PoseByHand {
        fn type_name() -> std::borrow::Cow<'static, str> {
            "Pose".into()
        }
    }

    /// The same size and alignment, one field of another type: refused by the schema.
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    #[iox(type_name = "Pose")]
    pub struct PoseSigned {
        pub x: f64,
        pub y: f64,
        pub yaw: f32,
        pub seq: i32,
    }

    /// A field added in the middle (what a program built from a newer definition has).
    #[derive(ZeroCopySafe, Clone, Copy, Debug)]
    #[repr(C)]
    #[iox(type_name = "Pose")]
    pub struct PoseStamped {
        pub x: f64,
        pub stamp: u64,
        pub y: f64,
        pub yaw: f32,
        pub seq: u32,
    }

    /// The same size (24), another alignment (4).
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    #[iox(type_name = "Pose")]
    pub struct PoseAlign4 {
        pub words: [u32; 6],
    }
}

fn pose(i: u32) -> (f64, f64, f32, u32) {
    (f64::from(i) * 0.5, -f64::from(i), i as f32 / 8.0, i)
}

fn connected<P: ?Sized + iox_service::Payload>(svc: &PubSubService<P>, pubs: usize, subs: usize) -> bool {
    let (p, s) = svc.port_counts();
    p >= pubs && s >= subs
}

#[test]
fn pose_with_type_name_crosses_programs() {
    const N: u32 = 1_000;
    if role().as_deref() == Some("publisher") {
        // The child: opens the parent's `posesub::Pose` service as `posepub::Pose`.
        let svc = Service::named("pose")
            .unwrap()
            .publish_subscribe::<posepub::Pose>()
            .open()
            .unwrap();
        let p = svc.publisher_builder().create().unwrap();
        assert!(wait_until(LIMIT, || connected(&svc, 1, 1)));
        for i in 0..N {
            let (x, y, yaw, seq) = pose(i);
            let value = posepub::Pose { x, y, yaw, seq };
            let start = Instant::now();
            loop {
                match p.loan_uninit().unwrap().write_payload(value).send() {
                    Ok(1) => break,
                    Ok(n) => panic!("delivered to {n} subscribers"),
                    Err(SendError::QueueFull { .. }) => std::thread::yield_now(),
                    Err(e) => panic!("send failed: {e}"),
                }
                assert!(start.elapsed() < LIMIT, "subscriber stopped reading");
            }
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("pose")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<posesub::Pose>()
        .overflow(Overflow::Reject)
        .create()
        .unwrap();
    assert_eq!(
        svc.static_config().payload,
        PayloadType::Typed {
            type_name: "Pose".into(),
            size: 24,
            alignment: 8,
            invalid_bit_patterns: false,
        }
    );
    let s = svc.subscriber_builder().create().unwrap();
    let child = spawn_self(
        "pose_with_type_name_crosses_programs",
        "publisher",
        &[root_env(&dir)],
    );
    for i in 0..N {
        let got = s
            .receive_timeout(LIMIT)
            .unwrap()
            .expect("sample within the limit");
        let (x, y, yaw, seq) = pose(i);
        assert_eq!(*got, posesub::Pose { x, y, yaw, seq });
    }
    wait_ok(child, LIMIT);
    assert!(s.receive().unwrap().is_none());
}

/// The child of the schema refusal tests: opens service `name` as `P` and expects
/// `IncompatibleSchema` naming `field`, with what the service and `P` have there.
fn expect_other_fields<P: iox_service::ZeroCopySafe>(name: &str, field: &str, found: &str, requested: &str) {
    match Service::named(name).unwrap().publish_subscribe::<P>().open() {
        Err(e @ OpenError::IncompatibleSchema(_)) => {
            let OpenError::IncompatibleSchema(m) = &e else {
                unreachable!()
            };
            let got = (m.field.as_str(), m.found.as_str(), m.requested.as_str());
            assert_eq!(got, (field, found, requested), "{e}");
            assert_eq!(m.type_name, "Pose");
            let text = e.to_string();
            assert!(text.contains(&format!("`{field}`")), "{text}");
        }
        Err(e) => panic!("expected IncompatibleSchema, got {e}"),
        Ok(_) => panic!("opened {name} as {}", P::type_name()),
    }
}

/// The child of the refusal tests: opens service `name` as `P` and expects
/// `IncompatiblePayload`, recording `requested` as `P`'s payload type.
fn expect_refused<P: iox_service::ZeroCopySafe>(name: &str) {
    match Service::named(name).unwrap().publish_subscribe::<P>().open() {
        Err(OpenError::IncompatiblePayload { requested, found, .. }) => {
            assert_eq!(requested, <P as iox_service::Payload>::payload_type());
            assert_ne!(requested, found);
        }
        Err(e) => panic!("expected IncompatiblePayload, got {e}"),
        Ok(_) => panic!("opened {name} as {}", P::type_name()),
    }
}

#[test]
fn same_struct_without_type_name_is_refused() {
    if role().as_deref() == Some("opener") {
        expect_refused::<posepub::Plain>("plain");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("plain")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<posesub::Plain>()
        .create()
        .unwrap();
    assert_eq!(
        svc.static_config().payload,
        PayloadType::Typed {
            type_name: std::any::type_name::<posesub::Plain>().into(),
            size: 16,
            alignment: 8,
            invalid_bit_patterns: false,
        }
    );
    let child = spawn_self(
        "same_struct_without_type_name_is_refused",
        "opener",
        &[root_env(&dir)],
    );
    wait_ok(child, LIMIT);
    // The refused opener left the service as it was.
    assert_eq!(svc.port_counts(), (0, 0));
}

#[test]
fn same_type_name_other_layout_is_refused() {
    match role().as_deref() {
        // Same name, other fields: the first differing field is named.
        Some("bigger") => return expect_other_fields::<posebad::Pose>("pose", "z", "nothing", "f64"),
        Some("aligned") => {
            return expect_other_fields::<posebad::PoseAlign4>(
                "pose",
                "words",
                "`x` (f64) at offset 0",
                "`words` ([u32; 6]) at offset 0",
            );
        }
        Some("stamped") => {
            // A field added to a struct whose service another process holds: the
            // whole message, as the program's user reads it.
            let err = Service::named("pose")
                .unwrap()
                .publish_subscribe::<posebad::PoseStamped>()
                .open()
                .expect_err("another layout of Pose");
            let holder = std::os::unix::process::parent_id();
            assert_eq!(
                err.to_string(),
                format!(
                    "service \"pose\" carries another layout of Pose: the service has field `y` (f64) at \
                     offset 8 where this program has `stamp` (u64) at offset 8 (the service's Pose is 24 \
                     bytes, this program's 32). Every program of a service uses one definition of Pose; \
                     process {holder} holds it with the service's layout (`iox show pose`). Build this \
                     program with that definition, or stop those processes and remove the service \
                     (`iox remove pose`) so the next program creates it with the new one"
                )
            );
            return;
        }
        Some("signed") => return expect_other_fields::<posebad::PoseSigned>("pose", "seq", "u32", "i32"),
        Some("by-hand") => {
            // The same layout, differing only in the bit-pattern claim: refused, and
            // the message says how to make the two agree.
            let err = Service::named("pose")
                .unwrap()
                .publish_subscribe::<posebad::PoseByHand>()
                .open()
                .err()
                .expect("a hand-written impl does not open a derived type's service");
            assert!(matches!(err, OpenError::IncompatiblePayload { .. }), "{err}");
            let text = err.to_string();
            assert!(text.contains("#[derive(ZeroCopySafe)]"), "{text}");
            return;
        }
        _ => {}
    }
    assert_eq!(size_of::<posebad::PoseAlign4>(), size_of::<posepub::Pose>());
    let dir = tempfile::tempdir().unwrap();
    let _svc = Service::named("pose")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<posepub::Pose>()
        .create()
        .unwrap();
    for role in ["bigger", "aligned", "signed", "by-hand", "stamped"] {
        let child = spawn_self("same_type_name_other_layout_is_refused", role, &[root_env(&dir)]);
        wait_ok(child, LIMIT);
    }
}

#[test]
fn arrays_and_slices_use_the_element_name() {
    let dir = tempfile::tempdir().unwrap();
    let a = Service::named("array")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[posepub::Pose; 3]>()
        .create()
        .unwrap();
    assert_eq!(<[posesub::Pose; 3]>::type_name(), "[Pose; 3]");
    let b = Service::named("array")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[posesub::Pose; 3]>()
        .open()
        .unwrap();
    let p = a.publisher_builder().create().unwrap();
    let s = b.subscriber_builder().create().unwrap();
    let v = posepub::Pose {
        x: 1.0,
        y: 2.0,
        yaw: 3.0,
        seq: 4,
    };
    p.loan_uninit().unwrap().write_payload([v; 3]).send().unwrap();
    assert_eq!(s.receive().unwrap().unwrap()[2].seq, 4);

    let slice = Service::named("slice")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[posepub::Pose]>()
        .max_slice_len(16)
        .open_or_create()
        .unwrap();
    assert_eq!(
        slice.static_config().payload,
        PayloadType::Slice {
            element: "Pose".into(),
            size: 24,
            alignment: 8,
            invalid_bit_patterns: false,
        }
    );
    Service::named("slice")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[posesub::Pose]>()
        .open()
        .unwrap();
    let refused = Service::named("slice")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[posebad::Pose]>()
        .open();
    assert!(matches!(refused, Err(OpenError::IncompatibleSchema(_))));
}

/// Generic structs: type parameters are bounded by ZeroCopySafe; the name stays Rust's.
#[test]
fn generic_struct_derives() {
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Pair<T, const N: usize> {
        a: [T; N],
        b: T,
    }
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(transparent)]
    struct Meters(f64);
    // A named type may not have padding, not even after a unit struct's `align(16)`:
    // the bytes are spelled out.
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C, align(16))]
    #[iox(type_name = "Tick")]
    struct Tick {
        _pad: [u8; 16],
    }

    assert_eq!(<Pair<u16, 3>>::type_name(), std::any::type_name::<Pair<u16, 3>>());
    assert_eq!(
        <(Meters, Tick)>::type_name(),
        format!("({}, Tick)", std::any::type_name::<Meters>())
    );
    assert_eq!(align_of::<Tick>(), 16);
}

/// Without `#[iox(type_name)]` a struct may hold a `bool`, and padding: the service is
/// only ever opened with this very type (its Rust type name), so readers see values its
/// writers stored.
#[test]
fn unnamed_struct_with_bool_and_padding() {
    #[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Status {
        on: bool,
        time: u64,
    }
    assert_eq!(size_of::<Status>(), 16);
    assert_eq!(Status::type_name(), std::any::type_name::<Status>());

    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("status")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<Status>()
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    for (on, time) in [(true, 1), (false, 2)] {
        p.loan_uninit()
            .unwrap()
            .write_payload(Status { on, time })
            .send()
            .unwrap();
        assert_eq!(*s.receive().unwrap().unwrap(), Status { on, time });
    }
    // A named type with the bool's byte as a `u8` and the padding spelled out is accepted.
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    #[iox(type_name = "Status")]
    struct NamedStatus {
        on: u8,
        _pad: [u8; 7],
        time: u64,
    }
    assert_eq!(size_of::<NamedStatus>(), 16);
    assert_eq!(NamedStatus::type_name(), "Status");
}

/// A service recorded without a schema (as by an iox from before schemas, or a binding
/// that knows no layout) opens with a typed program, from another process; one
/// recorded with a schema has it in the config file, as RON.
#[test]
fn config_without_schema_still_opens() {
    if role().as_deref() == Some("typed") {
        let svc = Service::named("old")
            .unwrap()
            .publish_subscribe::<posepub::Pose>()
            .open()
            .expect("a config without a schema opens");
        assert_eq!(svc.static_config().schema, None);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let old = Service::named("old")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u8]>()
        .carry_payload_type(<posesub::Pose as iox_service::Payload>::payload_type())
        .chunk_sizes(&[24])
        .create()
        .unwrap();
    assert!(!old.static_config().to_ron().contains("schema"));
    let child = spawn_self("config_without_schema_still_opens", "typed", &[root_env(&dir)]);
    wait_ok(child, LIMIT);

    let new = Service::named("new")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<posesub::Pose>()
        .create()
        .unwrap();
    let text = new.static_config().to_ron();
    assert!(text.contains("schema: Some(Struct("), "{text}");
    assert!(text.contains("name: \"yaw\""), "{text}");
    assert_eq!(new.static_config().schema, Some(posesub::Pose::schema()));
}

/// A type whose own schema the config check refuses (here a field name that is not
/// ASCII) still creates its service, recorded without a schema, as before schemas.
#[test]
fn a_schema_the_check_refuses_is_not_recorded() {
    #[derive(ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    struct Size {
        größe: u32,
    }
    assert!(Size::schema().check(4).is_err());
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("size")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<Size>()
        .create()
        .unwrap();
    assert_eq!(svc.static_config().schema, None);
}

/// Names as other languages and schema registries write them: the parent's and the
/// child's `geometry_msgs::Point` (two programs' definitions of one named type) share a
/// service across processes.
#[test]
fn a_type_name_with_a_path_crosses_programs() {
    mod one {
        #[derive(iox_service::ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
        #[repr(C)]
        #[iox(type_name = "geometry_msgs::Point")]
        pub struct Point {
            pub x: f64,
            pub y: f64,
            pub z: f64,
        }
    }
    mod two {
        #[derive(iox_service::ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
        #[repr(C)]
        #[iox(type_name = "geometry_msgs::Point")]
        pub struct Point {
            pub x: f64,
            pub y: f64,
            pub z: f64,
        }
    }
    const N: u32 = 100;
    let point = |i: u32| (f64::from(i), -f64::from(i), f64::from(i) / 4.0);
    if role().as_deref() == Some("publisher") {
        let svc = Service::named("point")
            .unwrap()
            .publish_subscribe::<two::Point>()
            .open()
            .unwrap();
        let p = svc.publisher_builder().create().unwrap();
        assert!(wait_until(LIMIT, || connected(&svc, 1, 1)));
        for i in 0..N {
            let (x, y, z) = point(i);
            let start = Instant::now();
            while let Err(e) = p
                .loan_uninit()
                .unwrap()
                .write_payload(two::Point { x, y, z })
                .send()
            {
                assert!(matches!(e, SendError::QueueFull { .. }), "send failed: {e}");
                assert!(start.elapsed() < LIMIT, "subscriber stopped reading");
                std::thread::yield_now();
            }
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("point")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<one::Point>()
        .overflow(Overflow::Reject)
        .create()
        .unwrap();
    assert_eq!(svc.static_config().payload.type_name(), "geometry_msgs::Point");
    let s = svc.subscriber_builder().create().unwrap();
    let child = spawn_self(
        "a_type_name_with_a_path_crosses_programs",
        "publisher",
        &[root_env(&dir)],
    );
    for i in 0..N {
        let got = s
            .receive_timeout(LIMIT)
            .unwrap()
            .expect("sample within the limit");
        let (x, y, z) = point(i);
        assert_eq!(*got, one::Point { x, y, z });
    }
    wait_ok(child, LIMIT);
}

/// The types of the test below: an unnamed struct holding a `bool` (and padding), and a
/// named one that takes its Rust path as its name.
mod status {
    #[derive(iox_service::ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    pub struct Status {
        pub on: bool,
        pub time: u64,
    }

    #[derive(iox_service::ZeroCopySafe, Clone, Copy)]
    #[repr(C)]
    #[iox(type_name = "derive::status::Status")]
    pub struct Named {
        pub on: u8,
        pub _pad: [u8; 7],
        pub time: u64,
    }
}

/// A named type may take the very path Rust gives an unnamed type, and still never
/// shares a service with one that holds a `bool` or padding: the identities differ in
/// whether every bit pattern is a value (so even a side without a schema is refused),
/// and the schemas name the field. Refused both ways, across processes.
#[test]
fn a_named_type_never_meets_an_unnamed_one_holding_a_bool_under_its_path() {
    use iox_service::Payload;
    assert_eq!(std::any::type_name::<status::Status>(), "derive::status::Status");
    assert_eq!(
        <status::Named as ZeroCopySafe>::type_name(),
        "derive::status::Status"
    );
    let (named, unnamed) = (status::Named::payload_type(), status::Status::payload_type());
    assert!(named.any_bit_pattern() && !unnamed.any_bit_pattern());
    assert_ne!(named, unnamed);
    let expect_refused_with_hint = |e: OpenError| match &e {
        OpenError::IncompatibleSchema(m) => assert_eq!(m.field, "on", "{e}"),
        other => panic!("expected IncompatibleSchema naming `on`, got {other}"),
    };
    match role().as_deref() {
        Some("unnamed") => {
            let e = Service::named("named")
                .unwrap()
                .publish_subscribe::<status::Status>()
                .open()
                .map(|_| ())
                .expect_err("an unnamed bool type opened a named type's service");
            expect_refused_with_hint(e);
            return;
        }
        Some("named") => {
            let e = Service::named("unnamed")
                .unwrap()
                .publish_subscribe::<status::Named>()
                .open()
                .map(|_| ())
                .expect_err("a named type opened an unnamed bool type's service");
            expect_refused_with_hint(e);
            return;
        }
        _ => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let _named = Service::named("named")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<status::Named>()
        .create()
        .unwrap();
    let _unnamed = Service::named("unnamed")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<status::Status>()
        .create()
        .unwrap();
    let name = "a_named_type_never_meets_an_unnamed_one_holding_a_bool_under_its_path";
    for role in ["unnamed", "named"] {
        wait_ok(spawn_self(name, role, &[root_env(&dir)]), LIMIT);
    }
}
