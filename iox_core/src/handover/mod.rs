//! Handing a service's descriptors to a new participant: no `/proc/<pid>/fd`, no pid,
//! no daemon.
//!
//! Some of a service's memory is reachable only through a descriptor: the sealed
//! memfd payload (no name in any file system), and a device pool's export (which
//! `/proc` cannot reopen). A process that holds them *offers* them ([`offer`]): it
//! listens on a socket under the root, `iox_<H>.h.<incarnation>.<random>.<node>.sock`,
//! and marks its user entry in the dynamic segment as a holder with the name's random
//! part (a name a stranger, who cannot read the entry, cannot take first). A newcomer asks a live holder ([`fetch`]) and gets the descriptors with
//! `SCM_RIGHTS`. This works between PID namespaces (two containers sharing the root
//! volume: a socket file on the shared volume reaches the other side, a pid does not)
//! and between users (no ptrace rights needed).
//!
//! Who gets them: the holder reads the peer's credentials from the connection
//! (`SO_PEERCRED`, `SO_PEERGROUPS`) and admits it only if the owner, group and mode of
//! the service's dynamic segment let it read and write that file ([`admission`]); a
//! refusal names the permissions. The socket file has the service's mode too, so the
//! kernel refuses a connect from outside it first. A service with an access policy
//! (`crate::access`) is then handed over by role: a publisher gets the descriptors as
//! this holder holds them, a reader the same files reopened read-only, anyone else a
//! refusal naming the policy (`serving::given`); a holder never hands out more than it
//! holds.
//!
//! What the newcomer trusts: nothing it got until the descriptors pass the checks of
//! their kind (the memfd: its name, seals, size and inode against the identity in the
//! static config, see `iox_mempool::memfd::open_memfd`; a device export: the import,
//! and the token read back after the payload, see `crate::device`). A holder that answers garbage,
//! the wrong descriptor, none, too much, or nothing within [`request::PER_HOLDER`], is
//! passed over for the next holder, until the open's timeout.
//!
//! Protocol: [`wire`]; the offers: [`responder`]; the thread that answers, and why no
//! peer's silence or flood delays another's hand-over: [`serving`].

pub mod admission;
pub mod request;
pub mod responder;
pub mod serving;
pub mod wire;

pub use request::{Denied, fetch};
pub use responder::{Offer, offer};
