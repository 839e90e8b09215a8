//! Where the ROS 2 install is: its prefixes (`--ros-prefix`, else `AMENT_PREFIX_PATH`
//! as a sourced ROS environment sets it) and the directories its libraries are in.
//!
//! A prefix's libraries are in `<prefix>/lib`; a ROS installed from PyPI into a venv
//! also keeps the libraries its wheels bundle in
//! `<prefix>/lib/python3.X/site-packages/ros_*.libs`. The dynamic loader reads
//! `LD_LIBRARY_PATH` once, when a program starts, so a gateway whose environment lacks
//! these directories starts itself again with them added ([`reexec_with_libraries`]):
//! what sourcing `setup.bash` (or the venv's bootstrap) does for other ROS programs.
//!
//! The PyPI wheels' `librcl` also needs the Python runtime's symbols (it links the
//! Python bindings of some message packages), which a Python process has and the
//! gateway does not: for a prefix that is a venv (`pyvenv.cfg`), [`python_runtime`]
//! finds the `libpython` of the venv's interpreter, and the gateway loads it first,
//! its symbols global. The interpreter is never started.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Set in the environment of the restarted gateway, so it restarts once at most.
const RESTARTED: &str = "IOX_ROS2_GATEWAY_LIBRARY_PATH";

/// The install's prefixes: `given` if any, else `AMENT_PREFIX_PATH`'s entries.
pub fn prefixes(given: &[PathBuf]) -> Vec<PathBuf> {
    if !given.is_empty() {
        return given.to_vec();
    }
    std::env::var_os("AMENT_PREFIX_PATH")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The directories holding the install's libraries (module docs), those that exist.
pub fn library_dirs(prefixes: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for prefix in prefixes {
        let lib = prefix.join("lib");
        if lib.is_dir() {
            dirs.push(lib.clone());
        }
        for site in python_site_packages(&lib) {
            let Ok(entries) = std::fs::read_dir(&site) else {
                continue;
            };
            let mut bundled: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_dir()
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("ros_") && n.ends_with(".libs"))
                })
                .collect();
            bundled.sort();
            dirs.extend(bundled);
        }
    }
    dirs
}

/// The shared Python runtime (`libpython3.X.so.1.0`) of the first prefix that is a
/// venv, if there is one and its library is found (module docs).
pub fn python_runtime(prefixes: &[PathBuf]) -> Option<PathBuf> {
    for prefix in prefixes {
        let Ok(cfg) = std::fs::read_to_string(prefix.join("pyvenv.cfg")) else {
            continue;
        };
        let value = |key: &str| {
            cfg.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_owned())
        };
        let (Some(home), Some(version)) = (value("home"), value("version").or_else(|| value("version_info")))
        else {
            continue;
        };
        let mut parts = version.split('.');
        let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
            continue;
        };
        let file = format!("libpython{major}.{minor}.so.1.0");
        let candidates = [
            Path::new(&home).join("../lib").join(&file),
            Path::new("/usr/lib/x86_64-linux-gnu").join(&file),
            Path::new("/usr/lib64").join(&file),
            Path::new("/usr/lib").join(&file),
        ];
        if let Some(found) = candidates.into_iter().find(|p| p.exists()) {
            return Some(found);
        }
    }
    None
}

fn python_site_packages(lib: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python3")))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect()
}

/// If `dirs` are not all on `LD_LIBRARY_PATH`, starts this program again with them
/// added (same arguments, same process id) and does not return; otherwise returns.
/// Returns the error if the restart failed.
pub fn reexec_with_libraries(dirs: &[PathBuf]) -> Option<std::io::Error> {
    let current: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let missing: Vec<&PathBuf> = dirs.iter().filter(|d| !current.contains(d)).collect();
    if missing.is_empty() || std::env::var_os(RESTARTED).is_some() {
        return None;
    }
    let mut all: Vec<PathBuf> = missing.into_iter().cloned().collect();
    all.extend(current);
    let path: OsString = match std::env::join_paths(&all) {
        Ok(p) => p,
        Err(e) => return Some(std::io::Error::other(e)),
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return Some(e),
    };
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("LD_LIBRARY_PATH", path)
        .env(RESTARTED, "1")
        .exec();
    Some(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pip_venv_contributes_its_wheels_library_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("lib/python3.11/site-packages");
        for d in ["ros_rcl.libs", "ros_fastdds.libs", "numpy.libs", "rclpy"] {
            std::fs::create_dir_all(site.join(d)).unwrap();
        }
        let dirs = library_dirs(&[dir.path().to_owned()]);
        assert_eq!(
            dirs,
            vec![
                dir.path().join("lib"),
                site.join("ros_fastdds.libs"),
                site.join("ros_rcl.libs")
            ]
        );
        assert!(library_dirs(&[dir.path().join("missing")]).is_empty());
    }
}
