//! Access roles across real users: a service created with an access policy hands a
//! reader uid a read-only descriptor of its pool (its `mmap(PROT_WRITE)`, `mprotect`
//! and reopen for writing fail, its publisher is refused), lets a writer uid publish,
//! refuses an unlisted uid at open and at every holder, makes a reader that holds the
//! service hand out only read-only descriptors, and refuses a policy someone else
//! rewrote. The children run as other users (the test binary started again with
//! `setuid`); needs root, otherwise it says why it skips.

use std::os::fd::AsFd;

use iox_service::{AccessPolicy, OpenError, PortCreateError, Service};
use iox_testkit::{role, wait_ok, wait_until};

mod access;
use access::*;

const ROLES_TEST: &str = "a_reader_cannot_write_the_pool_a_writer_publishes_a_stranger_is_refused";
const HOLDER_TEST: &str = "a_reader_that_holds_the_service_hands_out_read_only_descriptors";
const TAMPER_TEST: &str = "a_policy_rewritten_by_another_user_is_refused";

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
