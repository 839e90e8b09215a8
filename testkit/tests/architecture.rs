//! The workspace's shape, checked so that the next change cannot add an arrow the
//! architecture (`docs/architecture.md`) does not have:
//!
//! - the crate graph: each crate's normal dependencies on other crates of the
//!   workspace, from `cargo metadata`, are the allowed ones below (a new edge fails,
//!   naming it; so does an allowed edge that is gone, so the table stays true);
//! - module circles: inside each crate's `src/`, the top-level modules and the arrows
//!   between them (`use crate::x`, inline `crate::x::` paths) have no circle. One is
//!   known, in `iox_service`, and is the layered-core work's to remove (`KNOWN`): it may
//!   shrink, never grow, and no other crate may have one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Allowed dependencies between workspace crates (normal dependencies; dev- and
/// build-dependencies are the tests' and tools' business).
const ALLOWED: &[(&str, &[&str])] = &[
    ("iox_mempool", &[]),
    ("iox_derive", &[]),
    ("iox_cuda", &["iox_mempool"]),
    ("iox_process", &["iox_mempool"]),
    (
        "iox_core",
        &["iox_cuda", "iox_derive", "iox_mempool", "iox_process"],
    ),
    (
        "iox_service",
        &["iox_core", "iox_cuda", "iox_mempool", "iox_process"],
    ),
    ("iox_ffi", &["iox_service"]),
    ("iox_python", &["iox_mempool", "iox_service"]),
    ("iox_zenoh", &["iox_mempool", "iox_service"]),
    ("iox_ros2", &["iox_service"]),
    ("iox_ros2_gateway", &["iox_mempool", "iox_ros2", "iox_service"]),
    ("iox_cli", &["iox_mempool", "iox_ros2", "iox_service"]),
    ("iox_examples", &["iox_cuda", "iox_service"]),
    (
        "iox_benches",
        &["iox_ffi", "iox_mempool", "iox_ros2", "iox_service"],
    ),
    ("iox_testkit", &[]),
    ("iox_cuda_double", &[]),
];

/// The module circle `iox_service` has today (its modules, sorted).
const KNOWN: &[&str] = &[
    "blackboard",
    "config_file",
    "device",
    "event",
    "handover",
    "pattern",
    "port",
    "pubsub",
    "recovery",
    "reqres",
    "service",
    "shm",
    "static_config",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// (crate name, its src dir, its workspace dependencies).
fn crates() -> Vec<(String, PathBuf, BTreeSet<String>)> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(workspace())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|n| names.contains(n))
                .collect();
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
            (
                p["name"].as_str().unwrap().to_owned(),
                manifest.parent().unwrap().join("src"),
                deps,
            )
        })
        .collect()
}

#[test]
fn the_crate_graph_is_the_allowed_one() {
    let allowed: BTreeMap<&str, BTreeSet<String>> = ALLOWED
        .iter()
        .map(|(c, deps)| (*c, deps.iter().map(|d| d.to_string()).collect()))
        .collect();
    let mut wrong = Vec::new();
    for (name, _, deps) in crates() {
        match allowed.get(name.as_str()) {
            None => wrong.push(format!(
                "{name} is not in ALLOWED: add it with its layer's dependencies"
            )),
            Some(ok) => {
                for d in deps.difference(ok) {
                    wrong.push(format!(
                        "{name} -> {d} is not an allowed edge (docs/architecture.md)"
                    ));
                }
                for d in ok.difference(&deps) {
                    wrong.push(format!(
                        "{name} -> {d} is allowed but gone: remove it from ALLOWED"
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The top-level modules of `src` and the arrows between them.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "lib" && stem != "main" {
                files.entry(stem.to_owned()).or_default().push(path);
            }
        } else if path.is_dir() {
            let mut dirs = vec![path];
            while let Some(d) = dirs.pop() {
                for e in std::fs::read_dir(&d).unwrap().flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        dirs.push(p);
                    } else if p.extension().is_some_and(|x| x == "rs") {
                        files.entry(name.clone()).or_default().push(p);
                    }
                }
            }
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (m, paths) in &files {
        let mut to = BTreeSet::new();
        for p in paths {
            let text = std::fs::read_to_string(p).unwrap();
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or("");
                // `crate::x` anywhere, and the names inside `use crate::{a, b::c}`.
                let mut rest = code;
                while let Some(i) = rest.find("crate::") {
                    rest = &rest[i + "crate::".len()..];
                    let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                        let end = group.find('}').unwrap_or(group.len());
                        group[..end]
                            .split(',')
                            .map(|s| s.trim().split("::").next().unwrap_or(""))
                            .collect()
                    } else {
                        vec![
                            rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                                .next()
                                .unwrap_or(""),
                        ]
                    };
                    for n in names {
                        if n != m && modules.contains(n) {
                            to.insert(n.to_owned());
                        }
                    }
                }
            }
        }
        graph.insert(m.clone(), to);
    }
    graph
}

/// The circles (strongly connected components of more than one module).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for n in &graph[&m] {
                if seen.insert(n.clone()) {
                    todo.push(n.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for m in graph.keys() {
        let comp: BTreeSet<String> = graph
            .keys()
            .filter(|n| *n == m || (reaches[m].contains(*n) && reaches[*n].contains(m)))
            .cloned()
            .collect();
        if comp.len() > 1 && !out.contains(&comp) {
            out.push(comp);
        }
    }
    out
}

#[test]
fn no_crate_has_a_new_module_circle() {
    let known: BTreeSet<String> = KNOWN.iter().map(|s| s.to_string()).collect();
    let mut wrong = Vec::new();
    for (name, src, _) in crates() {
        if !src.is_dir() {
            continue;
        }
        for circle in circles(&module_graph(&src)) {
            let ok = name == "iox_core" && circle.is_subset(&known);
            if !ok {
                wrong.push(format!(
                    "{name}: modules {circle:?} import each other in a circle"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The scan finds a circle where there is one (so the test above can fail).
#[test]
fn the_scan_sees_a_circle() {
    let dir = std::env::temp_dir().join(format!("iox-arch-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "pub fn f() { crate::c::g() }\n").unwrap();
    std::fs::write(
        dir.join("c.rs"),
        "use crate::{a, d};\n// crate::b is only in a comment\n",
    )
    .unwrap();
    std::fs::write(dir.join("d.rs"), "").unwrap();
    let found = circles(&module_graph(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
    let abc: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    assert_eq!(found, vec![abc]);
}
