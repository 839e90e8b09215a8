//! SIGINT and SIGTERM end a [`crate::WaitSet`]'s wait with
//! [`crate::WaitSetRunResult::TerminationRequest`], so a program returns from its
//! event loop, drops its ports and services, and their files go.
//!
//! **Installation.** The first WaitSet created with termination handling (the default)
//! installs the process's handlers for SIGINT and SIGTERM, once per process, through
//! `signal-hook` (which owns the one real `sigaction` handler per signal and runs a list
//! of async-signal-safe actions). From then on, while at least one such WaitSet is
//! alive, Ctrl-C and `kill` no longer terminate the process by themselves: they end
//! the waits. This replaces the default termination for as long as the process uses
//! WaitSets; a program that blocks elsewhere (a `receive_timeout`, a long computation)
//! sees the request at its next wait.
//!
//! **Actions, in order, for each of the two signals:**
//! 1. a signal within [`GRACE`] of the one that made the last request
//!    ([`LAST_REQUEST`]) is that request again, handled or not, WaitSets alive or not:
//!    it never terminates the process, so a supervisor that signals the process and
//!    then its process group (`timeout -s INT`, a `kill` of the group), or a double
//!    press, lets the program finish its shutdown (a recorder completes its file after
//!    its WaitSet is gone). Live WaitSets are notified of it again (action 2), which a
//!    program that already returned on the request does not see.
//!    Otherwise, do what the default disposition does (terminate by that signal) if no
//!    WaitSet is alive ([`ALIVE`] clear) or if the last request is still pending,
//!    unhandled ([`PENDING`]): a second Ctrl-C ends a program stuck before its next
//!    wait. Otherwise this signal is a new request, pending from now;
//! 2. per live WaitSet: send one byte on its own socket pair (registered when the
//!    WaitSet is created, unregistered when it is dropped). The read end is in the
//!    WaitSet's epoll set, so every live WaitSet wakes, and one that is not waiting
//!    finds the byte at its next wait.
//!
//! A WaitSet that reads the byte reports `TerminationRequest` and clears [`PENDING`]
//! (the request is handled); so does a new WaitSet (a request its dropped predecessor
//! never reported is not held against it). When the last WaitSet goes, [`ALIVE`] is
//! cleared before its notices are unregistered: the signals terminate the process as
//! by default (after the grace of the last request).
//!
//! **Programs with their own SIGINT/SIGTERM handling** (`tokio::signal`, `ctrlc`,
//! `signal-hook` flags) must build their WaitSets with
//! `WaitSetBuilder::termination_signals(false)`: once a WaitSet with termination
//! handling was created, action 1 above terminates the process whenever no such
//! WaitSet is alive or a request is pending, after the program's own handlers ran
//! (the handlers share one `sigaction`, and an installed handler cannot be taken back
//! without leaving the signals ignored). The rule is stated on the builder too.
//!
//! Decisions: a socket per WaitSet rather than one process-wide pipe, so every WaitSet
//! in every thread wakes and none consumes another's notice. A stream socket pair: the
//! zero-byte probe `signal-hook` sends at registration creates nothing on a stream
//! (it would queue an empty datagram on a datagram socket). The pipe action is
//! `signal-hook`'s own; the first action is ours (one `unsafe` registration: it only
//! reads the monotonic clock, does atomic operations, and calls `signal-hook`'s
//! default emulation, all allowed in a signal handler).
//!
//! The bookkeeping below is changed under a [`ForkLock`], which every call into
//! `signal-hook`'s registration is made under too: a `fork` never copies either held.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use iox_mempool::fork::{ForkLock, Rank};
use signal_hook::SigId;
use signal_hook::consts::signal::{SIGINT, SIGTERM};

/// Set while at least one WaitSet with termination handling is alive.
static ALIVE: AtomicBool = AtomicBool::new(false);

/// When the last termination request came (monotonic clock, ns; 0 = none yet).
static LAST_REQUEST: AtomicU64 = AtomicU64::new(0);

/// Set while the last termination request is not yet reported by any wait.
static PENDING: AtomicBool = AtomicBool::new(false);

/// How long after a request another signal is the same request.
pub(crate) const GRACE: Duration = Duration::from_millis(300);

/// Process-wide bookkeeping, changed only outside signal handlers.
struct Registry {
    /// The process's handlers are installed.
    installed: bool,
    /// Live WaitSets with termination handling.
    live: usize,
}

static REGISTRY: ForkLock<Registry> = ForkLock::new(
    Rank::WaitSetSignals,
    Registry {
        installed: false,
        live: 0,
    },
);

/// The monotonic clock in ns, never 0 (0 means "none yet").
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64).max(1)
}

/// Action 1 (see the module docs), in the signal handler.
fn terminate_or_request(signal: i32) {
    let now = monotonic_ns();
    let last = LAST_REQUEST.load(Ordering::SeqCst);
    if last != 0 && now.saturating_sub(last) < GRACE.as_nanos() as u64 {
        return; // the same request
    }
    if !ALIVE.load(Ordering::SeqCst) || PENDING.load(Ordering::SeqCst) {
        let _ = signal_hook::low_level::emulate_default_handler(signal);
        return;
    }
    LAST_REQUEST.store(now, Ordering::SeqCst);
    PENDING.store(true, Ordering::SeqCst);
}

const SIGNALS: [i32; 2] = [SIGINT, SIGTERM];

/// One WaitSet's end of the termination notices: readable once a SIGINT/SIGTERM came.
#[derive(Debug)]
pub(crate) struct TerminationNotice {
    read: UnixStream,
    ids: Vec<SigId>,
}

impl TerminationNotice {
    /// Installs the process's handlers (first call only) and registers a new notice.
    pub(crate) fn register() -> io::Result<Self> {
        let mut registry = REGISTRY.lock();
        crate::testing::stall_point(crate::testing::Stall::WaitsetSignalsHeld);
        if !registry.installed {
            for signal in SIGNALS {
                // SAFETY: the action is async-signal-safe: atomic operations, a read of
                // the monotonic clock (vDSO `clock_gettime`), and signal-hook's default
                // emulation, which is documented for use in a handler.
                unsafe { signal_hook::low_level::register(signal, move || terminate_or_request(signal)) }?;
            }
            registry.installed = true;
        }
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        let mut ids = Vec::with_capacity(SIGNALS.len());
        for signal in SIGNALS {
            // `pipe::register` takes ownership (and closes it when unregistered).
            match write
                .try_clone()
                .and_then(|w| signal_hook::low_level::pipe::register(signal, w))
            {
                Ok(id) => ids.push(id),
                Err(e) => {
                    for id in ids {
                        signal_hook::low_level::unregister(id);
                    }
                    return Err(e);
                }
            }
        }
        registry.live += 1;
        PENDING.store(false, Ordering::SeqCst);
        ALIVE.store(true, Ordering::SeqCst);
        Ok(Self { read, ids })
    }

    /// The socket to watch.
    pub(crate) fn socket(&self) -> &UnixStream {
        &self.read
    }

    /// Consumes the notices; whether a termination signal came. A request reported
    /// to the program is handled: the next signal asks again instead of terminating.
    pub(crate) fn take(&self) -> bool {
        let mut buf = [0u8; 64];
        let mut any = false;
        while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {
            any = true;
        }
        if any {
            PENDING.store(false, Ordering::SeqCst);
        }
        any
    }
}

impl Drop for TerminationNotice {
    fn drop(&mut self) {
        let mut registry = REGISTRY.lock();
        registry.live -= 1;
        if registry.live == 0 {
            // Before the notices go: a signal in between terminates, not lost.
            ALIVE.store(false, Ordering::SeqCst);
        }
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
