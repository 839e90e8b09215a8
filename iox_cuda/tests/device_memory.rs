//! `iox_cuda`'s device memory, streams, inter-process events and device UUIDs across
//! real processes: children whose `LD_LIBRARY_PATH` makes cudarc load the driver
//! double (as in `double.rs`), every driver call checked in the double's log.
//!
//! Memory and events are shared as iox shares them: the process that made them stays
//! alive and starts the one that imports or opens them (a descriptor inherited, an
//! event handle through a file). With `IOX_CUDA_DRIVER=real` the sharing, event and
//! UUID tests check behaviour only; the injected failures need the double.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys::{self, CUresult};
use iox_cuda::{CudaError, DeviceMemory, EventHandle, IpcEvent, OpenedEvent, OwnedStream, Stream};
use iox_mempool::DevicePayload;
use iox_testkit::cuda_double::{self, Call, Driver, names};

/// The descriptor number an importer inherits, and the allocation's length.
const FD_ENV: &str = "IOX_TEST_DEVICE_MEMORY_FD";
const LEN_ENV: &str = "IOX_TEST_DEVICE_MEMORY_LEN";
/// 3 MiB of payload: with its mark, two of the double's 2 MiB granules.
const PAYLOAD: usize = 3 << 20;
const TOKEN: [u8; 16] = *b"iox-device-token";
const REPLY: &[u8] = b"written by the importing process";
/// Where the importer writes its reply.
const REPLY_AT: usize = 1 << 20;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The driver for `test`'s children, or `None` (after a skip line) when the real
/// driver was asked for and no device is usable.
fn driver(test: &str, dir: &Path) -> Option<Driver> {
    Driver::for_test(test, dir, || iox_cuda::device_uuid(0).map(drop))
}

/// The double only (injected failures and `IOX_CUDA_DOUBLE_*` settings).
fn double(test: &str, dir: &Path) -> Option<Driver> {
    Driver::double_only(test, dir, "needs the double's failure injection")
}

/// The thread's current context (the driver is initialised by iox or `user_context`).
fn current() -> sys::CUcontext {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { sys::cuCtxGetCurrent(&mut ctx) }, CUresult::CUDA_SUCCESS);
    ctx
}

/// A context of the "user's" own, created and current on this thread: iox's calls
/// must leave it current.
fn user_context() -> sys::CUcontext {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: plain driver calls with valid out-pointers; destroyed by the caller.
    unsafe {
        assert_eq!(sys::cuInit(0), CUresult::CUDA_SUCCESS);
        assert_eq!(sys::cuCtxCreate_v2(&mut ctx, 0, 0), CUresult::CUDA_SUCCESS);
    }
    assert_eq!(current(), ctx);
    ctx
}

fn destroy(ctx: sys::CUcontext) {
    // SAFETY: the context `user_context` made, destroyed once.
    assert_eq!(unsafe { sys::cuCtxDestroy_v2(ctx) }, CUresult::CUDA_SUCCESS);
}

fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD on a number only reads its flags; EBADF if closed.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// The descriptors of this process that are the double's allocation memfds.
fn vmm_memfds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().contains("memfd:iox-cuda-double-vmm"))
        .count()
}

/// In an owner: starts `role` of `test` with a copy of `memory`'s export descriptor
/// inherited (no close-on-exec) and its number and length in the environment, and
/// waits for it to succeed.
fn share(test: &str, role: &str, memory: &DeviceMemory, extra: &[(&str, String)]) {
    // SAFETY: duplicates an open descriptor; `dup` leaves close-on-exec off.
    let raw = unsafe { libc::dup(memory.export_fd().as_raw_fd()) };
    assert!(raw >= 0, "dup");
    // SAFETY: just made, this process's alone; closed when the child is done.
    let inherited = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut envs = vec![
        (FD_ENV, inherited.as_raw_fd().to_string()),
        (LEN_ENV, memory.len().to_string()),
    ];
    envs.extend(extra.iter().cloned());
    let child = iox_testkit::self_command(test, role, &envs)
        .spawn()
        .expect("spawn the importer");
    iox_testkit::wait_ok(child, Duration::from_secs(120));
}

/// In an importer: the inherited descriptor and the allocation's length.
fn inherited() -> (OwnedFd, usize) {
    let fd: RawFd = iox_testkit::env(FD_ENV);
    assert!(is_open(fd), "the descriptor was inherited");
    // SAFETY: the inherited descriptor, open (checked), owned by nothing else here.
    (unsafe { OwnedFd::from_raw_fd(fd) }, iox_testkit::env(LEN_ENV))
}

/// The VMM calls (and the mark's copies) of `calls`, short, a failure as `Name!code`.
fn vmm(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| {
            let short = match c.name.as_str() {
                "cuMemCreate" => "Create",
                "cuMemExportToShareableHandle" => "Export",
                "cuMemImportFromShareableHandle" => "Import",
                "cuMemAddressReserve" => "Reserve",
                "cuMemMap" => "Map",
                "cuMemSetAccess" => "Access",
                "cuMemcpyHtoD_v2" => "HtoD",
                "cuMemcpyDtoH_v2" => "DtoH",
                "cuMemUnmap" => "Unmap",
                "cuMemAddressFree" => "Free",
                "cuMemRelease" => "Release",
                _ => return None,
            };
            Some(match c.result {
                0 => short.to_string(),
                code => format!("{short}!{code}"),
            })
        })
        .collect()
}

fn count(calls: &[Call], name: &str) -> usize {
    calls.iter().filter(|c| c.name == name).count()
}

/// Every context push popped, every primary-context retain released, the last one
/// leaving none.
fn contexts_balanced(calls: &[Call]) {
    let all = names(calls);
    assert_eq!(
        count(calls, "cuCtxPushCurrent_v2"),
        count(calls, "cuCtxPopCurrent_v2"),
        "{all:#?}"
    );
    assert_eq!(
        count(calls, "cuDevicePrimaryCtxRetain"),
        count(calls, "cuDevicePrimaryCtxRelease_v2"),
        "{all:#?}"
    );
    let last = calls
        .iter()
        .rfind(|c| c.name == "cuDevicePrimaryCtxRelease_v2")
        .expect("a release");
    assert_eq!(last.get("retains"), Some("0"), "{all:#?}");
}

/// The calls of the owner (`pid`) and of the one other process in the log.
fn owner_and_other(calls: Vec<Call>, pid: u32) -> (Vec<Call>, Vec<Call>) {
    let (mine, theirs): (Vec<Call>, Vec<Call>) = calls.into_iter().partition(|c| c.pid == pid);
    assert!(!theirs.is_empty() && theirs.iter().all(|c| c.pid == theirs[0].pid));
    (mine, theirs)
}

/// Device memory made by one process is imported by another from an inherited
/// descriptor: it reads what the owner wrote, writes a reply the owner reads, imports
/// twice but maps once, and tears down in order when its last holder goes; a user's
/// context stays current throughout.
#[test]
fn device_memory_is_imported_once_per_process_and_torn_down_in_order() {
    const TEST: &str = "device_memory_is_imported_once_per_process_and_torn_down_in_order";
    match iox_testkit::role().as_deref() {
        Some("owner") => {
            let memory = DeviceMemory::create(0, PAYLOAD, TOKEN).unwrap();
            assert!(memory.len() >= PAYLOAD + 16 && memory.len() < PAYLOAD + (64 << 20));
            assert_eq!(memory.ordinal(), 0);
            assert_eq!(memory.uuid(), iox_cuda::device_uuid(0).unwrap());
            assert!(current().is_null(), "no context left current");
            let payload: Arc<dyn DevicePayload> = memory.clone();
            assert_eq!(
                (payload.device_base(), payload.len()),
                (memory.device_base(), memory.len())
            );
            assert_eq!(payload.export_fd().as_raw_fd(), memory.export_fd().as_raw_fd());
            memory.copy_from_host(0, &pattern(8192)).unwrap();
            // Out of bounds: an error, nothing copied.
            let mut buf = [0u8; 32];
            let out = memory.copy_to_host(memory.len() - 8, &mut buf);
            assert_eq!(out, Err(CudaError::OutOfBounds { len: memory.len() }));
            assert!(memory.copy_from_host(usize::MAX, &[1]).is_err());
            // The mark is where create wrote it.
            let mut mark = [0u8; 16];
            memory.copy_to_host(PAYLOAD, &mut mark).unwrap();
            assert_eq!(mark, TOKEN);
            share(TEST, "importer", &memory, &[]);
            let mut reply = vec![0u8; REPLY.len()];
            memory.copy_to_host(REPLY_AT, &mut reply).unwrap();
            assert_eq!(reply, REPLY);
        }
        Some("importer") => {
            let own = user_context();
            let (fd, len) = inherited();
            let raw = fd.as_raw_fd();
            let (second, later) = (fd.try_clone().unwrap(), fd.try_clone().unwrap());
            let second_raw = second.as_raw_fd();
            let first = DeviceMemory::import(fd, 0, len, PAYLOAD, TOKEN).unwrap();
            assert_eq!((first.len(), first.ordinal()), (len, 0));
            assert_eq!(first.export_fd().as_raw_fd(), raw, "the descriptor is kept");
            let mut got = vec![0u8; 8192];
            first.copy_to_host(0, &mut got).unwrap();
            assert!(got == pattern(8192), "the importer reads what the owner wrote");
            // Once per process: the second import is the same mapping, its descriptor
            // closed.
            let again = DeviceMemory::import(second, 0, len, PAYLOAD, TOKEN).unwrap();
            assert!(Arc::ptr_eq(&first, &again));
            assert!(!is_open(second_raw), "the second descriptor was closed");
            first.copy_from_host(REPLY_AT, REPLY).unwrap();
            assert_eq!(current(), own, "the user's context is still current");
            drop(first);
            assert!(is_open(raw), "a holder is left");
            drop(again);
            assert!(!is_open(raw), "the last holder closed the descriptor");
            // Gone from the registry with its last holder: a new import maps anew.
            let later = DeviceMemory::import(later, 0, len, PAYLOAD, TOKEN).unwrap();
            let mut mark = [0u8; 16];
            later.copy_to_host(PAYLOAD, &mut mark).unwrap();
            assert_eq!(mark, TOKEN);
            drop(later);
            assert_eq!(current(), own, "the user's context is still current");
            destroy(own);
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
            let (mine, theirs) = owner_and_other(calls, owner);
            let made = [
                "Create", "Export", "Reserve", "Map", "Access", "HtoD", "HtoD", "DtoH", "DtoH", "Unmap",
                "Free", "Release",
            ];
            assert_eq!(vmm(&mine), made, "{:#?}", names(&mine));
            let create = mine.iter().find(|c| c.name == "cuMemCreate").unwrap();
            assert_eq!(
                create.num("size"),
                Some(4 << 20),
                "3 MiB + 16 rounded up to 2 MiB"
            );
            assert_eq!(create.get("handle_types"), Some("1"), "POSIX descriptor");
            let granularity = mine
                .iter()
                .find(|c| c.name == "cuMemGetAllocationGranularity")
                .unwrap();
            assert_eq!(granularity.get("option"), Some("1"), "recommended");
            let token = mine.iter().find(|c| c.name == "cuMemcpyHtoD_v2").unwrap();
            assert_eq!(token.num("bytesize"), Some(16), "{token:?}");
            let imported = ["Import", "Reserve", "Map", "Access", "DtoH", "DtoH", "HtoD"];
            let teardown = ["Unmap", "Free", "Release"];
            let again = ["Import", "Reserve", "Map", "Access", "DtoH", "DtoH"];
            let expected: Vec<&str> = [&imported[..], &teardown, &again, &teardown].concat();
            assert_eq!(vmm(&theirs), expected, "{:#?}", names(&theirs));
            for c in mine.iter().chain(&theirs) {
                assert_eq!(c.result, 0, "{c:?}");
            }
            let access = theirs.iter().find(|c| c.name == "cuMemSetAccess").unwrap();
            assert_eq!(access.get("access"), Some("1:0:3"), "read-write for device 0");
            contexts_balanced(&mine);
            assert_eq!(
                count(&theirs, "cuDevicePrimaryCtxRetain"),
                2,
                "one per mapping's life"
            );
            assert_eq!(
                count(&theirs, "cuDevicePrimaryCtxRetain"),
                count(&theirs, "cuDevicePrimaryCtxRelease_v2")
            );
        }
    }
}

/// A descriptor imported with another allocation's token is `WrongAllocation`, with
/// the mapping undone; the right token then imports it.
#[test]
fn an_import_with_a_wrong_token_is_wrong_allocation_and_maps_nothing() {
    const TEST: &str = "an_import_with_a_wrong_token_is_wrong_allocation_and_maps_nothing";
    match iox_testkit::role().as_deref() {
        Some("owner") => {
            let memory = DeviceMemory::create(0, PAYLOAD, TOKEN).unwrap();
            share(TEST, "importer", &memory, &[]);
        }
        Some("importer") => {
            let (fd, len) = inherited();
            let raw = fd.as_raw_fd();
            let right = fd.try_clone().unwrap();
            let wrong = DeviceMemory::import(fd, 0, len, PAYLOAD, *b"another token...");
            assert_eq!(wrong.unwrap_err(), CudaError::WrongAllocation);
            assert!(!is_open(raw), "the descriptor handed over was closed");
            // A payload that leaves no room for the mark: refused before any call.
            let short = DeviceMemory::import(right.try_clone().unwrap(), 0, len, len - 8, TOKEN);
            assert_eq!(short.unwrap_err(), CudaError::WrongAllocation);
            let memory = DeviceMemory::import(right, 0, len, PAYLOAD, TOKEN).unwrap();
            assert_eq!(memory.len(), len);
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
            let (_, theirs) = owner_and_other(calls, owner);
            let refused = [
                "Import", "Reserve", "Map", "Access", "DtoH", "Unmap", "Free", "Release",
            ];
            let imported = [
                "Import", "Reserve", "Map", "Access", "DtoH", "Unmap", "Free", "Release",
            ];
            let expected: Vec<&str> = [refused, imported].concat();
            assert_eq!(vmm(&theirs), expected, "{:#?}", names(&theirs));
            contexts_balanced(&theirs);
        }
    }
}

/// Failures injected into each step of making and importing device memory: an error
/// naming the call, every earlier step undone in reverse order (the log), no
/// allocation left open, and the next try succeeds.
#[test]
fn a_failed_step_names_the_call_and_undoes_the_steps_before_it() {
    const TEST: &str = "a_failed_step_names_the_call_and_undoes_the_steps_before_it";
    /// Role, failure to inject, the call named, the VMM calls of the failed try.
    const MAKE: [(&str, &str, &str, &[&str]); 4] = [
        ("create", "cuMemCreate:2:1", "cuMemCreate", &["Create!2"]),
        (
            "export",
            "cuMemExportToShareableHandle:2:1",
            "cuMemExportToShareableHandle",
            &["Create", "Export!2", "Release"],
        ),
        (
            "map",
            "cuMemMap:2:1",
            "cuMemMap",
            &["Create", "Export", "Reserve", "Map!2", "Free", "Release"],
        ),
        (
            "mark",
            "cuMemcpyHtoD_v2:2:1",
            "cuMemcpyHtoD",
            &[
                "Create", "Export", "Reserve", "Map", "Access", "HtoD!2", "Unmap", "Free", "Release",
            ],
        ),
    ];
    let made = [
        "Create", "Export", "Reserve", "Map", "Access", "HtoD", "Unmap", "Free", "Release",
    ];
    match iox_testkit::role().as_deref() {
        Some("owner") => {
            let memory = DeviceMemory::create(0, PAYLOAD, TOKEN).unwrap();
            let fail = "cuMemImportFromShareableHandle:2:1,cuMemSetAccess:2:1".to_string();
            share(TEST, "importer", &memory, &[(cuda_double::FAIL_ENV, fail)]);
        }
        Some("importer") => {
            let (fd, len) = inherited();
            let (second, third) = (fd.try_clone().unwrap(), fd.try_clone().unwrap());
            let raws = [fd.as_raw_fd(), second.as_raw_fd()];
            for (fd, call) in [(fd, "cuMemImportFromShareableHandle"), (second, "cuMemSetAccess")] {
                match DeviceMemory::import(fd, 0, len, PAYLOAD, TOKEN) {
                    Err(CudaError::Driver { call: c, code: 2, .. }) if c == call => {}
                    other => panic!("{call}: {other:?}"),
                }
            }
            assert!(raws.iter().all(|fd| !is_open(*fd)), "both descriptors closed");
            let memory = DeviceMemory::import(third, 0, len, PAYLOAD, TOKEN).unwrap();
            drop(memory);
            assert_eq!(vmm_memfds(), 0, "nothing left open");
        }
        Some(role) => {
            let (_, _, call, _) = MAKE.iter().find(|m| m.0 == role).expect("a known role");
            let err = DeviceMemory::create(0, PAYLOAD, TOKEN).unwrap_err();
            assert!(
                matches!(&err, CudaError::Driver { call: c, code: 2, .. } if c == call),
                "{err:?}"
            );
            let text = err.to_string();
            assert!(
                text.contains(call) && text.contains("CUDA_ERROR_OUT_OF_MEMORY"),
                "{text}"
            );
            assert_eq!(vmm_memfds(), 0, "no allocation left");
            let memory = DeviceMemory::create(0, PAYLOAD, TOKEN).unwrap();
            drop(memory);
            assert_eq!(vmm_memfds(), 0, "no allocation left");
        }
        None => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = double(TEST, dir.path()) else {
                return;
            };
            for (role, fail, _, failed) in MAKE {
                let pid = driver.run(TEST, role, dir.path(), &[(cuda_double::FAIL_ENV, fail.into())]);
                let calls = driver.calls_of(pid).unwrap();
                let expected: Vec<&str> = [failed, &made].concat();
                assert_eq!(vmm(&calls), expected, "{role}: {:#?}", names(&calls));
                let injected = calls.iter().filter(|c| c.get("injected") == Some("yes"));
                assert_eq!(injected.count(), 1, "{role}");
                contexts_balanced(&calls);
            }
            // Importing, in a log of its own.
            let dir = tempfile::tempdir().unwrap();
            let driver = Driver::new(dir.path());
            let owner = driver.run(TEST, "owner", dir.path(), &[]);
            let (_, theirs) = owner_and_other(driver.calls().unwrap(), owner);
            let expected = [
                "Import!2", "Import", "Reserve", "Map", "Access!2", "Unmap", "Free", "Release", "Import",
                "Reserve", "Map", "Access", "DtoH", "Unmap", "Free", "Release",
            ];
            assert_eq!(vmm(&theirs), expected, "{:#?}", names(&theirs));
            contexts_balanced(&theirs);
        }
    }
}

/// An inter-process event made in one process and opened in another from its handle
/// (through a file) is the same event in both logs: recorded in one, waited for on
/// streams of the other; no host waits but the one explicit stream synchronisation.
#[test]
fn an_ipc_event_opened_in_another_process_is_the_same_event() {
    const TEST: &str = "an_ipc_event_opened_in_another_process_is_the_same_event";
    let handle_file = || cuda_double::test_dir().join("event.handle");
    match iox_testkit::role().as_deref() {
        Some("creator") => {
            let event = IpcEvent::new(0).unwrap();
            let stream = OwnedStream::new(0).unwrap();
            event.record(stream.stream()).unwrap();
            event.wait(stream.stream()).unwrap();
            let handle = event.handle();
            assert_eq!(EventHandle::from_words(handle.to_words()), handle);
            assert_eq!(handle, event.handle(), "taken once");
            // This process's own event: shared, without the driver.
            let own = OpenedEvent::open(0, &handle).unwrap();
            own.wait(Stream::null()).unwrap();
            std::fs::write(handle_file(), handle.0).unwrap();
            assert!(current().is_null(), "no context left current");
            let opener = iox_testkit::self_command(TEST, "opener", &[])
                .spawn()
                .expect("spawn the opener");
            iox_testkit::wait_ok(opener, Duration::from_secs(120));
            stream.synchronize().unwrap();
        }
        Some("opener") => {
            let own = user_context();
            let bytes: [u8; 64] = std::fs::read(handle_file()).unwrap().try_into().unwrap();
            let event = OpenedEvent::open(0, &EventHandle(bytes)).unwrap();
            let stream = OwnedStream::new(0).unwrap();
            event.wait(stream.stream()).unwrap();
            event.wait(Stream::null()).unwrap();
            event.record(stream.stream()).unwrap();
            assert!(OpenedEvent::open(0, &EventHandle([0; 64])).is_err());
            assert_eq!(current(), own, "the user's context is still current");
            drop((event, stream));
            destroy(own);
        }
        Some(other) => panic!("unknown role {other}"),
        None => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = driver(TEST, dir.path()) else {
                return;
            };
            let creator = driver.run(TEST, "creator", dir.path(), &[]);
            let Some(calls) = driver.calls() else {
                return;
            };
            let (made, used) = owner_and_other(calls, creator);
            let find = |calls: &[Call], name: &str| -> Vec<Call> {
                calls.iter().filter(|c| c.name == name).cloned().collect()
            };
            let created = find(&made, "cuEventCreate");
            assert_eq!(created.len(), 1);
            assert_eq!(created[0].get("flags"), Some("6"), "interprocess, no timing");
            let name = created[0].get("event").unwrap().to_string();
            assert!(name.starts_with(&format!("{creator}:")), "{name}");
            let records = find(&made, "cuEventRecord");
            assert_eq!(records.len(), 1);
            assert_eq!(records[0].get("event"), Some(&*name));
            assert_eq!(find(&made, "cuIpcOpenEventHandle"), [], "own event shared");
            let destroyed = find(&made, "cuEventDestroy_v2");
            assert_eq!(destroyed.len(), 1, "destroyed once");
            let opened = find(&used, "cuIpcOpenEventHandle");
            assert_eq!(opened.len(), 2, "{:#?}", names(&used));
            assert_eq!((opened[0].result, opened[0].get("of")), (0, Some(&*name)));
            assert_eq!(opened[0].get("event"), Some(&*name));
            assert_ne!(opened[1].result, 0, "a handle that is not one");
            let stream = find(&used, "cuStreamCreate")[0].num("stream").unwrap();
            let waits: Vec<(Option<u64>, Option<&str>, Option<&str>)> = used
                .iter()
                .filter(|c| c.name == "cuStreamWaitEvent")
                .map(|c| (c.num("stream"), c.get("event"), c.get("flags")))
                .collect();
            let expected = [
                (Some(stream), Some(&*name), Some("0")),
                (Some(0), Some(&*name), Some("0")),
            ];
            assert_eq!(waits, expected);
            let here = find(&used, "cuEventRecord");
            assert_eq!(here[0].get("event"), Some(&*name));
            assert_eq!(find(&used, "cuEventDestroy_v2")[0].get("event"), Some(&*name));
            assert_eq!(find(&used, "cuStreamDestroy_v2").len(), 1);
            let host_waits = |calls: &[Call]| -> Vec<String> {
                calls
                    .iter()
                    .filter(|c| c.name.contains("Synchronize"))
                    .map(|c| c.name.clone())
                    .collect()
            };
            assert_eq!(host_waits(&used), Vec::<String>::new());
            assert_eq!(host_waits(&made), ["cuStreamSynchronize"], "the explicit one");
            assert!(
                made.iter()
                    .chain(&used)
                    .all(|c| c.result == 0 || c.name == "cuIpcOpenEventHandle")
            );
            contexts_balanced(&made);
            contexts_balanced(&used);
        }
    }
}

/// `ordinal_of` finds a device by the UUID the driver reports (`IOX_CUDA_DOUBLE_UUIDS`
/// on the double), and nothing for an unknown one; device memory knows its device.
#[test]
fn ordinal_of_finds_a_device_by_uuid() {
    const TEST: &str = "ordinal_of_finds_a_device_by_uuid";
    const A: &str = "GPU-00112233-4455-6677-8899-aabbccddeeff";
    const B: &str = "GPU-ffeeddcc-bbaa-9988-7766-554433221100";
    const EXPECT_ENV: &str = "IOX_TEST_EXPECT_UUIDS";
    match iox_testkit::role().as_deref() {
        Some(_) => {
            let unknown = [0x5a; 16];
            assert_eq!(iox_cuda::ordinal_of(&unknown), Ok(None));
            let first = iox_cuda::device_uuid(0).unwrap();
            assert_eq!(iox_cuda::ordinal_of(&first), Ok(Some(0)));
            assert_eq!(iox_cuda::parse_uuid(&iox_cuda::format_uuid(&first)), Some(first));
            if std::env::var_os(EXPECT_ENV).is_none() {
                return;
            }
            let (a, b) = (iox_cuda::parse_uuid(A).unwrap(), iox_cuda::parse_uuid(B).unwrap());
            assert_eq!(
                (iox_cuda::device_uuid(0), iox_cuda::device_uuid(1)),
                (Ok(a), Ok(b))
            );
            assert_eq!(iox_cuda::ordinal_of(&b), Ok(Some(1)));
            assert_eq!(
                iox_cuda::device_uuid(2),
                Err(CudaError::NoDevice {
                    requested: 2,
                    count: 2
                })
            );
            let memory = DeviceMemory::create(1, 4096, TOKEN).unwrap();
            assert_eq!((memory.ordinal(), memory.uuid()), (1, b));
        }
        None => {
            let dir = tempfile::tempdir().unwrap();
            let Some(driver) = driver(TEST, dir.path()) else {
                return;
            };
            let mut envs = Vec::new();
            if driver.is_double() {
                let hex_a = A.trim_start_matches("GPU-").replace('-', "");
                envs.extend([
                    ("IOX_CUDA_DOUBLE_UUIDS", format!("{hex_a},{B}")),
                    ("IOX_CUDA_DOUBLE_DEVICES", "2".to_string()),
                    (EXPECT_ENV, "1".to_string()),
                ]);
            }
            let pid = driver.run(TEST, "child", dir.path(), &envs);
            if let Some(calls) = driver.calls_of(pid) {
                let create = calls.iter().find(|c| c.name == "cuMemCreate").unwrap();
                assert_eq!(create.get("location"), Some("1:1"), "{create:?}");
            }
        }
    }
}
