//! What the README tells a new user to put in their own crate names things that exist:
//! the dependency lines name a crate of this workspace by its directory, and the
//! features they list are that crate's.

use std::path::Path;

/// The repository's root (this crate is `examples/`).
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The `[dependencies]` lines of the README's toml blocks, comments stripped of their
/// `# ` (the commented lines are variants the user copies too).
fn dependency_lines(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_toml = false;
    for line in readme.lines() {
        match line.trim() {
            "```toml" => in_toml = true,
            "```" => in_toml = false,
            l if in_toml && l.trim_start_matches("# ").contains("path = ") => {
                out.push(l.trim_start_matches("# ").to_string());
            }
            _ => {}
        }
    }
    out
}

/// `key = "value"` inside one dependency line.
fn quoted_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    Some(&rest[start..start + len])
}

#[test]
fn the_readme_dependency_lines_name_crates_and_features_that_exist() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = dependency_lines(&readme);
    assert!(
        lines.len() >= 2,
        "the README shows a dependency line (and one with features): {lines:?}"
    );
    for line in &lines {
        let name = line.split('=').next().unwrap().trim();
        let path = quoted_after(line, "path =").unwrap_or_else(|| panic!("no path in {line:?}"));
        // The path is relative to the user's crate, beside a checkout named `iox`.
        let dir = path
            .strip_prefix("../iox/")
            .unwrap_or_else(|| panic!("{path:?} is not inside ../iox/"));
        let manifest = std::fs::read_to_string(repo().join(dir).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{dir}/Cargo.toml ({line:?}): {e}"));
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{dir}/Cargo.toml is not the package {name}"
        );
        if let Some(list) = line.split("features = [").nth(1) {
            let features = &manifest[manifest.find("[features]").expect("a [features] table")..];
            for feature in list.split(']').next().unwrap().split(',') {
                let feature = feature.trim().trim_matches('"');
                assert!(
                    features.lines().any(|l| l.starts_with(&format!("{feature} ="))),
                    "{name} has no feature {feature:?}"
                );
            }
        }
    }
}
