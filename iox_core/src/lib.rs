//! # iox_core
//!
//! The core of iox, under the messaging patterns' ports: everything a service writes to
//! shared memory or to disk, and the protocols on it, closed and versioned. Users
//! depend on `iox_service`, which re-exports what they need of this crate; its items
//! are public so that the crates above (the ports, the tools) build on them, and are
//! not a stable API of their own.
//!
//! The rule that decides what lives here: what is written to shared memory or to disk
//! (file formats, word protocols, recovery) is closed and lives here; ports and
//! builders are open and sit above (`iox_service`). The top-level modules form layers,
//! bottom up, and a module imports only modules of its own layer or below (checked by
//! `testkit/tests/architecture.rs`; `docs/architecture.md` draws them):
//!
//! 1. **formats**, what is written to disk: payload identity (`zero_copy`), schemas
//!    (`schema`), tensor element types and layouts (`tensor`), the user header's type
//!    states (`user_header`), names, attributes, access policies (`access`),
//!    and the static config with every pattern's section, a closed enum as a file
//!    format is (`static_config`, its `pubsub`, `event`, `reqres`, `blackboard`,
//!    `header` (the user header's identity and place) and `file` modules);
//! 2. **shared memory**: the protocol words (`shm::{queue, arming, connected, may_wait,
//!    publishers_seen, pending_set, request_word, blackboard_value, tensor_record}`,
//!    their atomics from
//!    one module, `sync`, which the loom models replace), the doorbell, the dynamic
//!    segment (`shm::dynamic`, `shm::layout`) and every pattern's regions of it
//!    (`shm::regions`, the one place the segment asks a pattern anything); a device
//!    pool's memory (`device`);
//! 3. **processes on a service**: the root they share (`root`), which nodes are alive
//!    (`liveness`), the service's lifecycle word and files (`lifecycle`), the
//!    descriptor hand-over (`handover`);
//! 4. **a service open in this process** (`shared`) and the primitives its ports share
//!    once they have a slot (`port`: loans, owner bits, the journaled send, waking,
//!    pinning; `fanout`: an event's notification to every listener; `chunk_guard`: the
//!    locks that keep readers' chunks from publishers whatever the shared words say);
//! 5. **recovery** of dead participants, one dispatch on the pattern (`recovery`, with
//!    each pattern's steps in `recovery::{pubsub, event, reqres, blackboard}`);
//! 6. **services**: open / create and the pattern plug-in (`service`), taking a port
//!    slot, which recovers first (`slot_claim`), removal and cleanup (`cleanup`),
//!    inspection (`inspect`).
//!
//! Below the core are `iox_process` (nodes, fork handling, the robust mutex, file
//! names, stall points) and `iox_mempool` (the pool); above it the ports and builders
//! (`iox_service`). Nothing here knows a port or builder type.

// Layer 1, what is written to disk: identities, schemas, names, attributes, the static
// config with every pattern's section.
pub mod access;
pub mod attributes;
pub mod name;
pub mod schema;
pub mod static_config;
pub mod tensor;
pub mod user_header;
pub mod valid;
pub mod zero_copy;

// Layer 2, what is written to shared memory: the protocol words and their atomics, the
// dynamic segment and every pattern's regions; the device pool's memory.
pub mod device;
pub mod shm;
mod sync;

// Layer 3, processes on a service: liveness of their nodes, the descriptor hand-over,
// the service's lifecycle word and files.
pub mod handover;
pub mod lifecycle;
pub mod liveness;
pub mod root;

// Layer 4, a service open in this process and the primitives its ports share.
pub mod chunk_guard;
pub mod fanout;
pub mod port;
pub mod shared;

// Layer 5, recovery of dead participants (one dispatch on the pattern).
pub mod recovery;

// Layer 6, services as a whole: open / create, removal and cleanup, inspection.
pub mod cleanup;
pub mod inspect;
pub mod service;
pub mod slot_claim;

#[doc(hidden)]
pub use iox_process::testing;
pub use iox_process::{fork, node, robust_mutex};
// Short paths to the modules every part uses.
pub use shm::{doorbell, dynamic, queue};

pub use attributes::{AttributeError, Attributes};
pub use name::{NameError, ServiceName};
pub use root::RootError;
pub use schema::Schema;
pub use service::{CreateError, OpenError, OpenOrCreateError, UserHeaderMismatch};
pub use static_config::{
    BlackboardConfig, BlackboardEntry, ConfigError, DeviceIdentity, EventConfig, HeaderType, InvalidConfig,
    MessagingPattern, Overflow, PatternConfig, PayloadBacking, PortLimits, PubSubConfig,
    RequestResponseConfig, StaticConfig,
};
pub use zero_copy::{Payload, PayloadType, ZeroCopySafe};
