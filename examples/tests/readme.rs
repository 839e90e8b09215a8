//! What the README and the set-up page tell a new user to put in their own crate names
//! things that exist: the dependency lines name a crate of this workspace (by its
//! directory for a path line, by its package name for a git line), the features they
//! list are that crate's, and the README's git lines are the set-up page's (which
//! `tests/git_dependency.rs` builds).

use std::path::Path;

/// The repository's root (this crate is `examples/`).
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// The `[dependencies]` lines of a page's toml blocks, comments stripped of their
/// `# ` (the commented lines are variants the user copies too).
fn dependency_lines(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_toml = false;
    for line in page.lines() {
        match line.trim() {
            "```toml" => in_toml = true,
            "```" => in_toml = false,
            l if in_toml && (l.trim_start_matches("# ").contains("path = ") || l.contains("git = ")) => {
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

/// The manifest of the workspace package `name`.
fn manifest_of(name: &str) -> String {
    let root = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let members = &root[root.find("members = [").expect("a members list")..];
    let members = &members[..members.find(']').unwrap()];
    members
        .split('"')
        .skip(1)
        .step_by(2)
        .filter_map(|dir| std::fs::read_to_string(repo().join(dir).join("Cargo.toml")).ok())
        .find(|m| m.contains(&format!("name = \"{name}\"")))
        .unwrap_or_else(|| panic!("no package of the workspace is named {name}"))
}

#[test]
fn the_readme_dependency_lines_name_crates_and_features_that_exist() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let setup = std::fs::read_to_string(repo().join("docs/guide/setup.md")).unwrap();
    let (front, guide) = (dependency_lines(&readme), dependency_lines(&setup));
    assert!(
        front.len() >= 2 && guide.len() >= 2,
        "the README and the set-up page show a dependency line (and one with features): {front:?} {guide:?}"
    );
    for line in front.iter().filter(|l| l.contains("git = ")) {
        assert!(
            guide.contains(line),
            "the README's {line:?} is not the set-up page's (which a test builds)"
        );
    }
    for line in front.iter().chain(&guide) {
        let name = line.split('=').next().unwrap().trim();
        let manifest = match quoted_after(line, "path =") {
            Some(path) => {
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
                manifest
            }
            None => manifest_of(name),
        };
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

/// The README's ```` ```rust ```` blocks, in order.
fn rust_blocks(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line) {
            (None, "```rust") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), l) => {
                block.push_str(l);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The blocks marked `// README block N` .. `// README block end` in the tour
/// program, indentation of the function body removed.
fn tour_blocks(source: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in source.lines() {
        let trimmed = line.trim();
        if trimmed == "// README block end" {
            blocks.extend(current.take());
        } else if trimmed.starts_with("// README block ") {
            current = Some(String::new());
        } else if let Some(block) = &mut current {
            block.push_str(line.strip_prefix("    ").unwrap_or(line));
            block.push('\n');
        }
    }
    blocks
}

/// The guide's API tour (`docs/guide/tour.md`, once the README's) runs as written and
/// in the order written: every block
/// is the text of one block of `readme_tour` (which only wraps them in a function),
/// and that program runs to its end as a user without privileges and with default
/// limits (the first block mlocks a pool), under its own root and temp directory.
#[test]
fn the_readme_rust_examples_are_one_program_that_runs_unprivileged() {
    // The API tour's page of the guide (the README's front page links it).
    let readme = std::fs::read_to_string(repo().join("docs/guide/tour.md")).unwrap();
    let tour_path = repo().join("examples/src/bin/readme_tour.rs");
    let tour = std::fs::read_to_string(&tour_path).unwrap();
    let (written, compiled) = (rust_blocks(&readme), tour_blocks(&tour));
    assert!(written.len() >= 5, "the README's Rust blocks: {}", written.len());
    assert_eq!(
        written.len(),
        compiled.len(),
        "README.md has {} Rust blocks, {} has {}: copy each README block there",
        written.len(),
        tour_path.display(),
        compiled.len()
    );
    for (i, (w, c)) in written.iter().zip(&compiled).enumerate() {
        assert_eq!(
            w,
            c,
            "README Rust block {} differs from `// README block {}` in {}",
            i + 1,
            i + 1,
            tour_path.display()
        );
    }

    let dir = tempfile::tempdir().unwrap();
    // The unprivileged user writes the root and its temp directory.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let mut cmd = iox_testkit::unprivileged(std::path::Path::new(env!("CARGO_BIN_EXE_readme_tour")));
    let out = cmd
        .env("IOX_ROOT", dir.path())
        .env("TMPDIR", dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    for expected in [
        "got 0",
        "EventId(3)",
        "EventId(7)",
        "waypoint 2 1",
        "speed 1.5 (generation 2)",
        "readme: every block ran",
    ] {
        assert!(
            stdout.contains(expected),
            "{expected:?} missing:\n{stdout}\n{stderr}"
        );
    }
}

/// The GPU page's (`docs/guide/gpu.md`) ```` ```rs ```` blocks are each the text
/// of `examples/src/bin/gpu_device.rs` or `gpu_tensors.rs`, which CI builds and runs
/// against the driver double: an excerpt cannot drift from code that works.
#[test]
fn the_readme_device_excerpts_are_in_the_gpu_examples() {
    assert_excerpts(
        "docs/guide/gpu.md",
        &[
            "examples/src/bin/gpu_device.rs",
            "examples/src/bin/gpu_tensors.rs",
        ],
        4,
    );
}

/// The huge-pages page's (`docs/guide/huge-pages.md`) ```` ```rs ```` blocks are the
/// text of `examples/src/bin/frames.rs`, which `examples.rs` runs on 2 MiB pages, and
/// of the huge-page service tests (a group reading through an access policy).
#[test]
fn the_huge_pages_excerpts_are_in_the_frames_example_and_the_tests() {
    assert_excerpts(
        "docs/guide/huge-pages.md",
        &["examples/src/bin/frames.rs", "iox_service/tests/huge_pages.rs"],
        2,
    );
}

/// Every ```` ```rs ```` block of `page` is the text of one of `programs` (paths in
/// the repository), and there are at least `min`. A block may leave lines out
/// where it says `// ...`; its pieces between those are each the program's text, in
/// the program's order, so a block uses only names the program defines where the
/// block shows them.
fn assert_excerpts(page: &str, programs: &[&str], min: usize) {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    // Compared line by line without indentation (an excerpt is dedented).
    let dedent = |t: &str| t.lines().map(str::trim_start).collect::<Vec<_>>().join("\n");
    let sources: Vec<String> = programs
        .iter()
        .map(|f| dedent(&std::fs::read_to_string(repo().join(f)).unwrap()))
        .collect();
    // Where every piece of `body` is found in order in `source`, if it is.
    let within = |source: &str, body: &str| {
        let mut at = 0;
        for piece in dedent(body).split("// ...\n") {
            let piece = piece.trim();
            at += source[at..].find(piece)? + piece.len();
        }
        Some(())
    };
    let mut excerpts = 0;
    let mut rest = text.as_str();
    while let Some(start) = rest.find("```rs\n") {
        let body = &rest[start + 6..];
        let end = body.find("```").expect("a closed block");
        assert!(
            sources
                .iter()
                .any(|source| within(source, &body[..end]).is_some()),
            "{page}: not in {programs:?}, piece by piece in order:\n{}",
            &body[..end]
        );
        excerpts += 1;
        rest = &body[end + 3..];
    }
    assert!(excerpts >= min, "{page}: {excerpts} excerpts");
}
