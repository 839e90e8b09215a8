//! The CUDA driver double's virtual memory management, streams, events and device
//! UUIDs, driven through cudarc's raw bindings in child processes whose
//! `LD_LIBRARY_PATH` makes cudarc load the double (as in `double.rs`), every call
//! checked in its log.
//!
//! The sharing test (device memory exported by one process, imported by another) also
//! runs against the real driver (`IOX_CUDA_DRIVER=real`), checking behaviour only; the
//! others check the double's own semantics and have nothing to do there.

use std::ffi::{c_int, c_void};
use std::path::Path;
use std::time::Duration;

use cudarc::driver::sys::{self, CUresult};
use iox_cuda::CudaPinner;
use iox_testkit::cuda_double::{self, Call, Driver, names};

const UUIDS_ENV: &str = "IOX_CUDA_DOUBLE_UUIDS";
const DEVICES_ENV: &str = "IOX_CUDA_DOUBLE_DEVICES";
/// The descriptor number a reader inherits, in its environment.
const FD_ENV: &str = "IOX_TEST_VMM_FD";
/// The double's granularity (2 MiB).
const DOUBLE_GRANULARITY: usize = 2 << 20;

fn ok(what: &str, r: CUresult) {
    assert_eq!(r, CUresult::CUDA_SUCCESS, "{what}");
}

fn is(what: &str, r: CUresult, expected: CUresult) {
    assert_eq!(r, expected, "{what}");
}

/// `cuInit`, then device 0's primary context made current on this thread.
fn init() -> sys::CUcontext {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: plain driver calls with valid out-pointers.
    unsafe {
        ok("init", sys::cuInit(0));
        ok("retain", sys::cuDevicePrimaryCtxRetain(&mut ctx, 0));
        ok("push", sys::cuCtxPushCurrent_v2(ctx));
    }
    ctx
}

const POSIX_FD: sys::CUmemAllocationHandleType = sys::CUmemAllocationHandleType_enum(1);
const NO_HANDLE: sys::CUmemAllocationHandleType = sys::CUmemAllocationHandleType_enum(0);

/// Pinned memory on device `device`, exportable as a descriptor if `fd`.
fn prop(device: c_int, fd: bool) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct: all-zero is a valid value of every field.
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = if fd { POSIX_FD } else { NO_HANDLE };
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    p
}

fn granularity(p: &sys::CUmemAllocationProp) -> (CUresult, usize) {
    let mut g = 0;
    let option = sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM;
    // SAFETY: valid out-pointer and property.
    let r = unsafe { sys::cuMemGetAllocationGranularity(&mut g, p, option) };
    (r, g)
}

fn create(size: usize, p: &sys::CUmemAllocationProp) -> (CUresult, u64) {
    let mut h = 0xdead;
    // SAFETY: valid out-pointer and property.
    let r = unsafe { sys::cuMemCreate(&mut h, size, p, 0) };
    (r, h)
}

fn export(h: u64) -> (CUresult, c_int) {
    let mut fd: c_int = -1;
    // SAFETY: the out-pointer is an `int`, as the descriptor handle type writes.
    let r = unsafe { sys::cuMemExportToShareableHandle((&mut fd as *mut c_int).cast(), h, POSIX_FD, 0) };
    (r, fd)
}

fn import(fd: c_int) -> (CUresult, u64) {
    let mut h = 0;
    // SAFETY: valid out-pointer; the descriptor travels as a number cast to a pointer,
    // which the driver checks, never dereferences.
    let r = unsafe { sys::cuMemImportFromShareableHandle(&mut h, fd as usize as *mut c_void, POSIX_FD) };
    (r, h)
}

fn reserve(size: usize) -> u64 {
    let mut at = 0;
    // SAFETY: valid out-pointer; no fixed address.
    ok("reserve", unsafe {
        sys::cuMemAddressReserve(&mut at, size, 0, 0, 0)
    });
    at
}

fn map(at: u64, size: usize, offset: usize, h: u64) -> CUresult {
    // SAFETY: the driver checks the range against its reservations.
    unsafe { sys::cuMemMap(at, size, offset, h, 0) }
}

fn set_access(at: u64, size: usize, flags: sys::CUmemAccess_flags) -> CUresult {
    let desc = sys::CUmemAccessDesc {
        location: prop(0, false).location,
        flags,
    };
    // SAFETY: one valid descriptor.
    unsafe { sys::cuMemSetAccess(at, size, &desc, 1) }
}

const READ: sys::CUmemAccess_flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READ;
const READ_WRITE: sys::CUmemAccess_flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

fn write(at: u64, bytes: &[u8]) -> CUresult {
    // SAFETY: `bytes` is readable for its length; the driver checks the device side.
    unsafe { sys::cuMemcpyHtoD_v2(at, bytes.as_ptr().cast(), bytes.len()) }
}

fn read(at: u64, bytes: &mut [u8]) -> CUresult {
    // SAFETY: `bytes` is writable for its length; the driver checks the device side.
    unsafe { sys::cuMemcpyDtoH_v2(bytes.as_mut_ptr().cast(), at, bytes.len()) }
}

fn unmap_free_release(at: u64, size: usize, h: u64) {
    // SAFETY: what this process mapped, reserved and holds, undone once.
    unsafe {
        ok("unmap", sys::cuMemUnmap(at, size));
        ok("free", sys::cuMemAddressFree(at, size));
        ok("release", sys::cuMemRelease(h));
    }
}

/// The descriptors of this process that are the double's allocation memfds.
fn vmm_memfds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().contains("memfd:iox-cuda-double-vmm"))
        .count()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

fn calls_named<'a>(calls: &'a [Call], name: &str) -> Vec<&'a Call> {
    calls.iter().filter(|c| c.name == name).collect()
}

/// The driver for `test`'s children, or `None` (after a skip line) when the real
/// driver was asked for and none is usable.
fn driver(test: &str, dir: &Path) -> Option<Driver> {
    Driver::for_test(test, dir, || CudaPinner::new(0).map(drop))
}

/// The double only, for tests of its own semantics.
fn double(test: &str, dir: &Path) -> Option<Driver> {
    Driver::double_only(test, dir, "checks the double itself")
}

/// (a) One process makes device memory, exports it, maps it and writes a pattern; a
/// second process, started with the exported descriptor inherited, imports it, maps
/// it with read access, reads the same bytes, cannot write them until it has
/// read-write access, and then writes a reply the first process reads.
#[test]
fn vmm_memory_exported_by_one_process_is_read_and_written_by_another() {
    const TEST: &str = "vmm_memory_exported_by_one_process_is_read_and_written_by_another";
    const REPLY: &[u8] = b"written by the importing process";
    match iox_testkit::role().as_deref() {
        Some("owner") => {
            init();
            let p = prop(0, true);
            let (r, g) = granularity(&p);
            ok("granularity", r);
            let size = 2 * g;
            let (r, h) = create(size, &p);
            ok("create", r);
            let (r, fd) = export(h);
            ok("export", r);
            let at = reserve(size);
            ok("map", map(at, size, 0, h));
            ok("access", set_access(at, size, READ_WRITE));
            ok("write", write(at, &pattern(size)));
            // A copy of the descriptor without close-on-exec, for the reader to inherit.
            // SAFETY: `fd` is the open descriptor the export handed to this process.
            let inherited = unsafe { libc::dup(fd) };
            assert!(inherited >= 0);
            let reader = iox_testkit::self_command(TEST, "reader", &[(FD_ENV, inherited.to_string())])
                .spawn()
                .expect("spawn the reader");
            iox_testkit::wait_ok(reader, Duration::from_secs(120));
            // SAFETY: both are this process's, closed once.
            unsafe {
                libc::close(inherited);
                libc::close(fd);
            }
            let mut back = vec![0u8; REPLY.len()];
            ok("read the reply", read(at + g as u64, &mut back));
            assert_eq!(back, REPLY);
            let mut first = vec![0u8; g];
            ok("read", read(at, &mut first));
            assert!(first == pattern(size)[..g], "the exporter's bytes are unchanged");
            unmap_free_release(at, size, h);
        }
        Some("reader") => {
            init();
            let fd: c_int = std::env::var(FD_ENV).unwrap().parse().unwrap();
            let (r, g) = granularity(&prop(0, true));
            ok("granularity", r);
            let size = 2 * g;
            let (r, h) = import(fd);
            ok("import", r);
            // The import holds its own reference: the descriptor may go.
            // SAFETY: the inherited descriptor is this process's, closed once.
            assert_eq!(unsafe { libc::close(fd) }, 0);
            let at = reserve(size);
            ok("map", map(at, size, 0, h));
            ok("read access", set_access(at, size, READ));
            let mut got = vec![0u8; size];
            ok("read", read(at, &mut got));
            assert!(got == pattern(size), "the importer reads what the exporter wrote");
            if !cuda_double::real_driver() {
                // Read access only: no writes (the real driver faults instead).
                is(
                    "write without write access",
                    write(at + g as u64, REPLY),
                    CUresult::CUDA_ERROR_INVALID_VALUE,
                );
            }
            ok("write access", set_access(at, size, READ_WRITE));
            ok("write the reply", write(at + g as u64, REPLY));
            unmap_free_release(at, size, h);
        }
        Some(other) => panic!("unknown role {other}"),
        None => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = driver(TEST, dir.path()) else {
                return;
            };
            let owner = driver.run(TEST, "owner", dir.path(), &[]);
            let Some(calls) = driver.calls() else {
                return;
            };
            let (mine, theirs): (Vec<Call>, Vec<Call>) = calls.into_iter().partition(|c| c.pid == owner);
            assert!(!theirs.is_empty() && theirs.iter().all(|c| c.pid == theirs[0].pid));
            let granularities = calls_named(&mine, "cuMemGetAllocationGranularity");
            assert_eq!(
                granularities[0].num("granularity"),
                Some(DOUBLE_GRANULARITY as u64)
            );
            let exports = calls_named(&mine, "cuMemExportToShareableHandle");
            assert_eq!(exports.len(), 1, "{:#?}", names(&mine));
            assert_eq!((exports[0].result, exports[0].get("type")), (0, Some("1")));
            let imports = calls_named(&theirs, "cuMemImportFromShareableHandle");
            assert_eq!(imports.len(), 1, "{:#?}", names(&theirs));
            assert_eq!(imports[0].result, 0);
            assert_eq!(imports[0].num("size"), Some(2 * DOUBLE_GRANULARITY as u64));
            let writes: Vec<u32> = calls_named(&theirs, "cuMemcpyHtoD_v2")
                .iter()
                .map(|c| c.result)
                .collect();
            assert_eq!(writes, [1, 0], "refused before write access, then done");
            let create = calls_named(&mine, "cuMemCreate");
            assert_eq!(create[0].get("handle_types"), Some("1"));
            for c in mine.iter().chain(&theirs) {
                assert!(c.name.starts_with("cu") && c.get("result").is_some(), "{c:?}");
            }
        }
    }
}

/// (b) Calls out of order or with bad arguments fail with the documented codes, and
/// the process goes on (no crash): map before reserve, copies before access,
/// address free while mapped, export without the descriptor handle type, imports of
/// descriptors that are not exports, sizes that are not granularity multiples.
#[test]
fn vmm_calls_out_of_order_fail_with_the_documented_codes() {
    const TEST: &str = "vmm_calls_out_of_order_fail_with_the_documented_codes";
    const INVALID: CUresult = CUresult::CUDA_ERROR_INVALID_VALUE;
    if iox_testkit::role().is_some() {
        let p = prop(0, false);
        is(
            "create before cuInit",
            create(DOUBLE_GRANULARITY, &p).0,
            CUresult::CUDA_ERROR_NOT_INITIALIZED,
        );
        init();
        let g = DOUBLE_GRANULARITY;
        let (r, got) = granularity(&p);
        assert_eq!((r, got), (CUresult::CUDA_SUCCESS, g));
        // Properties: a device the double does not have, an invalid type.
        is(
            "granularity of device 7",
            granularity(&prop(7, false)).0,
            CUresult::CUDA_ERROR_INVALID_DEVICE,
        );
        is(
            "create on device 7",
            create(g, &prop(7, false)).0,
            CUresult::CUDA_ERROR_INVALID_DEVICE,
        );
        let mut bad = p;
        bad.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_INVALID;
        is("create of an invalid type", create(g, &bad).0, INVALID);
        // Sizes that are not a non-zero granularity multiple.
        is("create of g + 4 KiB", create(g + 4096, &p).0, INVALID);
        is("create of 0", create(0, &p).0, INVALID);
        let (r, h) = create(2 * g, &p);
        ok("create", r);
        // Export of an allocation made without the descriptor handle type.
        is("export without the handle type", export(h).0, INVALID);
        // Map before reserve: a range reserved and freed again.
        let gone = reserve(2 * g);
        // SAFETY: frees what was just reserved.
        ok("free", unsafe { sys::cuMemAddressFree(gone, 2 * g) });
        is("map before reserve", map(gone, 2 * g, 0, h), INVALID);
        let at = reserve(2 * g);
        is("map of g + 4 KiB", map(at, g + 4096, 0, h), INVALID);
        is("map at half a granule", map(at, g, g / 2, h), INVALID);
        is("map past the allocation", map(at, 2 * g, g, h), INVALID);
        is(
            "map past the reservation",
            map(at + g as u64, 2 * g, 0, h),
            INVALID,
        );
        ok("map", map(at, 2 * g, 0, h));
        is("map over a mapping", map(at, g, 0, h), INVALID);
        // Copies before access.
        let mut buf = [0u8; 64];
        is("write before access", write(at, &[1; 64]), INVALID);
        is("read before access", read(at, &mut buf), INVALID);
        is(
            "access to part of a mapping",
            set_access(at, g, READ_WRITE),
            INVALID,
        );
        ok("read access", set_access(at, 2 * g, READ));
        ok("read with read access", read(at, &mut buf));
        assert_eq!(buf, [0; 64], "new device memory reads as zeros here");
        is("write with read access", write(at, &[1; 64]), INVALID);
        ok("read-write access", set_access(at, 2 * g, READ_WRITE));
        ok("write", write(at, &[5; 64]));
        // SAFETY: a range mapped with write access (above); the driver checks it.
        ok("memset", unsafe { sys::cuMemsetD8_v2(at + 64, 9, 64) });
        // SAFETY: both ranges are mapped with access (above); the driver checks them.
        ok("copy on the device", unsafe {
            sys::cuMemcpyDtoD_v2(at + g as u64, at, 128)
        });
        let mut both = [0u8; 128];
        ok("read back", read(at + g as u64, &mut both));
        assert!(both[..64] == [5; 64] && both[64..] == [9; 64], "{both:?}");
        is(
            "read across the mapping's end",
            read(at + 2 * g as u64 - 8, &mut buf),
            INVALID,
        );
        // Address free while mapped, unmap of part of a mapping.
        // SAFETY: the driver checks the range; nothing is freed on failure.
        is(
            "free while mapped",
            unsafe { sys::cuMemAddressFree(at, 2 * g) },
            INVALID,
        );
        // SAFETY: as above.
        is(
            "unmap of half a mapping",
            unsafe { sys::cuMemUnmap(at, g) },
            INVALID,
        );
        // Released while mapped: the bytes stay until unmapped; the handle is gone.
        // SAFETY: releases the handle made above, once.
        ok("release while mapped", unsafe { sys::cuMemRelease(h) });
        ok("read after release", read(at, &mut buf));
        assert_eq!(buf, [5; 64]);
        // SAFETY: the driver checks the handle.
        is("release twice", unsafe { sys::cuMemRelease(h) }, INVALID);
        is("map of a released handle", map(at, g, 0, h), INVALID);
        // SAFETY: unmaps what was mapped above, once.
        ok("unmap", unsafe { sys::cuMemUnmap(at, 2 * g) });
        is("read after unmap", read(at, &mut buf), INVALID);
        // SAFETY: frees the now empty reservation, then tries again.
        unsafe {
            ok("free", sys::cuMemAddressFree(at, 2 * g));
            is("free twice", sys::cuMemAddressFree(at, 2 * g), INVALID);
        }
        // Imports of what is not an export: a plain file, a closed descriptor.
        let path = cuda_double::test_dir().join("plain");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(2 * g as u64).unwrap();
        let raw = std::os::fd::AsRawFd::as_raw_fd(&file);
        is("import of a plain file", import(raw).0, INVALID);
        drop(file);
        is("import of a closed descriptor", import(raw).0, INVALID);
        is("import of -1", import(-1).0, INVALID);
        assert_eq!(vmm_memfds(), 0, "nothing left open");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = double(TEST, dir.path()) else {
        return;
    };
    let pid = driver.run(TEST, "child", dir.path(), &[]);
    let calls = driver.calls_of(pid).unwrap();
    let frees: Vec<u32> = calls_named(&calls, "cuMemAddressFree")
        .iter()
        .map(|c| c.result)
        .collect();
    assert_eq!(frees, [0, 1, 0, 1], "{:#?}", names(&calls));
    let maps: Vec<u32> = calls_named(&calls, "cuMemMap").iter().map(|c| c.result).collect();
    assert_eq!(maps, [1, 1, 1, 1, 1, 0, 1, 1]);
    let imports: Vec<u32> = calls_named(&calls, "cuMemImportFromShareableHandle")
        .iter()
        .map(|c| c.result)
        .collect();
    assert_eq!(imports, [1, 1, 1]);
    let release = calls_named(&calls, "cuMemRelease");
    assert_eq!(release[0].get("mapped"), Some("true"), "released while mapped");
}

/// (c) An interprocess event made and recorded in one process, its handle handed to
/// another through a file: the other opens it and waits on it, and both logs name the
/// same event. An event without `CU_EVENT_INTERPROCESS` has no IPC handle; a process
/// cannot open its own handle; a handle that is not the double's is refused.
#[test]
fn ipc_events_are_named_alike_in_the_creating_and_the_opening_process() {
    const TEST: &str = "ipc_events_are_named_alike_in_the_creating_and_the_opening_process";
    let handle_file = || cuda_double::test_dir().join("event.handle");
    let ipc =
        sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32 | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    match iox_testkit::role().as_deref() {
        Some("creator") => {
            init();
            let (mut event, mut plain, mut stream) =
                (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: valid out-pointers and handles made here; each destroyed once.
            unsafe {
                is(
                    "interprocess with timing",
                    sys::cuEventCreate(&mut event, sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32),
                    CUresult::CUDA_ERROR_INVALID_VALUE,
                );
                ok("create", sys::cuEventCreate(&mut event, ipc));
                ok("create plain", sys::cuEventCreate(&mut plain, 0));
                let mut handle: sys::CUipcEventHandle = std::mem::zeroed();
                is(
                    "handle of a plain event",
                    sys::cuIpcGetEventHandle(&mut handle, plain),
                    CUresult::CUDA_ERROR_INVALID_VALUE,
                );
                ok("handle", sys::cuIpcGetEventHandle(&mut handle, event));
                let mut own = std::ptr::null_mut();
                is(
                    "open in the same process",
                    sys::cuIpcOpenEventHandle(&mut own, handle),
                    CUresult::CUDA_ERROR_INVALID_CONTEXT,
                );
                ok("query before record", sys::cuEventQuery(event));
                ok("stream", sys::cuStreamCreate(&mut stream, 1));
                ok("record", sys::cuEventRecord(event, stream));
                ok("record again", sys::cuEventRecord(event, stream));
                ok("query", sys::cuEventQuery(event));
                ok("sync", sys::cuStreamSynchronize(stream));
                let bytes: Vec<u8> = handle.reserved.iter().map(|b| *b as u8).collect();
                std::fs::write(handle_file(), bytes).unwrap();
                ok("destroy plain", sys::cuEventDestroy_v2(plain));
                ok("destroy stream", sys::cuStreamDestroy_v2(stream));
                is(
                    "stream twice",
                    sys::cuStreamDestroy_v2(stream),
                    CUresult::CUDA_ERROR_INVALID_HANDLE,
                );
            }
        }
        Some("opener") => {
            init();
            let bytes = std::fs::read(handle_file()).unwrap();
            // SAFETY: a plain C struct of bytes; then valid out-pointers and handles.
            unsafe {
                let mut handle: sys::CUipcEventHandle = std::mem::zeroed();
                for (to, from) in handle.reserved.iter_mut().zip(&bytes) {
                    *to = *from as _;
                }
                let mut event = std::ptr::null_mut();
                let garbage: sys::CUipcEventHandle = std::mem::zeroed();
                is(
                    "open a handle that is not one",
                    sys::cuIpcOpenEventHandle(&mut event, garbage),
                    CUresult::CUDA_ERROR_INVALID_VALUE,
                );
                ok("open", sys::cuIpcOpenEventHandle(&mut event, handle));
                // On the legacy default stream (valid without creating it).
                ok("wait", sys::cuStreamWaitEvent(std::ptr::null_mut(), event, 0));
                ok("sync", sys::cuEventSynchronize(event));
                ok("record here", sys::cuEventRecord(event, std::ptr::null_mut()));
                ok("destroy", sys::cuEventDestroy_v2(event));
                is(
                    "use after destroy",
                    sys::cuEventQuery(event),
                    CUresult::CUDA_ERROR_INVALID_HANDLE,
                );
            }
        }
        Some(other) => panic!("unknown role {other}"),
        None => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = double(TEST, dir.path()) else {
                return;
            };
            let creator = driver.run(TEST, "creator", dir.path(), &[]);
            let opener = driver.run(TEST, "opener", dir.path(), &[]);
            let made = driver.calls_of(creator).unwrap();
            let used = driver.calls_of(opener).unwrap();
            let records: Vec<(Option<&str>, Option<&str>)> = calls_named(&made, "cuEventRecord")
                .iter()
                .map(|c| (c.get("event"), c.get("records")))
                .collect();
            let name = records[0].0.expect("the record names its event").to_string();
            assert!(name.starts_with(&format!("{creator}:")), "{name}");
            assert_eq!(records, [(Some(&*name), Some("1")), (Some(&*name), Some("2"))]);
            let waits = calls_named(&used, "cuStreamWaitEvent");
            assert_eq!(waits.len(), 1, "{:#?}", names(&used));
            assert_eq!((waits[0].result, waits[0].get("event")), (0, Some(&*name)));
            let opened = calls_named(&used, "cuIpcOpenEventHandle");
            assert_eq!(opened[1].get("of"), Some(&*name));
            let here = calls_named(&used, "cuEventRecord");
            assert_eq!(
                (here[0].get("event"), here[0].get("records")),
                (Some(&*name), Some("1"))
            );
        }
    }
}

/// (d) A failure of `cuMemCreate` asked for through `IOX_CUDA_DOUBLE_FAIL` is
/// `CUDA_ERROR_OUT_OF_MEMORY` and has no effect: no handle written, no memory made.
#[test]
fn an_injected_cumemcreate_failure_is_out_of_memory_without_effect() {
    const TEST: &str = "an_injected_cumemcreate_failure_is_out_of_memory_without_effect";
    if iox_testkit::role().is_some() {
        init();
        let p = prop(0, true);
        let (r, h) = create(DOUBLE_GRANULARITY, &p);
        assert_eq!(
            (r, h),
            (CUresult::CUDA_ERROR_OUT_OF_MEMORY, 0xdead),
            "nothing written"
        );
        assert_eq!(vmm_memfds(), 0, "no memory made");
        let (r, h) = create(DOUBLE_GRANULARITY, &p);
        ok("create after the failure", r);
        assert_eq!(vmm_memfds(), 1);
        // SAFETY: releases the handle just made, once.
        ok("release", unsafe { sys::cuMemRelease(h) });
        assert_eq!(vmm_memfds(), 0, "an unmapped allocation goes with its handle");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = double(TEST, dir.path()) else {
        return;
    };
    let pid = driver.run(
        TEST,
        "child",
        dir.path(),
        &[(cuda_double::FAIL_ENV, "cuMemCreate:2:1".into())],
    );
    let calls = driver.calls_of(pid).unwrap();
    let creates = calls_named(&calls, "cuMemCreate");
    assert_eq!(creates.len(), 2);
    assert_eq!((creates[0].result, creates[0].get("injected")), (2, Some("yes")));
    assert_eq!(creates[0].get("handle"), None);
    assert_eq!(creates[1].result, 0);
    assert!(creates[1].get("handle").is_some());
}

/// (e) Device UUIDs: from `IOX_CUDA_DOUBLE_UUIDS` by ordinal (so ordinal 0 of two
/// processes can be different GPUs), else made from the ordinal.
#[test]
fn device_uuids_come_from_iox_cuda_double_uuids() {
    const TEST: &str = "device_uuids_come_from_iox_cuda_double_uuids";
    const A: &str = "00112233445566778899aabbccddeeff";
    const B: &str = "ffeeddccbbaa99887766554433221100";
    let uuid = |device: c_int| {
        let mut u: sys::CUuuid = sys::CUuuid { bytes: [0; 16] };
        let mut v1: sys::CUuuid = sys::CUuuid { bytes: [0; 16] };
        // SAFETY: valid out-pointers.
        let (r, r1) = unsafe {
            (
                sys::cuDeviceGetUuid_v2(&mut u, device),
                sys::cuDeviceGetUuid(&mut v1, device),
            )
        };
        assert_eq!(r, r1);
        assert_eq!(u.bytes, v1.bytes, "both entry points agree");
        (
            r,
            u.bytes
                .iter()
                .map(|b| format!("{:02x}", *b as u8))
                .collect::<String>(),
        )
    };
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    match iox_testkit::role().as_deref() {
        Some(role) => {
            init();
            let expected: Vec<String> = match role {
                "two" => vec![A.into(), B.into()],
                "one" => vec![B.into()],
                _ => vec![hex(b"ioxdbl\0\0\0\0\0\0\0\0\0\0")],
            };
            for (ordinal, want) in expected.iter().enumerate() {
                assert_eq!(
                    uuid(ordinal as c_int),
                    (CUresult::CUDA_SUCCESS, want.clone()),
                    "{role} {ordinal}"
                );
            }
            let past = expected.len() as c_int;
            assert_eq!(uuid(past).0, CUresult::CUDA_ERROR_INVALID_DEVICE);
        }
        None => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = double(TEST, dir.path()) else {
                return;
            };
            let dashed = "GPU-ffeeddcc-bbaa-9988-7766-554433221100";
            let two = driver.run(
                TEST,
                "two",
                dir.path(),
                &[(UUIDS_ENV, format!("{A},{dashed}")), (DEVICES_ENV, "2".into())],
            );
            let one = driver.run(TEST, "one", dir.path(), &[(UUIDS_ENV, B.into())]);
            driver.run(TEST, "default", dir.path(), &[]);
            let first = |pid: u32| {
                let calls = driver.calls_of(pid).unwrap();
                calls_named(&calls, "cuDeviceGetUuid_v2")[0]
                    .get("uuid")
                    .map(str::to_string)
            };
            assert_eq!(first(two).as_deref(), Some(A));
            assert_eq!(first(one).as_deref(), Some(B), "ordinal 0 is another GPU there");
        }
    }
}
