//! `iox notify`, `iox listen`, and `iox show`/`list` on event services.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use iox_service::{EventId, EventService, Service};
use iox_testkit::wait_until;
use serde_json::Value;

mod common;
use common::{code, iox, text};

const LIMIT: Duration = Duration::from_secs(60);

fn create(root: &Path, name: &str) -> EventService {
    Service::named(name)
        .unwrap()
        .root(root)
        .event()
        .event_id_max(31)
        .notifier_dead_event(EventId::new(31))
        .create()
        .unwrap()
}

/// Waits (bounded) for `child` to exit; `what` if it does not.
fn exited(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(start.elapsed() < LIMIT, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn listen_prints_the_ids_that_notify_sends() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let event = create(root, "cli/ev");
    let mut listen = Command::new(env!("CARGO_BIN_EXE_iox"))
        .arg("--root")
        .arg(root)
        .args(["listen", "cli/ev", "--timeout", "60s", "--count", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(LIMIT, || event.port_counts().1 == 1),
        "iox listen never listened"
    );
    for id in ["7", "9"] {
        let out = iox(root, &["notify", "cli/ev", "--id", id]);
        assert_eq!(code(&out), 0, "{}", text(&out));
        assert!(
            text(&out).contains(&format!("notified event {id} to 1 listener(s)")),
            "{}",
            text(&out)
        );
    }
    let status = exited(&mut listen, "iox listen did not stop after 2 ids");
    assert!(status.success());
    let mut out = String::new();
    listen.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(out, "7\n9\n");
    // --timeout alone: exits 0 when it runs out, having printed nothing.
    let quiet = iox(root, &["listen", "cli/ev", "--timeout", "50ms"]);
    assert_eq!(code(&quiet), 0, "{}", text(&quiet));
    assert!(quiet.stdout.is_empty());
}

/// `iox listen --wait` started before its service exists listens once it is
/// created, and prints what is sent then.
#[test]
fn listen_with_wait_listens_once_the_service_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut listen = Command::new(env!("CARGO_BIN_EXE_iox"))
        .arg("--root")
        .arg(root)
        .args([
            "listen",
            "cli/later",
            "--wait",
            "--timeout",
            "60s",
            "--count",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It says that it waits (stderr), and keeps waiting.
    let mut stderr = listen.stderr.take().unwrap();
    let mut said = Vec::new();
    let mut byte = [0u8; 1];
    while !said.ends_with(b"\n") {
        assert_eq!(
            stderr.read(&mut byte).unwrap(),
            1,
            "iox listen ended: {}",
            String::from_utf8_lossy(&said)
        );
        said.push(byte[0]);
    }
    assert!(
        String::from_utf8_lossy(&said).contains("waiting for event service \"cli/later\" to be created"),
        "{}",
        String::from_utf8_lossy(&said)
    );
    assert!(listen.try_wait().unwrap().is_none(), "it waits for the service");
    let event = create(root, "cli/later");
    assert!(
        wait_until(LIMIT, || event.port_counts().1 == 1),
        "iox listen --wait never listened"
    );
    let notifier = event.notifier_builder().create().unwrap();
    notifier.notify_with_custom_event_id(EventId::new(5)).unwrap();
    let status = exited(&mut listen, "iox listen did not stop after 1 id");
    assert!(status.success(), "{status}");
    let mut out = String::new();
    listen.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(out.trim(), "5");
}

#[test]
fn notify_and_listen_report_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let out = iox(root, &["notify", "missing"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(text(&out).contains("does not exist"), "{}", text(&out));
    assert!(text(&out).contains("or pass --wait"), "{}", text(&out));
    let out = iox(root, &["listen", "missing", "--wait", "--timeout", "300ms"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(
        text(&out).contains("not created within --timeout"),
        "{}",
        text(&out)
    );
    let _event = create(root, "cli/ev");
    let out = iox(root, &["notify", "cli/ev", "--id", "32"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        text(&out).contains("event id 32 is above this service's event_id_max 31"),
        "{}",
        text(&out)
    );
    let out = iox(root, &["listen", "cli/ev", "--timeout", "soon"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    let _pubsub = Service::named("cli/ps")
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .create()
        .unwrap();
    for cmd in ["listen", "notify"] {
        let out = iox(root, &[cmd, "cli/ps"]);
        assert_eq!(code(&out), 6, "{cmd}: {}", text(&out));
        assert!(
            text(&out).contains("publish-subscribe pattern, not event")
                && text(&out).contains("`iox show cli/ps`"),
            "{}",
            text(&out)
        );
    }
}

#[test]
fn show_and_list_describe_notifiers_listeners_and_pending_ids() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let event = create(root, "cli/ev");
    let listener = event.listener_builder().create().unwrap();
    let notifier = event.notifier_builder().create().unwrap();
    for id in [3, 5, 3] {
        notifier.notify_with_custom_event_id(EventId::new(id)).unwrap();
    }
    let out = iox(root, &["show", "cli/ev"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("pattern   event, ids 0..=31"), "{shown}");
    assert!(
        shown.contains("notifier created -, dropped -, dead 31"),
        "{shown}"
    );
    let listener_line = shown.lines().find(|l| l.starts_with("listener")).expect(&shown);
    assert!(listener_line.ends_with("3 5"), "{listener_line}");
    let notifier_line = shown.lines().find(|l| l.starts_with("notifier ")).expect(&shown);
    assert!(
        notifier_line.contains(" 3 "),
        "three notifications: {notifier_line}"
    );

    let out = iox(root, &["show", "cli/ev", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ports = v["ports"].as_array().unwrap();
    let l = ports.iter().find(|p| p["kind"] == "listener").unwrap();
    assert_eq!(l["pending_ids"], serde_json::json!([3, 5]));
    assert_eq!(v["config"]["pattern"]["Event"]["event_id_max"], 31);

    let out = iox(root, &["list"]);
    let line = text(&out)
        .lines()
        .find(|l| l.starts_with("cli/ev"))
        .unwrap()
        .to_string();
    assert!(
        line.contains("Event") && line.contains("ids 0..=31") && line.contains("alive"),
        "{line}"
    );
    drop((listener, notifier));
}
