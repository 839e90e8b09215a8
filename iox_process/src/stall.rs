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
//! Points: the variants of [`Stall`], each with the window it holds open. A misspelt
//! point does not compile; a point named in the environment that does not exist stops
//! the process with a message naming the valid ones.

/// The stall points, one per race window a test holds open. A point is named in a
/// test's environment ([`STALL_ENV`]) by [`Stall::name`].
macro_rules! stall_points {
    ($($(#[doc = $doc:literal])* $point:ident = $name:literal,)*) => {
        /// A place where a test may hold a process still (see the module docs).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Stall {
            $($(#[doc = $doc])* $point,)*
        }

        impl Stall {
            /// Every stall point.
            pub const ALL: &[Stall] = &[$(Stall::$point),*];

            /// Its name, as a test's environment gives it ([`STALL_ENV`]).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Stall::$point => $name,)*
                }
            }

            /// The stall point called `name`, if there is one.
            pub fn named(name: &str) -> Option<Stall> {
                Self::ALL.iter().copied().find(|p| p.name() == name)
            }
        }

        impl std::fmt::Display for Stall {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

stall_points! {
    /// The dynamic segment is built under its temporary name.
    CreateBeforeRename = "create-before-rename",
    /// The dynamic segment and pool exist, the static config does not.
    CreateBeforeConfig = "create-before-config",
    /// A recoverer took the service's recovery lock and has not yet recovered anything.
    RecoveryLocked = "recovery-locked",
    /// A port's creation found every slot taken while another process was recovering, and
    /// is about to wait for it and look again.
    ClaimBehindRecoverer = "claim-behind-recoverer",
    /// Holding the recovery lock, one dead port recovered.
    RecoveryAfterFirstPort = "recovery-after-first-port",
    /// A send with history pushed to the subscribers and the history queue, not handed off.
    HistorySendBeforeHandOff = "history-send-before-hand-off",
    /// A send with history checked a subscriber's state word and is about to push to it.
    HistorySendBeforePush = "history-send-before-push",
    /// A send into one queue (a history sample re-sent to a late subscriber, a request, a
    /// response) pushed, not handed off.
    SendOneBeforeHandOff = "send-one-before-hand-off",
    /// A sender found a receiver armed and is about to ring its descriptor.
    WakeBeforeRing = "wake-before-ring",
    /// A sender rang an armed receiver and is about to clear the arming it read.
    WakeAfterRing = "wake-after-ring",
    /// A liveness probe opened a node file and is about to test its lock.
    ProbeAfterOpen = "probe-after-open",
    /// A publisher claimed a full queue's oldest entry to drop it, and has not taken it
    /// yet.
    QueueDropOldestClaimed = "queue-drop-oldest-claimed",
    /// A server leaving stored its slot's FREE state and has not yet freed the request
    /// words ABANDONED for it.
    ServerLeftBeforeScan = "server-left-before-scan",
    /// A blocking receive found nothing to take and has not yet said it waits.
    ReceiveBeforeWait = "receive-before-wait",
    /// A device loan recorded its write-done event and has not yet sent its chunk.
    DeviceRecordedBeforeSend = "device-recorded-before-send",
    /// A device loan sent its chunk and has not yet retired its port's events or let go
    /// of the port (a loan that outlived its publisher holds the publisher's slot until
    /// then).
    DeviceSentBeforeRetire = "device-sent-before-retire",
    /// A device sample recorded its read-done event and has not yet released its chunk.
    DeviceRecordedBeforeRelease = "device-recorded-before-release",
    /// A blocking receive found nothing ready after its fence and is about to sleep on its
    /// wake word.
    ReceiveBeforeSleep = "receive-before-sleep",
    /// A holder's responder read a well-formed request for its service and has not yet
    /// checked the peer or replied.
    HandoverBeforeReply = "handover-before-reply",
    /// A thread making this process's node for a root holds the process's node registry
    /// (what a `fork` must not copy held).
    NodeRegistryHeld = "node-registry-held",
    /// A thread offering a service's descriptors holds the registry of offers and is about
    /// to bind its socket.
    HandoverOfferHeld = "handover-offer-held",
    /// A service handle going away dropped its user entry and its node (the process's node
    /// id is forgotten if it was the last), and has not yet withdrawn its offer of the
    /// service's descriptors.
    HandoverBeforeWithdraw = "handover-before-withdraw",
    /// A thread creating a WaitSet holds the registry of termination-signal registrations.
    WaitsetSignalsHeld = "waitset-signals-held",
    /// An inspection (`iox show`, Python's open without a dtype) read the service's static
    /// config, or found none, and has not yet opened its dynamic segment.
    InspectAfterConfigRead = "inspect-after-config-read",
    /// A blackboard writer holds a key's lock and picked the buffer it will write.
    BlackboardLocked = "blackboard-locked",
    /// A blackboard writer wrote the new value into its buffer, holding the key's lock, and
    /// has not published it.
    BlackboardBeforePublish = "blackboard-before-publish",
    /// A blackboard reader pinned a key's current buffer and has not read it yet.
    BlackboardPinned = "blackboard-pinned",
    /// A publisher of a service with readers claimed a chunk's word for a loan and has
    /// not yet locked the chunk's write guard (`iox_core::chunk_guard`).
    GuardBeforeWriteLock = "guard-before-write-lock",
    /// A subscriber of a service with readers took an entry's chunk and locked it for
    /// reading, and has not yet checked its values and handed it out.
    GuardBeforeReadCheck = "guard-before-read-check",
}

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
    pub(super) static ARMED: iox_mempool::fork::ForkLock<Option<(super::Stall, PathBuf)>> =
        iox_mempool::fork::ForkLock::new(iox_mempool::fork::Rank::TestStall, None);
    /// Whether `ARMED` holds a point (looked at before taking its lock).
    pub(super) static ANY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    /// The environment's point and gate, read at the first pass.
    pub(super) static FROM_ENV: std::sync::OnceLock<Option<(super::Stall, Option<PathBuf>)>> =
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
pub fn stall_at(point: Stall, gate: &std::path::Path) {
    *armed::ARMED.lock() = Some((point, gate.to_path_buf()));
    armed::ANY.store(true, std::sync::atomic::Ordering::Release);
}

/// Stops the thread if the test armed this stall point (see the module docs). A pass
/// with nothing armed is two loads (points sit inside claims and sends: no lock, no
/// environment lookup there).
#[cfg(feature = "testing")]
#[inline]
pub fn stall_point(here: Stall) {
    use std::sync::atomic::Ordering;
    if armed::ANY.load(Ordering::Acquire) {
        let armed = {
            let mut armed = armed::ARMED.lock();
            match armed.as_ref() {
                Some((point, _)) if *point == here => {
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
        let name = std::env::var(STALL_ENV).ok()?;
        let Some(point) = Stall::named(&name) else {
            let valid: Vec<&str> = Stall::ALL.iter().map(|p| p.name()).collect();
            panic!(
                "{STALL_ENV}={name:?} names no stall point; they are: {}",
                valid.join(", ")
            );
        };
        Some((point, std::env::var_os(GATE_ENV).map(std::path::PathBuf::from)))
    });
    if let Some((point, gate)) = from_env
        && *point == here
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
pub fn stall_point(_here: Stall) {}

#[cfg(test)]
mod tests {
    use super::Stall;

    /// Every point has its own name, as tests write them in the environment
    /// (lowercase words joined by `-`), and is found by it.
    #[test]
    fn every_point_is_found_by_its_own_name() {
        let mut names: Vec<&str> = Stall::ALL.iter().map(|p| p.name()).collect();
        for p in Stall::ALL {
            assert_eq!(Stall::named(p.name()), Some(*p));
            assert!(
                p.name().split('-').all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())),
                "{p:?}: {:?}",
                p.name()
            );
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Stall::ALL.len(), "two points share a name");
        assert_eq!(Stall::named("create-before-renam"), None);
    }
}
