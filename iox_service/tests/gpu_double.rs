//! CUDA pinning through services and ports, against the driver double
//! (`cuda_double/`): every test runs its ports in child processes that load the
//! double, and checks the calls they made in its log. With `IOX_CUDA_DRIVER=real`
//! (scripts/gpu-check.sh on a GPU machine) the same children run against the
//! installed driver, and only behaviour is checked (the log assertions need the
//! double). Needs the `cuda` feature.
//!
//! Issue 18's tests here: 1 (eight pinned ports, one registration), 2 (two services,
//! two registrations), 3 (read-only flag for a subscriber-only process), 4 (mixed
//! readers in three processes), 5 (a refused registration), 8 (SIGKILL of a pinned
//! process), 10 (no driver call per sample).
#![cfg(feature = "cuda")]

use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::{MemoryType, PubSubService, Service};
use iox_testkit::cuda_double::{self, Call, Driver, names, test_dir};

const WAIT: Duration = Duration::from_secs(60);

/// The driver for `test`'s children, or `None` (after a skip line) when the real
/// driver was asked for and none is usable.
fn driver(test: &str, dir: &Path) -> Option<Driver> {
    Driver::for_test(test, dir, || iox_cuda::CudaPinner::new(0).map(drop))
}

fn service(name: &str) -> PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .publish_subscribe::<u64>()
        .memory_type(MemoryType::CudaPinned)
        .max_publishers(4)
        .max_subscribers(4)
        .subscriber_buffer(16)
        .open_or_create()
        .unwrap()
}

/// Writes the pool's (base, len) in this process to `<test dir>/<file>`.
fn write_pool(file: &str, s: &PubSubService<u64>) -> (usize, usize) {
    let info = s.pool_info();
    std::fs::write(test_dir().join(file), format!("{} {}", info.base, info.len)).unwrap();
    (info.base, info.len)
}

fn read_pool(dir: &Path, file: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let mut it = text.split_whitespace().map(|v| v.parse().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn of<'a>(calls: &'a [Call], name: &str) -> Vec<&'a Call> {
    calls.iter().filter(|c| c.name == name).collect()
}

fn is_mapped(addr: usize) -> bool {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.split_once('-'))
        .any(|(a, b)| {
            let (a, b) = (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            );
            (a..b).contains(&addr)
        })
}

/// Checks each received sample's device address: the driver's address of that
/// chunk, and the device reads the sample's value through it.
fn check_on_device(sample: &iox_service::Sample<u64>, device: &iox_cuda::DeviceBuffer) -> u64 {
    let dptr = sample.device_ptr().unwrap();
    assert_eq!(dptr, iox_cuda::device_pointer(sample.as_ptr()).unwrap());
    let mut bytes = [0u8; 8];
    device.copy_device_to_host(dptr, &mut bytes).unwrap();
    assert_eq!(u64::from_ne_bytes(bytes), **sample);
    dptr
}

/// Test 1: eight pinned ports of one process on one CudaPinned service register the
/// pool's payload range once and unregister it once, while it is still mapped,
/// before the unmap.
#[test]
fn eight_pinned_ports_register_once_and_unregister_once_while_mapped() {
    const TEST: &str = "eight_pinned_ports_register_once_and_unregister_once_while_mapped";
    if iox_testkit::role().is_some() {
        let s = service("gpu/eight");
        let pubs: Vec<_> = (0..4)
            .map(|_| s.publisher_builder().pin_memory(true).create().unwrap())
            .collect();
        let subs: Vec<_> = (0..4)
            .map(|_| s.subscriber_builder().pin_memory(true).create().unwrap())
            .collect();
        let (base, len) = write_pool("pool", &s);
        assert_eq!(iox_mempool::pin::pin_count(base as *const u8, len), 8);
        drop((pubs, subs, s));
        assert_eq!(iox_mempool::pin::pin_count(base as *const u8, len), 0);
        assert!(
            !is_mapped(base),
            "the pool is unmapped once the last handle is gone"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let pid = driver.run(TEST, "child", dir.path(), &[]);
    let Some(calls) = driver.calls_of(pid) else {
        return;
    };
    let (base, len) = read_pool(dir.path(), "pool");
    let registers = of(&calls, "cuMemHostRegister_v2");
    let unregisters = of(&calls, "cuMemHostUnregister");
    assert_eq!(
        (registers.len(), unregisters.len()),
        (1, 1),
        "{:#?}",
        names(&calls)
    );
    let (r, u) = (registers[0], unregisters[0]);
    assert_eq!(
        (r.num("p"), r.num("bytesize"), r.result),
        (Some(base), Some(len), 0)
    );
    assert_eq!(
        (u.num("p"), u.get("mapped"), u.result),
        (Some(base), Some("rw"), 0)
    );
    assert_eq!(u.num("bytesize"), Some(len));
}

/// Test 2: two CudaPinned services in one process: one registration per pool,
/// nothing else on the host-memory path.
#[test]
fn two_cuda_services_in_one_process_register_each_pool_once() {
    const TEST: &str = "two_cuda_services_in_one_process_register_each_pool_once";
    if iox_testkit::role().is_some() {
        let (a, b) = (service("gpu/a"), service("gpu/b"));
        let pa = a.publisher_builder().pin_memory(true).create().unwrap();
        let pb = b.publisher_builder().pin_memory(true).create().unwrap();
        let sa = a.subscriber_builder().pin_memory(true).create().unwrap();
        write_pool("a", &a);
        write_pool("b", &b);
        // a's pool is unpinned with its last port, then b's.
        drop(sa);
        drop(pa);
        drop(pb);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let pid = driver.run(TEST, "child", dir.path(), &[]);
    let Some(calls) = driver.calls_of(pid) else {
        return;
    };
    let pools = [read_pool(dir.path(), "a"), read_pool(dir.path(), "b")];
    let host: Vec<(&str, Option<u64>, u32)> = calls
        .iter()
        .filter(|c| c.name.starts_with("cuMemHost"))
        .map(|c| (c.name.as_str(), c.num("p"), c.result))
        .collect();
    let (a, b) = (Some(pools[0].0), Some(pools[1].0));
    assert_eq!(
        host,
        [
            ("cuMemHostRegister_v2", a, 0),
            ("cuMemHostGetDevicePointer_v2", a, 0),
            ("cuMemHostRegister_v2", b, 0),
            ("cuMemHostGetDevicePointer_v2", b, 0),
            ("cuMemHostUnregister", a, 0),
            ("cuMemHostUnregister", b, 0),
        ]
    );
    for (r, (_, len)) in of(&calls, "cuMemHostRegister_v2").iter().zip(pools) {
        assert_eq!(r.num("bytesize"), Some(len));
    }
}

/// Test 3: a process that holds the pool's descriptor read-write (every opener does)
/// registers it once, writable, whichever pinned port it builds first: a subscriber
/// alone, or a subscriber and then a publisher (no second registration, nothing
/// unregistered and registered again under the first port's device address). A
/// process holding the payload read-only registers it with the read-only flag
/// (`iox_cuda`'s `double` test 11).
#[test]
fn a_pool_is_registered_once_writable_whichever_pinned_port_comes_first() {
    const TEST: &str = "a_pool_is_registered_once_writable_whichever_pinned_port_comes_first";
    if let Some(role) = iox_testkit::role() {
        let s = service(&format!("gpu/{role}"));
        let sub = s.subscriber_builder().pin_memory(true).create().unwrap();
        assert!(sub.pool_info().base != 0 && sub.is_pinned());
        if role == "both" {
            let publisher = s.publisher_builder().pin_memory(true).create().unwrap();
            assert!(publisher.is_pinned());
            publisher.loan_uninit().unwrap().write_payload(3).send().unwrap();
            assert_eq!(sub.receive().unwrap().map(|s| *s), Some(3));
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let sub = driver.run(TEST, "subscriber", dir.path(), &[]);
    let both = driver.run(TEST, "both", dir.path(), &[]);
    let Some(calls) = driver.calls() else {
        return;
    };
    let register = |pid| {
        let r: Vec<_> = calls
            .iter()
            .filter(|c| {
                c.pid == pid && c.name.starts_with("cuMemHost") && c.name != "cuMemHostGetDevicePointer_v2"
            })
            .map(|c| {
                (
                    c.name.clone(),
                    c.num("flags").map(|f| f & 8),
                    c.get("mapped").map(str::to_string),
                    c.result,
                )
            })
            .collect();
        r
    };
    let once = [
        (
            "cuMemHostRegister_v2".to_string(),
            Some(0),
            Some("rw".to_string()),
            0,
        ),
        ("cuMemHostUnregister".to_string(), None, Some("rw".to_string()), 0),
    ];
    assert_eq!(register(sub), once);
    assert_eq!(register(both), once);
}

/// Test 4: a pinned publisher, a pinned GPU subscriber and an unpinned CPU subscriber
/// of one service in three processes. The CPU subscriber's process never loads the
/// driver and gets every sample; the GPU subscriber's `device_ptr()` of each sample is
/// the driver's device address of that chunk, and the device reads the sample there.
#[test]
fn mixed_readers_in_three_processes_each_get_every_sample() {
    const TEST: &str = "mixed_readers_in_three_processes_each_get_every_sample";
    const N: u64 = 8;
    if let Some(role) = iox_testkit::role() {
        let dir = test_dir();
        let s = service("gpu/mixed");
        match role.as_str() {
            "publisher" => {
                let p = s.publisher_builder().pin_memory(true).create().unwrap();
                assert_eq!(p.wait_for_subscribers(2, WAIT).unwrap(), 2);
                for i in 0..N {
                    p.loan_uninit().unwrap().write_payload(1000 + i).send().unwrap();
                }
                let done = || dir.join("done-gpu").exists() && dir.join("done-cpu").exists();
                assert!(iox_testkit::wait_until(WAIT, done), "subscribers did not finish");
            }
            reader => {
                let gpu = reader == "gpu";
                let sub = s.subscriber_builder().pin_memory(gpu).create().unwrap();
                let device = gpu.then(|| iox_cuda::DeviceBuffer::new(0, 64).unwrap());
                let mut seen = Vec::new();
                let mut pointers = String::new();
                for i in 0..N {
                    let sample = sub.receive_timeout(WAIT).unwrap().expect("a sample in time");
                    assert_eq!(*sample, 1000 + i);
                    if let Some(device) = &device {
                        let dptr = check_on_device(&sample, device);
                        pointers += &format!("{} {dptr}\n", sample.offset());
                    } else {
                        assert!(sample.device_ptr().is_err());
                    }
                    seen.push(*sample);
                }
                assert_eq!(seen.len() as u64, N);
                if gpu {
                    std::fs::write(dir.join("pointers"), pointers).unwrap();
                } else {
                    assert!(
                        !cuda_double::is_loaded("libcuda") && !cuda_double::is_loaded("cuda_double"),
                        "the CPU subscriber's process loaded the CUDA driver"
                    );
                }
                std::fs::write(dir.join(format!("done-{reader}")), "").unwrap();
            }
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let gpu = iox_testkit::Reaped::new(driver.spawn(TEST, "gpu", dir.path(), &[]));
    let cpu = iox_testkit::Reaped::new(driver.spawn(TEST, "cpu", dir.path(), &[]));
    let publisher = driver.spawn(TEST, "publisher", dir.path(), &[]);
    let (gpu_pid, cpu_pid) = (gpu.id(), cpu.id());
    iox_testkit::wait_ok(publisher, Duration::from_secs(120));
    iox_testkit::wait_ok(gpu.into_inner(), Duration::from_secs(120));
    iox_testkit::wait_ok(cpu.into_inner(), Duration::from_secs(120));
    let Some(calls) = driver.calls() else {
        return;
    };
    assert!(
        calls.iter().all(|c| c.pid != cpu_pid),
        "the CPU subscriber called the driver"
    );
    let gpu_calls: Vec<_> = calls.iter().filter(|c| c.pid == gpu_pid).cloned().collect();
    let registers = of(&gpu_calls, "cuMemHostRegister_v2");
    assert_eq!(registers.len(), 1, "{:#?}", names(&gpu_calls));
    let device_base = registers[0].num("dev").unwrap();
    let pointers = std::fs::read_to_string(dir.path().join("pointers")).unwrap();
    assert_eq!(pointers.lines().count() as u64, N);
    for line in pointers.lines() {
        let (offset, dptr) = line.split_once(' ').unwrap();
        let (offset, dptr): (u64, u64) = (offset.parse().unwrap(), dptr.parse().unwrap());
        assert_eq!(
            dptr,
            device_base + offset,
            "device_ptr is the driver's address of the chunk"
        );
    }
}

/// Test 5: the driver refuses the registration (out of memory, once): `create()` fails
/// naming the driver call and its error, this process's registry holds nothing, the
/// unpinned ports keep working, and the next pinned port pins.
#[test]
fn a_refused_registration_fails_create_and_leaves_nothing_pinned() {
    const TEST: &str = "a_refused_registration_fails_create_and_leaves_nothing_pinned";
    if iox_testkit::role().is_some() {
        let s = service("gpu/refused");
        let publisher = s.publisher_builder().create().unwrap();
        let sub = s.subscriber_builder().create().unwrap();
        let e = s.publisher_builder().pin_memory(true).create().unwrap_err();
        let text = e.to_string();
        assert!(text.contains("cuMemHostRegister"), "{text}");
        assert!(text.contains("CUDA_ERROR_OUT_OF_MEMORY"), "{text}");
        let info = s.pool_info();
        assert_eq!(iox_mempool::pin::pin_count(info.base as *const u8, info.len), 0);
        assert!(iox_mempool::pin::pinned_usage().is_empty());
        publisher.loan_uninit().unwrap().write_payload(5).send().unwrap();
        assert_eq!(*sub.receive().unwrap().unwrap(), 5);
        let pinned = s.subscriber_builder().pin_memory(true).create().unwrap();
        assert!(pinned.is_pinned());
        let usage = iox_mempool::pin::pinned_usage();
        assert_eq!(usage.len(), 1);
        assert_eq!(
            (usage[0].memory_type, usage[0].bytes),
            (MemoryType::CudaPinned, info.len)
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let driver = Driver::new(dir.path());
    if !driver.is_double() {
        eprintln!("NOTE {TEST}: needs the double's failure injection; not run against the real driver");
        return;
    }
    let pid = driver.run(
        TEST,
        "child",
        dir.path(),
        &[(cuda_double::FAIL_ENV, "cuMemHostRegister_v2:2:1".into())],
    );
    let calls = driver.calls_of(pid).unwrap();
    let results: Vec<u32> = of(&calls, "cuMemHostRegister_v2")
        .iter()
        .map(|c| c.result)
        .collect();
    assert_eq!(results, [2, 0]);
    assert_eq!(of(&calls, "cuMemHostUnregister").len(), 1);
}

/// Test 8: a pinned process is SIGKILLed; the pinned publisher and subscriber of
/// another process keep working (its registration is its own; the driver drops a
/// dead process's registrations itself), and a new pinned port can be built.
#[test]
fn sigkill_of_a_pinned_process_leaves_the_others_unaffected() {
    const TEST: &str = "sigkill_of_a_pinned_process_leaves_the_others_unaffected";
    if let Some(role) = iox_testkit::role() {
        let dir = test_dir();
        let s = service("gpu/kill");
        if role == "victim" {
            let _sub = s.subscriber_builder().pin_memory(true).create().unwrap();
            std::fs::write(dir.join("victim-ready"), "").unwrap();
            iox_testkit::wait_until(Duration::from_secs(120), || dir.join("never").exists());
            return;
        }
        let publisher = s.publisher_builder().pin_memory(true).create().unwrap();
        let sub = s.subscriber_builder().pin_memory(true).create().unwrap();
        assert_eq!(publisher.wait_for_subscribers(2, WAIT).unwrap(), 2);
        std::fs::write(dir.join("survivor-ready"), "").unwrap();
        assert!(iox_testkit::wait_until(WAIT, || dir.join("killed").exists()));
        let device = iox_cuda::DeviceBuffer::new(0, 64).unwrap();
        for i in 0..8u64 {
            publisher.loan_uninit().unwrap().write_payload(i).send().unwrap();
            let sample = sub.receive_timeout(WAIT).unwrap().unwrap();
            assert_eq!(*sample, i);
            check_on_device(&sample, &device);
        }
        let again = s.subscriber_builder().pin_memory(true).create().unwrap();
        assert!(again.is_pinned());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let victim = iox_testkit::Reaped::new(driver.spawn(TEST, "victim", dir.path(), &[]));
    assert!(iox_testkit::wait_until(WAIT, || dir
        .path()
        .join("victim-ready")
        .exists()));
    let survivor = driver.spawn(TEST, "survivor", dir.path(), &[]);
    let survivor_pid = survivor.id();
    let victim_pid = victim.id();
    assert!(iox_testkit::wait_until(WAIT, || dir
        .path()
        .join("survivor-ready")
        .exists()));
    victim.kill();
    std::fs::write(dir.path().join("killed"), "").unwrap();
    iox_testkit::wait_ok(survivor, Duration::from_secs(120));
    let Some(calls) = driver.calls() else {
        return;
    };
    let count = |pid: u32, name: &str| calls.iter().filter(|c| c.pid == pid && c.name == name).count();
    assert_eq!(count(victim_pid, "cuMemHostRegister_v2"), 1);
    assert_eq!(count(victim_pid, "cuMemHostUnregister"), 0);
    assert_eq!(count(survivor_pid, "cuMemHostRegister_v2"), 1);
    assert_eq!(count(survivor_pid, "cuMemHostUnregister"), 1);
    assert!(
        calls
            .iter()
            .filter(|c| c.pid == survivor_pid)
            .all(|c| c.result == 0)
    );
}

/// Test 10: no driver call per sample. Sending, receiving and `device_ptr()` of 64
/// samples add no line to the double's log; the device address comes from the pool's
/// base learned at registration. Also prints the per-sample cost of `device_ptr()`
/// next to asking the driver (what `device_ptr` did before).
#[test]
fn device_ptr_makes_no_driver_call_per_sample() {
    const TEST: &str = "device_ptr_makes_no_driver_call_per_sample";
    if iox_testkit::role().is_some() {
        let log = std::env::var(cuda_double::LOG_ENV).ok();
        let mine = || {
            log.as_ref().map(|path| {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let me = format!("pid={} ", std::process::id());
                text.lines().filter(|l| l.starts_with(&me)).count()
            })
        };
        let s = service("gpu/per-sample");
        let publisher = s.publisher_builder().pin_memory(true).create().unwrap();
        let sub = s.subscriber_builder().pin_memory(true).create().unwrap();
        let before = mine();
        let mut pointers = Vec::new();
        for i in 0..64u64 {
            publisher.loan_uninit().unwrap().write_payload(i).send().unwrap();
            let sample = sub.receive().unwrap().unwrap();
            pointers.push(sample.device_ptr().unwrap());
        }
        assert_eq!(
            mine(),
            before,
            "calls into the driver on the send/receive/device_ptr path"
        );
        assert!(pointers.iter().all(|&p| p != 0));
        // The cost per sample, now and asking the driver.
        publisher.loan_uninit().unwrap().write_payload(1).send().unwrap();
        let sample = sub.receive().unwrap().unwrap();
        let n = 100_000u32;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(std::hint::black_box(&sample).device_ptr().unwrap());
        }
        let now = t.elapsed() / n;
        let m = 1_000u32;
        let t = Instant::now();
        for _ in 0..m {
            std::hint::black_box(iox_cuda::device_pointer(sample.as_ptr()).unwrap());
        }
        let driver = t.elapsed() / m;
        std::fs::write(
            test_dir().join("cost"),
            format!(
                "device_ptr {} ns/sample; asking the driver {} ns/sample",
                now.as_nanos(),
                driver.as_nanos()
            ),
        )
        .unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    driver.run(TEST, "child", dir.path(), &[]);
    let cost = std::fs::read_to_string(dir.path().join("cost")).unwrap();
    let label = if driver.is_double() {
        "the double, logging every call"
    } else {
        "the real driver"
    };
    eprintln!("{TEST}: {cost} ({label})");
}

/// Access roles on a `CudaPinned` service: a reader uid (see `access_roles.rs`), whose
/// payload descriptor is read-only, registers the pool with the driver read-only
/// (`CU_MEMHOSTREGISTER_READ_ONLY`, flag 8); a publisher's process writable. Needs root
/// to run the reader as another user.
#[test]
fn a_reader_in_the_access_policy_registers_the_pool_read_only() {
    const TEST: &str = "a_reader_in_the_access_policy_registers_the_pool_read_only";
    const READER: u32 = 1002;
    if let Some(role) = iox_testkit::role() {
        assert_eq!(role, "reader");
        let s = Service::named("gpu/roles")
            .unwrap()
            .publish_subscribe::<u64>()
            .open()
            .unwrap();
        let sub = s.subscriber_builder().pin_memory(true).create().unwrap();
        assert!(sub.is_pinned());
        let refused = s
            .publisher_builder()
            .create()
            .map(drop)
            .expect_err("a reader's publisher");
        assert!(refused.to_string().contains("reader"), "{refused}");
        return;
    }
    if !iox_testkit::root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    for (path, mode) in [(dir.path(), 0o755), (root.as_path(), 0o1777)] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    // The reader writes the driver double's log too.
    let log = dir.path().join("cuda-calls.log");
    std::fs::write(&log, b"").unwrap();
    std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    // Created here without pinning (this process never loads the driver).
    let _svc = Service::named("gpu/roles")
        .unwrap()
        .root(&root)
        .publish_subscribe::<u64>()
        .memory_type(MemoryType::CudaPinned)
        .permissions(0o666)
        .access(iox_service::AccessPolicy::new().read_uid(READER))
        .create()
        .unwrap();
    let mut envs = driver.envs();
    envs.push(("IOX_ROOT", root.display().to_string()));
    let child = {
        use std::os::unix::process::CommandExt;
        iox_testkit::self_command(TEST, "reader", &envs)
            .uid(READER)
            .gid(READER)
            .spawn()
            .unwrap()
    };
    let pid = child.id();
    iox_testkit::wait_ok(child, WAIT);
    let Some(calls) = driver.calls_of(pid) else {
        return;
    };
    let register = of(&calls, "cuMemHostRegister_v2");
    assert_eq!(register.len(), 1, "{calls:?}");
    assert_eq!(
        register[0].num("flags").map(|f| f & 8),
        Some(8),
        "read-only: {calls:?}"
    );
    assert_eq!(register[0].get("mapped"), Some("ro"), "{calls:?}");
}

/// A `CudaPinned` pool on 2 MiB huge pages: a pinned subscriber in another process
/// registers the whole pool with the driver once (one `cuMemHostRegister` of the pool's
/// length, a multiple of 2 MiB) and the last port unregisters it, as on 4 KiB pages.
/// Needs two free 2 MiB pages (skipped, saying so, otherwise).
#[test]
fn a_cuda_pinned_pool_on_huge_pages_is_registered_once_whole() {
    const TEST: &str = "a_cuda_pinned_pool_on_huge_pages_is_registered_once_whole";
    let open = |root: &Path| {
        Service::named("gpu/huge")
            .unwrap()
            .root(root)
            .publish_subscribe::<[u8]>()
            .max_slice_len(1 << 20)
            .max_publishers(1)
            .max_subscribers(1)
            .subscriber_buffer(1)
            .max_loans(1)
            .max_held(1)
            .memory_type(MemoryType::CudaPinned)
            .page_size(iox_service::PageSize::Huge2MiB)
    };
    if let Some(role) = iox_testkit::role() {
        assert_eq!(role, "pinned");
        let s = open(&std::path::PathBuf::from(iox_testkit::env::<String>("IOX_ROOT")))
            .open()
            .unwrap();
        let info = s.pool_info();
        let sub = s.subscriber_builder().pin_memory(true).create().unwrap();
        assert!(sub.is_pinned());
        let publisher = s.publisher_builder().pin_memory(true).create().unwrap();
        println!("pool {:x} {}", info.base, info.len);
        drop((publisher, sub));
        return;
    }
    if !iox_testkit::huge_pages_or_skip(TEST, 2) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(driver) = driver(TEST, dir.path()) else {
        return;
    };
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let svc = open(&root).create().unwrap();
    let len = svc.pool_info().len;
    assert_eq!(len % (2 << 20), 0);
    let mut envs = driver.envs();
    envs.push(("IOX_ROOT", root.display().to_string()));
    let child = iox_testkit::self_command(TEST, "pinned", &envs).spawn().unwrap();
    let pid = child.id();
    iox_testkit::wait_ok(child, WAIT);
    let Some(calls) = driver.calls_of(pid) else {
        return;
    };
    let register = of(&calls, "cuMemHostRegister_v2");
    assert_eq!(
        register.len(),
        1,
        "one registration for two pinned ports: {calls:?}"
    );
    assert_eq!(
        register[0].num("bytesize"),
        Some(len as u64),
        "the whole pool: {calls:?}"
    );
    assert_eq!(of(&calls, "cuMemHostUnregister").len(), 1, "{calls:?}");
}
