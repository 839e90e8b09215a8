//! iox is a git dependency as the guide's set-up page writes it: a crate outside the
//! repository (in the test's temporary directory) names `iox_service` with the page's
//! `git = ..., rev = ...` line (its placeholders replaced by this checkout's path and
//! commit), builds with cargo, and its program (`outside/reading.rs`) moves a derived
//! struct between two processes.
//!
//! What is built is the commit `HEAD`, as a user's cargo fetches it; uncommitted
//! changes of this checkout are not in it. The outside crate starts from this
//! workspace's `Cargo.lock`, so it builds the versions CI built, without resolving
//! anew. Without `git` or outside a git checkout the test says it skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The git dependency line of the set-up page, as written.
fn documented_line() -> String {
    let page = std::fs::read_to_string(repo().join("docs/guide/setup.md")).unwrap();
    page.lines()
        .find(|l| l.starts_with("iox_service = { git = "))
        .expect("docs/guide/setup.md has an `iox_service = { git = ... }` line")
        .to_string()
}

#[test]
fn a_crate_outside_the_repository_depends_on_iox_by_git() {
    let head = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["rev-parse", "HEAD"])
        .output();
    let head = match head {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap().trim().to_string(),
        _ => {
            iox_testkit::skip(
                "a_crate_outside_the_repository_depends_on_iox_by_git",
                "IOX_REQUIRE_GIT",
                "no git, or this is no git checkout",
            );
            return;
        }
    };
    let line = documented_line();
    assert!(
        line.contains("URL-OF-YOUR-IOX-CLONE") && line.contains("COMMIT"),
        "the set-up page's line has other placeholders than the test replaces: {line}"
    );
    let url = format!("file://{}", repo().canonicalize().unwrap().display());
    let line = line
        .replace("URL-OF-YOUR-IOX-CLONE", &url)
        .replace("COMMIT", &head);

    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("outside");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"outside\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{line}\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/outside/reading.rs"),
        krate.join("src/main.rs"),
    )
    .unwrap();
    std::fs::copy(repo().join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .arg("build")
        .arg("--quiet")
        .current_dir(&krate)
        // Its own target directory, inside the temporary one.
        .env("CARGO_TARGET_DIR", krate.join("target"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cargo build of a crate with `{line}`:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let root = tempfile::tempdir().unwrap();
    let ran = Command::new(krate.join("target/debug/outside"))
        .env("IOX_ROOT", root.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{}\n{stdout}\n{}",
        ran.status,
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(stdout.contains("sent to 1 subscriber(s)"), "{stdout}");
    assert!(stdout.contains("received 7 2.5"), "{stdout}");
}
