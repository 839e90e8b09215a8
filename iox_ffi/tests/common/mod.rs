//! Building the C and C++ test programs against the `libiox_ffi.so` of this test run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `cargo test` put the `libiox_ffi.so` it built for this run: `deps/`, beside
/// the test binary (the copy in `target/<profile>/` is refreshed by `cargo build` only).
pub fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().expect("target/<profile>/deps").to_path_buf();
    assert!(
        dir.join("libiox_ffi.so").exists(),
        "libiox_ffi.so is not in {}: build the crate (cargo test -p iox_ffi builds it)",
        dir.display()
    );
    dir
}

/// Compiles `<source>` (a path in this crate: `tests/programs/...` or `examples/...`)
/// into a program named `name` (C for `.c`, C++17 for `.cpp`), with `extra` flags.
pub fn build(source: impl AsRef<Path>, name: &str, extra: &[&str]) -> PathBuf {
    let source = source.as_ref();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("iox_ffi_programs");
    std::fs::create_dir_all(&out).expect("a directory for the programs");
    let exe = out.join(name);
    let lib = library_dir();
    let (compiler, std) = if source.extension().is_some_and(|e| e == "cpp") {
        ("g++", "-std=c++17")
    } else {
        ("gcc", "-std=c11")
    };
    let output = Command::new(compiler)
        .arg(std)
        .args(["-Wall", "-Wextra", "-Werror", "-g", "-pthread"])
        .args(extra)
        .arg("-I")
        .arg(here.join("include"))
        .arg(here.join(source))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        // DT_RPATH (not RUNPATH): searched before LD_LIBRARY_PATH, which `cargo test`
        // sets to directories that may hold an older libiox_ffi.so of another build.
        .arg(format!("-Wl,--disable-new-dtags,-rpath,{}", lib.display()))
        .arg("-liox_ffi")
        .output()
        .unwrap_or_else(|e| panic!("run {compiler} (the C and C++ tests need gcc and g++): {e}"));
    assert!(
        output.status.success(),
        "{compiler} {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}
