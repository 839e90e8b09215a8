//! Every file under the root is untrusted input: one table of corruptions, each of
//! which must give its own specific error naming the file, never a panic or SIGBUS,
//! and must delete nothing.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_mempool::OpenPoolError;
use iox_mempool::segment::OpenSegmentError;
use iox_service::{
    AttributeError, Backing, ConfigError, Corruption, CreateError, InvalidConfig, OpenError, PubSubBuilder,
    Service, ServiceName,
};

const NAME: &str = "bad/files";

/// File backing: these cases are about files under the root (the memfd payload's
/// own checks are in `tests/memfd.rs`).
fn builder(root: &Path) -> PubSubBuilder<u64> {
    Service::named(NAME)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .backing(Backing::File)
        .timeout(Duration::from_millis(300))
}

fn file(root: &Path, ext: &str) -> PathBuf {
    root.join(format!("{}.{ext}", ServiceName::new(NAME).unwrap().stem()))
}

fn overwrite(path: &Path, offset: u64, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(bytes, offset)
        .unwrap();
}

fn set_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn replace_with_symlink(path: &Path) {
    let copy = path.with_extension("copy");
    std::fs::rename(path, &copy).unwrap();
    std::os::unix::fs::symlink(&copy, path).unwrap();
}

fn edit_config(root: &Path, f: impl FnOnce(String) -> String) {
    let path = file(root, "service");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, f(text)).unwrap();
}

/// Puts `attributes: {entries}` (RON map entries, as written) into the static config,
/// as a hand edit or another writer would.
fn with_attributes(root: &Path, entries: &str) {
    edit_config(root, |t| {
        let version = format!("version: {},", iox_service::static_config::CONFIG_VERSION);
        assert!(t.contains(&version), "{t}");
        t.replacen(&version, &format!("{version}\n    attributes: {{{entries}}},"), 1)
    })
}

/// Whether `e` says the static config's attributes break `rule`.
fn attribute_error(e: &OpenError, rule: impl Fn(&AttributeError) -> bool) -> bool {
    matches!(
        e,
        OpenError::Config(ConfigError::Invalid { what: InvalidConfig::Attribute(a), .. }) if rule(a)
    )
}

type Check = fn(&OpenError) -> bool;
type Case = (&'static str, fn(&Path), Check);

#[test]
fn each_corruption_gets_its_own_error_and_nothing_is_deleted() {
    let cases: Vec<Case> = vec![
        (
            "malformed RON",
            |r| edit_config(r, |t| t.replace("version", "((( not ron")),
            |e| matches!(e, OpenError::Config(ConfigError::Malformed { .. })),
        ),
        (
            "unknown config version",
            |r| {
                edit_config(r, |t| {
                    let current = format!("version: {}", iox_service::static_config::CONFIG_VERSION);
                    t.replacen(&current, "version: 99", 1)
                })
            },
            |e| {
                matches!(
                    e,
                    OpenError::Config(ConfigError::UnsupportedVersion { found: 99, .. })
                )
            },
        ),
        (
            "config limits out of bounds",
            |r| {
                edit_config(r, |t| {
                    let start = t.find("max_publishers: ").unwrap() + "max_publishers: ".len();
                    let end = start + t[start..].find(',').unwrap();
                    format!("{}0{}", &t[..start], &t[end..])
                })
            },
            |e| matches!(e, OpenError::Config(ConfigError::Invalid { .. })),
        ),
        (
            "oversized config",
            |r| edit_config(r, |t| t + &" ".repeat(70 * 1024)),
            |e| matches!(e, OpenError::Config(ConfigError::TooLarge { .. })),
        ),
        (
            "an attribute value over 8192 bytes",
            |r| with_attributes(r, &format!("\"ros2/msgdef\": \"{}\"", "x".repeat(8193))),
            |e| {
                attribute_error(
                    e,
                    |a| matches!(a, AttributeError::ValueLength { key, len: 8193 } if key == "ros2/msgdef"),
                )
            },
        ),
        (
            "33 attributes",
            |r| {
                let entries: Vec<String> = (0..33).map(|i| format!("\"k{i:02}\": \"v\"")).collect();
                with_attributes(r, &entries.join(", "))
            },
            |e| attribute_error(e, |a| matches!(a, AttributeError::TooMany { count: 33 })),
        ),
        (
            "an attribute key twice",
            |r| with_attributes(r, r#""a": "1", "a": "2""#),
            |e| {
                attribute_error(
                    e,
                    |a| matches!(a, AttributeError::Duplicate { key } if key == "a"),
                )
            },
        ),
        (
            "attribute keys out of order",
            |r| with_attributes(r, r#""b": "1", "a": "2""#),
            |e| {
                attribute_error(
                    e,
                    |a| matches!(a, AttributeError::Unsorted { key, previous } if key == "a" && previous == "b"),
                )
            },
        ),
        (
            "an attribute key with '='",
            |r| with_attributes(r, r#""a=b": "1""#),
            |e| {
                attribute_error(
                    e,
                    |a| matches!(a, AttributeError::KeyCharacter { key, found: '=' } if key == "a=b"),
                )
            },
        ),
        (
            "an attribute key with a control character",
            |r| with_attributes(r, "\"a\u{7}b\": \"1\""),
            |e| {
                attribute_error(
                    e,
                    |a| matches!(a, AttributeError::KeyCharacter { key, found: '\u{7}' } if key == "a\u{7}b"),
                )
            },
        ),
        (
            "an attribute value with an escape character",
            |r| with_attributes(r, "\"k\": \"\u{1b}[2J\""),
            |e| {
                attribute_error(
                    e,
                    |a| matches!(a, AttributeError::ValueCharacter { key, found: '\u{1b}' } if key == "k"),
                )
            },
        ),
        (
            "config is a symlink",
            |r| replace_with_symlink(&file(r, "service")),
            |e| matches!(e, OpenError::Config(ConfigError::NotRegularFile { .. })),
        ),
        (
            "dynamic segment has the wrong magic",
            |r| overwrite(&file(r, "dynamic"), 0, b"NOTIOX!!"),
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::Magic(_),
                        ..
                    }
                )
            },
        ),
        (
            "dynamic segment of another format version",
            |r| overwrite(&file(r, "dynamic"), 40, &6u32.to_le_bytes()),
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::Version(6),
                        ..
                    }
                )
            },
        ),
        (
            "dynamic segment truncated below its header",
            |r| set_len(&file(r, "dynamic"), 100),
            |e| {
                matches!(
                    e,
                    OpenError::Segment {
                        source: OpenSegmentError::TooShort { .. },
                        ..
                    }
                )
            },
        ),
        (
            "dynamic segment truncated",
            |r| set_len(&file(r, "dynamic"), 4096),
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::Length { .. },
                        ..
                    }
                )
            },
        ),
        (
            "dynamic segment grown",
            |r| {
                let f = file(r, "dynamic");
                set_len(&f, std::fs::metadata(&f).unwrap().len() + 64)
            },
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::Length { .. },
                        ..
                    }
                )
            },
        ),
        (
            "dynamic header claims other limits than the config",
            |r| overwrite(&file(r, "dynamic"), 44, &1000u32.to_le_bytes()),
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::Limit {
                            what: "sending port slots",
                            found: 1000,
                            ..
                        },
                        ..
                    }
                )
            },
        ),
        (
            // The pattern's own limit (pub-sub: history) at offset 84 of the header.
            "dynamic header claims another history than the config",
            |r| overwrite(&file(r, "dynamic"), 84, &3u32.to_le_bytes()),
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::Limit {
                            what: "history",
                            found: 3,
                            ..
                        },
                        ..
                    }
                )
            },
        ),
        (
            "dynamic lifecycle word is garbage",
            |r| overwrite(&file(r, "dynamic"), 16, &0u64.to_le_bytes()),
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::Lifecycle(_),
                        ..
                    }
                )
            },
        ),
        (
            // The static config beside it stays what it is: no waiting mends that, so it
            // is said at once (not after the open's timeout).
            "dynamic segment belongs to another static config",
            |r| overwrite(&file(r, "dynamic"), 8, &1u64.to_le_bytes()),
            |e| {
                matches!(
                    e,
                    OpenError::Corrupt {
                        problem: Corruption::OtherIncarnation,
                        ..
                    }
                )
            },
        ),
        (
            "dynamic segment is a symlink",
            |r| replace_with_symlink(&file(r, "dynamic")),
            |e| {
                matches!(
                    e,
                    OpenError::Segment {
                        source: OpenSegmentError::NotRegularFile { .. },
                        ..
                    }
                )
            },
        ),
        (
            "pool bookkeeping has a layout hash mismatch",
            |r| overwrite(&file(r, "chunks"), 8, &1u64.to_le_bytes()),
            |e| {
                matches!(
                    e,
                    OpenError::Pool {
                        source: OpenPoolError::LayoutMismatch { .. },
                        ..
                    }
                )
            },
        ),
        (
            "pool bookkeeping claims a payload beyond the file",
            |r| overwrite(&file(r, "chunks"), 16, &(1u64 << 40).to_le_bytes()),
            |e| {
                matches!(
                    e,
                    OpenError::Pool {
                        source: OpenPoolError::HeaderMismatch {
                            what: "payload length",
                            ..
                        },
                        ..
                    }
                )
            },
        ),
        (
            "pool bookkeeping is foreign",
            |r| overwrite(&file(r, "chunks"), 0, b"\x7fELF\x02\x01\x01\x00"),
            |e| {
                matches!(
                    e,
                    OpenError::Pool {
                        source: OpenPoolError::Foreign { .. },
                        ..
                    }
                )
            },
        ),
        (
            "pool bookkeeping truncated",
            |r| set_len(&file(r, "chunks"), 200),
            |e| {
                matches!(
                    e,
                    OpenError::Pool {
                        source: OpenPoolError::Segment(OpenSegmentError::WrongLength { .. }),
                        ..
                    }
                )
            },
        ),
        (
            "pool payload truncated",
            |r| set_len(&file(r, "pool"), 0),
            |e| {
                matches!(
                    e,
                    OpenError::Pool {
                        source: OpenPoolError::Segment(OpenSegmentError::TooShort { .. }),
                        ..
                    }
                )
            },
        ),
        (
            "pool payload grown",
            |r| {
                let f = file(r, "pool");
                set_len(&f, std::fs::metadata(&f).unwrap().len() + 4096)
            },
            |e| {
                matches!(
                    e,
                    OpenError::Pool {
                        source: OpenPoolError::Segment(OpenSegmentError::WrongLength { .. }),
                        ..
                    }
                )
            },
        ),
        (
            "pool payload is a symlink",
            |r| replace_with_symlink(&file(r, "pool")),
            |e| {
                matches!(
                    e,
                    OpenError::Pool {
                        source: OpenPoolError::Segment(OpenSegmentError::NotRegularFile { .. }),
                        ..
                    }
                )
            },
        ),
    ];
    for (what, corrupt, check) in cases {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // A live service (this handle keeps it alive) whose files we then damage.
        let keep = builder(root).create().unwrap();
        corrupt(root);
        let before = listing(root);
        let e = builder(root).open().expect_err(what);
        assert!(check(&e), "{what}: unexpected error: {e}");
        let message = e.to_string();
        assert!(
            message.contains(".service")
                || message.contains(".dynamic")
                || message.contains(".chunks")
                || message.contains(".pool"),
            "{what}: the error does not name the file: {message}"
        );
        assert_eq!(listing(root), before, "{what}: opening deleted something");
        // open_or_create and cleanup do not crash on it either, nor delete it.
        let _ = builder(root).open_or_create();
        let _ = Service::cleanup_dead_in(root, NAME);
        assert_eq!(
            listing(root),
            before,
            "{what}: open_or_create or cleanup deleted something"
        );
        println!("{what}: {message}");
        drop(keep);
    }
}

fn listing(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| !f.starts_with("iox_node_"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_static_config_without_its_dynamic_segment_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let keep = builder(root).create().unwrap();
    let copy = std::fs::read(file(root, "service")).unwrap();
    drop(keep);
    std::fs::write(file(root, "service"), copy).unwrap();
    let e = builder(root).open().unwrap_err();
    assert!(
        matches!(
            &e,
            OpenError::Corrupt {
                problem: Corruption::NoDynamicSegment,
                ..
            }
        ),
        "{e}"
    );
    assert!(file(root, "service").exists(), "not deleted unasked");
    assert!(Service::remove_in(root, NAME).unwrap());
    assert!(builder(root).open_or_create().unwrap().is_creator());
}

#[test]
fn bad_names_and_limits_fail_at_the_builder() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "a\0b", &"x".repeat(300)] {
        assert!(Service::named(bad).is_err(), "{bad:?} accepted");
    }
    // Path separators never escape the root: names are hashed into file names
    // (`..` segments are valid, a name starting with `.` is not).
    assert!(Service::named("../../etc/passwd").is_err());
    let svc = Service::named("x/../../etc/passwd")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<u8>()
        .create()
        .unwrap();
    assert!(
        std::fs::read_dir(dir.path()).unwrap().all(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("iox_")),
        "a file outside the iox_ naming scheme appeared"
    );
    drop(svc);
    let base = || {
        Service::named("limits")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<u8>()
    };
    for (what, e) in [
        ("max_publishers", base().max_publishers(0).create().unwrap_err()),
        ("max_subscribers", base().max_subscribers(0).create().unwrap_err()),
        (
            "subscriber_buffer",
            base().subscriber_buffer(0).create().unwrap_err(),
        ),
        ("max_loans", base().max_loans(1 << 20).create().unwrap_err()),
        ("max_held", base().max_held(0).create().unwrap_err()),
        (
            "max_publishers + max_subscribers",
            base()
                .max_publishers(40)
                .max_subscribers(40)
                .create()
                .unwrap_err(),
        ),
    ] {
        let limit = matches!(
            &e,
            CreateError::InvalidSetting { source: InvalidConfig::Limit { what: w, .. }, .. } if *w == what
        );
        let ports = matches!(
            &e,
            CreateError::InvalidSetting {
                source: InvalidConfig::TooManyPorts { .. },
                ..
            }
        ) && what == "max_publishers + max_subscribers";
        assert!(limit || ports, "{what}: {e}");
    }
    let e = Service::named("slices")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u64]>()
        .max_slice_len(usize::MAX / 4)
        .create()
        .unwrap_err();
    assert!(
        matches!(
            &e,
            CreateError::InvalidSetting {
                source: InvalidConfig::Overflow {
                    what: "max_slice_len",
                    ..
                },
                ..
            }
        ),
        "{e}"
    );
}

/// A history is publish-subscribe's: an event section that carries one (a file
/// edited by hand, or written by something else) is refused as malformed, naming the
/// field, rather than read with the field ignored.
#[test]
fn a_history_in_an_event_section_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _event = Service::named(NAME)
        .unwrap()
        .root(dir.path())
        .event()
        .create()
        .unwrap();
    let path = file(dir.path(), "service");
    let (config, _) = iox_service::StaticConfig::read(&path).unwrap();
    assert_eq!(config.check(), Ok(()));
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen("max_notifiers:", "history: 2,\n        max_notifiers:", 1);
    assert_ne!(edited, text, "{text}");
    let e = iox_service::StaticConfig::parse(&edited, &path).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Malformed { message, .. } if message.contains("history")),
        "{e}"
    );
}
