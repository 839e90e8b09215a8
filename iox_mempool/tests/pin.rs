//! The pin registry: many acquirers, one pin; the last guard, one unpin; `Locked`
//! pools really are page-locked (VmLck) while pinned and only then.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use iox_mempool::pin::{self, pin_count};
use iox_mempool::segment::{Access, Segment};
use iox_mempool::{MemoryType, PinError, Pinner, Pool, PoolLayout, Region, register_pinner};
use iox_testkit::{role, spawn_self, vm_lck_kib, wait_ok};

#[derive(Default)]
struct CountingPinner {
    pins: AtomicUsize,
    unpins: AtomicUsize,
    log: Mutex<Vec<(&'static str, usize, usize)>>,
}

impl Pinner for CountingPinner {
    fn pin(&self, r: &Region) -> Result<(), PinError> {
        self.pins.fetch_add(1, Ordering::SeqCst);
        self.log.lock().unwrap().push(("pin", r.addr() as usize, r.len()));
        // Slow, like a driver: widens the window for a racing second registration.
        std::thread::sleep(Duration::from_millis(20));
        Ok(())
    }
    fn unpin(&self, r: &Region) -> Result<(), PinError> {
        self.unpins.fetch_add(1, Ordering::SeqCst);
        self.log
            .lock()
            .unwrap()
            .push(("unpin", r.addr() as usize, r.len()));
        Ok(())
    }
}

#[test]
fn eight_threads_one_pin_one_unpin() {
    let code = MemoryType::user(0x0101).unwrap();
    let pinner = Arc::new(CountingPinner::default());
    register_pinner(code, pinner.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(4096, 16)]).unwrap();
    let pool = Arc::new(Pool::create(dir.path(), "pins", &layout, code, 0o600).unwrap());
    let barrier = Arc::new(Barrier::new(9));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (pool, barrier) = (pool.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let guard = pool.pin().unwrap();
                barrier.wait(); // all 8 hold a guard now
                barrier.wait(); // main has checked
                drop(guard);
            })
        })
        .collect();
    barrier.wait();
    barrier.wait();
    let region = pool.payload_region();
    assert_eq!(pinner.pins.load(Ordering::SeqCst), 1);
    assert_eq!(pin_count(region.addr(), region.len()), 8);
    assert_eq!(pinner.unpins.load(Ordering::SeqCst), 0);
    barrier.wait();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(pinner.pins.load(Ordering::SeqCst), 1);
    assert_eq!(pinner.unpins.load(Ordering::SeqCst), 1);
    assert_eq!(pin_count(region.addr(), region.len()), 0);
    let log = pinner.log.lock().unwrap();
    assert_eq!(log[0], ("pin", region.addr() as usize, region.len()));
    assert_eq!(log[1], ("unpin", region.addr() as usize, region.len()));
}

#[test]
fn unregistered_types_fail_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(64, 1)]).unwrap();
    let cuda = Arc::new(Pool::create(dir.path(), "cuda", &layout, MemoryType::CudaPinned, 0o600).unwrap());
    let e = cuda.pin().unwrap_err();
    assert!(matches!(
        e,
        PinError::NoPinner {
            memory_type: MemoryType::CudaPinned,
            ..
        }
    ));
    assert!(e.to_string().contains("cuda"), "{e}");
    let user = Arc::new(
        Pool::create(
            dir.path(),
            "user",
            &layout,
            MemoryType::user(0x0777).unwrap(),
            0o600,
        )
        .unwrap(),
    );
    let e = user.pin().unwrap_err();
    assert!(
        matches!(
            e,
            PinError::NoPinner { memory_type, .. } if memory_type == MemoryType::user(0x0777).unwrap()
        ),
        "{e}"
    );
    let cpu = Arc::new(Pool::create(dir.path(), "cpu", &layout, MemoryType::Cpu, 0o600).unwrap());
    assert!(!cpu.pin().unwrap().is_pinned());
}

/// A pinner that refuses the way the CUDA driver refuses a file it cannot pin.
struct RefusingPinner;

impl Pinner for RefusingPinner {
    fn pin(&self, _: &Region) -> Result<(), PinError> {
        Err(PinError::Pinner(
            "cuMemHostRegister failed: CUDA_ERROR_INVALID_VALUE (1)".into(),
        ))
    }
    fn unpin(&self, _: &Region) -> Result<(), PinError> {
        unreachable!("nothing was pinned")
    }
}

/// A refused pin of a pool whose memory is a file outside tmpfs says so and names
/// the fix; on tmpfs the pinner's own message stands. (The real driver refused a
/// pool file on ext4 with a bare CUDA_ERROR_INVALID_VALUE on an H200.)
#[test]
fn a_refused_pin_of_a_disk_file_names_the_filesystem() {
    let code = MemoryType::user(0x0103).unwrap();
    register_pinner(code, Arc::new(RefusingPinner)).unwrap();
    let layout = PoolLayout::new(&[(4096, 1)]).unwrap();
    let shm = std::path::Path::new("/dev/shm");
    let dirs = [
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
        tempfile::tempdir_in(if shm.is_dir() {
            shm
        } else {
            std::path::Path::new("/tmp")
        })
        .unwrap(),
    ];
    let mut seen = [false; 2];
    for dir in &dirs {
        let pool = Arc::new(Pool::create(dir.path(), "refused", &layout, code, 0o600).unwrap());
        let magic = rustix::fs::statfs(dir.path()).unwrap().f_type as u64 & 0xffff_ffff;
        let e = pool.pin().unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("cuMemHostRegister failed"), "{text}");
        if magic == 0x0102_1994 {
            assert!(matches!(e, PinError::Pinner(_)), "{e:?}");
            seen[1] = true;
        } else {
            assert!(
                matches!(e, PinError::NotShmem { magic: m, .. } if m == magic),
                "{e:?}"
            );
            assert!(text.contains("/dev/shm") && text.contains("memfd"), "{text}");
            seen[0] = true;
        }
        assert_eq!(
            pin_count(pool.payload_region().addr(), pool.payload_region().len()),
            0
        );
    }
    if !seen[0] || !seen[1] {
        eprintln!("note: only one kind of filesystem here (seen disk/tmpfs: {seen:?})");
    }
    // `mlock` pins any file: a Locked refusal is never re-explained.
    let locked =
        Arc::new(Pool::create(dirs[0].path(), "locked", &layout, MemoryType::Locked, 0o600).unwrap());
    assert!(locked.pin().is_ok());
}

#[test]
fn conflicting_memory_types_on_one_region_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(4096, 1)]).unwrap();
    let pool = Pool::create(dir.path(), "c", &layout, MemoryType::Locked, 0o600).unwrap();
    // SAFETY: `pool` stays mapped until the end of the test, after the guard drops.
    let _g = unsafe { pin::acquire(pool.payload_region(), MemoryType::Locked) }.unwrap();
    // SAFETY: as above (and this one fails, so there is no guard).
    let e = unsafe { pin::acquire(pool.payload_region(), MemoryType::user(0x0100).unwrap()) }.unwrap_err();
    assert!(matches!(e, PinError::Conflict { .. }), "{e}");
}

/// Runs in a child process so no other test's pins change VmLck meanwhile.
#[test]
fn locked_pool_raises_vm_lck_while_pinned() {
    if role().is_none() {
        let child = spawn_self("locked_pool_raises_vm_lck_while_pinned", "vmlck", &[]);
        return wait_ok(child, Duration::from_secs(60));
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(1 << 20, 8)]).unwrap(); // 8 MiB
    let len_kib = layout.payload_len() as u64 / 1024;
    let before = vm_lck_kib();
    let unpinned = Arc::new(Pool::create(dir.path(), "cpu", &layout, MemoryType::Cpu, 0o600).unwrap());
    let g = unpinned.pin().unwrap();
    assert_eq!(vm_lck_kib(), before, "a Cpu pool must not be locked");
    drop(g);
    let locked = Arc::new(Pool::create(dir.path(), "locked", &layout, MemoryType::Locked, 0o600).unwrap());
    assert_eq!(
        vm_lck_kib(),
        before,
        "creating a Locked pool does not lock it; pinning does"
    );
    let guard = match locked.pin() {
        Ok(g) => g,
        Err(e) => {
            // Only a memlock limit without CAP_IPC_LOCK may stop this test.
            iox_testkit::skip(
                "locked_pool_raises_vm_lck_while_pinned",
                iox_testkit::REQUIRE_MLOCK,
                format!("mlock refused ({e}); raise `ulimit -l` or run as root"),
            );
            return;
        }
    };
    let second = locked.pin().unwrap();
    let during = vm_lck_kib();
    assert!(
        during >= before + len_kib,
        "VmLck {during} KiB, expected >= {before} + {len_kib}"
    );
    drop(guard);
    assert!(
        vm_lck_kib() >= before + len_kib,
        "still pinned by the second guard"
    );
    drop(second);
    assert_eq!(vm_lck_kib(), before);
}

/// Records how each region it is handed is mapped.
#[derive(Default)]
struct ReadOnlyRecorder {
    seen: Mutex<Vec<(&'static str, bool)>>,
}

impl Pinner for ReadOnlyRecorder {
    fn pin(&self, r: &Region) -> Result<(), PinError> {
        self.seen.lock().unwrap().push(("pin", r.read_only()));
        Ok(())
    }
    fn unpin(&self, r: &Region) -> Result<(), PinError> {
        self.seen.lock().unwrap().push(("unpin", r.read_only()));
        Ok(())
    }
}

/// A process that may write a pool (its payload's file is open read-write) registers
/// it once, writable, even when the first pin comes while its mapping is read-only (a
/// subscriber built before a publisher): the registration a publisher needs is the one
/// made, and nothing is ever unregistered and registered again while a guard lives.
#[test]
fn a_pool_that_can_be_written_is_registered_writable_once_whoever_pins_first() {
    let code = MemoryType::user(0x0102).unwrap();
    let pinner = Arc::new(ReadOnlyRecorder::default());
    register_pinner(code, pinner.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(4096, 2)]).unwrap();
    let _creator = Pool::create(dir.path(), "ro", &layout, code, 0o600).unwrap();
    let reader = Arc::new(Pool::open(dir.path(), "ro", &layout, Some(code), Access::ReadOnly).unwrap());
    assert!(reader.payload_region().read_only());
    let first = reader.pin().unwrap();
    assert!(
        !reader.payload_region().read_only(),
        "made writable to be registered as the process may use it"
    );
    reader.make_payload_writable().unwrap();
    let writer = reader.pin().unwrap();
    let (addr, len) = (reader.payload_region().addr(), reader.payload_region().len());
    assert_eq!(pin::pin_count(addr, len), 2);
    drop(first);
    drop(writer);
    assert_eq!(pin::pin_count(addr, len), 0);
    assert_eq!(*pinner.seen.lock().unwrap(), [("pin", false), ("unpin", false)]);
}

/// A process holding only a read-only descriptor registers its read-only mapping;
/// `Locked` pools stay mapped as they are (`mlock` pins either).
#[test]
fn a_read_only_descriptor_is_registered_read_only() {
    let code = MemoryType::user(0x0103).unwrap();
    let pinner = Arc::new(ReadOnlyRecorder::default());
    register_pinner(code, pinner.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(4096, 2)]).unwrap();
    let _creator = Pool::create(dir.path(), "fixed", &layout, code, 0o600).unwrap();
    let payload = Segment::open(dir.path(), "fixed.pool", Access::ReadOnly, 1).unwrap();
    let reader = Arc::new(Pool::open_with_payload(dir.path(), "fixed", &layout, None, 0, payload).unwrap());
    let guard = reader.pin().unwrap();
    assert!(reader.payload_region().read_only());
    drop(guard);
    assert_eq!(*pinner.seen.lock().unwrap(), [("pin", true), ("unpin", true)]);
    let _locked_creator = Pool::create(dir.path(), "locked", &layout, MemoryType::Locked, 0o600).unwrap();
    let locked = Arc::new(Pool::open(dir.path(), "locked", &layout, None, Access::ReadOnly).unwrap());
    drop(locked.pin());
    assert!(
        locked.payload_region().read_only(),
        "a Locked reader keeps its read-only mapping"
    );
}

/// Pinned directly (not through `Pool::pin`) while read-only and then asked for
/// writable, the registration is refused, not swapped under the first guard.
#[test]
fn a_read_only_registration_is_never_swapped_for_a_writable_one() {
    let code = MemoryType::user(0x0109).unwrap();
    let pinner = Arc::new(ReadOnlyRecorder::default());
    register_pinner(code, pinner.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    drop(Segment::create(dir.path(), "s", 4096, 0o600).unwrap());
    let seg = Segment::open_upgradable(dir.path(), "s", Access::ReadOnly, 4096).unwrap();
    // SAFETY: `seg` stays mapped until after both guards are gone (dropped below).
    let reader = unsafe { pin::acquire(Region::of(&seg), code) }.unwrap();
    seg.make_writable().unwrap();
    // SAFETY: as above.
    let refused = unsafe { pin::acquire(Region::of(&seg), code) }.unwrap_err();
    assert!(matches!(refused, PinError::RegisteredReadOnly), "{refused}");
    assert_eq!(pin_count(seg.as_ptr(), seg.len()), 1);
    drop(reader);
    assert_eq!(*pinner.seen.lock().unwrap(), [("pin", true), ("unpin", true)]);
}
