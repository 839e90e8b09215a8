//! `Subscriber::receive_async` (the `tokio` feature): the next sample, awaited on the
//! subscriber's readiness descriptor in tokio's reactor (see [`crate::async_ready`]).

use std::io;

use thiserror::Error;

use crate::Payload;
use crate::async_ready::{ReadyError, next_ready};
use crate::sample::Sample;
use crate::subscriber::{ReceiveError, Subscriber};

/// Why `receive_async` failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReceiveAsyncError {
    /// The receive itself failed.
    #[error(transparent)]
    Receive(#[from] ReceiveError),
    /// tokio's reactor refused the subscriber's descriptor (is the runtime built with
    /// I/O enabled, `enable_io()` or `enable_all()`?).
    #[error(
        "cannot wait on the subscriber's descriptor in tokio's reactor: {0} (build the runtime with I/O enabled)"
    )]
    Reactor(#[source] io::Error),
}

impl<P: ?Sized + Payload, H: crate::UserHeader> Subscriber<P, H> {
    /// Waits for the next sample without blocking the thread: tokio's reactor watches
    /// the subscriber's readiness descriptor. A sample already waiting is returned at
    /// once. Needs a tokio runtime with I/O enabled (panics outside one, as tokio's
    /// own I/O types do). Takes `&mut self`, so the future is `Send` (it can be
    /// spawned) and one future waits per subscriber.
    ///
    /// ```
    /// use iox_service::Service;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let service = Service::named("doc/async").unwrap()
    /// #   .root(dir.path())
    ///     .publish_subscribe::<u64>()
    ///     .open_or_create()
    ///     .unwrap();
    /// let mut subscriber = service.subscriber_builder().create().unwrap();
    /// let publisher = service.publisher_builder().create().unwrap();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    /// runtime.block_on(async {
    ///     publisher.loan_uninit().unwrap().write_payload(7).send().unwrap();
    ///     assert_eq!(*subscriber.receive_async().await.unwrap(), 7);
    /// });
    /// ```
    pub async fn receive_async(&mut self) -> Result<Sample<P, H>, ReceiveAsyncError> {
        next_ready(self, Subscriber::receive).await.map_err(|e| match e {
            ReadyError::Take(e) => ReceiveAsyncError::Receive(e),
            ReadyError::Reactor(e) => ReceiveAsyncError::Reactor(e),
        })
    }
}
