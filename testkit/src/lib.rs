//! Helpers for iox's tests: re-executing the test binary as child processes, and
//! bounded polling.
//!
//! A test that wants children calls [`spawn_self`] with its own name and a role; the
//! child runs the same test function, which sees [`role`] set and does the child's
//! part instead of the parent's. Children get the parent's `IOX_ROOT` unless told
//! otherwise, so a test passes its own temp directory down with `envs`.
//!
//! Children are quiet: their standard output (the harness's `running 1 test` and
//! `test result:` lines, and anything the child prints there) goes to `/dev/null`, so
//! a test log and CI's tally hold only the top-level runs. Their standard error (panic
//! messages, SKIP lines) is the parent's. Set `IOX_TEST_CHILD_STDOUT=1` to see a
//! child's standard output while debugging; a test that reads it on purpose builds
//! the child with [`self_command`] and sets `.stdout(Stdio::piped())`.

pub mod cuda_double;
pub mod hostile;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE_ENV: &str = "IOX_TEST_ROLE";

/// Env var that, set to `1`, passes children's standard output through to the
/// parent's (it goes to `/dev/null` otherwise).
pub const CHILD_STDOUT: &str = "IOX_TEST_CHILD_STDOUT";

/// The role this process was started with, if it is a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE_ENV).ok()
}

/// The command that starts this test binary again, running only `test`, with `role`
/// and `envs` set: standard input and output `/dev/null` (output inherited when
/// [`CHILD_STDOUT`] is `1`), standard error inherited. Change what a test needs
/// (`.stdout(Stdio::piped())`, `.uid(..)`) before spawning it.
pub fn self_command(test: &str, role: &str, envs: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("current exe"));
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .stdin(Stdio::null());
    if std::env::var(CHILD_STDOUT).as_deref() != Ok("1") {
        cmd.stdout(Stdio::null());
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// Starts this test binary again, running only `test`, with `role` and `envs` set
/// ([`self_command`], spawned).
pub fn spawn_self(test: &str, role: &str, envs: &[(&str, String)]) -> Child {
    self_command(test, role, envs)
        .spawn()
        .expect("spawn child test process")
}

/// Starts this test binary again as [`spawn_self`] does, as pid 1 of a new PID
/// namespace with its own `/proc` (`unshare --pid --fork --kill-child --mount-proc`,
/// root only): what a process in another container sharing the root volume is. The
/// child returned is `unshare`; killing it kills the namespace's process too.
pub fn spawn_self_in_pid_namespace(test: &str, role: &str, envs: &[(&str, String)]) -> Child {
    let inner = self_command(test, role, envs);
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--kill-child", "--mount-proc"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .stdin(Stdio::null());
    if std::env::var(CHILD_STDOUT).as_deref() != Ok("1") {
        cmd.stdout(Stdio::null());
    }
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.spawn().expect("spawn unshare (util-linux)")
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

/// A command for `program` that runs it as a user without privileges: when this
/// process is root (CI), as user and group `nobody` (65534), no supplementary groups,
/// no capabilities, under the limits root has (`setpriv`, from util-linux; panics
/// naming it if missing); otherwise as this user, who has none to drop. What a new
/// user running an example on their own machine is.
pub fn unprivileged(program: &std::path::Path) -> Command {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Command::new(program);
    }
    let found = Command::new("setpriv").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "running as root: setpriv (util-linux) is needed to run {} as an unprivileged user",
        program.display()
    );
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(program);
    cmd
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

    /// Its exit status if it has exited (reaped then), `None` while it runs.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.0.as_mut().and_then(|c| c.try_wait().ok().flatten())
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

/// Env var that turns mlock skips (`ulimit -l` too low, no `CAP_IPC_LOCK`) into failures.
pub const REQUIRE_MLOCK: &str = "IOX_REQUIRE_MLOCK";
/// Env var that turns GPU skips (no CUDA driver or device) into failures.
pub const REQUIRE_GPU: &str = "IOX_REQUIRE_GPU";
/// Env var that turns skips for lack of root (mount, setuid children) into failures.
pub const REQUIRE_ROOT: &str = "IOX_REQUIRE_ROOT";
/// Env var that turns the no-driver test's skip on a machine with a CUDA driver into a
/// failure (for a CI job that must exercise the driverless path).
pub const REQUIRE_NO_GPU: &str = "IOX_REQUIRE_NO_GPU";

/// Env var that turns skips for want of reserved huge pages into failures.
pub const REQUIRE_HUGE_PAGES: &str = "IOX_REQUIRE_HUGE_PAGES";

/// Whether at least `pages` 2 MiB huge pages are free to take here
/// (`/sys/kernel/mm/hugepages/hugepages-2048kB`, free less promised); if not, `test`
/// says it skipped (or fails where [`REQUIRE_HUGE_PAGES`] is set) and returns.
#[track_caller]
pub fn huge_pages_or_skip(test: &str, pages: u64) -> bool {
    let dir = std::path::Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB");
    let read = |f: &str| -> Option<u64> { std::fs::read_to_string(dir.join(f)).ok()?.trim().parse().ok() };
    let available = match (read("free_hugepages"), read("resv_hugepages")) {
        (Some(free), Some(resv)) => free.saturating_sub(resv),
        _ => 0,
    };
    if available >= pages {
        return true;
    }
    skip(
        test,
        REQUIRE_HUGE_PAGES,
        format!(
            "needs {pages} free 2 MiB huge pages, {available} are (reserve them as root: echo 512 > /proc/sys/vm/nr_hugepages)"
        ),
    );
    false
}

/// What [`skip`] does: the line it prints, or the panic message when required.
fn skip_outcome(
    test: &str,
    requirement_env: &str,
    env_value: Option<&str>,
    reason: &str,
) -> Result<String, String> {
    let line = format!("SKIP {test}: {reason}");
    if env_value == Some("1") {
        Err(format!("{line} (but {requirement_env}=1 requires it to run)"))
    } else {
        Ok(format!("{line} (set {requirement_env}=1 to make this a failure)"))
    }
}

/// Env var naming a file each [`skip`] appends a line to (`<test>\t<reason>`), so the
/// test command counts skipped tests apart from passed ones (libtest counts a test
/// that returned early as passed, and hides what a passing test printed).
pub const SKIP_LOG: &str = "IOX_SKIP_LOG";

/// A test cannot run its checks here. Call it, then `return`: it prints one line
/// `SKIP <test>: <reason>` to stderr and appends `<test>\t<reason>` to the file
/// `IOX_SKIP_LOG` names (when set), or panics (failing the test) when the
/// `requirement_env` variable is `1`, so a machine meant to have the capability
/// (CI with a GPU, a raised memlock limit, root) cannot pass by skipping.
#[track_caller]
pub fn skip(test: &str, requirement_env: &str, reason: impl std::fmt::Display) {
    let value = std::env::var(requirement_env).ok();
    let reason = reason.to_string();
    match skip_outcome(test, requirement_env, value.as_deref(), &reason) {
        Ok(line) => {
            eprintln!("{line}");
            if let Some(log) = std::env::var_os(SKIP_LOG) {
                use std::io::Write;
                // One write of one line to a file opened for appending: lines of tests
                // running side by side do not interleave.
                let entry = format!("{test}\t{}\n", reason.replace(['\n', '\t'], " "));
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .and_then(|mut f| f.write_all(entry.as_bytes()));
                if let Err(e) = written {
                    panic!("{line}, and it cannot be logged to {SKIP_LOG}: {e}");
                }
            }
        }
        Err(message) => panic!("{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_outcome_prints_unless_required() {
        let printed = skip_outcome("t", "IOX_X", None, "no x here").unwrap();
        assert!(printed.starts_with("SKIP t: no x here"), "{printed}");
        assert!(skip_outcome("t", "IOX_X", Some("0"), "r").is_ok());
        assert!(skip_outcome("t", "IOX_X", Some(""), "r").is_ok());
        let failed = skip_outcome("t", "IOX_X", Some("1"), "no x here").unwrap_err();
        assert!(failed.starts_with("SKIP t: no x here"), "{failed}");
        assert!(failed.contains("IOX_X=1"), "{failed}");
    }

    const DEMO_ENV: &str = "IOX_TESTKIT_DEMO_REQUIRE";

    /// The real helper in a child process: a skip passes and prints its line to
    /// stderr, unless the requirement is set, then the test fails.
    #[test]
    fn skip_passes_with_a_line_or_fails_when_required() {
        const TEST: &str = "tests::skip_passes_with_a_line_or_fails_when_required";
        if role().is_some() {
            skip("demo", DEMO_ENV, "the demo capability is missing");
            return;
        }
        let log = std::env::temp_dir().join(format!("iox-skip-demo-{}", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let run = |required: Option<&str>| {
            let mut cmd = self_command(TEST, "child", &[]);
            cmd.env_remove(DEMO_ENV);
            // The demo's skip is logged here, not in the test command's count.
            cmd.env(SKIP_LOG, &log);
            if let Some(v) = required {
                cmd.env(DEMO_ENV, v);
            }
            cmd.output().unwrap()
        };
        let skipped = run(None);
        let stderr = String::from_utf8_lossy(&skipped.stderr);
        assert!(skipped.status.success(), "{stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("SKIP demo: the demo capability is missing")),
            "{stderr}"
        );
        let failed = run(Some("1"));
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert!(!failed.status.success(), "a required skip must fail: {stderr}");
        assert!(stderr.contains(&format!("{DEMO_ENV}=1")), "{stderr}");
        // The skip, and only it (a required one fails instead), is logged for the count.
        let logged = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_file(&log);
        assert_eq!(logged, "demo\tthe demo capability is missing\n");
    }

    /// A child's standard output goes nowhere unless the test asks for it, as this
    /// one does.
    #[test]
    fn a_child_stdout_is_read_when_piped() {
        const TEST: &str = "tests::a_child_stdout_is_read_when_piped";
        if role().is_some() {
            println!("child says {}", env::<u32>("WORD"));
            return;
        }
        let out = self_command(TEST, "child", &[("WORD", "42".into())])
            .env_remove(CHILD_STDOUT)
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        assert!(out.status.success());
        let stdout = String::from_utf8_lossy(&out.stdout);
        // The harness prints "test NAME ... " with no newline before the test runs.
        assert!(stdout.lines().any(|l| l.ends_with("child says 42")), "{stdout}");
        // Not piped: nothing comes back.
        let quiet = self_command(TEST, "child", &[("WORD", "7".into())])
            .env_remove(CHILD_STDOUT)
            .output()
            .unwrap();
        assert!(quiet.status.success());
        assert!(
            quiet.stdout.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&quiet.stdout)
        );
    }
}

/// Whether `test` can act as other users here (this process is root); if not, it says
/// it skipped (or fails where `IOX_REQUIRE_ROOT` is set) and the test returns.
#[track_caller]
pub fn root_or_skip(test: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(
        test,
        REQUIRE_ROOT,
        "needs root to start child processes as other users",
    );
    false
}

/// This test binary started again as child `role` of `test` (as [`self_command`]), as
/// user `uid` and group `gid` (the caller is root).
pub fn spawn_self_as(
    test: &str,
    role: &str,
    uid: u32,
    gid: u32,
    envs: &[(&str, String)],
) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    self_command(test, role, envs)
        .uid(uid)
        .gid(gid)
        .spawn()
        .expect("spawn the test binary as another user")
}

/// Whether this process runs as root (its effective uid is 0), read from
/// `/proc/self/status`: mounting a tmpfs and switching users need it.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let uids = s.lines().find_map(|l| l.strip_prefix("Uid:"))?.to_string();
            uids.split_whitespace().nth(1).map(|euid| euid == "0")
        })
        .unwrap_or(false)
}

/// A tmpfs mounted on a fresh directory under the system's temp directory, for a
/// test that needs a small or read-only file system; unmounted and its directory
/// removed when dropped.
#[derive(Debug)]
pub struct Tmpfs {
    at: std::path::PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs with `options` (`size=2m`, `ro,size=1m`), or says why not (a
    /// skip reason: not root, or `mount` refused).
    pub fn mount(options: &str) -> Result<Self, String> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        if !is_root() {
            return Err("mounting a tmpfs needs root".into());
        }
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let at = std::env::temp_dir().join(format!("iox-tmpfs-{}-{n}", std::process::id()));
        std::fs::create_dir(&at).map_err(|e| format!("cannot make {}: {e}", at.display()))?;
        match Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&at)
            .output()
        {
            Ok(o) if o.status.success() => Ok(Self { at }),
            outcome => {
                let _ = std::fs::remove_dir(&at);
                Err(match outcome {
                    Ok(o) => format!(
                        "cannot mount a tmpfs here: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                    Err(e) => format!("cannot run mount: {e}"),
                })
            }
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &std::path::Path {
        &self.at
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).status();
        let _ = std::fs::remove_dir(&self.at);
    }
}

/// Writes `root/filler` until the file system is full.
pub fn fill(root: &std::path::Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(root.join("filler")).expect("create the filler file");
    let block = [0xa5u8; 4096];
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling {}: {e}", root.display()),
        }
    }
}

/// The test's side of a gated stall point (iox_service's `testing` module): a
/// directory where the stalled process says it arrived (`reached`) and waits until
/// the test opens it (`open`). Hand [`Gate::path`] to the process (`IOX_TEST_GATE`, or
/// `testing::stall_at` in the process itself), wait with [`Gate::wait_reached`], act
/// inside the window, then [`Gate::open`].
#[derive(Debug)]
pub struct Gate {
    dir: std::path::PathBuf,
}

impl Gate {
    /// A fresh gate directory named `name` under `parent` (a test's temp directory).
    pub fn new(parent: &std::path::Path, name: &str) -> Self {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).expect("create the gate directory");
        Self { dir }
    }

    /// The directory, for the stalled process.
    pub fn path(&self) -> &std::path::Path {
        &self.dir
    }

    /// The gate as the env pair a child needs to stall at `point`.
    pub fn env(&self, point: &str) -> [(&'static str, String); 2] {
        [
            ("IOX_TEST_STALL", point.to_string()),
            ("IOX_TEST_GATE", self.dir.display().to_string()),
        ]
    }

    /// Whether a process stopped at the gate, waiting up to `limit`.
    pub fn wait_reached(&self, limit: Duration) -> bool {
        wait_until(limit, || self.dir.join("reached").exists())
    }

    /// Whether a process stopped at the gate (now, without waiting).
    pub fn reached(&self) -> bool {
        self.dir.join("reached").exists()
    }

    /// Lets the stalled process go on.
    pub fn open(&self) {
        std::fs::write(self.dir.join("open"), b"").expect("open the gate");
    }
}

/// Whether `fd` becomes readable within `timeout` (poll(2); an interrupted poll
/// counts as not readable).
pub fn readable(fd: &impl std::os::fd::AsFd, timeout: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: fd.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd, borrowed for the call; the descriptor is alive (`fd`).
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    n == 1 && pfd.revents & libc::POLLIN != 0
}

/// The env pair that gives a child process the test's root (`IOX_ROOT`).
pub fn root_env(root: impl AsRef<std::path::Path>) -> (&'static str, String) {
    ("IOX_ROOT", root.as_ref().display().to_string())
}

/// Forks this process while another of its threads is stopped inside a process-global
/// lock at `gate` (the caller started that thread; it waits at the gate, as a stall
/// point or a blocking callback does, until the gate opens), and runs `child` in the
/// forked child, which exits 0 if `child` returns true. The gate opens once the fork
/// has returned in the parent, or after half a second if the fork waits for the lock
/// (as it must when the lock is held across forks). Call it from a re-executed,
/// single-test process ([`spawn_self`]): a fork copies only the calling thread.
///
/// `Ok` if the child finished well within `limit`; `Err` says what happened (it hung:
/// the fork copied the lock held; or it failed).
pub fn fork_inside(gate: &Gate, child: impl FnOnce() -> bool, limit: Duration) -> Result<(), String> {
    if !gate.wait_reached(Duration::from_secs(30)) {
        return Err("the holder never reached the gate".into());
    }
    let forked = gate.path().join("forked");
    let opener = {
        let (forked, gate_dir) = (forked.clone(), gate.path().to_path_buf());
        std::thread::spawn(move || {
            wait_until(Duration::from_millis(500), || forked.exists());
            let _ = std::fs::write(gate_dir.join("open"), b"");
        })
    };
    // SAFETY: the caller's process runs one test; its other threads are the holder,
    // stopped at the gate inside the lock under test, and the opener above (which polls
    // a file and writes one). The child runs `child` and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork failed: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let ok = child();
        // SAFETY: leaves the child at once (no exit handlers, no harness output).
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    let _ = std::fs::write(&forked, b"");
    let mut status = 0;
    let exited = wait_until(limit, || {
        // SAFETY: polls the child just forked; `status` is a valid out pointer.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
    });
    if !exited {
        // SAFETY: kills and reaps the child we forked.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
    }
    let _ = opener.join();
    if !exited {
        return Err(format!(
            "the forked child hung for {limit:?} (the lock was copied held)"
        ));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("the forked child failed (status {status:#x})"));
    }
    Ok(())
}

/// Waits at `gate` as a stalled thread does: says it arrived, and returns once the
/// gate opens (bounded by two minutes, so a failed test never hangs CI). For
/// callbacks a test holds inside a lock (a pinner, say).
pub fn wait_at(gate: &std::path::Path) {
    let _ = std::fs::write(gate.join("reached"), b"");
    wait_until(Duration::from_secs(120), || gate.join("open").exists());
}
