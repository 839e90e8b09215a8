//! The files of a service and what lives in them: the dynamic segment, the queues,
//! and the lifecycle of a service's files.

pub mod arming;
pub mod blackboard_value;
pub mod connected;
pub mod doorbell;
pub mod dynamic;
pub use iox_process::files;
pub mod layout;
pub mod may_wait;
pub mod pending_set;
pub mod publishers_seen;
pub mod queue;
pub mod regions;
pub mod request_word;
pub mod tensor_record;
