//! Moving a publisher to another thread: [`SendablePublisher`].
//!
//! A [`Publisher`] is not `Send` because it shares its port's state with its loans
//! through an `Rc`, and the send path keeps state in `Cell`s (see the module docs of
//! `publisher`). Both reasons concern sharing, not the thread itself: a publisher with
//! *no* loan alive is the only holder of its port, and nothing in the port is tied to
//! the thread that made it (the pool, the mapping, the pin guard, the readiness
//! connections are all `Send`, which a compile-time check below keeps true). So a
//! publisher without loans may move, whole, to another thread.
//!
//! [`Publisher::into_sendable`] checks that no loan is alive and wraps the publisher;
//! the wrapper is `Send` (not `Sync`) and offers nothing but turning back into a
//! `Publisher` on the thread that now holds it. That is what an event loop whose
//! callbacks run on changing threads needs (the Zenoh bridge publishes from Zenoh's
//! callbacks this way: the wrapper in a `Mutex`, taken out, used, put back).
//!
//! Decision: a conversion rather than a `Send` publisher type with its own send
//! methods, so that no loan can ever be made from a publisher that might move while
//! the loan stays behind (a loan holds a reference to the port).

use std::rc::Rc;

use super::{Publisher, PublisherPort};

/// A [`Publisher`] with no loan alive, which may move to another thread. Made by
/// [`Publisher::into_sendable`]; used after [`SendablePublisher::into_publisher`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use iox_service::Service;
/// let svc = Service::named("doc/sendable")?
///     .root(dir.path())
///     .publish_subscribe::<u64>()
///     .create()?;
/// let subscriber = svc.subscriber_builder().create()?;
/// let moving = svc.publisher_builder().create()?.into_sendable().unwrap();
/// std::thread::spawn(move || {
///     let publisher = moving.into_publisher();
///     publisher.loan_uninit().unwrap().write_payload(7).send().unwrap();
/// })
/// .join()
/// .unwrap();
/// assert_eq!(*subscriber.receive()?.unwrap(), 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SendablePublisher<P: ?Sized, H = ()>(Publisher<P, H>);

// SAFETY: the publisher's only non-`Send` parts are the `Rc` of its port and the
// `Cell`s inside the port. `into_sendable` builds this wrapper only when the `Rc` has
// no other strong reference (no loan alive) and no weak one (none are ever made), and
// the wrapper gives no access to the publisher until it is turned back with
// `into_publisher` on the receiving thread: so all references to the port, and every
// `Cell` in it, move together and are used by one thread at a time. The port's other
// contents are `Send` (checked at compile time below), so nothing thread-bound moves.
unsafe impl<P: ?Sized, H> Send for SendablePublisher<P, H> {}

/// The port's contents must stay `Send` for the `unsafe impl` above to hold.
const _: fn() = || {
    fn is_send<T: Send>() {}
    is_send::<PublisherPort>();
};

impl<P: ?Sized, H> Publisher<P, H> {
    /// Wraps this publisher so that it can move to another thread; gives it back
    /// (`Err`) if a loan of it is alive, since the loan would stay behind holding a
    /// reference to the port. See [`SendablePublisher`].
    pub fn into_sendable(self) -> Result<SendablePublisher<P, H>, Self> {
        if Rc::strong_count(&self.port) == 1 && Rc::weak_count(&self.port) == 0 {
            Ok(SendablePublisher(self))
        } else {
            Err(self)
        }
    }
}

impl<P: ?Sized, H> SendablePublisher<P, H> {
    /// The publisher, to use on the thread that now holds it.
    pub fn into_publisher(self) -> Publisher<P, H> {
        self.0
    }
}
