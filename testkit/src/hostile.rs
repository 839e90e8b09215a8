//! A hostile local user, for tests of programs that must not wait on one service: a
//! child of the test binary that runs a role as user and group `nobody`, makes its
//! services (with a mode that lets others open them), says so, and is then stopped
//! (`SIGSTOP`), so it holds its services and answers no hand-over: an open of them
//! waits until its timeout.

use std::path::Path;
use std::time::Duration;

use crate::Reaped;

/// The uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

/// A stopped child running as `nobody`; SIGKILLed and reaped when dropped.
pub struct StoppedStranger {
    // Kept for its drop: SIGKILL and reap.
    _child: Reaped,
}

impl StoppedStranger {
    /// Starts role `role` of `test` as `nobody` with `envs`, waits (up to `limit`) until
    /// it has made the file `ready` (in a directory `nobody` may write), and stops it.
    /// Panics if it ends first or never says so.
    pub fn start(test: &str, role: &str, envs: &[(&str, String)], ready: &Path, limit: Duration) -> Self {
        let mut child = Reaped::new(crate::spawn_self_as(test, role, NOBODY, NOBODY, envs));
        let said = crate::wait_until(limit, || ready.exists() || child.try_wait().is_some());
        assert!(
            said && ready.exists(),
            "the stranger's role {role} never became ready"
        );
        // SAFETY: kill(2) on our own child, not yet reaped (it is still running).
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGSTOP) }, 0);
        let stat = format!("/proc/{}/stat", child.id());
        let stopped = crate::wait_until(limit, || {
            std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('T'))
            })
        });
        assert!(stopped, "the stranger did not stop");
        Self { _child: child }
    }
}

/// The end of a stranger's role: says it is ready (the file `ready`), then waits to be
/// stopped and killed, holding what it made.
pub fn ready_and_hold(ready: &Path) -> ! {
    std::fs::write(ready, b"").expect("write the ready file");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
