//! Events' part of the core: the static config section (`config`), the event id
//! (`id`), the regions of the dynamic segment (`layout`), the pending-set word
//! protocol (`pending_set`) and the fan-out of a notification over it (`pending`),
//! and recovery of dead notifiers and listeners (`recovery`). The ports are above the
//! core (`iox_service`).

pub mod config;
pub mod id;
pub mod layout;
pub mod pending;
pub mod pending_set;
pub mod recovery;
