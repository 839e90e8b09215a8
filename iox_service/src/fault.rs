//! Stall points for crash tests: places where a test can make a process stop, so it
//! can be killed there deterministically.
//!
//! A stall point does nothing unless the environment variable [`STALL_ENV`] names it;
//! then the thread parks forever (until the test kills the process). Points:
//! `create-before-rename` (the dynamic segment is built under its temporary name),
//! `create-before-config` (the dynamic segment and pool exist, the static config does
//! not), `recovery-after-first-port` (holding the recovery lock, one dead port
//! recovered). Only ever reached on slow paths (creation, recovery).

/// The environment variable naming the stall point a test wants.
pub const STALL_ENV: &str = "IOX_TEST_STALL";

pub(crate) fn stall_point(name: &str) {
    if std::env::var_os(STALL_ENV).is_some_and(|v| v == name) {
        loop {
            std::thread::park();
        }
    }
}
