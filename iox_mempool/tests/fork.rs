//! The pin registry across `fork`: a child forked while another thread's pinner works
//! (the registry's lock held) can pin (the lock was not copied held), and a child
//! holds none of its parent's pins (it neither counts nor releases them, and pins a
//! region its parent pinned afresh). Each runs in a re-executed, single-test process.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use iox_mempool::pin::pin_count;
use iox_mempool::{MemoryType, PinError, Pinner, Pool, PoolLayout, Region, register_pinner};
use iox_testkit::{Gate, fork_inside, role, spawn_self, vm_lck_kib, wait_ok};

/// A pinner that stops at its gate (inside the registry's lock) the first time it pins.
struct StopsAtGate {
    gate: PathBuf,
}

impl Pinner for StopsAtGate {
    fn pin(&self, _: &Region) -> Result<(), PinError> {
        iox_testkit::wait_at(&self.gate);
        Ok(())
    }
    fn unpin(&self, _: &Region) -> Result<(), PinError> {
        Ok(())
    }
}

fn layout() -> PoolLayout {
    PoolLayout::new(&[(4096, 2)]).unwrap()
}

#[test]
fn a_child_forked_while_a_pinner_works_can_pin() {
    const TEST: &str = "a_child_forked_while_a_pinner_works_can_pin";
    if role().as_deref() != Some("forker") {
        wait_ok(spawn_self(TEST, "forker", &[]), Duration::from_secs(90));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new(dir.path(), "pinner");
    let code = MemoryType::user(0x0111).unwrap();
    register_pinner(
        code,
        Arc::new(StopsAtGate {
            gate: gate.path().to_path_buf(),
        }),
    )
    .unwrap();
    let slow = Arc::new(Pool::create(dir.path(), "slow", &layout(), code, 0o600).unwrap());
    let locked = Arc::new(Pool::create(dir.path(), "locked", &layout(), MemoryType::Locked, 0o600).unwrap());
    let holder = {
        let slow = Arc::clone(&slow);
        std::thread::spawn(move || slow.pin().is_ok())
    };
    let region = locked.payload_region();
    let (addr, len) = (region.addr(), region.len());
    let forked = fork_inside(
        &gate,
        || match locked.pin() {
            Ok(p) if p.is_pinned() && pin_count(addr, len) == 1 => true,
            other => {
                eprintln!("child: {other:?}, count {}", pin_count(addr, len));
                false
            }
        },
        Duration::from_secs(20),
    );
    assert!(holder.join().unwrap(), "the holder's pin failed");
    forked.unwrap();
}

#[test]
fn a_forked_child_holds_none_of_its_parents_pins() {
    const TEST: &str = "a_forked_child_holds_none_of_its_parents_pins";
    if role().as_deref() != Some("forker") {
        wait_ok(spawn_self(TEST, "forker", &[]), Duration::from_secs(90));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(Pool::create(dir.path(), "p", &layout(), MemoryType::Locked, 0o600).unwrap());
    let region = pool.payload_region();
    let (addr, len) = (region.addr(), region.len());
    let before = vm_lck_kib();
    let parents = pool.pin().unwrap();
    let pinned = vm_lck_kib();
    assert!(pinned > before, "the parent's pin locked nothing");
    // SAFETY: this process runs one test thread and no other thread of ours.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // `mlock` is not inherited: the child has nothing locked and counts no pin.
        let none = vm_lck_kib() == 0 && pin_count(addr, len) == 0;
        // Its own pin locks the pages in the child, once.
        let own = pool.pin();
        let pins = own.as_ref().is_ok_and(|p| p.is_pinned()) && pin_count(addr, len) == 1 && vm_lck_kib() > 0;
        drop(own);
        // The parent's guard, copied: dropping it releases nothing anywhere.
        drop(parents);
        let ok = none && pins && vm_lck_kib() == 0;
        if !ok {
            eprintln!(
                "child: inherited none {none}, own pin {pins}, VmLck after {}",
                vm_lck_kib()
            );
        }
        // SAFETY: leaves the child at once.
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}"
    );
    assert_eq!(
        pin_count(addr, len),
        1,
        "the child's drops released the parent's pin"
    );
    assert_eq!(vm_lck_kib(), pinned);
    drop(parents);
    assert_eq!(pin_count(addr, len), 0);
}

/// A lock first used while a fork's prepare step is past its rank (recorded behind
/// it, and held by the time the step would finish) is seen by the step's last look:
/// it starts over in rank order and takes that lock too, so the child finds it free.
#[test]
fn a_lock_first_used_during_a_fork_is_not_copied_held() {
    use iox_mempool::fork::{ForkLock, Rank};
    static LOW: ForkLock<u32> = ForkLock::new(Rank::Test0, 0);
    static HIGH: ForkLock<u32> = ForkLock::new(Rank::Test1, 0);
    const TEST: &str = "a_lock_first_used_during_a_fork_is_not_copied_held";
    if role().as_deref() != Some("forker") {
        wait_ok(spawn_self(TEST, "forker", &[]), Duration::from_secs(90));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (Gate::new(dir.path(), "first"), Gate::new(dir.path(), "second"));
    let holder = {
        let (first, second) = (first.path().to_path_buf(), second.path().to_path_buf());
        std::thread::spawn(move || {
            let high = HIGH.lock();
            iox_testkit::wait_at(&first); // the fork's prepare step waits for HIGH here
            drop(high);
            let low = LOW.lock(); // first use of LOW: recorded behind the step
            iox_testkit::wait_at(&second);
            drop(low);
        })
    };
    // The second gate opens half a second after the holder reached it.
    let opener = {
        let second = Gate::new(dir.path(), "second");
        std::thread::spawn(move || {
            assert!(second.wait_reached(Duration::from_secs(30)));
            let at = std::time::Instant::now();
            iox_testkit::wait_until(Duration::from_secs(30), || {
                at.elapsed() > Duration::from_millis(500)
            });
            second.open();
        })
    };
    let forked = fork_inside(
        &first,
        || {
            drop(LOW.lock());
            drop(HIGH.lock());
            true
        },
        Duration::from_secs(20),
    );
    holder.join().unwrap();
    opener.join().unwrap();
    forked.unwrap();
}

/// A library whose constructor forks from a thread of its own and waits for it, as
/// lttng-ust's does when rclpy's extension loads: the loading thread holds the
/// loader's lock inside `dlopen` while the other thread forks.
const FORKS_IN_CONSTRUCTOR: &str = r#"
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
static void *forker(void *arg) {
    (void)arg;
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    return 0;
}
__attribute__((constructor)) static void start(void) {
    pthread_t t;
    if (pthread_create(&t, 0, forker, 0) == 0) pthread_join(t, 0);
}
"#;

/// The fork handlers run in whatever thread forks, maybe while another thread holds
/// the loader's lock: a prepare step that takes anything but its ranked locks (a
/// thread-local's first use registers its destructor under that lock; an allocation
/// may take malloc's) waits forever for the thread inside `dlopen`, which waits for
/// the fork. The child here has used a `ForkLock` (handlers registered, a lock
/// recorded), then loads a library whose constructor forks from a new thread.
#[test]
fn a_fork_while_another_thread_is_inside_dlopen_finishes() {
    use iox_mempool::fork::{ForkLock, Rank};
    static USED: ForkLock<u32> = ForkLock::new(Rank::Test0, 0);
    const TEST: &str = "a_fork_while_another_thread_is_inside_dlopen_finishes";
    if role().as_deref() == Some("loader") {
        *USED.lock() += 1;
        let lib = std::ffi::CString::new(iox_testkit::env::<String>("FORKING_LIB")).unwrap();
        // SAFETY: loads a library built by the parent for this test; its constructor
        // forks from its own thread and joins it.
        let handle = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null(), "dlopen failed");
        *USED.lock() += 1;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("forks.c");
    let lib = dir.path().join("libforks.so");
    std::fs::write(&source, FORKS_IN_CONSTRUCTOR).unwrap();
    let built = std::process::Command::new("gcc")
        .args(["-shared", "-fPIC", "-pthread", "-o"])
        .arg(&lib)
        .arg(&source)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        iox_testkit::skip(TEST, "IOX_REQUIRE_CC", "gcc could not build the test's library");
        return;
    }
    let child = spawn_self(TEST, "loader", &[("FORKING_LIB", lib.display().to_string())]);
    wait_ok(child, Duration::from_secs(20));
}
