//! Access roles across real users: a service created with an access policy hands a
//! reader uid a read-only descriptor of its pool (its `mmap(PROT_WRITE)`, `mprotect`
//! and reopen for writing fail, its publisher is refused), lets a writer uid publish,
//! refuses an unlisted uid at open and at every holder, makes a reader that holds the
//! service hand out only read-only descriptors, and refuses a policy someone else
//! rewrote. The children run as other users (the test binary started again with
//! `setuid`); needs root, otherwise it says why it skips.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iox_service::{AccessPolicy, OpenError, PortCreateError, Service};
use iox_testkit::{env, role, wait_ok, wait_until};

const WRITER: u32 = 1001;
const READER: u32 = 1002;
const READER_GROUP: u32 = 1003;
const STRANGER: u32 = 1004;
/// A user that reads by its group (READER_GROUP) only.
const GROUP_MEMBER: u32 = 1005;
const LIMIT: Duration = Duration::from_secs(60);

const ROLES_TEST: &str = "a_reader_cannot_write_the_pool_a_writer_publishes_a_stranger_is_refused";
const HOLDER_TEST: &str = "a_reader_that_holds_the_service_hands_out_read_only_descriptors";
const TAMPER_TEST: &str = "a_policy_rewritten_by_another_user_is_refused";

fn policy() -> AccessPolicy {
    AccessPolicy::new()
        .publish_uid(WRITER)
        .read_uid(READER)
        .read_gid(READER_GROUP)
}

fn open(root: &Path, name: &str) -> Result<iox_service::PubSubService<u64>, OpenError> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open()
}

fn create(root: &Path, name: &str) -> iox_service::PubSubService<u64> {
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
fn sticky_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    dir
}

fn spawn(test: &str, role: &str, uid: u32, gid: u32, root: &Path, name: &str) -> std::process::Child {
    let envs = [
        ("IOX_ROOT", root.display().to_string()),
        ("SERVICE", name.to_string()),
    ];
    iox_testkit::spawn_self_as(test, role, uid, gid, &envs)
}

fn child_env() -> (PathBuf, String) {
    (PathBuf::from(env::<String>("IOX_ROOT")), env("SERVICE"))
}

/// The descriptors of this process that are the service's payload memfd (`iox:<stem>`).
fn payload_fds(name: &str) -> Vec<OwnedFd> {
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

fn read_only_description(fd: &OwnedFd) -> bool {
    let flags = rustix::fs::fcntl_getfl(fd).unwrap();
    flags & rustix::fs::OFlags::RWMODE == rustix::fs::OFlags::RDONLY
}

/// Everything the kernel must refuse a holder of a read-only payload descriptor.
fn assert_kernel_refuses_writes(fd: &OwnedFd) {
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
fn holders(root: &Path, name: &str) -> Vec<(u64, u32, u64)> {
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
fn ask_holders(root: &Path, name: &str) -> Vec<Result<Vec<OwnedFd>, iox_core::handover::Denied>> {
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

fn receive_within(s: &iox_service::Subscriber<u64>, limit: Duration) -> u64 {
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

#[test]
fn a_reader_cannot_write_the_pool_a_writer_publishes_a_stranger_is_refused() {
    if let Some(r) = role() {
        let (root, name) = child_env();
        match r.as_str() {
            "writer" => {
                let svc = open(&root, &name).unwrap();
                let p = svc.publisher_builder().create().unwrap();
                let fds = payload_fds(&name);
                let modes: Vec<bool> = fds.iter().map(read_only_description).collect();
                // Its own, read-write; and the read-only copy it keeps for readers.
                assert!(modes.contains(&false), "read-only: {modes:?}");
                p.loan_uninit().unwrap().write_payload(42).send().unwrap();
            }
            "reader" => {
                let svc = open(&root, &name).unwrap();
                let refused = svc
                    .publisher_builder()
                    .create()
                    .map(drop)
                    .expect_err("a reader's publisher");
                assert!(
                    matches!(refused, PortCreateError::NotAPublisher { .. }),
                    "{refused}"
                );
                let text = refused.to_string();
                assert!(text.contains("is a reader in its access policy"), "{text}");
                let fds = payload_fds(&name);
                assert!(!fds.is_empty(), "the payload is open");
                for fd in &fds {
                    assert_kernel_refuses_writes(fd);
                }
                let s = svc.subscriber_builder().create().unwrap();
                assert_eq!(receive_within(&s, LIMIT), 7);
            }
            "stranger" => {
                let e = open(&root, &name).map(drop).expect_err("a stranger's open");
                assert!(matches!(e, OpenError::NotInAccessPolicy { .. }), "{e}");
                let text = e.to_string();
                assert!(
                    text.contains(&format!("uid {STRANGER} (gid {STRANGER})"))
                        && text.contains(&format!(
                            "publish: uid 0 (creator), uid {WRITER}; read: uid {READER}, gid {READER_GROUP}"
                        )),
                    "{text}"
                );
                // Past the opener's own check: every holder refuses it too.
                let answers = ask_holders(&root, &name);
                assert!(!answers.is_empty());
                for a in answers {
                    match a {
                        Err(iox_core::handover::Denied::Refused(why)) => {
                            assert!(why.contains("neither a publisher nor a reader"), "{why}")
                        }
                        other => panic!("a holder answered a stranger: {:?}", other.map(|f| f.len())),
                    }
                }
                assert!(payload_fds(&name).is_empty(), "a stranger holds no descriptor");
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    if !iox_testkit::root_or_skip(ROLES_TEST) {
        return;
    }
    let dir = sticky_root();
    let root = dir.path();
    let svc = create(root, "camera");
    // The policy file: the creator's, and no one else may change it.
    let config = root.join(format!(
        "{}.service",
        iox_service::ServiceName::new("camera").unwrap().stem()
    ));
    let mode = std::fs::metadata(&config).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o644);
    let s = svc.subscriber_builder().create().unwrap();
    wait_ok(spawn(ROLES_TEST, "writer", WRITER, WRITER, root, "camera"), LIMIT);
    assert_eq!(receive_within(&s, LIMIT), 42, "the writer uid published");
    let p = svc.publisher_builder().create().unwrap();
    for (uid, gid) in [(READER, READER), (GROUP_MEMBER, READER_GROUP)] {
        let child = spawn(ROLES_TEST, "reader", uid, gid, root, "camera");
        // Its subscriber is the second one: then it is sent what it waits for.
        assert!(
            wait_until(LIMIT, || svc.port_counts().1 == 2),
            "the reader subscribed"
        );
        p.loan_uninit().unwrap().write_payload(7).send().unwrap();
        wait_ok(child, LIMIT);
        assert_eq!(receive_within(&s, LIMIT), 7);
        assert!(wait_until(LIMIT, || svc.port_counts().1 == 1));
    }
    wait_ok(
        spawn(ROLES_TEST, "stranger", STRANGER, STRANGER, root, "camera"),
        LIMIT,
    );
}

#[test]
fn a_reader_that_holds_the_service_hands_out_read_only_descriptors() {
    if let Some(r) = role() {
        let (root, name) = child_env();
        match r.as_str() {
            "holding reader" => {
                let svc = open(&root, &name).unwrap();
                let _s = svc.subscriber_builder().create().unwrap();
                // Holds the service (and answers for it) until the test is done.
                assert!(wait_until(LIMIT, || root.join("done").exists()), "told to stop");
            }
            "restart creator" => {
                // A creator that is not root (so it gets no root's reopen), gone once a
                // reader holds its service.
                let _svc = Service::named(&name)
                    .unwrap()
                    .root(&root)
                    .publish_subscribe::<u64>()
                    .permissions(0o666)
                    .access(policy())
                    .create()
                    .unwrap();
                std::fs::write(root.join("created"), b"").unwrap();
                assert!(wait_until(LIMIT, || root.join("reader-holds").exists()));
            }
            "restart reader" => {
                let svc = open(&root, &name).unwrap();
                let s = svc.subscriber_builder().create().unwrap();
                std::fs::write(root.join("reader-holds"), b"").unwrap();
                assert_eq!(receive_within(&s, LIMIT), 5, "the restarted creator publishes");
            }
            "restarted creator" => {
                // Only the reader holds it: handed read-only, reopened for writing (the
                // memfd is this uid's), publishes.
                let svc = open(&root, &name).unwrap();
                let p = svc.publisher_builder().create().unwrap();
                p.loan_uninit().unwrap().write_payload(5).send().unwrap();
            }
            "late writer" => {
                // Only a reader holds the service now: it hands over read-only.
                let svc = open(&root, &name).unwrap();
                let refused = svc
                    .publisher_builder()
                    .create()
                    .map(drop)
                    .expect_err("no writable pool");
                let text = refused.to_string();
                assert!(text.contains("only holders that may read were alive"), "{text}");
                for fd in payload_fds(&name) {
                    assert_kernel_refuses_writes(&fd);
                }
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    if !iox_testkit::root_or_skip(HOLDER_TEST) {
        return;
    }
    let dir = sticky_root();
    let root = dir.path();
    let svc = create(root, "held");
    let holder = spawn(HOLDER_TEST, "holding reader", READER, READER, root, "held");
    assert!(
        wait_until(LIMIT, || svc.port_counts().1 == 1),
        "the reader subscribed"
    );
    // The creator, the only writable holder, goes: the reader holds it alone.
    drop(svc);
    assert_eq!(holders(root, "held").len(), 1, "one holder left");
    // Asked directly by root (a publisher in the policy), it hands a read-only one.
    for answer in ask_holders(root, "held") {
        let fds = answer.unwrap_or_else(|e| panic!("the reader refused root: {e:?}"));
        assert!(fds.iter().all(read_only_description), "only read-only");
        assert!(!fds.is_empty());
        let _ = fds[0].as_fd();
    }
    wait_ok(
        spawn(HOLDER_TEST, "late writer", WRITER, WRITER, root, "held"),
        LIMIT,
    );
    std::fs::write(root.join("done"), b"").unwrap();
    wait_ok(holder, LIMIT);
    // A creator (not root) that restarts while only a reader holds its service
    // publishes again: the memfd is its own to reopen.
    let creator = spawn(HOLDER_TEST, "restart creator", WRITER, WRITER, root, "restarted");
    assert!(wait_until(LIMIT, || root.join("created").exists()), "created");
    let reader = spawn(HOLDER_TEST, "restart reader", READER, READER, root, "restarted");
    wait_ok(creator, LIMIT);
    assert_eq!(holders(root, "restarted").len(), 1, "only the reader holds it");
    wait_ok(
        spawn(
            HOLDER_TEST,
            "restarted creator",
            WRITER,
            WRITER,
            root,
            "restarted",
        ),
        LIMIT,
    );
    wait_ok(reader, LIMIT);
}

#[test]
fn a_policy_rewritten_by_another_user_is_refused() {
    if let Some(r) = role() {
        let (root, name) = child_env();
        let stem = iox_service::ServiceName::new(&name).unwrap().stem();
        let config = root.join(format!("{stem}.service"));
        match r.as_str() {
            "tamperer" => {
                let denied = |r: std::io::Result<()>, what: &str| {
                    let e = r.expect_err(what);
                    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{what}: {e}");
                };
                // In place: the file is its creator's, 0644.
                denied(
                    std::fs::OpenOptions::new().append(true).open(&config).map(drop),
                    "writing the policy",
                );
                // Replaced or removed: the root is sticky.
                let text = std::fs::read_to_string(&config).unwrap();
                let forged = text.replace(
                    &format!("Uid({WRITER}),"),
                    &format!("Uid({WRITER}),Uid({READER}),"),
                );
                assert_ne!(forged, text, "the policy is in the text: {text}");
                let tmp = root.join("forged");
                std::fs::write(&tmp, forged).unwrap();
                denied(std::fs::rename(&tmp, &config), "replacing the policy");
                denied(std::fs::remove_file(&config), "removing the policy");
            }
            "squatter" => {
                // The same rules, created first under another name by a reader.
                let _svc = Service::named("squatted")
                    .unwrap()
                    .root(&root)
                    .publish_subscribe::<u64>()
                    .permissions(0o666)
                    .access(policy())
                    .create()
                    .unwrap();
                std::fs::write(root.join("squatting"), b"").unwrap();
                assert!(wait_until(LIMIT, || root.join("done").exists()), "told to stop");
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    if !iox_testkit::root_or_skip(TAMPER_TEST) {
        return;
    }
    let dir = sticky_root();
    let root = dir.path();
    let _svc = create(root, "tampered");
    wait_ok(
        spawn(TAMPER_TEST, "tamperer", READER, READER, root, "tampered"),
        LIMIT,
    );
    assert!(open(root, "tampered").is_ok(), "untouched");
    // A policy file someone else wrote (made here by root, given to the reader): refused.
    let config = root.join(format!(
        "{}.service",
        iox_service::ServiceName::new("tampered").unwrap().stem()
    ));
    rustix::fs::chown(&config, Some(rustix::fs::Uid::from_raw(READER)), None).unwrap();
    let e = open(root, "tampered")
        .map(drop)
        .expect_err("a policy file of another user");
    assert!(matches!(e, OpenError::AccessTampered { .. }), "{e}");
    assert!(e.to_string().contains(&format!("belongs to uid {READER}")), "{e}");
    rustix::fs::chown(&config, Some(rustix::fs::Uid::from_raw(0)), None).unwrap();
    // A root where others may replace files keeps no policy: refused at open and create.
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let e = open(root, "tampered")
        .map(drop)
        .expect_err("a root without the sticky bit");
    assert!(e.to_string().contains("without the sticky bit"), "{e}");
    let e = Service::named("unsafe")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .access(policy())
        .create()
        .map(drop)
        .expect_err("created in a root without the sticky bit");
    assert!(e.to_string().contains("without the sticky bit"), "{e}");
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    // A reader that takes a name first with the same rules: an opener that names the
    // creator it expects refuses it; one that gives the rules alone takes it.
    let squatter = spawn(TAMPER_TEST, "squatter", READER, READER, root, "squatted");
    assert!(wait_until(LIMIT, || root.join("squatting").exists()), "squatting");
    let expected = Service::named("squatted")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .access(policy().created_by(0))
        .open()
        .map(drop)
        .expect_err("created by someone else");
    assert!(
        matches!(expected, OpenError::IncompatibleAccess { .. }),
        "{expected}"
    );
    assert!(
        expected.to_string().contains(&format!("uid {READER} (creator)")),
        "{expected}"
    );
    let rules_only = Service::named("squatted")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .access(policy())
        .open()
        .unwrap();
    assert_eq!(rules_only.access_policy().unwrap().creator, READER);
    drop(rules_only);
    std::fs::write(root.join("done"), b"").unwrap();
    wait_ok(squatter, LIMIT);
}

/// Settings that cannot be kept are refused when the service is created (no root
/// needed): a file-backed pool (opened by path, its mode alone decides), readers of a
/// device pool (the driver imports it with full access; refused before the driver is
/// asked anything); an opener that requires another policy is refused, one that
/// requires none takes the service's.
#[test]
fn policies_are_recorded_compared_and_refused_where_they_cannot_be_kept() {
    use iox_service::{Backing, CreateError, MemoryType};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let builder = |name: &str| {
        Service::named(name)
            .unwrap()
            .root(root)
            .publish_subscribe::<u64>()
    };
    let file = builder("file")
        .backing(Backing::File)
        .access(policy())
        .create()
        .map(drop)
        .expect_err("a file-backed pool with a policy");
    assert!(matches!(file, CreateError::InvalidSetting { .. }), "{file}");
    assert!(file.to_string().contains("handed over by descriptor"), "{file}");
    let device = builder("device")
        .memory_type(MemoryType::CudaDevice)
        .access(AccessPolicy::new().read_uid(READER))
        .create()
        .map(drop)
        .expect_err("readers of a device pool");
    assert!(
        device
            .to_string()
            .contains("CudaDevice pool cannot be handed to readers"),
        "{device}"
    );
    let svc = builder("kept").access(policy()).create().unwrap();
    let me = rustix::process::geteuid().as_raw();
    assert_eq!(svc.access_policy(), Some(&policy().with_creator(me)));
    // The same rules in another order: the same policy.
    let same = AccessPolicy::new()
        .read_gid(READER_GROUP)
        .read_uid(READER)
        .publish_uid(WRITER);
    assert!(builder("kept").access(same).open().is_ok());
    assert!(builder("kept").open().unwrap().access_policy().is_some());
    let other = builder("kept")
        .access(AccessPolicy::new().read_uid(READER))
        .open()
        .map(drop)
        .expect_err("another policy");
    assert!(matches!(other, OpenError::IncompatibleAccess { .. }), "{other}");
    let text = other.to_string();
    assert!(
        text.contains(&format!("read: uid {READER}, gid {READER_GROUP}")),
        "names both: {text}"
    );
    let none = builder("plain").create().unwrap();
    let required = builder("plain")
        .access(policy())
        .open()
        .map(drop)
        .expect_err("a policy the service lacks");
    assert!(
        required.to_string().contains("has access policy none"),
        "{required}"
    );
    drop(none);
}

const HOSTILE_TEST: &str =
    "a_hostile_reader_clearing_the_words_it_can_write_never_changes_what_another_reads";
/// Elements per message: element `i` of message `seq` is `seq * 1_000_003 + i`, so a
/// message overwritten or torn under a reader shows.
const WORDS: usize = 64;
type Frame = [u64; WORDS];

fn frame_ok(f: &Frame) -> bool {
    let seq = f[0] / 1_000_003;
    f.iter()
        .enumerate()
        .all(|(i, &v)| v == seq.wrapping_mul(1_000_003).wrapping_add(i as u64))
}

fn open_frames(root: &Path, name: &str) -> iox_service::PubSubService<Frame> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<Frame>()
        .open()
        .unwrap()
}

/// The victim: holds the last 8 samples it received, checks each when it arrives and
/// again when it lets it go; any change is a failure. Stops once `done` exists and
/// nothing more comes. Receive errors (entries the hostile reader spoiled) are
/// counted, not fatal.
fn victim(root: &Path, name: &str) {
    let svc = open_frames(root, name);
    let s = svc.subscriber_builder().create().unwrap();
    let mut held = std::collections::VecDeque::new();
    let (mut good, mut errors) = (0u64, 0u64);
    let start = Instant::now();
    let mut idle_since_done = None;
    while start.elapsed() < LIMIT {
        match s.receive() {
            Ok(Some(sample)) => {
                assert!(frame_ok(&sample), "a sample arrived torn: {:?}", &sample[..4]);
                let first = sample[0];
                held.push_back((first, sample));
                if held.len() > 8 {
                    let (seq, old) = held.pop_front().unwrap();
                    assert!(
                        old[0] == seq && frame_ok(&old),
                        "a held sample changed under its reader: {seq} became {}",
                        old[0]
                    );
                    good += 1;
                }
                idle_since_done = None;
            }
            Ok(None) => {
                if root.join("done").exists() {
                    let idle = *idle_since_done.get_or_insert_with(Instant::now);
                    if idle.elapsed() > Duration::from_millis(500) {
                        break;
                    }
                }
                std::thread::yield_now();
            }
            Err(_) => errors += 1,
        }
    }
    for (seq, old) in held {
        assert!(old[0] == seq && frame_ok(&old), "a held sample changed: {seq}");
        good += 1;
    }
    // The last messages, sent after the hostile reader was killed, all arrive.
    std::fs::write(root.join("victim-counts"), format!("{good} {errors}")).unwrap();
}

/// The hostile reader: maps the bookkeeping (every ownership word) read-write, as its
/// open lets it, and clears everything after its header again and again: every chunk
/// then looks free to a publisher, including those the victim holds.
fn hostile(root: &Path, name: &str) {
    let _svc = open_frames(root, name);
    let stem = iox_service::ServiceName::new(name).unwrap().stem();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join(format!("{stem}.chunks")))
        .unwrap();
    let len = file.metadata().unwrap().len() as usize;
    // SAFETY: a fresh shared mapping of the whole file, written below through raw
    // pointers only (other processes change it meanwhile: that is the attack).
    let map = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            &file,
            0,
        )
    }
    .unwrap()
    .cast::<u8>();
    std::fs::write(root.join("scribbling"), b"").unwrap();
    let start = Instant::now();
    while !root.join("stop").exists() && start.elapsed() < LIMIT {
        // SAFETY: within the mapping (64..len); volatile, as other processes race it.
        unsafe {
            for at in (64..len).step_by(8) {
                map.add(at).cast::<u64>().write_volatile(0);
            }
        }
        std::thread::yield_now();
    }
    // Killed by the test (SIGKILL) before it gets here, normally.
}

#[test]
fn a_hostile_reader_clearing_the_words_it_can_write_never_changes_what_another_reads() {
    if let Some(r) = role() {
        let (root, name) = child_env();
        match r.as_str() {
            "victim" => victim(&root, &name),
            "hostile" => hostile(&root, &name),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    if !iox_testkit::root_or_skip(HOSTILE_TEST) {
        return;
    }
    let dir = sticky_root();
    let root = dir.path();
    let svc = Service::named("frames")
        .unwrap()
        .root(root)
        .publish_subscribe::<Frame>()
        .permissions(0o666)
        // Room for everything sent after the attack, however slow the victim.
        .subscriber_buffer(256)
        .max_held(16)
        .access(policy())
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let victim = spawn(HOSTILE_TEST, "victim", GROUP_MEMBER, READER_GROUP, root, "frames");
    assert!(
        wait_until(LIMIT, || svc.port_counts().1 == 1),
        "the victim subscribed"
    );
    let mut hostile = spawn(HOSTILE_TEST, "hostile", READER, READER, root, "frames");
    assert!(
        wait_until(LIMIT, || root.join("scribbling").exists()),
        "scribbling"
    );
    let mut seq = 0u64;
    let mut publish = |count: u64| {
        let mut sent = 0;
        let start = Instant::now();
        while sent < count && start.elapsed() < LIMIT {
            seq += 1;
            // Loans and sends may fail while the words are spoiled; that is the cost.
            let Ok(loan) = p.loan_uninit() else {
                std::thread::yield_now();
                continue;
            };
            let s = seq;
            let frame: Frame = std::array::from_fn(|i| s.wrapping_mul(1_000_003).wrapping_add(i as u64));
            if loan.write_payload(frame).send().is_ok() {
                sent += 1;
            }
        }
        sent
    };
    let under_attack = publish(20_000);
    assert!(under_attack > 0, "nothing could be sent under attack");
    // The hostile reader dies as a crash would.
    hostile.kill().unwrap();
    hostile.wait().unwrap();
    let _ = svc.cleanup_dead();
    // Recoverable: what is sent after it went arrives whole.
    let after = publish(200);
    assert_eq!(
        after, 200,
        "the service works again once the hostile reader is gone"
    );
    std::fs::write(root.join("done"), b"").unwrap();
    wait_ok(victim, LIMIT);
    let counts = std::fs::read_to_string(root.join("victim-counts")).unwrap();
    let good: u64 = counts.split(' ').next().unwrap().parse().unwrap();
    assert!(good >= 200, "the victim checked {counts} (good, errors)");
    println!("sent {under_attack} under attack; victim: {counts} (checked, receive errors)");
}

const KILLED_TEST: &str = "a_port_killed_at_each_step_of_the_chunk_guard_leaves_no_lock_behind";

/// Whether any description holds a chunk lock of service `name` under `root` (asked
/// through a description of our own, which holds none): any lock on the dynamic
/// segment from `LOCKS_AT` on.
fn chunks_locked(root: &Path, name: &str) -> bool {
    let stem = iox_service::ServiceName::new(name).unwrap().stem();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join(format!("{stem}.dynamic")))
        .unwrap();
    // SAFETY: a zeroed flock is valid; F_OFD_GETLK reads it and writes it back.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = libc::F_WRLCK as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = iox_core::chunk_guard::LOCKS_AT as libc::off_t;
    // SAFETY: `file` is open; `l` is a valid flock (l_len 0: to the end).
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &raw mut l) };
    assert_eq!(rc, 0);
    l.l_type != libc::F_UNLCK as libc::c_short
}

/// The chunk guard's steps (`iox_core::chunk_guard`), each with a process SIGKILLed
/// there (no root needed: every port of a service whose policy names readers has a
/// guard, whatever its own role):
/// - a subscriber stopped after it locked a taken chunk for reading and before it
///   looked for a publisher writing it: its lock is there while it lives, gone with
///   it (the kernel drops a dead process's locks), and recovery returns its chunk;
/// - a publisher stopped after it claimed a chunk's word and before it locked it for
///   writing: no lock, and recovery returns the chunk;
/// - a publisher holding a loan (locked for writing): gone with it.
///
/// After each, every chunk can be loaned and sent again.
#[test]
fn a_port_killed_at_each_step_of_the_chunk_guard_leaves_no_lock_behind() {
    if let Some(r) = role() {
        let (root, name) = child_env();
        let gate = PathBuf::from(env::<String>("GATE"));
        let svc = open(&root, &name).unwrap();
        match r.as_str() {
            "subscriber" => {
                let s = svc.subscriber_builder().create().unwrap();
                iox_service::testing::stall_at(iox_service::testing::Stall::GuardBeforeReadCheck, &gate);
                // Stops inside, with the chunk locked for reading; killed there.
                let _ = receive_within(&s, LIMIT);
            }
            "publisher" => {
                let p = svc.publisher_builder().create().unwrap();
                iox_service::testing::stall_at(iox_service::testing::Stall::GuardBeforeWriteLock, &gate);
                // Stops inside the loan, its word claimed; killed there.
                let _ = p.loan_uninit();
            }
            "loaning publisher" => {
                let p = svc.publisher_builder().create().unwrap();
                let _loan = p.loan_uninit().unwrap();
                std::fs::write(gate.join("reached"), b"").unwrap();
                assert!(wait_until(LIMIT, || false), "killed before this");
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    // Readers named (any uid): every port has a guard.
    let svc = Service::named("killed")
        .unwrap()
        .root(&root)
        .publish_subscribe::<u64>()
        .access(AccessPolicy::new().read_uid(READER))
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let check_all_chunks = |round: u64| {
        assert!(!chunks_locked(&root, "killed"), "a lock was left behind");
        while s.receive().unwrap().is_some() {} // what the round sent before
        // Every chunk once round the pool: each loaned, locked, sent, received.
        let chunks: u64 = svc.pool_info().classes.iter().map(|c| u64::from(c.count)).sum();
        for i in 0..chunks {
            p.loan_uninit()
                .unwrap()
                .write_payload(round * 1000 + i)
                .send()
                .unwrap();
            assert_eq!(*s.receive().unwrap().expect("sent just now"), round * 1000 + i);
        }
    };
    for (round, role) in ["subscriber", "publisher", "loaning publisher"]
        .into_iter()
        .enumerate()
    {
        let gate = iox_testkit::Gate::new(dir.path(), role);
        let envs = [
            ("IOX_ROOT", root.display().to_string()),
            ("SERVICE", "killed".to_string()),
            ("GATE", gate.path().display().to_string()),
        ];
        let mut child = iox_testkit::spawn_self(KILLED_TEST, role, &envs);
        if role == "subscriber" {
            assert!(wait_until(LIMIT, || svc.port_counts().1 == 2), "it subscribed");
            p.loan_uninit().unwrap().write_payload(7).send().unwrap();
        }
        assert!(gate.wait_reached(LIMIT), "{role} stopped at its step");
        assert_eq!(
            chunks_locked(&root, "killed"),
            role != "publisher",
            "{role}: locked while it lives"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        svc.cleanup_dead();
        assert!(
            wait_until(LIMIT, || svc.port_counts() == (1, 1)),
            "{role} recovered"
        );
        check_all_chunks(round as u64 + 1);
    }
}
