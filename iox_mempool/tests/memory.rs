//! Memory types: a `User` type always holds a valid code; RON round-trips keep the
//! on-disk form `User(256)`, and bad codes in a file are refused with a clear error.

use iox_mempool::{MemoryType, MemoryTypeError, UserCode};

#[test]
fn user_codes_are_checked_when_made() {
    assert_eq!(
        MemoryType::user(0x00ff),
        Err(MemoryTypeError::ReservedUserCode(0x00ff))
    );
    assert_eq!(
        UserCode::new(0).unwrap_err(),
        MemoryTypeError::ReservedUserCode(0)
    );
    assert_eq!(UserCode::try_from(0x0100).unwrap().get(), 0x0100);
    let t = MemoryType::user(0xffff).unwrap();
    assert_eq!(t, MemoryType::User(UserCode::new(0xffff).unwrap()));
    assert_eq!(t.code(), 0xffff);
    assert_eq!(MemoryType::from_code(0xffff).unwrap(), t);
    assert_eq!(t.to_string(), "User(0xffff)");
}

#[test]
fn ron_round_trips_keep_the_on_disk_form() {
    for t in [
        MemoryType::Cpu,
        MemoryType::Locked,
        MemoryType::CudaPinned,
        MemoryType::user(256).unwrap(),
    ] {
        let text = ron::to_string(&t).unwrap();
        assert_eq!(ron::from_str::<MemoryType>(&text).unwrap(), t);
    }
    assert_eq!(
        ron::to_string(&MemoryType::user(256).unwrap()).unwrap(),
        "User(256)"
    );
    assert_eq!(ron::from_str::<MemoryType>("User(4096)").unwrap().code(), 4096);
}

#[test]
fn bad_codes_in_a_file_are_refused() {
    let e = ron::from_str::<MemoryType>("User(3)").unwrap_err().to_string();
    assert!(e.contains("0x0003") && e.contains("reserved"), "{e}");
}
