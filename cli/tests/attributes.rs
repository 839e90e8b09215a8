//! `iox list` and `iox show` print the attributes and access policies of services
//! another process created (text and JSON), and `iox list --attribute KEY[=VALUE]`
//! lists only the services that have them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::Service;
use iox_testkit::{Reaped, env, role, spawn_self, wait_until};
use serde_json::Value;

mod common;
use common::{code, iox, text};

const MSGDEF: &str = "int32 x\nint32 y\n\tstring label\n";

/// Child: creates three services with attributes (the event service last), then
/// waits to be killed.
fn creator() {
    let root = PathBuf::from(env::<String>("IOX_ROOT"));
    let named = |n: &str| Service::named(n).unwrap().root(&root);
    let _a = named("cli/attr/a")
        .publish_subscribe::<u64>()
        .attribute("ros2/type", "std_msgs/msg/String")
        .attribute("ros2/qos", "depth=10")
        .attribute("ros2/msgdef", MSGDEF)
        .create()
        .unwrap();
    let _b = named("cli/attr/b")
        .publish_subscribe::<u32>()
        .attribute("ros2/type", "geometry_msgs/msg/Pose")
        .create()
        .unwrap();
    let _guarded = named("cli/attr/guarded")
        .publish_subscribe::<u8>()
        .permissions(0o666)
        .access(iox_service::AccessPolicy::new().publish_uid(1001).read_gid(50))
        .create()
        .unwrap();
    let _plain = named("cli/attr/plain")
        .publish_subscribe::<u8>()
        .create()
        .unwrap();
    let _e = named("cli/attr/event")
        .event()
        .attribute("role", "estop")
        .create()
        .unwrap();
    loop {
        std::thread::park();
    }
}

/// The service names `iox list` printed (rows start at the first column).
fn listed(out: &str) -> Vec<String> {
    let mut names: Vec<String> = out
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("cli/"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn list(root: &Path, filters: &[&str]) -> Vec<String> {
    let mut args = vec!["list"];
    for f in filters {
        args.extend(["--attribute", f]);
    }
    let out = iox(root, &args);
    assert_eq!(code(&out), 0, "{}", text(&out));
    listed(&text(&out))
}

#[test]
fn list_and_show_print_and_filter_by_the_attributes_another_process_recorded() {
    if role().is_some() {
        return creator();
    }
    let test = "list_and_show_print_and_filter_by_the_attributes_another_process_recorded";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let _child = Reaped::new(spawn_self(
        test,
        "creator",
        &[("IOX_ROOT", root.display().to_string())],
    ));
    assert!(
        wait_until(Duration::from_secs(30), || Service::exists_in(
            root,
            "cli/attr/event"
        )
        .unwrap()),
        "the child did not create its services"
    );

    // Filters: KEY=VALUE, KEY alone, several (all must hold).
    let all = [
        "cli/attr/a",
        "cli/attr/b",
        "cli/attr/event",
        "cli/attr/guarded",
        "cli/attr/plain",
    ];
    assert_eq!(list(root, &[]), all);
    assert_eq!(list(root, &["ros2/type=std_msgs/msg/String"]), ["cli/attr/a"]);
    assert_eq!(list(root, &["ros2/type"]), ["cli/attr/a", "cli/attr/b"]);
    assert_eq!(list(root, &["ros2/type", "ros2/qos=depth=10"]), ["cli/attr/a"]);
    assert_eq!(
        list(root, &["ros2/type=geometry_msgs/msg/Pose", "ros2/qos"]),
        Vec::<String>::new()
    );
    assert_eq!(list(root, &["role=estop"]), ["cli/attr/event"]);
    assert_eq!(
        list(root, &["ros2/qos=depth"]),
        Vec::<String>::new(),
        "values match whole"
    );

    // Text: each attribute under its row, a long value's first line only.
    let out = iox(root, &["list"]);
    let t = text(&out);
    assert!(t.contains("    attribute ros2/type=std_msgs/msg/String\n"), "{t}");
    assert!(t.contains("    attribute ros2/msgdef=int32 x...\n"), "{t}");
    assert!(t.contains("    attribute role=estop\n"), "{t}");
    let me = rustix::process::geteuid().as_raw();
    let policy = format!("publish: uid {me} (creator), uid 1001; read: gid 50");
    assert!(t.contains(&format!("    access {policy}\n")), "{t}");
    let out = iox(root, &["show", "cli/attr/guarded"]);
    assert!(
        text(&out).contains(&format!("\naccess    {policy}\n")),
        "{}",
        text(&out)
    );
    let out = iox(root, &["show", "cli/attr/guarded", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["config"]["access"],
        serde_json::json!({"creator": me, "publish": [{"Uid": 1001}], "read": [{"Gid": 50}]}),
        "{v}"
    );

    // JSON: an object of key to value in each service's config, filtered alike.
    let out = iox(root, &["list", "--json", "--attribute", "ros2/type"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let services = v["services"].as_array().unwrap();
    assert_eq!(services.len(), 2, "{v}");
    let a = services.iter().find(|s| s["name"] == "cli/attr/a").unwrap();
    assert_eq!(
        a["config"]["attributes"]["ros2/type"], "std_msgs/msg/String",
        "{a}"
    );
    assert_eq!(a["config"]["attributes"]["ros2/msgdef"], MSGDEF);
    assert_eq!(a["config"]["attributes"].as_object().unwrap().len(), 3);

    // show: every attribute whole, a value of several lines indented under its first.
    let out = iox(root, &["show", "cli/attr/a"]);
    let t = text(&out);
    assert_eq!(code(&out), 0, "{t}");
    let indent = " ".repeat("attribute ros2/msgdef = ".len());
    assert!(
        t.contains(&format!(
            "attribute ros2/msgdef = int32 x\n{indent}int32 y\n{indent}\tstring label\n"
        )),
        "{t}"
    );
    assert!(t.contains("attribute ros2/qos = depth=10\n"), "{t}");
    let out = iox(root, &["show", "cli/attr/event", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["config"]["attributes"],
        serde_json::json!({"role": "estop"}),
        "{v}"
    );
    // A service without attributes has none in its JSON (its config as before).
    let out = iox(root, &["show", "cli/attr/plain", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["config"].get("attributes").is_none(), "{v}");

    // A filter whose key could never be an attribute's: a usage error naming it.
    let out = iox(root, &["list", "--attribute", "bad key=x"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("\"bad key=x\""), "{}", text(&out));
}
