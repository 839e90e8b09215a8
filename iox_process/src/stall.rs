//! Stall points: test hooks compiled in only with the `testing` cargo feature (which
//! iox's own tests enable); without it, a stall point compiles to nothing.
//!
//! Stall points are places where a test holds a process still, so another process can
//! act inside a race window deterministically. A stall point does nothing unless it is
//! armed: by the environment variable [`STALL_ENV`] naming it (for a whole child
//! process), or by [`stall_at`] (from inside the process, once it has done what must
//! not stall). Armed without a gate, the thread parks forever (until the test kills
//! the process). Armed with a gate (a directory: [`GATE_ENV`], or `stall_at`'s
//! argument), the thread creates `<gate>/reached`, waits (polling, bounded by
//! [`GATE_LIMIT`]) until `<gate>/open` exists, and goes on; a gated point stalls once
//! per process, later passes go straight through.
//!
//! Points:
//! - `create-before-rename`: the dynamic segment is built under its temporary name;
//! - `create-before-config`: the dynamic segment and pool exist, the static config
//!   does not;
//! - `recovery-locked`: a recoverer took the service's recovery lock and has not yet
//!   recovered anything;
//! - `claim-behind-recoverer`: a port's creation found every slot taken while another
//!   process was recovering, and is about to wait for it and look again;
//! - `recovery-after-first-port`: holding the recovery lock, one dead port recovered;
//! - `history-send-before-hand-off`: a send with history pushed to the subscribers and
//!   the history queue, not handed off;
//! - `history-send-before-push`: a send with history checked a subscriber's state
//!   word and is about to push to it;
//! - `send-one-before-hand-off`: a send into one queue (a history sample re-sent to a
//!   late subscriber, a request, a response) pushed, not handed off;
//! - `wake-before-ring`: a sender found a receiver armed and is about to ring its
//!   descriptor;
//! - `wake-after-ring`: a sender rang an armed receiver and is about to clear the
//!   arming it read;
//! - `probe-after-open`: a liveness probe opened a node file and is about to test its
//!   lock;
//! - `queue-drop-oldest-claimed`: a publisher claimed a full queue's oldest entry to
//!   drop it, and has not taken it yet;
//! - `server-left-before-scan`: a server leaving stored its slot's FREE state and has
//!   not yet freed the request words ABANDONED for it.
//! - `receive-before-wait`: a blocking receive found nothing to take and has not yet
//!   said it waits;
//! - `device-recorded-before-send`: a device loan recorded its write-done event and
//!   has not yet sent its chunk;
//! - `device-recorded-before-release`: a device sample recorded its read-done event
//!   and has not yet released its chunk;
//! - `receive-before-sleep`: a blocking receive found nothing ready after its fence
//!   and is about to sleep on its wake word;
//! - `handover-before-reply`: a holder's responder read a well-formed request for
//!   its service and has not yet checked the peer or replied.
//! - `node-registry-held`: a thread making this process's node for a root holds the
//!   process's node registry (what a `fork` must not copy held).
//! - `handover-offer-held`: a thread offering a service's descriptors holds the
//!   registry of offers and is about to bind its socket;
//! - `handover-before-withdraw`: a service handle going away dropped its user entry
//!   and its node (the process's node id is forgotten if it was the last), and has not
//!   yet withdrawn its offer of the service's descriptors;
//! - `waitset-signals-held`: a thread creating a WaitSet holds the registry of
//!   termination-signal registrations;
//! - `blackboard-locked`: a blackboard writer holds a key's lock and picked the buffer
//!   it will write;
//! - `blackboard-before-publish`: a blackboard writer wrote the new value into its
//!   buffer, holding the key's lock, and has not published it;
//! - `blackboard-pinned`: a blackboard reader pinned a key's current buffer and has
//!   not read it yet.
//!

/// The environment variable naming the stall point a test wants.
#[cfg(feature = "testing")]
pub const STALL_ENV: &str = "IOX_TEST_STALL";

/// The environment variable naming the gate directory of the stall point of
/// [`STALL_ENV`] (unset: the point parks forever).
#[cfg(feature = "testing")]
pub const GATE_ENV: &str = "IOX_TEST_GATE";

/// How long a gated stall point waits for its gate to open before it goes on anyway
/// (a test that never opens it has failed already; the process must not hang CI).
#[cfg(feature = "testing")]
pub const GATE_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

#[cfg(feature = "testing")]
mod armed {
    use std::path::{Path, PathBuf};

    /// The point armed by `stall_at`, with its gate; taken (disarmed) when it stalls.
    /// Highest in rank: stall points sit inside the other process-global locks.
    pub(super) static ARMED: iox_mempool::fork::ForkLock<Option<(String, PathBuf)>> =
        iox_mempool::fork::ForkLock::new(iox_mempool::fork::Rank::TestStall, None);
    /// Whether `ARMED` holds a point (looked at before taking its lock).
    pub(super) static ANY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    /// The environment's point and gate, read at the first pass.
    pub(super) static FROM_ENV: std::sync::OnceLock<Option<(String, Option<PathBuf>)>> =
        std::sync::OnceLock::new();
    /// Whether the environment's gated point has stalled already (it stalls once).
    pub(super) static ENV_DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// Stops at the gate `dir`: says so, waits for it to open (bounded).
    pub(super) fn wait_at(dir: &Path) {
        let _ = std::fs::write(dir.join("reached"), b"");
        let start = std::time::Instant::now();
        while !dir.join("open").exists() && start.elapsed() < super::GATE_LIMIT {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Arms stall point `point` in this process with the gate directory `gate`: the next
/// thread that passes it stops there until `<gate>/open` exists (see the module docs).
#[cfg(feature = "testing")]
pub fn stall_at(point: &str, gate: &std::path::Path) {
    *armed::ARMED.lock() = Some((point.to_string(), gate.to_path_buf()));
    armed::ANY.store(true, std::sync::atomic::Ordering::Release);
}

/// Stops the thread if the test armed this stall point (see the module docs). A pass
/// with nothing armed is two loads (points sit inside claims and sends: no lock, no
/// environment lookup there).
#[cfg(feature = "testing")]
#[inline]
pub fn stall_point(name: &str) {
    use std::sync::atomic::Ordering;
    if armed::ANY.load(Ordering::Acquire) {
        let armed = {
            let mut armed = armed::ARMED.lock();
            match armed.as_ref() {
                Some((point, _)) if point == name => {
                    armed::ANY.store(false, Ordering::Relaxed);
                    armed.take()
                }
                _ => None,
            }
        };
        if let Some((_, gate)) = armed {
            armed::wait_at(&gate);
            return;
        }
    }
    let from_env = armed::FROM_ENV.get_or_init(|| {
        let point = std::env::var(STALL_ENV).ok()?;
        Some((point, std::env::var_os(GATE_ENV).map(std::path::PathBuf::from)))
    });
    if let Some((point, gate)) = from_env
        && point == name
    {
        match gate {
            Some(gate) => {
                if !armed::ENV_DONE.swap(true, Ordering::Relaxed) {
                    armed::wait_at(gate);
                }
            }
            None => loop {
                std::thread::park();
            },
        }
    }
}

/// Without the `testing` feature: nothing.
#[cfg(not(feature = "testing"))]
#[inline(always)]
pub fn stall_point(_name: &str) {}
