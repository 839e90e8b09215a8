//! The publish-subscribe pattern: ports, samples and what they share.

pub(crate) mod port;
pub(crate) mod publisher;
pub(crate) mod raw;
#[cfg(feature = "tokio")]
pub(crate) mod receive_async;
pub(crate) mod sample;
pub(crate) mod service;
pub(crate) mod subscriber;
