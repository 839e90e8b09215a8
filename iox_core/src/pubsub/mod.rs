//! Publish-subscribe's part of the core: its section of the static config
//! (`config`), its regions of the dynamic segment (`layout`), how its dead ports are
//! recovered (`recovery`), and the user header's identity and placement
//! (`user_header`). Its ports are above the core (`iox_service`).

pub mod config;
pub mod layout;
pub mod recovery;
pub mod user_header;
