//! Waiting for a readiness descriptor on tokio's reactor (the `tokio` feature): the
//! generic part of `Subscriber::receive_async`, for any port whose descriptor follows
//! iox's contract (readable when something may be waiting; an empty take re-arms it;
//! a wake-up may be spurious).
//!
//! **Loop.** Arm the descriptor (`as_fd`), take; if nothing, register the descriptor
//! with the current runtime's reactor (`AsyncFd`, read interest) and loop: await
//! readiness, take; on nothing, clear the readiness and await again. Clearing is safe
//! against a lost wake: tokio clears only if no new readiness event arrived since the
//! guard was handed out, and the empty take re-armed the port before the clear.
//!
//! Decisions: the descriptor is registered per call and only when the first take
//! finds nothing (a busy stream never touches the reactor; an idle wait costs one
//! register and one deregister, small beside a sleep). The source is borrowed `&mut`:
//! one waiting future per port (a second registration of the same descriptor would
//! fail), and the future is `Send` whenever the port is, though ports are not `Sync`.

use std::io;
use std::os::fd::AsFd;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Why waiting failed: the port's own take failed, or the reactor refused.
#[derive(Debug)]
pub(crate) enum ReadyError<E> {
    Take(E),
    Reactor(io::Error),
}

/// Takes from `source` with `take`, waiting on its descriptor until something comes.
///
/// Panics (as tokio's own I/O types do) outside a tokio runtime with I/O enabled.
pub(crate) async fn next_ready<S, T, E>(
    source: &mut S,
    take: impl Fn(&S) -> Result<Option<T>, E>,
) -> Result<T, ReadyError<E>>
where
    S: AsFd,
{
    // Arms the descriptor (the first call for the port) before the first look.
    let fd = source.as_fd();
    if let Some(item) = take(source).map_err(ReadyError::Take)? {
        return Ok(item);
    }
    // SAFETY: `fd` borrows `source`, so the descriptor stays open and the same for as
    // long as `fd` lives, and the `AsyncFd` (a local of this future) does not outlive it.
    let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
        .map_err(|e| ReadyError::Reactor(e.into()))?;
    loop {
        let mut guard = registered.readable().await.map_err(ReadyError::Reactor)?;
        if let Some(item) = take(source).map_err(ReadyError::Take)? {
            return Ok(item);
        }
        // A spurious wake: the empty take re-armed the port; wait for the next ring.
        guard.clear_ready();
    }
}
