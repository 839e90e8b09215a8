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
//! The check must cost nothing on the hot path, and `getpid` is a system call: the
//! fork generation of [`iox_mempool::fork`] (bumped by a `pthread_atfork` child
//! handler) is recorded by a handle and compared, one relaxed load. The same handlers
//! hold every process-global lock of iox across each fork (they are all
//! [`iox_mempool::fork::ForkLock`]s: the node registry, the hand-over's offers, the
//! WaitSet's signal registrations, the pin registry, iox_cuda's), so a child never
//! inherits one held by a thread it does not have; and the node registry's child step
//! makes the child draw its own node id.

/// The fork generation of this process: different in a forked child from its parent's.
/// (The node registry registers its own child step, which makes a child draw its own
/// node id, when it first makes a node.)
#[inline]
pub fn generation() -> u64 {
    iox_mempool::fork::generation()
}

/// Whether this is still the process (fork generation) `generation` was taken in.
#[inline]
pub fn is_same_process(generation: u64) -> bool {
    iox_mempool::fork::is_same_process(generation)
}
