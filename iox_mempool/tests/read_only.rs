//! Read-only payload mappings: a write through one faults (SIGSEGV) in the writing
//! process and changes nothing; after `make_payload_writable` the same mapping writes,
//! and other mappings see it. For named-file and memfd payloads.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use iox_mempool::PageSize;
use iox_mempool::memfd::{create_memfd, open_memfd};
use iox_mempool::segment::Access;
use iox_mempool::{MakeWritableError, MemoryType, Owner, Pool, PoolLayout};
use iox_testkit::{role, spawn_self};

const DIR_ENV: &str = "IOX_TEST_POOL_DIR";

fn layout() -> PoolLayout {
    PoolLayout::new(&[(64, 4), (4096, 2)]).unwrap()
}

/// Waits for `child` and returns how it ended.
fn wait(mut child: std::process::Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("child did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_write_through_a_read_only_payload_faults() {
    if role().as_deref() == Some("writer") {
        // The child: map the payload read-only and write through a chunk's address.
        let dir = PathBuf::from(std::env::var(DIR_ENV).unwrap());
        let pool = Pool::open(&dir, "ro", &layout(), None, Access::ReadOnly).unwrap();
        let h = pool.book().handle_from_raw(0).unwrap();
        let (ptr, _) = pool.chunk(h).unwrap();
        // SAFETY: deliberately not sound: this is the write a read-only mapping must
        // stop, and it does so by killing this (child) process with SIGSEGV.
        unsafe { ptr.write_volatile(0xee) };
        // Reached only if the write did not fault.
        std::process::exit(0);
    }
    let dir = tempfile::tempdir().unwrap();
    let creator = Pool::create(dir.path(), "ro", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let (ptr, _) = creator.chunk(creator.book().handle_from_raw(0).unwrap()).unwrap();
    // SAFETY: 64-byte chunk of our own read-write mapping; the child only reads it.
    unsafe { ptr.write(7) };
    let status = wait(spawn_self(
        "a_write_through_a_read_only_payload_faults",
        "writer",
        &[(DIR_ENV, dir.path().display().to_string())],
    ));
    assert_eq!(status.signal(), Some(libc_sigsegv()), "child ended with {status}");
    // SAFETY: as above; the child is gone.
    assert_eq!(unsafe { ptr.read() }, 7, "the faulting write changed nothing");
}

fn libc_sigsegv() -> i32 {
    rustix::process::Signal::SEGV.as_raw()
}

/// Makes the read-only `reader` writable from 8 threads at once, then writes through
/// it and checks `other` (another mapping of the same payload) sees the write.
fn upgrade_and_write(reader: Arc<Pool>, other: &Pool) {
    assert!(reader.payload_region().read_only());
    let me = Owner::new(1).unwrap();
    assert!(reader.loan(8, &mut 0, me).is_err());
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (reader, barrier) = (reader.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                reader.make_payload_writable().unwrap();
                assert!(!reader.payload_region().read_only());
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    reader.make_payload_writable().unwrap();
    assert_eq!(reader.payload_access(), Access::ReadWrite);
    let h = reader.loan(4000, &mut 0, me).unwrap();
    let (ptr, len) = reader.chunk(h).unwrap();
    // SAFETY: the chunk is loaned to us and `len` bytes long; the mapping is writable.
    unsafe { ptr.write_bytes(0x5a, len) };
    let (seen, _) = other.chunk(h).unwrap();
    // SAFETY: the same chunk through the other mapping; nobody writes it meanwhile.
    assert_eq!(unsafe { (seen.read(), seen.add(len - 1).read()) }, (0x5a, 0x5a));
    reader.book().release(h, me).unwrap();
}

#[test]
fn a_read_only_file_payload_becomes_writable() {
    let dir = tempfile::tempdir().unwrap();
    let creator = Pool::create(dir.path(), "up", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let reader = Pool::open(dir.path(), "up", &layout(), None, Access::ReadOnly).unwrap();
    upgrade_and_write(Arc::new(reader), &creator);
}

#[test]
fn a_read_only_memfd_payload_becomes_writable() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, id) = create_memfd("up", layout().payload_len(), PageSize::Base).unwrap();
    let file = seg.file().try_clone().unwrap();
    let creator =
        Pool::create_with_payload(dir.path(), "m", &layout(), MemoryType::Cpu, 0o600, 0, seg).unwrap();
    let label = PathBuf::from("memfd:up");
    let payload = open_memfd(file, label, Access::ReadOnly, (id, PageSize::Base)).unwrap();
    let reader = Pool::open_with_payload(dir.path(), "m", &layout(), None, 0, payload).unwrap();
    upgrade_and_write(Arc::new(reader), &creator);
}

#[test]
fn a_payload_file_opened_read_only_cannot_become_writable() {
    let dir = tempfile::tempdir().unwrap();
    let _creator = Pool::create(dir.path(), "fixed", &layout(), MemoryType::Cpu, 0o600).unwrap();
    let payload = read_only_payload(dir.path(), "fixed.pool");
    let reader = Pool::open_with_payload(dir.path(), "fixed", &layout(), None, 0, payload).unwrap();
    assert!(matches!(
        reader.make_payload_writable(),
        Err(MakeWritableError::FileReadOnly { .. })
    ));
    assert!(reader.payload_region().read_only());
}

fn read_only_payload(dir: &Path, name: &str) -> iox_mempool::segment::Segment {
    iox_mempool::segment::Segment::open(dir, name, Access::ReadOnly, 1).unwrap()
}
