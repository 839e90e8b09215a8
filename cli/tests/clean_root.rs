//! `iox clean` against roots made by real processes: a dry run lists exactly the files
//! the real run removes (dead node files, node files abandoned before their rename,
//! temporary files of dead processes, a dead service), never those of a live one; on
//! a full root (a small tmpfs filled up, as root; skipped with the reason otherwise)
//! `clean` works without a file of its own and exits 0; a root that cannot be used
//! is named, with the documented exit code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use std::time::Duration;

use iox_service::{CreateError, OpenOrCreateError, PubSubService, RootError, Service};
use iox_testkit::{Reaped, env, role, spawn_self, wait_until};

mod common;
use common::{code, iox, text};
use iox_testkit::Tmpfs;

const LIMIT: Duration = Duration::from_secs(20);

fn open(root: &Path, name: &str) -> Result<PubSubService<u64>, OpenOrCreateError> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open_or_create()
}

/// Child: opens the service, makes a publisher and a subscriber, and waits to be
/// killed.
fn holder() {
    let root = PathBuf::from(env::<String>("IOX_ROOT"));
    let svc = open(&root, &env::<String>("SERVICE")).unwrap();
    let _p = svc.publisher_builder().create().unwrap();
    let _s = svc.subscriber_builder().create().unwrap();
    loop {
        std::thread::park();
    }
}

/// A holder of service `name` under `root`, once its ports are seen.
fn spawn_holder(test: &str, root: &Path, name: &str) -> Reaped {
    let child = Reaped::new(spawn_self(
        test,
        "holder",
        &[
            ("IOX_ROOT", root.display().to_string()),
            ("SERVICE", name.to_string()),
        ],
    ));
    assert!(
        wait_until(LIMIT, || iox_service::inspect::inspect_in(root, name).is_ok_and(
            |i| i.ports.len() == 2 && i.ports.iter().all(|p| p.phase == "active")
        )),
        "holder of {name} did not come up"
    );
    child
}

/// The file names under `root`.
fn listing(root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

/// The node id of the node file of process `pid` under `root` (the file's text says
/// the pid: `pid <pid> pidns <inode>`).
fn node_of(root: &Path, pid: u32) -> u64 {
    listing(root)
        .iter()
        .filter_map(|n| {
            let hex = n.strip_prefix("iox_node_")?.strip_suffix(".lock")?;
            let text = std::fs::read_to_string(root.join(n)).ok()?;
            let said: u32 = text.split_whitespace().nth(1)?.parse().ok()?;
            (said == pid).then(|| u64::from_str_radix(hex, 16).ok())?
        })
        .next()
        .expect("node file of the process")
}

/// The files an `iox clean --dry-run` output says it would remove.
fn announced(out: &str) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| l.split_once("would remove file ")?.1.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// A dry run, then the real run: the files removed are the ones announced. Returns
/// them.
fn dry_run_then_clean(root: &Path) -> BTreeSet<String> {
    let out = iox(root, &["clean", "--dry-run"]);
    let t = text(&out);
    assert_eq!(code(&out), 0, "{t}");
    let announced = announced(&t);
    let before = listing(root);
    assert!(
        announced.is_subset(&before),
        "announced {announced:?}, present {before:?}"
    );
    assert_eq!(listing(root), before, "a dry run changes nothing");

    let out = iox(root, &["clean"]);
    let t = text(&out);
    assert_eq!(code(&out), 0, "{t}");
    let after = listing(root);
    let removed: BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(removed, announced, "dry run and real run disagree: {t}");
    removed
}

#[test]
fn a_dry_run_lists_exactly_what_clean_removes() {
    const TEST: &str = "a_dry_run_lists_exactly_what_clean_removes";
    if role().is_some() {
        return holder();
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let live = spawn_holder(TEST, root, "agree/live");
    let dead = spawn_holder(TEST, root, "agree/dead");
    let (live_node, dead_node) = (node_of(root, live.id()), node_of(root, dead.id()));
    dead.kill(); // SIGKILL: its node file, its service and its ports stay behind
    // What a dead process leaves when it dies at the wrong moment: a node file
    // before its rename (lock free), and a temporary file named with its id.
    let node_tmp = format!(".iox_node_{dead_node:016x}.lock.7.{dead_node:016x}.tmp");
    std::fs::write(root.join(&node_tmp), "1\n").unwrap();
    let other_tmp = format!(".iox_0123456789abcdef.service.3.{dead_node:016x}.tmp");
    std::fs::write(root.join(&other_tmp), "").unwrap();
    // And temporary files of the live process, which must stay.
    let live_tmp = format!(".iox_0123456789abcdef.service.4.{live_node:016x}.tmp");
    std::fs::write(root.join(&live_tmp), "").unwrap();

    let info = iox_service::inspect::inspect_all_in(root).unwrap();
    let dead_stem = iox_service::ServiceName::new("agree/dead").unwrap().stem();
    let removed = dry_run_then_clean(root);
    assert_eq!(
        removed,
        info.files_to_remove().into_iter().collect(),
        "the library's list and the CLI's agree"
    );
    for f in [
        &format!("iox_node_{dead_node:016x}.lock"),
        &node_tmp,
        &other_tmp,
        &format!("{dead_stem}.service"),
        &format!("{dead_stem}.dynamic"),
        &format!("{dead_stem}.chunks"),
    ] {
        assert!(removed.contains(f), "{f} not removed: {removed:?}");
    }
    let left = listing(root);
    assert!(
        left.contains(&format!("iox_node_{live_node:016x}.lock")),
        "{left:?}"
    );
    assert!(left.contains(&live_tmp), "{left:?}");
    assert!(Service::exists_in(root, "agree/live").unwrap());
    assert!(!Service::exists_in(root, "agree/dead").unwrap());
    // Nothing more to do: both runs agree on nothing.
    assert!(dry_run_then_clean(root).is_empty());
    drop(live);
}

const FULL_TEST: &str = "clean_works_on_a_full_root_and_failed_opens_leave_nothing";

#[test]
fn clean_works_on_a_full_root_and_failed_opens_leave_nothing() {
    if role().is_some() {
        return holder();
    }
    let fs = match Tmpfs::mount("size=2m") {
        Ok(fs) => fs,
        Err(reason) => return iox_testkit::skip(FULL_TEST, iox_testkit::REQUIRE_ROOT, reason),
    };
    let root = fs.path();
    let dead = spawn_holder(FULL_TEST, root, "full/dead");
    let dead_node = node_of(root, dead.id());
    dead.kill();
    iox_testkit::fill(root);
    for attempt in 0..5 {
        let e = open(root, "full/new").unwrap_err();
        assert!(
            matches!(
                &e,
                OpenOrCreateError::Create(CreateError::Root {
                    source: RootError::NoSpace { .. },
                    ..
                })
            ),
            "attempt {attempt}: {e:?}"
        );
        assert!(e.to_string().contains(&root.display().to_string()), "{e}");
        let temps: Vec<String> = listing(root)
            .into_iter()
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(temps.is_empty(), "attempt {attempt} left {temps:?}");
    }
    // Clean needs no new file: it removes what the dead process left, and the dry run
    // said so.
    let removed = dry_run_then_clean(root);
    assert!(
        removed.contains(&format!("iox_node_{dead_node:016x}.lock")),
        "{removed:?}"
    );
    assert!(!Service::exists_in(root, "full/dead").unwrap());
    assert_eq!(
        listing(root),
        BTreeSet::from(["filler".to_string()]),
        "only the filler is left"
    );
}

#[test]
fn a_root_that_cannot_be_used_is_named_with_the_documented_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    for args in [&["clean"][..], &["clean", "--dry-run"], &["list"], &["show", "x"]] {
        let out = iox(&missing, args);
        let t = text(&out);
        assert_eq!(code(&out), 1, "{args:?}: {t}");
        assert!(
            t.contains(&missing.display().to_string()) && t.contains("does not exist"),
            "{args:?}: {t}"
        );
    }
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = iox(&file, &["clean"]);
    let t = text(&out);
    assert_eq!(code(&out), 1, "{t}");
    assert!(
        t.contains(&file.display().to_string()) && t.contains("not a directory"),
        "{t}"
    );
}

const READ_ONLY_TEST: &str = "clean_on_a_read_only_root_exits_5_naming_it";

#[test]
fn clean_on_a_read_only_root_exits_5_naming_it() {
    let fs = match Tmpfs::mount("ro,size=1m") {
        Ok(fs) => fs,
        Err(reason) => return iox_testkit::skip(READ_ONLY_TEST, iox_testkit::REQUIRE_ROOT, reason),
    };
    let root = fs.path();
    let out = iox(root, &["clean"]);
    let t = text(&out);
    assert_eq!(code(&out), 5, "{t}");
    assert!(
        t.contains(&root.display().to_string()) && t.contains("not writable"),
        "{t}"
    );
    // Reading it is fine.
    let out = iox(root, &["clean", "--dry-run"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
}
