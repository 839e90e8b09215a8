//! `Listener::wait_async` (the `tokio` feature): the next pending event id, awaited on
//! the listener's readiness descriptor in tokio's reactor (see [`crate::async_ready`]).

use std::io;

use thiserror::Error;

use crate::async_ready::{ReadyError, next_ready};
use crate::event::{EventId, ListenError, Listener};

/// Why `wait_async` failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WaitAsyncError {
    /// Taking the pending ids failed.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// tokio's reactor refused the listener's descriptor (is the runtime built with I/O
    /// enabled, `enable_io()` or `enable_all()`?).
    #[error(
        "cannot wait on the listener's descriptor in tokio's reactor: {0} (build the runtime with I/O enabled)"
    )]
    Reactor(#[source] io::Error),
}

impl Listener {
    /// Waits for the next event id without blocking the thread: tokio's reactor
    /// watches the listener's readiness descriptor. A pending id is returned at once
    /// (the lowest, as [`Listener::try_wait_one`]). Needs a tokio runtime with I/O
    /// enabled (panics outside one, as tokio's own I/O types do). Takes `&mut self`, so
    /// the future is `Send` and one future waits per listener.
    ///
    /// ```
    /// use iox_service::{EventId, Service};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let event = Service::named("doc/event-async").unwrap()
    /// #   .root(dir.path())
    ///     .event()
    ///     .open_or_create()
    ///     .unwrap();
    /// let mut listener = event.listener_builder().create().unwrap();
    /// let notifier = event.notifier_builder().create().unwrap();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// runtime.block_on(async {
    ///     notifier.notify_with_custom_event_id(EventId::new(5)).unwrap();
    ///     assert_eq!(listener.wait_async().await.unwrap(), EventId::new(5));
    /// });
    /// ```
    pub async fn wait_async(&mut self) -> Result<EventId, WaitAsyncError> {
        next_ready(self, Listener::try_wait_one)
            .await
            .map_err(|e| match e {
                ReadyError::Take(e) => WaitAsyncError::Listen(e),
                ReadyError::Reactor(e) => WaitAsyncError::Reactor(e),
            })
    }
}
