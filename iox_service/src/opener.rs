//! Opening services off a long-running program's forwarding path.
//!
//! A program that forwards samples while it discovers services (the ROS 2 gateway,
//! the Zenoh bridge, `iox record`) must never let one service delay the others. An
//! open may wait: for a creator to finish, for a holder to hand over the pool's
//! descriptor; a holder that another user stopped (`SIGSTOP`) never answers, and a
//! service anyone may create can be made to look alive. So such a program never opens
//! on the thread that forwards, nor while it holds a lock that thread needs: it asks
//! an [`Opener`], which runs each open on a thread of its own and hands back what
//! opened. The program gives its opens a short timeout ([`DAEMON_OPEN_TIMEOUT`]), so
//! each of those threads ends soon either way.
//!
//! Invariants: at most one open in flight per name, and at most [`MAX_IN_FLIGHT`] in
//! all (names may come from the network); a name whose open failed (or whose use after
//! the open failed, [`Opener::failed_later`]) is not opened again before its back-off
//! passes (doubling from [`Backoff::first`] to [`Backoff::most`] with each failure in a
//! row, reset by a success or [`Opener::forget`]), so a service that keeps failing
//! costs one short-lived thread now and then and nothing else; an open that panics is
//! a failed open, never a name stuck in flight; the caller's own state changes only in
//! [`Opener::finished`], on its own thread.
//!
//! ```
//! use std::time::Duration;
//! use iox_service::opener::{Backoff, Opener};
//! let mut opener: Opener<u32> = Opener::new(Backoff::default());
//! assert!(opener.open("a/b", || Ok(7)));
//! assert!(!opener.open("a/b", || Ok(8)), "one open per name in flight");
//! let done = opener.wait_finished(Duration::from_secs(10));
//! assert_eq!(done[0].name, "a/b");
//! assert_eq!(*done[0].result.as_ref().unwrap(), 7);
//! assert!(opener.open("c", || Err("no such service".into())));
//! let failed = opener.wait_finished(Duration::from_secs(10));
//! assert!(failed[0].result.is_err() && !opener.ready("c"), "backed off");
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

/// The open timeout a long-running program gives the opens it hands an [`Opener`]
/// (the builders' `timeout`): long enough for a live holder's hand-over (milliseconds),
/// short enough that a stopped one costs little.
pub const DAEMON_OPEN_TIMEOUT: Duration = Duration::from_secs(1);

/// Opens in flight at most (each a thread); more wait for a later scan.
pub const MAX_IN_FLIGHT: usize = 16;

/// How long a name whose open failed waits before it is opened again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// After the first failure.
    pub first: Duration,
    /// The longest wait, however many failures in a row.
    pub most: Duration,
}

impl Default for Backoff {
    /// 500 ms, doubling to 30 s.
    fn default() -> Self {
        Self {
            first: Duration::from_millis(500),
            most: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The wait after `failures` failures in a row (at least 1).
    pub fn after(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        self.first.saturating_mul(1 << doublings).min(self.most)
    }
}

/// One open that finished.
#[derive(Debug)]
pub struct Finished<T> {
    /// The name it was asked for under.
    pub name: String,
    /// What opened, or why not.
    pub result: Result<T, OpenFailed>,
}

/// Why an open failed, and when the name may be opened again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFailed {
    /// What the open said.
    pub why: String,
    /// Failures of this name in a row, this one included.
    pub failures: u32,
    /// How long until the name may be opened again.
    pub retry_in: Duration,
}

impl std::fmt::Display for OpenFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (tried again in {:.1} s)",
            self.why,
            self.retry_in.as_secs_f64()
        )
    }
}

/// Opens services on threads of their own (see the module docs).
#[derive(Debug)]
pub struct Opener<T> {
    backoff: Backoff,
    tx: Sender<(String, Result<T, String>)>,
    rx: Receiver<(String, Result<T, String>)>,
    in_flight: HashSet<String>,
    /// Per name that failed last time: failures in a row, and when it may go again.
    failed: HashMap<String, (u32, Instant)>,
}

impl<T: Send + 'static> Opener<T> {
    /// An opener with nothing in flight.
    pub fn new(backoff: Backoff) -> Self {
        let (tx, rx) = channel();
        Self {
            backoff,
            tx,
            rx,
            in_flight: HashSet::new(),
            failed: HashMap::new(),
        }
    }

    /// Whether `name` may be opened now: not in flight, not waiting out a back-off,
    /// and fewer than [`MAX_IN_FLIGHT`] opens in flight.
    pub fn ready(&self, name: &str) -> bool {
        self.in_flight.len() < MAX_IN_FLIGHT
            && !self.in_flight.contains(name)
            && self.failed.get(name).is_none_or(|&(_, at)| Instant::now() >= at)
    }

    /// Whether no open is in flight.
    pub fn idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Whether an open of `name` is in flight.
    pub fn is_opening(&self, name: &str) -> bool {
        self.in_flight.contains(name)
    }

    /// Starts `open` for `name` on a thread of its own, if `name` is [`ready`](Self::ready);
    /// returns whether it started. Its result comes back from [`finished`](Self::finished).
    pub fn open(&mut self, name: &str, open: impl FnOnce() -> Result<T, String> + Send + 'static) -> bool {
        if !self.ready(name) {
            return false;
        }
        let tx = self.tx.clone();
        let key = name.to_owned();
        // The name may come from anywhere (a network peer's key): only printable
        // characters go into the thread's name (a NUL would make the spawn panic).
        let label: String = name.chars().filter(|c| !c.is_control()).take(10).collect();
        let spawned = std::thread::Builder::new()
            .name(format!("open {label}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(open))
                    .unwrap_or_else(|_| Err("the open panicked".into()));
                let _ = tx.send((key, result));
            });
        if let Err(e) = spawned {
            // Reported as a failed open, backed off like one.
            let _ = self.tx.send((
                name.to_owned(),
                Err(format!("cannot start a thread to open it: {e}")),
            ));
        }
        self.in_flight.insert(name.to_owned());
        true
    }

    /// The opens that finished since the last call, without waiting.
    pub fn finished(&mut self) -> Vec<Finished<T>> {
        let mut done = Vec::new();
        while let Ok((name, result)) = self.rx.try_recv() {
            done.push(self.settle(name, result));
        }
        done
    }

    /// [`finished`](Self::finished), waiting up to `timeout` for the first one when none
    /// has finished yet (for a thread that only opens).
    pub fn wait_finished(&mut self, timeout: Duration) -> Vec<Finished<T>> {
        let mut done = self.finished();
        if done.is_empty() {
            match self.rx.recv_timeout(timeout) {
                Ok((name, result)) => done.push(self.settle(name, result)),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
            done.extend(self.finished());
        }
        done
    }

    /// Forgets `name`'s failures (its service went away or changed): the next request
    /// opens it at once.
    pub fn forget(&mut self, name: &str) {
        self.failed.remove(name);
    }

    /// Counts a failure of what the caller did with `name` after it opened (its ports,
    /// the other side's endpoints), backed off as a failed open; says when it may go
    /// again.
    pub fn failed_later(&mut self, name: &str, why: String) -> OpenFailed {
        self.fail(name.to_owned(), why)
    }

    fn settle(&mut self, name: String, result: Result<T, String>) -> Finished<T> {
        self.in_flight.remove(&name);
        let result = match result {
            Ok(opened) => {
                self.failed.remove(&name);
                Ok(opened)
            }
            Err(why) => Err(self.fail(name.clone(), why)),
        };
        Finished { name, result }
    }

    /// Records a failure of `name` and its back-off; forgets names whose back-off
    /// passed long ago (they start over), so the record stays as small as what fails.
    fn fail(&mut self, name: String, why: String) -> OpenFailed {
        let now = Instant::now();
        let forget_after = self.backoff.most;
        self.failed
            .retain(|_, &mut (_, at)| now.saturating_duration_since(at) < forget_after);
        let failures = self.failed.get(&name).map_or(0, |f| f.0) + 1;
        let retry_in = self.backoff.after(failures);
        self.failed.insert(name, (failures, now + retry_in));
        OpenFailed {
            why,
            failures,
            retry_in,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_doubling_and_a_success_resets() {
        let b = Backoff {
            first: Duration::from_millis(10),
            most: Duration::from_millis(50),
        };
        assert_eq!(
            [1, 2, 3, 4, 40].map(|n| b.after(n)),
            [10, 20, 40, 50, 50].map(Duration::from_millis)
        );
        let mut opener: Opener<()> = Opener::new(b);
        for round in 1..=3 {
            assert!(opener.open("x", || Err("down".into())));
            let f = opener.wait_finished(Duration::from_secs(10));
            assert_eq!(f[0].result.as_ref().unwrap_err().failures, round);
            assert!(!opener.ready("x"));
            assert!(iox_testkit::wait_until(Duration::from_secs(10), || opener.ready("x")));
        }
        assert!(opener.open("x", || Ok(())));
        assert!(opener.wait_finished(Duration::from_secs(10))[0].result.is_ok());
        assert!(opener.open("x", || Err("down".into())));
        let f = opener.wait_finished(Duration::from_secs(10));
        assert_eq!(
            f[0].result.as_ref().unwrap_err().failures,
            1,
            "reset by the success"
        );
    }

    /// An open that panics is a failed open, and a name with a NUL is opened (its
    /// thread's name leaves it out).
    #[test]
    fn a_panicking_open_fails_and_any_name_opens() {
        let mut opener: Opener<()> = Opener::new(Backoff::default());
        assert!(opener.open("bad\0name", || panic!("a bug")));
        let f = opener.wait_finished(Duration::from_secs(10));
        assert_eq!(f[0].result.as_ref().unwrap_err().why, "the open panicked");
        assert!(!opener.is_opening("bad\0name"));
    }

    /// A slow open (a stopped holder) does not hold up another name's.
    #[test]
    fn a_slow_open_does_not_hold_up_another() {
        let mut opener: Opener<&'static str> = Opener::new(Backoff::default());
        let (release, stuck) = channel::<()>();
        opener.open("slow", move || {
            let _ = stuck.recv_timeout(Duration::from_secs(30));
            Ok("slow")
        });
        opener.open("fast", || Ok("fast"));
        let done = opener.wait_finished(Duration::from_secs(10));
        assert_eq!(done.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["fast"]);
        assert!(opener.is_opening("slow"));
        release.send(()).unwrap();
        assert_eq!(opener.wait_finished(Duration::from_secs(10))[0].name, "slow");
    }
}
