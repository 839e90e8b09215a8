//! The [`Waker`]: another thread ends a [`crate::WaitSet`]'s wait.
//!
//! Mechanism: an `eventfd` in the WaitSet's epoll set. `wake` adds one to its counter
//! (one `write`), which makes it readable; the WaitSet reads it back to zero (one
//! `read`) and returns [`crate::WaitSetRunResult::Interrupt`]. Wakes before or during a
//! wait are not lost (the counter holds them until the next wait) and several coalesce
//! into one interrupt.
//!
//! Decision: an eventfd, not a pipe or one of iox's doorbell sockets: the waker is
//! process-local (threads share the descriptor through an `Arc`), so nothing needs a
//! name under the root, and an eventfd is one descriptor with a counter that cannot
//! fill up in practice (2^64 - 2 wakes between two waits).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use rustix::event::{EventfdFlags, eventfd};

/// Ends the wait of the [`crate::WaitSet`] it came from, from any thread: the wait
/// returns [`crate::WaitSetRunResult::Interrupt`]. A wake while the WaitSet is not
/// waiting ends its next wait. Cheap to clone; stays valid (and harmless) after the
/// WaitSet is dropped.
///
/// ```
/// use iox_service::{WaitSet, WaitSetRunResult, CallbackProgression};
/// let waitset = WaitSet::new().unwrap();
/// let waker = waitset.waker();
/// let t = std::thread::spawn(move || waker.wake());
/// let result = waitset.wait_and_process(|_| CallbackProgression::Continue).unwrap();
/// assert_eq!(result, WaitSetRunResult::Interrupt);
/// t.join().unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Waker {
    fd: Arc<OwnedFd>,
}

impl Waker {
    pub(crate) fn new() -> io::Result<Self> {
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self { fd: Arc::new(fd) })
    }

    /// Ends the WaitSet's current or next wait with `Interrupt`.
    pub fn wake(&self) {
        // Fails only if the counter would overflow (2^64 - 2 unread wakes): then it is
        // readable anyway.
        let _ = rustix::io::write(&*self.fd, &1u64.to_ne_bytes());
    }

    /// The eventfd, for the WaitSet's epoll set.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Resets the counter; whether there was a wake.
    pub(crate) fn take(&self) -> bool {
        let mut buf = [0u8; 8];
        rustix::io::read(&*self.fd, &mut buf).is_ok_and(|n| n == 8)
    }
}
