//! The blackboard's part of the core: the static config section (`config`), the
//! regions of the dynamic segment (`layout`), the value word protocol (`value`),
//! recovery of dead writers and readers (`recovery`), and what tools show of its keys
//! (`inspect`). The ports, and the event service that wakes readers, are above the
//! core (`iox_service`).

pub mod config;
pub mod inspect;
pub mod layout;
pub mod recovery;
pub mod value;

pub use inspect::KeyInfo;
