//! The publish-subscribe pattern: its part of the dynamic segment (`layout.rs`),
//! publishers, subscribers, samples, raw payloads, and the recovery of its ports.

pub(crate) mod carry;
mod compatible;
mod creating;
pub(crate) use iox_core::shm::regions::pubsub as layout;
pub(crate) use iox_core::static_config::pubsub as config;
pub(crate) mod like_config;
pub(crate) mod publisher;
pub(crate) mod raw;
#[cfg(feature = "tokio")]
pub(crate) mod receive_async;
pub(crate) mod sample;
pub(crate) mod service;
pub(crate) mod subscriber;
pub(crate) mod tensor;
pub use iox_core::user_header;
