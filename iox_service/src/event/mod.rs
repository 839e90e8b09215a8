//! The event pattern: notifiers signal event ids, listeners wait for them. No
//! payload travels; an event says "id N happened (at least once) since you last
//! looked".
//!
//! Layout and delivery. An event service uses the core's files and protocol (static
//! config, dynamic segment, users, node liveness, recovery, `iox list/show/clean`) as
//! pub-sub does: notifiers take the publisher port slots, listeners the subscriber
//! slots (64-byte `PortHeader`s, so slot claiming, liveness, inspection and the
//! doorbell sockets are shared), and the dynamic segment has no queues; instead each
//! listener slot has a pending set, one bit per id (`event_id_max + 1` bits in
//! `AtomicU64` words, see [`pending_set`]). A notify sets the id's bit in the set of every
//! active listener (`fetch_or`, Release), fences (SeqCst), and wakes those that sleep
//! or armed their readiness descriptor (the `waiting` word and the doorbell, as
//! subscribers use them: [`crate::doorbell`], `port::wake`). A listener takes a word's
//! bits with one `swap(0)` (Acquire). So repeated notifications of one id before the
//! listener looks coalesce into one, and no distinct id is ever lost; there is no
//! buffer to overflow, and a notifier never blocks, whatever its listeners do (dead,
//! stopped, slow).
//!
//! Waiting. The blocking waits (`timed_wait_*`, `blocking_wait_*`) sleep on the
//! listener slot's futex word, exactly as `Subscriber::receive_timeout` does (count
//! in `waiting`, SeqCst fence, look again, `futex_wait`); a notifier makes the wake
//! syscall only when that count is non-zero or the listener armed its descriptor.
//! Decision: the futex rather than `poll` on the doorbell socket, because a futex wake
//! is one syscall on the notifier's side and no socket buffer on the listener's (the
//! benchmark measures the latency), and because the same protocol is already
//! model-checked for subscribers. The descriptor (`AsFd`) is for event loops and the
//! WaitSet; both paths can be used on one listener.
//!
//! Pool. Every iox service owns a pool; an event service's is the smallest there is
//! (one 64-byte chunk, never loaned). Decision: a minimal pool rather than teaching
//! the core to skip the pool for patterns without payload, because the open, create,
//! memfd, recovery, cleanup and inspection paths then stay one code path for every
//! pattern (the cost is one page and the `.chunks` file, or a memfd).
//!
//! Port lifecycle events (optional, fixed at creation in the static config): the
//! service emits `notifier_created_event` to its listeners when a notifier is
//! created (by that notifier's process), `notifier_dropped_event` when one is dropped,
//! and `notifier_dead_event` when a dead notifier is recovered, by whichever process
//! recovers it: any port creation on the service, an open, `iox clean`,
//! [`crate::Service::cleanup_dead_in`], or [`EventService::cleanup_dead`], which a
//! listener's process can call whenever it wants dead notifiers found now.
//!
//! Files: `id.rs` ([`EventId`]), `service.rs` (builder, [`EventService`]),
//! `layout.rs` (the pattern's part of the dynamic segment, and what the core asks of
//! it), `pending_set.rs` (one pending set and its protocol, loom-checked),
//! `pending.rs` (the fan-out of a notification), `recovery.rs`, `notifier.rs`,
//! `listener.rs`, `wait_async.rs` (`Listener::wait_async`, the `tokio` feature).

pub(crate) mod id;
pub(crate) use iox_core::shm::regions::event as layout;
pub(crate) mod listener;
pub(crate) mod notifier;
pub(crate) use iox_core::fanout as pending;
pub(crate) use iox_core::shm::pending_set;
pub(crate) mod service;
#[cfg(feature = "tokio")]
pub(crate) mod wait_async;

pub use id::EventId;
pub use listener::{ListenError, Listener, ListenerBuilder};
pub use notifier::{Notifier, NotifierBuilder, NotifyError};
pub use service::{EventBuilder, EventService};
#[cfg(feature = "tokio")]
pub use wait_async::WaitAsyncError;
