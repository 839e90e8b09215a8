//! Why a subscriber's receive failed ([`ReceiveError`]).

use thiserror::Error;

/// Why a receive failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReceiveError {
    /// This subscriber holds its maximum of samples.
    #[error(
        "this subscriber already holds its maximum of {max} samples (the service's max_held, fixed by its creator); drop one first, copying what you keep, or create the service with a larger max_held"
    )]
    TooManyHeld {
        /// The service's `max_held`.
        max: usize,
    },
    /// A queue held something that is not a valid sample of this service.
    #[error("corrupt queue entry {raw:#x} from publisher slot {publisher}: {what}")]
    Corrupt {
        /// The entry.
        raw: u64,
        /// The publisher slot it came from.
        publisher: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// A sample held bytes that are no value of the payload's or header's type (a
    /// `bool` other than 0 or 1): it was released unread; receive again for the next.
    #[error("refused a sample from publisher slot {publisher}: {source}")]
    InvalidValue {
        /// The publisher slot it came from.
        publisher: usize,
        /// What was invalid.
        source: crate::valid::InvalidValue,
    },
    /// This process is a fork of the one that made the subscriber.
    #[error(
        "this subscriber belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
    /// Nothing was waiting and the service was removed (e.g. `iox remove --force`)
    /// after this subscriber's handle opened it: drop the subscriber and the handle and
    /// open the service again (a new opener creates a fresh one).
    #[error(
        "the service was removed after this subscriber's handle opened it (drop the subscriber and the handle, and open the service again)"
    )]
    ServiceRemoved,
    /// Waiting on the futex failed.
    #[error("waiting for a sample failed: {0}")]
    Wait(std::io::Error),
}
