//! Permissions across users: a default (0600) service refuses a process of another
//! user with a clear error; a group-access (0660) service admits a process of that
//! group. Needs root to start a child as uid 65534; otherwise it says why it skips.

use std::path::Path;
use std::time::Duration;

use iox_service::{ConfigError, OpenError, Service};
use iox_testkit::{env, role, wait_ok};

const NOBODY: u32 = 65534;
const TEST: &str = "another_user_is_refused_by_default_and_admitted_with_group_access";

fn spawn_as(uid: u32, gid: u32, role: &str, root: &Path, name: &str) -> std::process::Child {
    let envs = [
        ("IOX_ROOT", root.display().to_string()),
        ("SERVICE", name.to_string()),
    ];
    iox_testkit::spawn_self_as(TEST, role, uid, gid, &envs)
}

#[test]
fn another_user_is_refused_by_default_and_admitted_with_group_access() {
    if let Some(r) = role() {
        let root = std::path::PathBuf::from(env::<String>("IOX_ROOT"));
        let name: String = env("SERVICE");
        let opened = Service::named(&name)
            .unwrap()
            .root(&root)
            .publish_subscribe::<u64>()
            .open();
        match r.as_str() {
            "refused" => {
                let e = opened.unwrap_err();
                assert!(
                    matches!(e, OpenError::Config(ConfigError::PermissionDenied { .. })),
                    "{e}"
                );
                // It names the permissions: the files' owner and mode, and who asked.
                let text = e.to_string();
                assert!(
                    text.contains("owned by 0:0, mode 0600") && text.contains("uid 65534"),
                    "{text}"
                );
                println!("refused as expected: {e}");
            }
            "admitted" => {
                let svc = opened.unwrap();
                let p = svc.publisher_builder().create().unwrap();
                let s = svc.subscriber_builder().create().unwrap();
                p.loan_uninit().unwrap().write_payload(65534).send().unwrap();
                assert_eq!(*s.receive().unwrap().unwrap(), 65534);
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
    // The directory lets anyone create files (node files); the service files decide.
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let private = Service::named("private")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    wait_ok(
        spawn_as(NOBODY, NOBODY, "refused", root, "private"),
        Duration::from_secs(30),
    );
    // Group access: root's group (0) owns the files created here; a child of that
    // group (and another user) gets in.
    let shared = Service::named("shared")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .permissions(0o660)
        .create()
        .unwrap();
    wait_ok(
        spawn_as(NOBODY, 0, "admitted", root, "shared"),
        Duration::from_secs(30),
    );
    // The private one is still the creator's alone, and nothing was deleted.
    assert_eq!(private.port_counts(), (0, 0));
    assert!(Service::exists_in(root, "private").unwrap());
    drop((private, shared));
}
