//! A `Locked` port whose pool does not fit under the process's `RLIMIT_MEMLOCK`
//! fails in `create()` naming the limit, the pool size and how to raise it (issue 18;
//! a newcomer got only "mlock failed: Cannot allocate memory").

use std::time::Duration;

use iox_service::{MemoryType, Service};

/// Drops `CAP_IPC_LOCK` from this process's effective capabilities (root ignores
/// `RLIMIT_MEMLOCK` with it).
fn drop_ipc_lock() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_IPC_LOCK: u32 = 14;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset with a version-3 header and two data structs, as the ABI
    // requires; both are valid for the kernel to read and write.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()), 0);
        data[0].effective &= !(1 << CAP_IPC_LOCK);
        assert_eq!(libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()), 0);
    }
}

#[test]
fn a_locked_port_over_rlimit_memlock_fails_naming_the_limit() {
    const TEST: &str = "a_locked_port_over_rlimit_memlock_fails_naming_the_limit";
    if iox_testkit::role().is_some() {
        let limit = 64 * 1024;
        let rlimit = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        // SAFETY: a valid rlimit struct; lowering a limit needs no privilege.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rlimit) }, 0);
        drop_ipc_lock();
        let service = Service::named("locked/big")
            .unwrap()
            .publish_subscribe::<[u8]>()
            .memory_type(MemoryType::Locked)
            .max_publishers(1)
            .max_subscribers(1)
            .subscriber_buffer(1)
            .chunk_sizes(&[1 << 20])
            .open_or_create()
            .unwrap();
        let len = service.pool_info().len;
        let e = service.publisher_builder().pin_memory(true).create().unwrap_err();
        let text = e.to_string();
        for needed in [
            "RLIMIT_MEMLOCK".to_string(),
            format!("{limit} bytes"),
            format!("locking {len} bytes"),
            "ulimit -l".to_string(),
            "pin_memory(false)".to_string(),
        ] {
            assert!(text.contains(&needed), "{needed:?} missing from: {text}");
        }
        // Unpinned, the same port works.
        assert!(service.publisher_builder().create().is_ok());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let child = iox_testkit::spawn_self(TEST, "child", &[("IOX_ROOT", dir.path().display().to_string())]);
    iox_testkit::wait_ok(child, Duration::from_secs(60));
}
