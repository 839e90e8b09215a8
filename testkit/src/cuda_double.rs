//! Running a test's child processes against the CUDA driver double
//! (`cuda_double/`, a test-only `cdylib`), and reading the calls they made.
//!
//! [`Driver::new`] makes a directory holding `libcuda.so` and `libcuda.so.1`, both
//! links to the built double, and a call log; [`Driver::envs`] gives a child the
//! `LD_LIBRARY_PATH` that makes cudarc load the double instead of any installed
//! driver (the dynamic loader reads it when a process starts, so only children can be
//! switched, never the test process itself), and the log's path.
//!
//! Finding the double: `IOX_CUDA_DOUBLE_LIB` if set; else `libiox_cuda_double.so`
//! next to the test executable (`target/<profile>/deps`) or one level up, where cargo
//! puts it when the run builds the `iox_cuda_double` package (`cargo test --workspace`,
//! or `-p iox_cuda_double` beside the packages tested); else it is built once with
//! `cargo build -p iox_cuda_double --target-dir target/cuda-double` (a separate target
//! directory, so it never waits for the lock of the running cargo).
//!
//! Against a real driver (`IOX_CUDA_DRIVER=real`, what `scripts/gpu-check.sh` sets
//! on a GPU machine) the children load the installed `libcuda` and there is no call
//! log: [`Driver::calls`] is `None`, and tests check behaviour only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::Duration;

/// Env var naming the double's library file, overriding the search.
pub const LIB_ENV: &str = "IOX_CUDA_DOUBLE_LIB";
/// Env var that selects the real driver (`real`) instead of the double.
pub const DRIVER_ENV: &str = "IOX_CUDA_DRIVER";
/// The double's env vars (see the `iox_cuda_double` docs).
pub const LOG_ENV: &str = "IOX_CUDA_DOUBLE_LOG";
/// Fail given calls: `CALL:CODE[:TIMES],...`.
pub const FAIL_ENV: &str = "IOX_CUDA_DOUBLE_FAIL";
/// `0`: devices report no read-only host registration.
pub const READ_ONLY_ENV: &str = "IOX_CUDA_DOUBLE_READ_ONLY_REGISTER";

const LIB_NAME: &str = "libiox_cuda_double.so";

/// Whether the tests run against the real driver (`IOX_CUDA_DRIVER=real`).
pub fn real_driver() -> bool {
    std::env::var(DRIVER_ENV).as_deref() == Ok("real")
}

/// The built double, found or built once (see the module docs).
pub fn library() -> Result<PathBuf, String> {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    LIB.get_or_init(find_or_build).clone()
}

fn find_or_build() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var(LIB_ENV) {
        return Ok(path.into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join(LIB_NAME);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the workspace");
    let target = workspace.join("target").join("cuda-double");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--quiet", "-p", "iox_cuda_double", "--target-dir"])
        .arg(&target)
        .current_dir(workspace)
        .output()
        .map_err(|e| format!("cannot run cargo to build the CUDA double: {e}"))?;
    let built = target.join("debug").join(LIB_NAME);
    if out.status.success() && built.is_file() {
        Ok(built)
    } else {
        Err(format!(
            "the CUDA double was not found next to the test executable and `cargo build -p iox_cuda_double` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The driver a test's children use: the double (with its call log) or the real one.
#[derive(Debug)]
pub struct Driver {
    /// The directory put on `LD_LIBRARY_PATH` (double only).
    lib_dir: Option<PathBuf>,
    log: PathBuf,
}

impl Driver {
    /// [`Driver::new`] for `test`, or `None` after a skip line (a failure under
    /// `IOX_REQUIRE_GPU=1`) when the real driver was asked for and `usable` says no
    /// device can be used (e.g. `|| iox_cuda::CudaPinner::new(0).map(drop)`).
    pub fn for_test<E: std::fmt::Display>(
        test: &str,
        dir: &Path,
        usable: impl FnOnce() -> Result<(), E>,
    ) -> Option<Self> {
        let driver = Self::new(dir);
        if !driver.is_double()
            && let Err(e) = usable()
        {
            crate::skip(test, crate::REQUIRE_GPU, format!("no usable CUDA device: {e}"));
            return None;
        }
        Some(driver)
    }

    /// [`Driver::new`] if it is the double, else `None` after a note that `test`
    /// (which needs the double: `why`) has nothing to do against the real driver.
    pub fn double_only(test: &str, dir: &Path, why: &str) -> Option<Self> {
        let driver = Self::new(dir);
        if driver.is_double() {
            return Some(driver);
        }
        eprintln!("NOTE {test}: {why}; nothing to do against the real driver");
        None
    }

    /// The double, set up under `dir` (the test's temp directory), or the real driver
    /// when [`real_driver`]. Panics if the double cannot be found or built.
    pub fn new(dir: &Path) -> Self {
        let log = dir.join("cuda-calls.log");
        if real_driver() {
            return Self { lib_dir: None, log };
        }
        let lib = library().unwrap_or_else(|e| panic!("{e}"));
        let lib_dir = dir.join("cuda-driver");
        std::fs::create_dir_all(&lib_dir).expect("make the driver directory");
        for name in ["libcuda.so", "libcuda.so.1"] {
            let link = lib_dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&lib, &link).expect("link the CUDA double");
        }
        Self {
            lib_dir: Some(lib_dir),
            log,
        }
    }

    /// Whether this is the double.
    pub fn is_double(&self) -> bool {
        self.lib_dir.is_some()
    }

    /// What a child needs to load this driver (nothing for the real one).
    pub fn envs(&self) -> Vec<(&'static str, String)> {
        let Some(dir) = &self.lib_dir else {
            return Vec::new();
        };
        let path = match std::env::var("LD_LIBRARY_PATH") {
            Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
            _ => dir.display().to_string(),
        };
        vec![
            ("LD_LIBRARY_PATH", path),
            (LOG_ENV, self.log.display().to_string()),
        ]
    }

    /// Starts this test binary again as a child running `test` in `role` on this
    /// driver, with `IOX_ROOT` set to `dir/root` (made here), [`test_dir`] to `dir`,
    /// and `extra`.
    pub fn spawn(&self, test: &str, role: &str, dir: &Path, extra: &[(&str, String)]) -> Child {
        let root = dir.join("root");
        std::fs::create_dir_all(&root).expect("make the test root");
        let mut envs = self.envs();
        envs.push(("IOX_ROOT", root.display().to_string()));
        envs.push((DIR_ENV, dir.display().to_string()));
        envs.extend(extra.iter().map(|(k, v)| (*k, v.clone())));
        crate::spawn_self(test, role, &envs)
    }

    /// [`Driver::spawn`], waiting (at most two minutes) for the child to succeed;
    /// returns its pid.
    pub fn run(&self, test: &str, role: &str, dir: &Path, extra: &[(&str, String)]) -> u32 {
        let child = self.spawn(test, role, dir, extra);
        let pid = child.id();
        crate::wait_ok(child, Duration::from_secs(120));
        pid
    }

    /// The calls of process `pid` (`None` against the real driver).
    pub fn calls_of(&self, pid: u32) -> Option<Vec<Call>> {
        Some(self.calls()?.into_iter().filter(|c| c.pid == pid).collect())
    }

    /// Every call logged so far by the children (`None` against the real driver).
    pub fn calls(&self) -> Option<Vec<Call>> {
        self.lib_dir.as_ref()?;
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        Some(text.lines().filter_map(Call::parse).collect())
    }
}

/// One logged driver call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The calling process.
    pub pid: u32,
    /// The calling thread.
    pub tid: u32,
    /// The entry point (`cuMemHostRegister_v2`).
    pub name: String,
    /// The result code (0: success).
    pub result: u32,
    /// Every `key=value` of the line (arguments, what it handed back).
    pub fields: BTreeMap<String, String>,
}

impl Call {
    /// Parses one log line.
    pub fn parse(line: &str) -> Option<Self> {
        let fields: BTreeMap<String, String> = line
            .split_whitespace()
            .filter_map(|f| f.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Some(Self {
            pid: fields.get("pid")?.parse().ok()?,
            tid: fields.get("tid")?.parse().ok()?,
            name: fields.get("call")?.clone(),
            result: fields.get("result")?.parse().ok()?,
            fields,
        })
    }

    /// A field's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// A numeric field (hex with `0x`, or decimal).
    pub fn num(&self, key: &str) -> Option<u64> {
        let v = self.get(key)?;
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    }
}

const DIR_ENV: &str = "IOX_TEST_DIR";

/// In a child started by [`Driver::spawn`]: the test's directory.
pub fn test_dir() -> PathBuf {
    std::env::var(DIR_ENV).expect("started by Driver::spawn").into()
}

/// Names of `calls`, in order, for assertions and messages.
pub fn names(calls: &[Call]) -> Vec<&str> {
    calls.iter().map(|c| c.name.as_str()).collect()
}

/// Whether `lib` (e.g. `libcuda`) is mapped in this process (`/proc/self/maps`).
pub fn is_loaded(lib: &str) -> bool {
    std::fs::read_to_string("/proc/self/maps").is_ok_and(|m| m.lines().any(|l| l.contains(lib)))
}
