//! # iox_core
//!
//! The core of iox, under the messaging patterns' ports: everything a service writes to
//! shared memory or to disk, and the protocols on it, closed and versioned. Users
//! depend on `iox_service`, which re-exports what they need of this crate; its items
//! are public so that the crates above (the ports, the tools) build on them, and are
//! not a stable API of their own.
//!
//! What lives here (bottom up; `docs/architecture.md` draws it):
//! - payload identity and schemas (`zero_copy`, `schema`, `pubsub::user_header`), names
//!   (`name`), attributes (`attributes`);
//! - the static config with every pattern's section, a closed enum as a file format is
//!   (`static_config`, `config_file`, the `config` module of each pattern folder);
//! - the dynamic segment and every pattern's regions (`shm::dynamic`, `shm::layout`,
//!   each pattern's `layout`), the one place the core asks a pattern anything
//!   (`pattern`);
//! - the protocol words: the queue, arming, connected and may-wait sets (`shm`), the
//!   pending set (`event::pending_set`), the request word (`reqres::request_word`),
//!   the blackboard's value words (`blackboard::value`); their atomics come from one
//!   module (`sync`), which the loom models replace;
//! - the port primitives every port kind shares (`port`);
//! - recovery of dead participants (`recovery`, with each pattern's `recovery`),
//!   open / create and the service's lifecycle (`service`, `shm::lifecycle`), the
//!   descriptor hand-over (`handover`), inspection (`inspect`).
//!
//! Below it is `iox_process` (nodes, fork handling, the robust mutex, file names,
//! stall points) and `iox_mempool` (the pool); above it the ports and builders
//! (`iox_service`). Nothing here knows a port or builder type.

pub mod attributes;
pub mod blackboard;
pub mod config_file;
pub mod device;
pub mod event;
pub mod handover;
pub mod inspect;
pub mod name;
pub mod pattern;
pub mod port;
pub mod pubsub;
pub mod recovery;
pub mod reqres;
pub mod schema;
pub mod service;
pub mod shm;
pub mod static_config;
mod sync;
pub mod zero_copy;
#[doc(hidden)]
pub use iox_process::testing;

// Short paths to the modules every part uses.
pub use recovery::{cleanup, fork, node};
pub use shm::{doorbell, dynamic, lifecycle, queue};

pub use attributes::{AttributeError, Attributes};
pub use name::{NameError, ServiceName};
pub use pubsub::user_header::{self, HeaderType};
pub use schema::Schema;
pub use service::{CreateError, OpenError, OpenOrCreateError, RootError, UserHeaderMismatch};
pub use static_config::{
    BlackboardConfig, BlackboardEntry, ConfigError, DeviceIdentity, EventConfig, InvalidConfig,
    MessagingPattern, Overflow, PatternConfig, PayloadBacking, PortLimits, PubSubConfig,
    RequestResponseConfig, StaticConfig,
};
pub use zero_copy::{Payload, PayloadType, ZeroCopySafe};
