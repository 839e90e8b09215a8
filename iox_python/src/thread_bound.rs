//! Ports that belong to one thread, reachable from Python objects that may travel.
//!
//! iox's publishers, clients and servers are not `Send` (one send journal per port;
//! a client's pending responses and received responses share its port through an
//! `Rc`). Python objects, though, can be handed to any thread. Two tools keep the
//! port on its thread:
//!
//! - [`Owner`]: the thread a port belongs to, and the `iox.WrongThread` error naming
//!   it (by its Python name) when another thread calls.
//! - [`ThreadBound`]: a value reachable only from its owner thread. Every access checks
//!   the thread first ([`ThreadBound::get`]); dropped on another thread (the last
//!   reference to its Python object gone there), the value is leaked with a
//!   `RuntimeWarning` rather than touched from the wrong thread: its port or chunk
//!   stays taken until the process exits, when crash recovery reclaims it.
//!   (Not the `send_wrapper` crate: it panics on a foreign access or drop, where
//!   Python needs an exception and a leak.)
//! - [`detached`]: runs a closure over such values with the GIL released, on this
//!   same thread (pyo3's `detach` asks `Send` of what the closure captures, which
//!   these values are not; they never leave the thread, so nothing is shared).
//!
//! Invariant: a `ThreadBound`'s value is created, used and dropped on its owner
//! thread only, so the values' `Rc`s and `Cell`s are never touched concurrently.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::thread::ThreadId;

use pyo3::prelude::*;

use crate::errors;

/// The thread a port (and what it lends) belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    id: ThreadId,
    /// Its Python name (`threading.current_thread().name`), for messages.
    name: Arc<str>,
}

impl Owner {
    /// The calling thread.
    pub(crate) fn current(py: Python<'_>) -> PyResult<Self> {
        let thread = py.import("threading")?.call_method0("current_thread")?;
        Ok(Self {
            id: std::thread::current().id(),
            name: thread.getattr("name")?.extract::<String>()?.into(),
        })
    }

    /// Whether the calling thread is the owner.
    pub(crate) fn is_current(&self) -> bool {
        std::thread::current().id() == self.id
    }

    /// `Ok` on the owner thread; `iox.WrongThread` naming it elsewhere. `what` is the
    /// object called ("Client"), `port` the kind of port that made it ("client").
    pub(crate) fn check(&self, what: &str, port: &str) -> PyResult<()> {
        if self.is_current() {
            return Ok(());
        }
        Err(errors::WrongThread::new_err(format!(
            "this {what} belongs to thread {:?}, which created the {port}: an iox {port} and \
             what it lends are used from one thread; call it from that thread, or create a \
             {port} in this one (svc.{port}())",
            self.name
        )))
    }
}

/// A value reachable from its owner thread only (see the module docs).
pub(crate) struct ThreadBound<T> {
    owner: Owner,
    /// What it names in `WrongThread` messages: the object and the port kind.
    what: (&'static str, &'static str),
    value: ManuallyDrop<T>,
}

// SAFETY: the value is reached only through `get`, which checks
// that the calling thread is the owner, and dropped only on the owner thread (leaked
// elsewhere): so it is never used from two threads, whatever `T` is.
unsafe impl<T> Send for ThreadBound<T> {}
// SAFETY: as for `Send`: a shared reference gives access to the value only on the
// owner thread.
unsafe impl<T> Sync for ThreadBound<T> {}

impl<T> ThreadBound<T> {
    /// `value`, owned by `owner` (which must be the calling thread).
    pub(crate) fn new(owner: Owner, what: (&'static str, &'static str), value: T) -> Self {
        debug_assert!(owner.is_current(), "a ThreadBound is made on its owner thread");
        Self {
            owner,
            what,
            value: ManuallyDrop::new(value),
        }
    }

    /// The value, on the owner thread; `iox.WrongThread` elsewhere.
    pub(crate) fn get(&self) -> PyResult<&T> {
        self.owner.check(self.what.0, self.what.1)?;
        Ok(&self.value)
    }

    /// The owner thread.
    pub(crate) fn owner(&self) -> &Owner {
        &self.owner
    }
}

impl<T> Drop for ThreadBound<T> {
    fn drop(&mut self) {
        if self.owner.is_current() {
            // SAFETY: dropped once, here, on the owner thread; never used again.
            unsafe { ManuallyDrop::drop(&mut self.value) };
            return;
        }
        // Leaked: its port or chunk stays taken until the process exits.
        let msg = format!(
            "an iox {} was dropped on another thread than its {}'s ({:?}); what it holds stays \
             taken until this process exits (drop it on its own thread)",
            self.what.0, self.what.1, self.owner.name
        );
        Python::attach(|py| {
            // Dropped while an exception may be on its way (a dealloc inside a failing
            // expression): the warning must not replace it.
            let pending = PyErr::take(py);
            let _ = PyErr::warn(
                py,
                &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(),
                &std::ffi::CString::new(msg).unwrap_or_default(),
                1,
            );
            if let Some(e) = pending {
                e.restore(py);
            }
        });
    }
}

/// Runs `f(value)` with the GIL released, on this thread, and returns what it returns:
/// for ports and results that are not `Send` (see the module docs).
///
/// # Safety
/// Neither `value`, `f` nor what `f` returns holds a `Python` token, a `Bound` or
/// `Borrowed` reference, or anything else that needs the GIL to be used or dropped
/// (`f` runs, and drops what it does not return, without it): pyo3's `Send` bound on
/// `detach`, which this bypasses, is what checks that otherwise.
pub(crate) unsafe fn detached<V, R>(py: Python<'_>, value: V, f: impl FnOnce(V) -> R) -> R {
    /// Carries the closure and its result across `detach`, which runs its closure on
    /// the calling thread.
    struct SameThread<X>(X);
    // SAFETY: `Python::detach` runs its closure on the calling thread and returns on
    // it; the wrapped values never reach another thread.
    unsafe impl<X> Send for SameThread<X> {}
    impl<X> SameThread<X> {
        // A method, so the closure below captures the whole wrapper, not its field.
        fn into_inner(self) -> X {
            self.0
        }
    }
    let call = SameThread((value, f));
    py.detach(move || {
        let (value, f) = call.into_inner();
        SameThread(f(value))
    })
    .into_inner()
}
