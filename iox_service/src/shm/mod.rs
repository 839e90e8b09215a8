//! The files of a service and what lives in them: the dynamic segment, the queues,
//! and the lifecycle of a service's files.

pub(crate) mod dynamic;
pub(crate) mod files;
pub(crate) mod lifecycle;
pub(crate) mod queue;
