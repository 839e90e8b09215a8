//! # iox_zenoh: iox services across machines, over Zenoh
//!
//! A bridge process (`iox-zenoh`) carries selected publish-subscribe services over a
//! Zenoh session in both directions, so a subscriber on host B receives what a
//! publisher on host A sends, with no change to either program.
//!
//! - Export (local -> Zenoh, [`export`]): each local service matching an export pattern
//!   gets a bridge subscriber; each sample is one Zenoh put on `<prefix>/<name>`, its
//!   buffer the received sample itself (no copy by the bridge).
//! - Import (Zenoh -> local, [`import`]): each key matching an import pattern is
//!   published into the local service of the same name, created with the exporter's
//!   static config (fetched from the exporting bridge) or, for plain Zenoh publishers,
//!   as a `[u8]` service with [`local::DEFAULT_CLASSES`]; one copy per sample.
//! - No echo: the bridge's own publishers are told apart on receive by
//!   [`iox_service::Sample::publisher_slot`], so two bridges exporting and importing the
//!   same service neither loop nor duplicate.
//! - Names ([`keys`]): `camera/front` travels as `iox/camera/front`; every name iox
//!   accepts is a key (the grammar of `iox_service::name`); a remote name that is not
//!   one is refused, naming it.
//!
//! Waiting: one thread per export blocks in its subscriber's futex wait
//! (`receive_timeout`) and puts each sample itself; imports publish from Zenoh's
//! subscriber callbacks (the publishers move between Zenoh's threads as
//! [`iox_service::SendablePublisher`]s), and one thread per import pattern opens local
//! services off Zenoh's threads. So a sample wakes one bridge thread per direction
//! beyond Zenoh's own, and no hand-off between bridge threads. A thread per
//! export keeps a slow service from delaying others.
//!
//! The core crates never depend on this one.

pub mod bridge;
pub mod export;
pub mod import;
pub mod keys;
pub mod local;

pub use bridge::{Bridge, Options, StartError, Status};

/// Locks one of the bridge's mutexes, whatever a panicking thread left in it: each
/// holds maps that every step leaves whole (an insert, a remove, a lookup), so a
/// thread that panicked while holding one (a bug in Zenoh's callback, say) must not
/// stop every other export and import through a poisoned lock.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    /// A thread that panics while holding one of the bridge's locks leaves it usable.
    #[test]
    fn a_poisoned_lock_still_locks() {
        let m = std::sync::Arc::new(std::sync::Mutex::new(vec![1]));
        let held = std::sync::Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("a callback bug");
        })
        .join();
        assert!(m.is_poisoned());
        super::lock(&m).push(2);
        assert_eq!(*super::lock(&m), vec![1, 2]);
    }
}
