//! The publish-subscribe pattern: ports, samples and what they share.

pub(crate) mod port;
pub(crate) mod publisher;
pub(crate) mod sample;
pub(crate) mod service;
pub(crate) mod subscriber;
