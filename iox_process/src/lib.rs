//! iox's process layer, the bottom of the service stack: what a process is to the
//! others that share a root, and the names of the files it leaves there.
//!
//! - [`node`]: node identity (one id per process and root, a lock file held while the
//!   process lives) and liveness (whether the process behind an id is alive);
//! - [`fork`]: telling a forked child from the process that opened a service;
//! - [`robust_mutex`]: the process-shared mutex a process may die holding;
//! - [`files`]: the file names under the root, and the atomic rename;
//! - [`stall`]: stall points for iox's own tests (nothing without the `testing`
//!   feature), and [`testing`], the other test hooks.
//!
//! Nothing here knows a service, a pattern or a port: `iox_service` builds on it.

pub mod files;
pub mod fork;
pub mod node;
pub mod robust_mutex;
#[doc(hidden)]
pub mod stall;
#[doc(hidden)]
pub mod testing;
