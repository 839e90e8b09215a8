//! Telling a forked child from the process that opened a service, cheaply.
//!
//! A child made by `fork` (without `exec`) inherits copies of every service handle,
//! port, loan and sample of its parent. None of them is the child's: the slots, owner
//! bits and send journals belong to the parent, so a child that sent, received, or
//! released a chunk through them would corrupt the parent's state (release a chunk the
//! parent still reads, or push as a second producer into a single-producer queue).
//! So every port operation and every drop first checks that it runs in the process
//! that made the service handle, and otherwise does nothing (drops) or fails with a
//! `ForkedProcess` error (operations); a child opens the service itself.
//!
//! The check must cost nothing on the hot path, and `getpid` is a system call: a
//! `pthread_atfork` child handler, registered once, bumps a process-global generation,
//! and a handle records the generation it was made in. Comparing them is one relaxed
//! load. The same registration holds the node registry's locks across every fork
//! (prepare: taken by the forking thread; parent and child: released), so a child
//! never inherits them held by a thread it does not have. A fork therefore waits
//! while another thread makes or drops a node (a node file's creation or removal).
//! Not supported: forking from a signal handler that interrupted iox making or
//! dropping a node on the same thread (the prepare step would wait on its own lock;
//! `fork` is not async-signal-safe with handlers registered anyway).

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" fn before_fork() {
    // In the forking thread, before the fork: holds the node registry across it.
    crate::recovery::node::lock_for_fork();
}

extern "C" fn forked_parent() {
    crate::recovery::node::unlock_after_fork();
}

extern "C" fn forked_child() {
    // Runs in the child right after fork, before fork returns there: atomic stores
    // and the release of the registry's locks (copies this thread took), all safe in
    // that context.
    GENERATION.fetch_add(1, Ordering::Relaxed);
    // The child draws its own node id.
    crate::recovery::node::forget_after_fork();
    crate::recovery::node::unlock_after_fork();
}

/// The fork generation of this process: different in a forked child from its parent's.
/// The first call registers the `pthread_atfork` handlers that maintain it and keep
/// the node registry consistent across a fork.
pub(crate) fn generation() -> u64 {
    REGISTER.call_once(|| {
        // SAFETY: registers plain `extern "C" fn`s with no captured state; the prepare
        // handler takes two process-local locks, the others release them and do
        // atomic stores, which is allowed in a child right after fork.
        let rc = unsafe { libc::pthread_atfork(Some(before_fork), Some(forked_parent), Some(forked_child)) };
        // It only fails with ENOMEM; then forked children are not told apart (the state
        // before this module existed), which is no reason to refuse to work.
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
    });
    GENERATION.load(Ordering::Relaxed)
}

/// Whether this is still the process (fork generation) `generation` was taken in.
#[inline]
pub(crate) fn is_same_process(generation: u64) -> bool {
    GENERATION.load(Ordering::Relaxed) == generation
}
