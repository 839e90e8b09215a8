//! Sealed memfd payloads: sealing holds, and an opener handed the wrong file gets a
//! specific error before anything is mapped.

use std::path::PathBuf;

use iox_mempool::PageSize;
use iox_mempool::memfd::{MemfdError, create_memfd, open_memfd};
use iox_mempool::segment::Access;
use iox_mempool::{MemoryType, Owner, Pool, PoolLayout};

#[test]
fn a_sealed_memfd_can_neither_shrink_nor_grow() {
    let (seg, id) = create_memfd("test", 1 << 20, PageSize::Base).unwrap();
    assert_eq!(id.len, 1 << 20);
    assert!(seg.file().set_len(4096).is_err(), "shrinking must be refused");
    assert!(seg.file().set_len(2 << 20).is_err(), "growing must be refused");
    assert_eq!(seg.file().metadata().unwrap().len(), 1 << 20);
}

#[test]
fn wrong_targets_are_refused_with_specific_errors() {
    let (good, id) = create_memfd("good", 8192, PageSize::Base).unwrap();
    let label = || PathBuf::from("/proc/x/fd/y");
    let again = open_memfd(
        good.file().try_clone().unwrap(),
        label(),
        Access::ReadWrite,
        (id, PageSize::Base),
    )
    .unwrap();
    // The same memory through both mappings.
    // SAFETY: both map 8192 bytes of the same memfd; nothing else touches it.
    unsafe {
        good.as_ptr().write(42);
        assert_eq!(again.as_ptr().read(), 42);
    }

    let dir = tempfile::tempdir().unwrap();
    let plain = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("plain"))
        .unwrap();
    plain.set_len(8192).unwrap();
    assert!(matches!(
        open_memfd(plain, label(), Access::ReadWrite, (id, PageSize::Base)),
        Err(MemfdError::NotMemfd { .. })
    ));

    // Named like the recorded memfd (same nonce), so the later checks are reached.
    let named = |len: u64, seal: bool| {
        let m = memfd::MemfdOptions::new()
            .allow_sealing(true)
            .create(format!("x:{:016x}", id.nonce))
            .unwrap();
        m.as_file().set_len(len).unwrap();
        if seal {
            m.add_seals(&[
                memfd::FileSeal::SealShrink,
                memfd::FileSeal::SealGrow,
                memfd::FileSeal::SealSeal,
            ])
            .unwrap();
        }
        m.into_file()
    };
    let e = open_memfd(
        named(8192, false),
        label(),
        Access::ReadWrite,
        (id, PageSize::Base),
    )
    .unwrap_err();
    assert!(matches!(e, MemfdError::MissingSeals { .. }), "{e}");
    assert!(e.to_string().contains("/proc/x/fd/y"), "{e}");
    let e = open_memfd(
        named(4096, true),
        label(),
        Access::ReadWrite,
        (id, PageSize::Base),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            MemfdError::WrongSize {
                len: 4096,
                expected: 8192,
                ..
            }
        ),
        "{e}"
    );
    let e = open_memfd(
        named(8192, true),
        label(),
        Access::ReadWrite,
        (id, PageSize::Base),
    )
    .unwrap_err();
    assert!(
        matches!(e, MemfdError::WrongIdentity { .. }),
        "same name and size, another inode: {e}"
    );

    let (other, _) = create_memfd("other", 8192, PageSize::Base).unwrap();
    let e = open_memfd(
        other.file().try_clone().unwrap(),
        label(),
        Access::ReadWrite,
        (id, PageSize::Base),
    )
    .unwrap_err();
    assert!(
        matches!(e, MemfdError::WrongIdentity { .. }),
        "another nonce: {e}"
    );
}

#[test]
fn a_pool_works_on_a_memfd_payload() {
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(64, 8), (4096, 4)]).unwrap();
    let (payload, id) = create_memfd("pool", layout.payload_len(), PageSize::Base).unwrap();
    let file = payload.file().try_clone().unwrap();
    let pool =
        Pool::create_with_payload(dir.path(), "m", &layout, MemoryType::Cpu, 0o600, 7, payload).unwrap();
    assert!(
        !dir.path().join("m.pool").exists(),
        "no payload file under the root"
    );
    let seg = open_memfd(
        file,
        PathBuf::from("dup"),
        Access::ReadWrite,
        (id, PageSize::Base),
    )
    .unwrap();
    let other = Pool::open_with_payload(dir.path(), "m", &layout, Some(MemoryType::Cpu), 7, seg).unwrap();
    let me = Owner::new(0).unwrap();
    let mut hint = 0;
    let h = pool.loan(100, &mut hint, me).unwrap();
    // SAFETY: the chunk is loaned to us; 4096 bytes.
    unsafe { pool.chunk(h).unwrap().0.write(9) };
    // SAFETY: same chunk through the other mapping; nobody writes it meanwhile.
    assert_eq!(unsafe { other.chunk(h).unwrap().0.read() }, 9);
    assert_eq!(other.info().free_chunks(), 11);
    other.book().release(h, me).unwrap();
    assert_eq!(pool.info().free_chunks(), 12);
}
