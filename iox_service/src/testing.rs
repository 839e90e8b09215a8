//! Test hooks, compiled in only with the `testing` cargo feature (which iox's own tests
//! enable); without it, stall points compile to nothing and none of this is public.
//!
//! Stall points are places where a crash test can make a process stop, so it can be
//! killed there deterministically. A stall point does nothing unless the environment
//! variable [`STALL_ENV`] names it; then the thread parks forever (until the test kills
//! the process). Points: `create-before-rename` (the dynamic segment is built under its
//! temporary name), `create-before-config` (the dynamic segment and pool exist, the
//! static config does not), `recovery-after-first-port` (holding the recovery lock, one
//! dead port recovered), `history-send-before-hand-off` (a send with history pushed to
//! the subscribers and the history queue, not handed off) and
//! `history-resend-before-hand-off` (a kept sample re-sent to a late subscriber, not
//! handed off) and `wake-before-ring` (a sender found a receiver armed and is about to
//! ring its descriptor).

/// The environment variable naming the stall point a test wants.
#[cfg(feature = "testing")]
pub const STALL_ENV: &str = "IOX_TEST_STALL";

/// Node liveness, for tests that check how dead processes are told from live ones.
#[cfg(feature = "testing")]
pub use crate::recovery::node::is_alive;
#[cfg(feature = "testing")]
pub use crate::shm::files::parse_node_file_name;

/// Parks the thread forever if the test asked for this stall point.
#[cfg(feature = "testing")]
pub(crate) fn stall_point(name: &str) {
    if std::env::var_os(STALL_ENV).is_some_and(|v| v == name) {
        loop {
            std::thread::park();
        }
    }
}

/// Without the `testing` feature: nothing.
#[cfg(not(feature = "testing"))]
#[inline(always)]
pub(crate) fn stall_point(_name: &str) {}
