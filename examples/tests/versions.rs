//! One version for every way iox is installed: the Rust crates' (the workspace's
//! `version`), the Python package's (`iox_python/pyproject.toml`, and `iox.__version__`,
//! taken from the crates at build time: `iox_python/tests/test_wheel.py`), the C/C++
//! package's CMake version file and pkg-config file (`scripts/install-c.sh`), and the
//! changelog names it.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The text between `before` and the next `"` of the first line of `file` starting
/// with `before`.
fn quoted(file: &str, before: &str) -> String {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(before))
        .unwrap_or_else(|| panic!("{file} has no line starting {before:?}"));
    line[before.len()..].split('"').next().unwrap().to_string()
}

#[test]
fn every_package_carries_the_crates_version() {
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(quoted("Cargo.toml", "version = \""), version);
    assert_eq!(
        quoted("iox_python/pyproject.toml", "version = \""),
        version,
        "the Python package"
    );
    assert_eq!(
        quoted("iox_ffi/cmake/ioxConfigVersion.cmake", "set(PACKAGE_VERSION \""),
        version,
        "the CMake package"
    );
    let pc = std::fs::read_to_string(repo().join("scripts/install-c.sh")).unwrap();
    assert!(
        pc.lines().any(|l| l == format!("Version: {version}")),
        "scripts/install-c.sh writes an iox.pc of another version"
    );
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    assert!(
        changelog.contains(&format!("`{version}`")),
        "CHANGELOG.md does not name version {version}"
    );
}
