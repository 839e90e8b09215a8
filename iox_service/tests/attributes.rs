//! Service attributes across processes: a child records them when it creates a
//! service of each pattern; the parent opens those services with requirements met,
//! with another value and with a missing key (each refusal naming the key and both
//! values), and open-or-create refuses a service in use whose attributes differ but
//! replaces a stale one. Then what the builders refuse before touching anything, and
//! that a config without attributes is written as before. Corrupt attributes in a
//! static config on disk: `tests/bad_files.rs`.

use std::path::Path;
use std::time::Duration;

use iox_service::attributes::{AttributeError, MAX_ATTRIBUTES, MAX_VALUE_LEN};
use iox_service::{
    Attributes, CreateError, EventId, InvalidConfig, OpenError, OpenOrCreateError, Service, ServiceName,
};
use iox_testkit::{Reaped, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(30);
const DONE: &str = "attr/done";

/// A ROS 2 style message definition of about 4 KiB: lines, a tab, non-ASCII text.
fn msgdef() -> String {
    let mut d = String::from("# A test message\t(ünïcödé comment)\n");
    let mut i = 0;
    while d.len() < 4000 {
        d += &format!("int32 field_{i} # = {i}\n");
        i += 1;
    }
    d
}

/// What the creator records on every service.
fn expected() -> Attributes {
    let mut a = Attributes::new();
    a.insert("ros2/type", "std_msgs/msg/String").unwrap();
    a.insert("ros2/qos", "reliability=reliable\ndurability=volatile")
        .unwrap();
    a.insert("ros2/msgdef", &msgdef()).unwrap();
    a
}

/// Child: creates one service of each pattern with the expected attributes, then the
/// event service `DONE` (its appearance tells the parent the others exist), and
/// waits for the parent's notification before leaving.
fn creator() {
    let named = |n: &str| Service::named(n).unwrap();
    let msgdef = msgdef();
    let _pubsub = named("attr/pubsub")
        .publish_subscribe::<u64>()
        .attribute("ros2/msgdef", msgdef.as_str())
        .attribute("ros2/type", "std_msgs/msg/String")
        .attribute("ros2/qos", "reliability=reliable\ndurability=volatile")
        .create()
        .unwrap();
    let _event = named("attr/event")
        .event()
        .attribute("ros2/type", "std_msgs/msg/String")
        .attribute("ros2/qos", "reliability=reliable\ndurability=volatile")
        .attribute("ros2/msgdef", msgdef.as_str())
        .create()
        .unwrap();
    let _reqres = named("attr/reqres")
        .request_response::<u64, u64>()
        .attribute("ros2/qos", "reliability=reliable\ndurability=volatile")
        .attribute("ros2/type", "std_msgs/msg/String")
        .attribute("ros2/msgdef", msgdef.as_str())
        .create()
        .unwrap();
    let _board = named("attr/blackboard")
        .blackboard::<u32>()
        .add::<u64>(0, 0)
        .attribute("ros2/type", "std_msgs/msg/String")
        .attribute("ros2/msgdef", msgdef.as_str())
        .attribute("ros2/qos", "reliability=reliable\ndurability=volatile")
        .create()
        .unwrap();
    let done = named(DONE).event().create().unwrap();
    let listener = done.listener_builder().create().unwrap();
    assert_eq!(
        listener.timed_wait_one(LIMIT).unwrap(),
        Some(EventId::new(1)),
        "the parent never said it was done"
    );
}

/// The parent's checks on the service `name`, which `open` opens with the
/// requirements given (returning the attributes it read, or the error).
fn check_refusals(name: &str, open: impl Fn(&[(&str, Option<&str>)]) -> Result<Attributes, OpenError>) {
    // Requirements met: the attributes are read back whole.
    let got = open(&[("ros2/type", Some("std_msgs/msg/String")), ("ros2/msgdef", None)])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(got, expected(), "{name}");
    assert_eq!(got.get("ros2/msgdef").unwrap().len(), msgdef().len());

    // Another value: the key and both values are named.
    let e = open(&[("ros2/type", Some("geometry_msgs/msg/Pose"))]).unwrap_err();
    match &e {
        OpenError::IncompatibleAttribute {
            name: n,
            key,
            required,
            found,
        } => {
            assert_eq!((n.as_str(), key.as_str()), (name, "ros2/type"));
            assert_eq!(
                (required.as_str(), found.as_str()),
                ("geometry_msgs/msg/Pose", "std_msgs/msg/String")
            );
        }
        other => panic!("{name}: expected IncompatibleAttribute, got {other}"),
    }
    let m = e.to_string();
    for part in [name, "ros2/type", "geometry_msgs/msg/Pose", "std_msgs/msg/String"] {
        assert!(m.contains(part), "{name}: {part:?} not in: {m}");
    }

    // A missing key, with any value or with one.
    let e = open(&[("ros2/type", None), ("dds/partition", None)]).unwrap_err();
    assert!(
        matches!(&e, OpenError::MissingAttribute { key, required: None, .. } if key == "dds/partition"),
        "{name}: {e}"
    );
    assert!(
        e.to_string().contains("\"dds/partition\"") && e.to_string().contains(name),
        "{e}"
    );
    let e = open(&[("dds/partition", Some("robots"))]).unwrap_err();
    assert!(
        matches!(&e, OpenError::MissingAttribute { key, required: Some(v), .. } if key == "dds/partition" && v == "robots"),
        "{name}: {e}"
    );
    let m = e.to_string();
    assert!(m.contains("\"dds/partition\"") && m.contains("\"robots\""), "{m}");
}

/// Requirement tuples applied to any builder (each has the same three methods).
macro_rules! require {
    ($builder:expr, $reqs:expr) => {{
        let mut b = $builder;
        for &(k, v) in $reqs {
            b = match v {
                Some(v) => b.require_attribute(k, v),
                None => b.require_attribute_key(k),
            };
        }
        b
    }};
}

#[test]
fn another_process_records_attributes_and_openers_require_them() {
    if role().as_deref() == Some("creator") {
        return creator();
    }
    let test = "another_process_records_attributes_and_openers_require_them";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let child = Reaped::new(spawn_self(
        test,
        "creator",
        &[("IOX_ROOT", root.display().to_string())],
    ));
    assert!(
        wait_until(LIMIT, || Service::exists_in(root, DONE).unwrap()),
        "the creator did not create its services"
    );
    let named = |n: &str| Service::named(n).unwrap().root(root);
    check_refusals("attr/pubsub", |r| {
        require!(named("attr/pubsub").publish_subscribe::<u64>(), r)
            .open()
            .map(|s| s.attributes().clone())
    });
    check_refusals("attr/event", |r| {
        require!(named("attr/event").event(), r)
            .open()
            .map(|s| s.static_config().attributes.clone())
    });
    check_refusals("attr/reqres", |r| {
        require!(named("attr/reqres").request_response::<u64, u64>(), r)
            .open()
            .map(|s| s.attributes().clone())
    });
    check_refusals("attr/blackboard", |r| {
        require!(named("attr/blackboard").blackboard::<u32>(), r)
            .open()
            .map(|s| s.attributes().clone())
    });

    // `.attribute` is not compared on open: a builder that would record other
    // attributes opens the existing service and reads the creator's.
    let opened = named("attr/pubsub")
        .publish_subscribe::<u64>()
        .attribute("ros2/type", "other")
        .open_or_create()
        .unwrap();
    assert!(!opened.is_creator());
    assert_eq!(opened.attributes(), &expected());
    drop(opened);

    // open_or_create whose requirement the service in use does not meet: refused,
    // the service left alone (as for another payload type).
    let e = named("attr/event")
        .event()
        .attribute("ros2/type", "geometry_msgs/msg/Pose")
        .require_attribute("ros2/type", "geometry_msgs/msg/Pose")
        .open_or_create()
        .unwrap_err();
    assert!(
        matches!(&e, OpenOrCreateError::Open(OpenError::IncompatibleAttribute { key, .. }) if key == "ros2/type"),
        "{e}"
    );
    assert!(Service::exists_in(root, "attr/event").unwrap());

    let done = named(DONE).event().open().unwrap();
    let notifier = done.notifier_builder().create().unwrap();
    assert_eq!(notifier.notify_with_custom_event_id(EventId::new(1)).unwrap(), 1);
    wait_ok(child.into_inner(), LIMIT);
}

/// Child: creates a service recording `version = 1`, then waits to be killed.
fn stale_creator() {
    let _svc = Service::named("attr/stale")
        .unwrap()
        .publish_subscribe::<u64>()
        .attribute("version", "1")
        .create()
        .unwrap();
    loop {
        std::thread::park();
    }
}

#[test]
fn open_or_create_replaces_a_stale_service_whose_attributes_differ() {
    if role().as_deref() == Some("stale") {
        return stale_creator();
    }
    let test = "open_or_create_replaces_a_stale_service_whose_attributes_differ";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let child = Reaped::new(spawn_self(
        test,
        "stale",
        &[("IOX_ROOT", root.display().to_string())],
    ));
    let builder = || {
        Service::named("attr/stale")
            .unwrap()
            .root(root)
            .publish_subscribe::<u64>()
            .attribute("version", "2")
            .require_attribute("version", "2")
    };
    assert!(
        wait_until(LIMIT, || Service::exists_in(root, "attr/stale").unwrap()),
        "the child did not create its service"
    );
    // In use: refused, naming both values.
    let e = builder().open().unwrap_err();
    assert!(
        matches!(&e, OpenError::IncompatibleAttribute { required, found, .. } if required == "2" && found == "1"),
        "{e}"
    );
    // SIGKILLed: nobody uses it any more, so it is replaced by one that meets the
    // requirement.
    child.kill();
    let svc = builder().open_or_create().unwrap();
    assert!(svc.is_creator());
    assert_eq!(svc.attributes().get("version"), Some("2"));
}

fn stem_path(root: &Path, name: &str) -> std::path::PathBuf {
    root.join(format!("{}.service", ServiceName::new(name).unwrap().stem()))
}

/// Whether `e` is an invalid setting whose attribute error passes `rule`.
fn invalid(e: &CreateError, rule: impl Fn(&AttributeError) -> bool) -> bool {
    matches!(e, CreateError::InvalidSetting { source: InvalidConfig::Attribute(a), .. } if rule(a))
}

#[test]
fn builders_refuse_invalid_attributes_before_touching_anything() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let pubsub = || {
        Service::named("attr/bad")
            .unwrap()
            .root(root)
            .publish_subscribe::<u64>()
    };

    let e = pubsub().attribute("bad key", "v").create().unwrap_err();
    assert!(
        invalid(
            &e,
            |a| matches!(a, AttributeError::KeyCharacter { key, found: ' ' } if key == "bad key")
        ),
        "{e}"
    );
    assert!(e.to_string().contains("\"bad key\""), "{e}");
    let e = pubsub()
        .attribute("k", "x".repeat(MAX_VALUE_LEN + 1))
        .create()
        .unwrap_err();
    assert!(
        invalid(&e, |a| matches!(a, AttributeError::ValueLength { .. })),
        "{e}"
    );
    let e = pubsub().attribute("", "v").create().unwrap_err();
    assert!(
        invalid(&e, |a| matches!(a, AttributeError::KeyLength { len: 0, .. })),
        "{e}"
    );
    let mut many = pubsub();
    for i in 0..=MAX_ATTRIBUTES {
        many = many.attribute(format!("k{i:02}"), "v");
    }
    let e = many.create().unwrap_err();
    assert!(
        invalid(&e, |a| matches!(a, AttributeError::TooMany { count: 33 })),
        "{e}"
    );
    // Each value within bounds, the file too large for a static config.
    let mut large = pubsub();
    for i in 0..8 {
        large = large.attribute(format!("k{i}"), "x".repeat(MAX_VALUE_LEN));
    }
    let e = large.create().unwrap_err();
    assert!(
        invalid(&e, |a| matches!(a, AttributeError::ConfigTooLarge { .. })),
        "{e}"
    );

    // A builder that may create must meet its own requirements, whichever happens.
    for e in [
        pubsub()
            .attribute("unit", "m")
            .require_attribute("unit", "ft")
            .create()
            .unwrap_err(),
        match pubsub()
            .require_attribute_key("unit")
            .open_or_create()
            .unwrap_err()
        {
            OpenOrCreateError::Create(e) => e,
            other => panic!("{other}"),
        },
    ] {
        assert!(
            invalid(
                &e,
                |a| matches!(a, AttributeError::Unsatisfied { key, .. } if key == "unit")
            ),
            "{e}"
        );
        assert!(e.to_string().contains("\"unit\""), "{e}");
    }
    let e = Service::named("attr/bad")
        .unwrap()
        .root(root)
        .event()
        .attribute("a", "1")
        .require_attribute("a", "2")
        .create()
        .unwrap_err();
    assert!(
        invalid(&e, |a| matches!(
            a,
            AttributeError::Unsatisfied { key, required: Some(r), recorded: Some(f) } if key == "a" && r == "2" && f == "1"
        )),
        "{e}"
    );
    // Nothing was created by any of them.
    assert_eq!(std::fs::read_dir(root).unwrap().count(), 0);

    // Open checks what it is given too (a requirement that could never be met).
    let e = pubsub().require_attribute("k", "a\rb").open().unwrap_err();
    assert!(
        matches!(
            &e,
            OpenError::InvalidSetting {
                source: InvalidConfig::Attribute(AttributeError::ValueCharacter { found: '\r', .. }),
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_key_given_again_replaces_its_value_and_no_attributes_write_the_config_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let svc = Service::named("attr/twice")
        .unwrap()
        .root(root)
        .event()
        .attribute("b", "1")
        .attribute("a", "x")
        .attribute("b", "2")
        .create()
        .unwrap();
    assert_eq!(
        svc.attributes().iter().collect::<Vec<_>>(),
        [("a", "x"), ("b", "2")]
    );
    let text = std::fs::read_to_string(stem_path(root, "attr/twice")).unwrap();
    assert!(text.contains("attributes: {"), "{text}");

    // Without attributes the file has no such field (an older iox reads it).
    let plain = Service::named("attr/plain")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    let text = std::fs::read_to_string(stem_path(root, "attr/plain")).unwrap();
    assert!(!text.contains("attributes"), "{text}");
    assert!(plain.attributes().is_empty());
    assert_eq!(plain.static_config().to_ron(), text);
}
