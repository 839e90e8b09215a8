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
//! 1. if [`KILL_NEXT`] is set, do what the default disposition does (terminate by that
//!    signal): no WaitSet is alive, or a termination request is still pending and
//!    unhandled, so a second Ctrl-C ends a program stuck before its next wait;
//! 2. set [`KILL_NEXT`] (a request is now pending);
//! 3. per live WaitSet: send one byte on its own socket pair (registered when the
//!    WaitSet is created, unregistered when it is dropped). The read end is in the
//!    WaitSet's epoll set, so every live WaitSet wakes, and one that is not waiting
//!    finds the byte at its next wait.
//!
//! A WaitSet that reads the byte reports `TerminationRequest` and clears
//! [`KILL_NEXT`] (the request is handled). When the last WaitSet goes, [`KILL_NEXT`]
//! is set again: the signals terminate the process as by default.
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
//! (it would queue an empty datagram on a datagram socket). No unsafe code: the flag
//! and pipe actions are `signal-hook`'s own.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use signal_hook::SigId;
use signal_hook::consts::signal::{SIGINT, SIGTERM};

/// Set: the next SIGINT/SIGTERM terminates the process the default way (no WaitSet is
/// alive, or a termination request is pending and unhandled).
static KILL_NEXT: AtomicBool = AtomicBool::new(true);

/// Process-wide bookkeeping, changed only outside signal handlers.
struct Registry {
    /// The process's handlers are installed.
    installed: bool,
    /// Live WaitSets with termination handling.
    live: usize,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    installed: false,
    live: 0,
});

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
        let mut registry = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        if !registry.installed {
            for signal in SIGNALS {
                // The default action first (it checks the flag before step 2 sets it).
                signal_hook::flag::register_conditional_default(signal, &KILL_NEXT)?;
                signal_hook::flag::register(signal, &KILL_NEXT)?;
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
        KILL_NEXT.store(false, Ordering::SeqCst);
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
            KILL_NEXT.store(false, Ordering::SeqCst);
        }
        any
    }
}

impl Drop for TerminationNotice {
    fn drop(&mut self) {
        let mut registry = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
        registry.live -= 1;
        if registry.live == 0 {
            KILL_NEXT.store(true, Ordering::SeqCst);
        }
    }
}
