//! The workspace's shape, checked so that the next change cannot add an arrow the
//! architecture (`docs/architecture.md`) does not have:
//!
//! - the crate graph: each crate's normal dependencies on other crates of the
//!   workspace, from `cargo metadata`, are the allowed ones below (a new edge fails,
//!   naming it; so does an allowed edge that is gone, so the table stays true);
//! - module circles: inside each crate's `src/`, the top-level modules and the arrows
//!   between them (`use crate::x`, inline `crate::x::` paths) have no circle;
//! - the core's layers: every arrow between `iox_core`'s top-level modules runs to the
//!   same layer or a lower one (`CORE_LAYERS`), and every module has a layer.

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
    // The hot path's gate: the public API only.
    ("iox_hotpath", &["iox_service"]),
    ("iox_testkit", &[]),
    ("iox_cuda_double", &[]),
    // The fuzz targets call the decoders of every layer that reads untrusted bytes.
    (
        "iox_fuzz",
        &[
            "iox_cli",
            "iox_core",
            "iox_mempool",
            "iox_ros2",
            "iox_ros2_gateway",
        ],
    ),
];

/// The layers of `iox_core`, bottom up: its top-level modules, each importing only
/// modules of its own layer or below (`docs/architecture.md`, "The core's layers").
const CORE_LAYERS: &[(&str, &[&str])] = &[
    (
        "formats: what is written to disk",
        &[
            "access",
            "attributes",
            "name",
            "schema",
            "static_config",
            "tensor",
            "user_header",
            "valid",
            "zero_copy",
        ],
    ),
    (
        "shared memory: protocol words, segment, regions",
        &["device", "shm", "sync"],
    ),
    (
        "processes on a service",
        &["handover", "lifecycle", "liveness", "root"],
    ),
    (
        "an open service and its ports' primitives",
        &["chunk_guard", "fanout", "port", "shared"],
    ),
    ("recovery", &["recovery"]),
    ("services", &["cleanup", "inspect", "service", "slot_claim"]),
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
    let reexported = root_names(src, &modules);
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
                        let target = match reexported.get(n) {
                            Some(module) => module.as_str(),
                            None => n,
                        };
                        if target != m && modules.contains(target) {
                            to.insert(target.to_owned());
                        }
                    }
                }
            }
        }
        graph.insert(m.clone(), to);
    }
    graph
}

/// The names the crate root re-exports from its own modules (`pub use m::{A, b};`,
/// `pub(crate) use m::c;`), each with its module: `crate::A` is an arrow to `m` as much
/// as `crate::m::A` is.
fn root_names(src: &Path, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let Some(root) = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.exists())
    else {
        return BTreeMap::new();
    };
    let text = std::fs::read_to_string(root).unwrap();
    let code: Vec<&str> = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect();
    let mut names = BTreeMap::new();
    for statement in code.join("\n").split(';') {
        let s = statement.trim();
        let s = s.rsplit_once(']').map_or(s, |(_, after)| after.trim());
        let Some(path) = s
            .strip_prefix("pub use ")
            .or_else(|| s.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let path = path.trim().trim_start_matches("crate::");
        let module = path.split("::").next().unwrap_or("").trim();
        if !modules.contains(module) {
            continue;
        }
        let rest = &path[module.len()..];
        let items: Vec<&str> = match (rest.find('{'), rest.rfind('}')) {
            (Some(open), Some(close)) => rest[open + 1..close].split(',').collect(),
            _ => vec![rest],
        };
        for item in items {
            let item = item.rsplit(" as ").next().unwrap_or("");
            let name = item
                .rsplit("::")
                .next()
                .unwrap_or("")
                .trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
            if !name.is_empty() && name != "self" && !modules.contains(name) {
                names.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    names
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
fn no_crate_has_a_module_circle() {
    let mut wrong = Vec::new();
    for (name, src, _) in crates() {
        if !src.is_dir() {
            continue;
        }
        for circle in circles(&module_graph(&src)) {
            wrong.push(format!(
                "{name}: modules {circle:?} import each other in a circle"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The arrows of `graph` that run to a higher layer of `layers`, and the modules that
/// have no layer.
fn upward(graph: &BTreeMap<String, BTreeSet<String>>, layers: &[(&str, &[&str])]) -> Vec<String> {
    let layer_of = |m: &str| layers.iter().position(|(_, ms)| ms.contains(&m));
    let mut wrong = Vec::new();
    for (m, to) in graph {
        let Some(from) = layer_of(m) else {
            wrong.push(format!("module `{m}` has no layer: add it to CORE_LAYERS"));
            continue;
        };
        for t in to {
            if let Some(up) = layer_of(t).filter(|&l| l > from) {
                wrong.push(format!(
                    "`{m}` ({}) imports `{t}` ({}), a higher layer",
                    layers[from].0, layers[up].0
                ));
            }
        }
    }
    wrong
}

#[test]
fn the_core_imports_only_downwards() {
    let src = workspace().join("iox_core/src");
    let wrong = upward(&module_graph(&src), CORE_LAYERS);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The layer check sees an upward arrow and a module without a layer.
#[test]
fn the_layer_check_sees_an_upward_arrow() {
    let graph: BTreeMap<String, BTreeSet<String>> =
        [("low", vec!["high"]), ("high", vec!["low"]), ("stray", vec![])]
            .into_iter()
            .map(|(m, to)| (m.to_owned(), to.into_iter().map(str::to_owned).collect()))
            .collect();
    let wrong = upward(&graph, &[("bottom", &["low"]), ("top", &["high"])]);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(
        wrong[0].contains("`low` (bottom) imports `high` (top)"),
        "{wrong:?}"
    );
    assert!(wrong[1].contains("`stray` has no layer"), "{wrong:?}");
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

/// A name the crate root re-exports counts as an arrow to its module.
#[test]
fn the_scan_follows_root_reexports() {
    let dir = std::env::temp_dir().join(format!("iox-arch-root-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "mod a;\nmod b;\npub use b::{Thing, other::Deep};\n",
    )
    .unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::{Deep, Thing};\n").unwrap();
    std::fs::write(dir.join("b.rs"), "pub struct Thing;\n").unwrap();
    let graph = module_graph(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(graph["a"], BTreeSet::from(["b".to_owned()]));
    assert!(graph["b"].is_empty());
}
