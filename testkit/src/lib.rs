//! Helpers for iox's tests: re-executing the test binary as child processes, and
//! bounded polling.
//!
//! A test that wants children calls [`spawn_self`] with its own name and a role; the
//! child runs the same test function, which sees [`role`] set and does the child's
//! part instead of the parent's. Children get the parent's `IOX_ROOT` unless told
//! otherwise, so a test passes its own temp directory down with `envs`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE_ENV: &str = "IOX_TEST_ROLE";

/// The role this process was started with, if it is a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE_ENV).ok()
}

/// Starts this test binary again, running only `test`, with `role` and `envs` set.
pub fn spawn_self(test: &str, role: &str, envs: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().expect("current exe"));
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .stdin(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child test process")
}

/// Waits for `child` to exit within `limit`, killing it otherwise; panics unless it
/// succeeded.
pub fn wait_ok(mut child: Child, limit: Duration) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "child failed: {status}");
            return;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `cond` every millisecond until it holds or `limit` passes; returns whether
/// it held. For waiting on another process's visible effect, never a bare sleep.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// This process's locked memory (`VmLck` in /proc/self/status), in KiB.
pub fn vm_lck_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmLck in /proc/self/status")
}

/// An env var's value in a child, parsed; panics with the name if missing.
pub fn env<T: std::str::FromStr>(name: &str) -> T {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("child needs {name}"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} does not parse"))
}

/// A small deterministic PRNG (xorshift64*), enough to vary sizes and hold counts.
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (a zero seed is replaced).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    /// The next value.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A child process that is SIGKILLed and reaped when dropped, so a test that fails
/// half-way never leaves a parked child behind (holding the harness's output pipes).
pub struct Reaped(Option<Child>);

impl Reaped {
    /// Takes charge of `child`.
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// SIGKILLs it now and reaps it.
    pub fn kill(mut self) {
        self.stop();
    }

    /// Gives the child back (no kill on drop any more).
    pub fn into_inner(mut self) -> Child {
        self.0.take().expect("child still owned")
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        self.stop();
    }
}
