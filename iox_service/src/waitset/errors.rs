//! The WaitSet's errors: one enum per operation (create, attach, wait).

use std::io;

use thiserror::Error;

/// Why a [`crate::WaitSet`] could not be created.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WaitSetCreateError {
    /// The epoll instance could not be created.
    #[error("cannot create the WaitSet's epoll instance: {0} (too many open files? raise `ulimit -n`)")]
    Epoll(#[source] io::Error),
    /// The waker's eventfd could not be created or added.
    #[error("cannot create the WaitSet's waker (an eventfd): {0} (too many open files? raise `ulimit -n`)")]
    Waker(#[source] io::Error),
    /// The SIGINT/SIGTERM handlers or this WaitSet's signal socket could not be set up.
    #[error(
        "cannot set up SIGINT/SIGTERM handling for the WaitSet: {0} (build it with \
         `WaitSetBuilder::new().termination_signals(false)` to do without)"
    )]
    Signals(#[source] io::Error),
}

/// Why an attachment was refused.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WaitSetAttachError {
    /// The descriptor is in this WaitSet already (through another guard).
    #[error("this descriptor is attached to the WaitSet already; drop its other guard first")]
    AlreadyAttached,
    /// The descriptor cannot be waited on with epoll (a regular file or a directory).
    #[error(
        "this descriptor cannot be waited on (epoll refuses regular files and directories); \
         attach a socket, pipe, eventfd or iox port"
    )]
    NotPollable,
    /// An interval or deadline of zero would fire without end.
    #[error("a {what} of zero would fire continuously; give it a positive duration")]
    ZeroDuration {
        /// "interval" or "deadline".
        what: &'static str,
    },
    /// The system's limit on watched descriptors was reached.
    #[error(
        "the system's limit on descriptors watched by epoll is reached \
         (raise /proc/sys/fs/epoll/max_user_watches)"
    )]
    WatchLimit,
    /// epoll_ctl failed otherwise.
    #[error("adding the descriptor to the WaitSet's epoll instance failed: {0}")]
    Epoll(#[source] io::Error),
}

/// Why a wait failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WaitSetRunError {
    /// `epoll_wait` failed (not by a signal: those are retried).
    #[error("waiting on the WaitSet's epoll instance failed: {0}")]
    Wait(#[source] io::Error),
}
