//! Segments: names that could escape the root are refused, permissions are exactly
//! what was asked (whatever the umask), and opening checks type and size first.

use std::os::unix::fs::PermissionsExt;

use iox_mempool::segment::{self, Access, CreateSegmentError, OpenSegmentError, Segment, SegmentNameError};

#[test]
fn names_are_validated() {
    assert_eq!(segment::validate_name(""), Err(SegmentNameError::Empty));
    assert!(matches!(
        segment::validate_name("../etc/passwd"),
        Err(SegmentNameError::BadByte { byte: b'/', .. })
    ));
    assert!(matches!(
        segment::validate_name("a\0b"),
        Err(SegmentNameError::BadByte { byte: 0, .. })
    ));
    assert!(matches!(
        segment::validate_name(".hidden"),
        Err(SegmentNameError::LeadingDot(_))
    ));
    assert!(matches!(
        segment::validate_name(&"x".repeat(201)),
        Err(SegmentNameError::TooLong { len: 201 })
    ));
    assert_eq!(segment::validate_name("iox_0123abcd.pool"), Ok(()));
}

#[test]
fn permissions_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let a = Segment::create(dir.path(), "a", 10, segment::DEFAULT_MODE).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(a.path()), 0o600);
    let b = Segment::create(dir.path(), "b", 10, 0o660).unwrap();
    assert_eq!(mode(b.path()), 0o660, "group write survives the umask");
    assert!(matches!(
        Segment::create(dir.path(), "c", 10, 0o400),
        Err(CreateSegmentError::InvalidMode { .. })
    ));
    assert!(matches!(
        Segment::create(dir.path(), "c", 10, 0o1600),
        Err(CreateSegmentError::InvalidMode { .. })
    ));
    assert!(matches!(
        Segment::create(dir.path(), "c", 0, 0o600),
        Err(CreateSegmentError::ZeroSize)
    ));
    assert!(matches!(
        Segment::create(dir.path(), "a", 10, 0o600),
        Err(CreateSegmentError::AlreadyExists { .. })
    ));
}

#[test]
fn open_checks_type_and_size_before_mapping() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    assert!(matches!(
        Segment::open(dir.path(), "d", Access::ReadOnly, 1),
        Err(OpenSegmentError::NotRegularFile { .. })
    ));
    std::fs::write(dir.path().join("empty"), b"").unwrap();
    assert!(matches!(
        Segment::open(dir.path(), "empty", Access::ReadOnly, 0),
        Err(OpenSegmentError::TooShort { len: 0, need: 1, .. })
    ));
    std::fs::write(dir.path().join("f"), [1u8; 100]).unwrap();
    let s = Segment::open(dir.path(), "f", Access::ReadOnly, 100).unwrap();
    assert_eq!(s.len(), 100);
    assert!(matches!(
        Segment::open(dir.path(), "f", Access::ReadOnly, 101),
        Err(OpenSegmentError::TooShort {
            len: 100,
            need: 101,
            ..
        })
    ));
    assert!(segment::remove(dir.path(), "f").unwrap());
    assert!(!segment::remove(dir.path(), "f").unwrap());
    assert!(segment::remove(dir.path(), "../x").is_err());
}
