//! The CUDA pinner against the driver double (`cuda_double/`), in child processes
//! whose `LD_LIBRARY_PATH` makes cudarc load it, every call checked in its log. With
//! `IOX_CUDA_DRIVER=real` (scripts/gpu-check.sh on a GPU machine) the same children
//! run against the installed driver and only behaviour is checked.
//!
//! Issue 18's tests here: 6 (a range the user registered stays registered), 9 (the
//! calling thread's context is left as found), 11 (the read-only flag only where the
//! device supports it); and the double's own semantics, which the other tests rely on.

use std::path::Path;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUresult};
use iox_cuda::{CudaError, CudaPinner};
use iox_mempool::segment::Access;
use iox_mempool::{MemoryType, Pool, PoolLayout};
use iox_testkit::cuda_double::{self, Call, Driver, names};

/// The driver for `test`'s children, or `None` (after a skip line) when the real
/// driver was asked for and none is usable.
fn driver(test: &str, dir: &Path) -> Option<Driver> {
    Driver::for_test(test, dir, || CudaPinner::new(0).map(drop))
}

/// A test directory on tmpfs where there is one: the children create the pools they
/// pin in it, and Linux refuses device pins of shared pages of files on disk
/// filesystems (the real driver: `CUDA_ERROR_INVALID_VALUE`; iox says why,
/// `PinError::NotShmem`).
fn shm_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// A 4 MiB CudaPinned pool under the test directory (created by this process).
fn pool(name: &str) -> Arc<Pool> {
    let layout = PoolLayout::new(&[(1 << 20, 4)]).unwrap();
    Arc::new(
        Pool::create(
            &cuda_double::test_dir(),
            name,
            &layout,
            MemoryType::CudaPinned,
            0o600,
        )
        .unwrap(),
    )
}

fn ok(call: &'static str, r: CUresult) {
    assert_eq!(r, CUresult::CUDA_SUCCESS, "{call}");
}

fn current() -> sys::CUcontext {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: the driver is initialised (iox_cuda::register ran); valid out-pointer.
    ok("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut ctx) });
    ctx
}

/// The calls of `pid` that iox's pinner makes on the registration path.
fn pin_calls(calls: &[Call]) -> Vec<&Call> {
    calls.iter().filter(|c| c.name.starts_with("cuMemHost")).collect()
}

#[test]
fn the_double_keeps_the_drivers_register_semantics() {
    const TEST: &str = "the_double_keeps_the_drivers_register_semantics";
    if iox_testkit::role().is_some() {
        iox_cuda::register(0).unwrap();
        let p = pool("sem");
        let (base, len) = (p.payload_region().addr(), p.payload_region().len());
        let mut ctx = std::ptr::null_mut();
        // SAFETY: initialised driver, valid pointers; the pool stays mapped until the
        // end of this block, and every registration below is undone before that.
        unsafe {
            let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
            // Without a current context: refused.
            assert_eq!(
                sys::cuMemHostRegister_v2(base.cast(), len, flags),
                CUresult::CUDA_ERROR_INVALID_CONTEXT
            );
            ok("retain", sys::cuDevicePrimaryCtxRetain(&mut ctx, 0));
            ok("push", sys::cuCtxPushCurrent_v2(ctx));
            ok("register", sys::cuMemHostRegister_v2(base.cast(), len, flags));
            // Any overlap: already registered (712).
            assert_eq!(
                sys::cuMemHostRegister_v2(base.add(4096).cast(), 4096, flags),
                CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
            );
            // Not the base of a registration: not registered (713).
            assert_eq!(
                sys::cuMemHostUnregister(base.add(4096).cast()),
                CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
            );
            let mut dptr = 0;
            ok(
                "device pointer",
                sys::cuMemHostGetDevicePointer_v2(&mut dptr, base.add(100).cast(), 0),
            );
            assert_ne!(dptr, base as u64 + 100, "device addresses are not host addresses");
            let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
            ok(
                "host pointer",
                sys::cuPointerGetAttribute(
                    (&mut host as *mut *mut std::ffi::c_void).cast(),
                    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_HOST_POINTER,
                    dptr,
                ),
            );
            assert_eq!(host as usize, base as usize + 100);
            ok("unregister", sys::cuMemHostUnregister(base.cast()));
            assert_eq!(
                sys::cuMemHostUnregister(base.cast()),
                CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
            );
            // Memory that is not mapped: refused.
            let page = 4096;
            let hole = libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(hole, libc::MAP_FAILED);
            assert_eq!(libc::munmap(hole, page), 0);
            assert_eq!(
                sys::cuMemHostRegister_v2(hole, page, flags),
                CUresult::CUDA_ERROR_INVALID_VALUE
            );
            // A read-only mapping needs the read-only flag.
            let ro = libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_eq!(
                sys::cuMemHostRegister_v2(ro, page, flags),
                CUresult::CUDA_ERROR_INVALID_VALUE
            );
            ok(
                "register read-only",
                sys::cuMemHostRegister_v2(ro, page, flags | sys::CU_MEMHOSTREGISTER_READ_ONLY),
            );
            // Unregistering needs the range still mapped.
            assert_eq!(libc::munmap(ro, page), 0);
            assert_eq!(sys::cuMemHostUnregister(ro), CUresult::CUDA_ERROR_INVALID_VALUE);
            // The failure asked for (IOX_CUDA_DOUBLE_FAIL): out of memory, once.
            assert_eq!(
                sys::cuMemAlloc_v2(&mut dptr, 64),
                CUresult::CUDA_ERROR_OUT_OF_MEMORY
            );
            ok("alloc", sys::cuMemAlloc_v2(&mut dptr, 64));
            ok("free", sys::cuMemFree_v2(dptr));
            let mut popped = std::ptr::null_mut();
            ok("pop", sys::cuCtxPopCurrent_v2(&mut popped));
            assert_eq!(popped, ctx);
            assert_eq!(
                sys::cuCtxPopCurrent_v2(&mut popped),
                CUresult::CUDA_ERROR_INVALID_CONTEXT
            );
            ok("release", sys::cuDevicePrimaryCtxRelease_v2(0));
            let mut name = std::ptr::null();
            ok(
                "name",
                sys::cuGetErrorName(CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, &mut name),
            );
            assert_eq!(
                std::ffi::CStr::from_ptr(name).to_str().unwrap(),
                "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"
            );
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let driver = Driver::new(dir.path());
    if !driver.is_double() {
        eprintln!("NOTE {TEST}: checks the double itself; nothing to do against the real driver");
        return;
    }
    let pid = driver.run(
        TEST,
        "child",
        dir.path(),
        &[(cuda_double::FAIL_ENV, "cuMemAlloc_v2:2:1".into())],
    );
    let calls = driver.calls_of(pid).unwrap();
    assert!(calls.iter().all(|c| c.tid > 0), "{calls:?}");
    let injected: Vec<_> = calls
        .iter()
        .filter(|c| c.get("injected") == Some("yes"))
        .collect();
    assert_eq!(injected.len(), 1, "{injected:?}");
    assert_eq!(injected[0].name, "cuMemAlloc_v2");
}

/// Test 6: the user registered the pool's range before iox pinned it. Pinning
/// succeeds (the driver's "already registered"), and iox's unpin leaves the user's
/// registration alone: the user unregisters it afterwards, successfully.
#[test]
fn a_range_the_user_registered_stays_registered_after_iox_unpins() {
    const TEST: &str = "a_range_the_user_registered_stays_registered_after_iox_unpins";
    if iox_testkit::role().is_some() {
        iox_cuda::register(0).unwrap();
        let p = pool("user");
        let (base, len) = (p.payload_region().addr(), p.payload_region().len());
        let mut ctx = std::ptr::null_mut();
        // SAFETY: initialised driver; the pool stays mapped until after the user's
        // unregister below.
        unsafe {
            ok("retain", sys::cuDevicePrimaryCtxRetain(&mut ctx, 0));
            ok("push", sys::cuCtxPushCurrent_v2(ctx));
            ok(
                "user register",
                sys::cuMemHostRegister_v2(
                    base.cast(),
                    len,
                    sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP,
                ),
            );
        }
        let pin = p.pin().expect("pinning a range the user registered succeeds");
        assert!(
            pin.device_base().is_some(),
            "the user's DEVICEMAP registration maps it"
        );
        drop(pin);
        assert_eq!(iox_mempool::pin::pin_count(base, len), 0);
        // Still registered: the driver still maps it, and the user's unregister works.
        let mut dptr = 0;
        // SAFETY: as above; the user's context is current.
        unsafe {
            ok(
                "still mapped",
                sys::cuMemHostGetDevicePointer_v2(&mut dptr, base.cast(), 0),
            );
            ok("user unregister", sys::cuMemHostUnregister(base.cast()));
            let mut popped = std::ptr::null_mut();
            ok("pop", sys::cuCtxPopCurrent_v2(&mut popped));
            ok("release", sys::cuDevicePrimaryCtxRelease_v2(0));
        }
        return;
    }
    let dir = shm_dir();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let pid = driver.run(TEST, "child", dir.path(), &[]);
    let Some(calls) = driver.calls_of(pid) else {
        return;
    };
    let pins = pin_calls(&calls);
    let summary: Vec<_> = pins.iter().map(|c| (c.name.as_str(), c.result)).collect();
    assert_eq!(
        summary,
        [
            ("cuMemHostRegister_v2", 0),         // the user's
            ("cuMemHostRegister_v2", 712),       // iox's: already registered
            ("cuMemHostGetDevicePointer_v2", 0), // iox learns the base's device address
            ("cuMemHostGetDevicePointer_v2", 0), // the user's check
            ("cuMemHostUnregister", 0),          // the user's, the only one
        ],
        "{:#?}",
        names(&calls)
    );
}

/// Test 9: iox pushes its context for each driver call and pops it: a thread with a
/// context of its own, or none, has the same current afterwards. The double records
/// the current context per thread; iox never calls cuCtxSetCurrent.
#[test]
fn iox_leaves_the_calling_threads_context_as_it_found_it() {
    const TEST: &str = "iox_leaves_the_calling_threads_context_as_it_found_it";
    if iox_testkit::role().is_some() {
        iox_cuda::register(0).unwrap();
        // A thread with no current context keeps none.
        assert!(current().is_null());
        let p = pool("none");
        let pin = p.pin().unwrap();
        assert!(current().is_null(), "register left a context current");
        iox_cuda::device_pointer(p.payload_region().addr()).unwrap();
        assert!(current().is_null(), "device_pointer left a context current");
        drop(pin);
        assert!(current().is_null(), "unregister left a context current");
        // A thread with its own context keeps it, in another thread too.
        std::thread::spawn(|| {
            let mut own = std::ptr::null_mut();
            // SAFETY: initialised driver; valid out-pointer; the context is destroyed
            // below, after its last use.
            ok("create", unsafe { sys::cuCtxCreate_v2(&mut own, 0, 0) });
            assert_eq!(current(), own);
            let p = pool("own");
            let pin = p.pin().unwrap();
            assert_eq!(current(), own, "register switched the thread's context");
            iox_cuda::device_pointer(p.payload_region().addr()).unwrap();
            assert_eq!(current(), own, "device_pointer switched the thread's context");
            let mut buf = iox_cuda::DeviceBuffer::new(0, 64).unwrap();
            buf.copy_from_host(&[7; 64]).unwrap();
            drop(buf);
            assert_eq!(current(), own, "DeviceBuffer switched the thread's context");
            drop(pin);
            assert_eq!(current(), own, "unregister switched the thread's context");
            // SAFETY: ours, current, no longer used.
            ok("destroy", unsafe { sys::cuCtxDestroy_v2(own) });
        })
        .join()
        .unwrap();
        return;
    }
    let dir = shm_dir();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let pid = driver.run(TEST, "child", dir.path(), &[]);
    let Some(calls) = driver.calls_of(pid) else {
        return;
    };
    assert!(
        !calls.iter().any(|c| c.name == "cuCtxSetCurrent"),
        "{:#?}",
        names(&calls)
    );
    // Per thread, every push is popped, and every register/unregister/lookup runs
    // with iox's context pushed.
    let mut depth: std::collections::HashMap<u32, i32> = Default::default();
    for c in &calls {
        let d = depth.entry(c.tid).or_default();
        match c.name.as_str() {
            "cuCtxPushCurrent_v2" => *d += 1,
            "cuCtxPopCurrent_v2" => *d -= 1,
            n if n.starts_with("cuMemHost") => assert!(*d > 0, "{n} without iox's context pushed"),
            _ => {}
        }
    }
    assert!(depth.values().all(|&d| d == 0), "unbalanced push/pop: {depth:?}");
    let registers = calls.iter().filter(|c| c.name == "cuMemHostRegister_v2").count();
    assert_eq!(registers, 2, "{:#?}", names(&calls));
    assert_eq!(depth.len(), 2, "calls from two threads");
}

/// Test 11: a read-only mapping is registered with `READ_ONLY` where the device
/// reports `CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED`; elsewhere pinning
/// it fails naming that attribute, before any registration is tried. A writable
/// mapping never gets the flag.
#[test]
fn the_read_only_flag_is_used_only_where_the_device_supports_it() {
    const TEST: &str = "the_read_only_flag_is_used_only_where_the_device_supports_it";
    if let Some(role) = iox_testkit::role() {
        iox_cuda::register(0).unwrap();
        let supported = CudaPinner::new(0).unwrap().read_only_supported();
        let dir = cuda_double::test_dir();
        let layout = PoolLayout::new(&[(1 << 20, 4)]).unwrap();
        let name = format!("ro-{role}");
        let writable = Arc::new(Pool::create(&dir, &name, &layout, MemoryType::CudaPinned, 0o600).unwrap());
        // A process holding the payload read-only (a writable descriptor would be
        // registered writable, see `Pool::pin`).
        let payload =
            iox_mempool::segment::Segment::open(&dir, &format!("{name}.pool"), Access::ReadOnly, 1).unwrap();
        let read_only = Arc::new(Pool::open_with_payload(&dir, &name, &layout, None, 0, payload).unwrap());
        assert!(read_only.payload_region().read_only());
        match read_only.pin() {
            Ok(pin) => {
                assert!(supported, "pinned read-only memory on a device without support");
                assert!(pin.device_base().is_some());
            }
            Err(e) => {
                assert!(!supported, "{e}");
                let text = e.to_string();
                assert!(
                    text.contains("CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED"),
                    "{text}"
                );
                assert_eq!(
                    iox_mempool::pin::pin_count(
                        read_only.payload_region().addr(),
                        read_only.payload_region().len()
                    ),
                    0
                );
            }
        }
        let _pin = writable.pin().unwrap();
        if role != "real" {
            assert_eq!(role == "unsupported", !supported, "the double was told {role}");
        }
        return;
    }
    let dir = shm_dir();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    if !driver.is_double() {
        // One run on the real device: whichever it reports, the behaviour matches.
        driver.run(TEST, "real", dir.path(), &[]);
        return;
    }
    for (role, value) in [("supported", "1"), ("unsupported", "0")] {
        let pid = driver.run(
            TEST,
            role,
            dir.path(),
            &[(cuda_double::READ_ONLY_ENV, value.into())],
        );
        let calls = driver.calls_of(pid).unwrap();
        let registers: Vec<(u64, Option<&str>)> = calls
            .iter()
            .filter(|c| c.name == "cuMemHostRegister_v2")
            .map(|c| {
                (
                    c.num("flags").unwrap() & u64::from(sys::CU_MEMHOSTREGISTER_READ_ONLY),
                    c.get("mapped"),
                )
            })
            .collect();
        let expected: &[(u64, Option<&str>)] = if value == "1" {
            &[(8, Some("ro")), (0, Some("rw"))]
        } else {
            &[(0, Some("rw"))]
        };
        assert_eq!(registers, expected, "{role}: {:#?}", names(&calls));
        let asked = calls.iter().any(|c| {
            c.name == "cuDeviceGetAttribute"
                && c.num("attribute")
                    == Some(
                        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED as u64,
                    )
        });
        assert!(asked, "the pinner reads the attribute");
    }
}

#[test]
fn cuda_error_names_the_attribute_for_read_only() {
    let text = CudaError::ReadOnlyRegisterUnsupported(0).to_string();
    assert!(
        text.contains("CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED"),
        "{text}"
    );
}
