//! What the access-role tests share: the users they run children as, the policy
//! they create services with, and the looks they take at a process's descriptors and
//! a service's holders. (Each test binary uses some of it.)
#![allow(dead_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iox_service::{AccessPolicy, OpenError, Service};
use iox_testkit::{env, wait_until};

pub const WRITER: u32 = 1001;
pub const READER: u32 = 1002;
pub const READER_GROUP: u32 = 1003;
pub const STRANGER: u32 = 1004;
/// A user that reads by its group (READER_GROUP) only.
pub const GROUP_MEMBER: u32 = 1005;
pub const LIMIT: Duration = Duration::from_secs(60);

pub fn policy() -> AccessPolicy {
    AccessPolicy::new()
        .publish_uid(WRITER)
        .read_uid(READER)
        .read_gid(READER_GROUP)
}

pub fn open(root: &Path, name: &str) -> Result<iox_service::PubSubService<u64>, OpenError> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open()
}

pub fn create(root: &Path, name: &str) -> iox_service::PubSubService<u64> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .permissions(0o666)
        .access(policy())
        .create()
        .unwrap()
}

/// A fresh root as /dev/shm is: sticky and open to all (owned by root, who runs these).
pub fn sticky_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    dir
}

pub fn spawn(test: &str, role: &str, uid: u32, gid: u32, root: &Path, name: &str) -> std::process::Child {
    let envs = [
        ("IOX_ROOT", root.display().to_string()),
        ("SERVICE", name.to_string()),
    ];
    iox_testkit::spawn_self_as(test, role, uid, gid, &envs)
}

pub fn child_env() -> (PathBuf, String) {
    (PathBuf::from(env::<String>("IOX_ROOT")), env("SERVICE"))
}

/// The descriptors of this process that are the service's payload memfd (`iox:<stem>`).
pub fn payload_fds(name: &str) -> Vec<OwnedFd> {
    let stem = iox_service::ServiceName::new(name).unwrap().stem();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(link) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if link.to_string_lossy().starts_with(&format!("/memfd:iox:{stem}:")) {
            let fd: i32 = entry.file_name().to_string_lossy().parse().unwrap();
            // SAFETY: `fd` is open in this process (just listed); the duplicate is ours.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            found.push(borrowed.try_clone_to_owned().unwrap());
        }
    }
    found
}

pub fn read_only_description(fd: &OwnedFd) -> bool {
    let flags = rustix::fs::fcntl_getfl(fd).unwrap();
    flags & rustix::fs::OFlags::RWMODE == rustix::fs::OFlags::RDONLY
}

/// Everything the kernel must refuse a holder of a read-only payload descriptor.
pub fn assert_kernel_refuses_writes(fd: &OwnedFd) {
    use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
    assert!(read_only_description(fd), "the payload descriptor is read-only");
    let len = rustix::fs::fstat(fd).unwrap().st_size as usize;
    // SAFETY: a fresh mapping the kernel places; it is unmapped below if made.
    let writable = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )
    };
    assert_eq!(
        writable.err(),
        Some(rustix::io::Errno::ACCESS),
        "mmap(PROT_WRITE)"
    );
    // SAFETY: as above, read-only.
    let ro = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ,
            MapFlags::SHARED,
            fd,
            0,
        )
    }
    .expect("a read-only mapping");
    // SAFETY: `ro` is our own mapping of `len` bytes; adding write would not invalidate
    // any reference (there is none), and the kernel refuses it anyway.
    let upgraded = unsafe { rustix::mm::mprotect(ro, len, MprotectFlags::READ | MprotectFlags::WRITE) };
    assert_eq!(
        upgraded.err(),
        Some(rustix::io::Errno::ACCESS),
        "mprotect to writable"
    );
    // SAFETY: unmapping our own mapping, used by nothing else.
    unsafe { rustix::mm::munmap(ro, len).unwrap() };
    let reopened = rustix::fs::open(
        format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(),
        rustix::fs::OFlags::RDWR,
        rustix::fs::Mode::empty(),
    );
    assert_eq!(
        reopened.err(),
        Some(rustix::io::Errno::ACCESS),
        "reopen for writing"
    );
    let written = rustix::io::pwrite(fd, b"x", 0);
    assert_eq!(written.err(), Some(rustix::io::Errno::BADF), "write");
    let chmod = rustix::fs::fchmod(fd, rustix::fs::Mode::from_raw_mode(0o666));
    assert_eq!(chmod.err(), Some(rustix::io::Errno::PERM), "chmod of the payload");
}

/// The hand-over socket of one holder of `name` under `root`: (incarnation, nonce,
/// node), parsed from the socket's file name.
pub fn holders(root: &Path, name: &str) -> Vec<(u64, u32, u64)> {
    let stem = iox_service::ServiceName::new(name).unwrap().stem();
    let prefix = format!("{stem}.h.");
    std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let rest = n.strip_prefix(&prefix)?.strip_suffix(".sock")?.to_string();
            let mut parts = rest.split('.');
            let incarnation = u64::from_str_radix(parts.next()?, 16).ok()?;
            let nonce = u32::from_str_radix(parts.next()?, 16).ok()?;
            let node = u64::from_str_radix(parts.next()?, 16).ok()?;
            Some((incarnation, nonce, node))
        })
        .collect()
}

/// Asks every holder of `name` directly (past the opener's own checks) for the payload.
pub fn ask_holders(root: &Path, name: &str) -> Vec<Result<Vec<OwnedFd>, iox_core::handover::Denied>> {
    let stem = iox_service::ServiceName::new(name).unwrap().stem();
    holders(root, name)
        .into_iter()
        .map(|(incarnation, nonce, node)| {
            iox_core::handover::fetch(
                root,
                &stem,
                incarnation,
                (node, nonce),
                Instant::now() + Duration::from_secs(5),
            )
        })
        .collect()
}

pub fn receive_within(s: &iox_service::Subscriber<u64>, limit: Duration) -> u64 {
    let mut got = None;
    assert!(
        wait_until(limit, || {
            got = s.receive().unwrap().map(|v| *v);
            got.is_some()
        }),
        "nothing received"
    );
    got.unwrap()
}
