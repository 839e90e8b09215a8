//! Event services across users: a default (0600) event service refuses a process of
//! another user; a group-access (0660) one lets a process of that group listen (on
//! its readiness descriptor, woken by the other user's notify) and notify back. Needs
//! root to start a child as uid 65534; otherwise it says why it skips.

use std::path::Path;
use std::time::Duration;

use iox_service::{ConfigError, EventId, OpenError, Service};
use iox_testkit::{env, role, wait_ok, wait_until};

const NOBODY: u32 = 65534;
const TEST: &str = "another_user_listens_and_notifies_on_a_group_access_event_service";
const LIMIT: Duration = Duration::from_secs(60);

fn spawn_as(uid: u32, gid: u32, role: &str, root: &Path, name: &str) -> std::process::Child {
    let envs = [
        ("IOX_ROOT", root.display().to_string()),
        ("SERVICE", name.to_string()),
    ];
    iox_testkit::spawn_self_as(TEST, role, uid, gid, &envs)
}

#[test]
fn another_user_listens_and_notifies_on_a_group_access_event_service() {
    if let Some(r) = role() {
        let root = std::path::PathBuf::from(env::<String>("IOX_ROOT"));
        let name: String = env("SERVICE");
        let opened = Service::named(&name).unwrap().root(&root).event().open();
        match r.as_str() {
            "refused" => {
                let e = opened.unwrap_err();
                assert!(
                    matches!(e, OpenError::Config(ConfigError::PermissionDenied { .. })),
                    "{e}"
                );
            }
            "admitted" => {
                let event = opened.unwrap();
                let listener = event.listener_builder().create().unwrap();
                let mut fds = [rustix::event::PollFd::new(
                    &listener,
                    rustix::event::PollFlags::IN,
                )];
                let ts = rustix::event::Timespec {
                    tv_sec: 60,
                    tv_nsec: 0,
                };
                assert_eq!(rustix::event::poll(&mut fds, Some(&ts)).unwrap(), 1, "not woken");
                assert_eq!(listener.try_wait_one().unwrap(), Some(EventId::new(1)));
                let notifier = event.notifier_builder().create().unwrap();
                assert!(notifier.notify_with_custom_event_id(EventId::new(2)).unwrap() >= 1);
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    if !iox_testkit::root_or_skip(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let private = Service::named("private")
        .unwrap()
        .root(root)
        .event()
        .create()
        .unwrap();
    wait_ok(spawn_as(NOBODY, NOBODY, "refused", root, "private"), LIMIT);
    let shared = Service::named("shared")
        .unwrap()
        .root(root)
        .event()
        .permissions(0o660)
        .create()
        .unwrap();
    let listener = shared.listener_builder().create().unwrap();
    let child = spawn_as(NOBODY, 0, "admitted", root, "shared");
    assert!(
        wait_until(LIMIT, || shared.port_counts().1 == 2),
        "the child never listened"
    );
    let notifier = shared.notifier_builder().create().unwrap();
    assert_eq!(notifier.notify_with_custom_event_id(EventId::new(1)).unwrap(), 2);
    assert_eq!(listener.try_wait_one().unwrap(), Some(EventId::new(1)), "our own");
    assert_eq!(
        listener.timed_wait_one(LIMIT).unwrap(),
        Some(EventId::new(2)),
        "the child's"
    );
    wait_ok(child, LIMIT);
    assert_eq!(private.port_counts(), (0, 0));
    drop((listener, notifier, shared, private));
}
