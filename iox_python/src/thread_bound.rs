//! Ports that belong to one thread, reachable from Python objects that may travel.
//!
//! iox's publishers, clients and servers are not `Send` (one send journal per port;
//! a client's pending responses and received responses share its port through an
//! `Rc`). Python objects, though, can be handed to any thread. Three tools keep the
//! port on its thread:
//!
//! - [`Owner`]: the thread a port belongs to, and the `iox.WrongThread` error naming
//!   it (by its Python name) when another thread calls.
//! - [`ThreadBound`]: a value reachable only from its owner thread. Every access checks
//!   the thread first ([`ThreadBound::get`]). Dropped on another thread (the last
//!   reference to its Python object gone there, or a garbage collection of a cycle
//!   running there), the value is not touched: it is moved, as it is, to a list of
//!   values kept for their owner thread, which drops them at its next call that reaches
//!   a `ThreadBound` (so a response handed to a worker thread is released when the
//!   client's thread next calls iox). A value whose owner thread has ended stays there
//!   until the process exits, when crash recovery reclaims what it held.
//!   (Not the `send_wrapper` crate: it panics on a foreign access or drop, where
//!   Python needs an exception and a deferred drop.)
//! - [`detached`]: runs a closure over such values with the GIL released, on this
//!   same thread (pyo3's `detach` asks `Send` of what the closure captures, which
//!   these values are not; they never leave the thread, so nothing is shared). Once
//!   the interpreter finalizes (an `atexit` hook), a thread other than the finalizing
//!   one that comes back from such a wait parks instead of taking the GIL again.
//!
//! Invariant: a `ThreadBound`'s value is created, used and dropped on its owner
//! thread only (moving it, untouched, to the kept list is not a use), so the values'
//! `Rc`s and `Cell`s are never touched concurrently.

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::ThreadId;

use iox_mempool::fork::{ForkLock, Rank};

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
            id: this_thread(),
            name: thread.getattr("name")?.extract::<String>()?.into(),
        })
    }

    /// Whether the calling thread is the owner.
    pub(crate) fn is_current(&self) -> bool {
        this_thread() == self.id
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

/// The calling thread's id, read from a thread-local (`std::thread::current()` clones
/// a handle, an atomic step each way, on every port call otherwise).
fn this_thread() -> ThreadId {
    thread_local! {
        static ME: ThreadId = std::thread::current().id();
    }
    ME.with(|me| *me)
}

/// A value reachable from its owner thread only (see the module docs).
pub(crate) struct ThreadBound<T: 'static> {
    owner: Owner,
    /// What it names in `WrongThread` messages: the object and the port kind.
    what: (&'static str, &'static str),
    value: ManuallyDrop<T>,
}

// SAFETY: the value is reached only through `get`, which checks that the calling
// thread is the owner, and dropped only on the owner thread (elsewhere it is moved,
// untouched, to `KEPT` for its owner): so it is never used from two threads,
// whatever `T` is.
unsafe impl<T> Send for ThreadBound<T> {}
// SAFETY: as for `Send`: a shared reference gives access to the value only on the
// owner thread.
unsafe impl<T> Sync for ThreadBound<T> {}

impl<T> ThreadBound<T> {
    /// `value`, owned by `owner` (which must be the calling thread).
    pub(crate) fn new(owner: Owner, what: (&'static str, &'static str), value: T) -> Self {
        debug_assert!(owner.is_current(), "a ThreadBound is made on its owner thread");
        drop_kept();
        Self {
            owner,
            what,
            value: ManuallyDrop::new(value),
        }
    }

    /// The value, on the owner thread; `iox.WrongThread` elsewhere. Drops the values
    /// other threads kept for this one first.
    pub(crate) fn get(&self) -> PyResult<&T> {
        self.owner.check(self.what.0, self.what.1)?;
        drop_kept();
        Ok(&self.value)
    }

    /// The owner thread.
    pub(crate) fn owner(&self) -> &Owner {
        &self.owner
    }
}

impl<T> Drop for ThreadBound<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.value` is not used again.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        if self.owner.is_current() {
            drop(value);
            drop_kept();
            return;
        }
        let kept = Kept {
            owner: self.owner.id,
            value: Box::new(value),
        };
        KEPT.lock().push(kept);
        KEPT_COUNT.fetch_add(1, Ordering::Release);
    }
}

/// A value dropped on another thread than its owner, kept for the owner.
struct Kept {
    owner: ThreadId,
    /// Held only to be dropped on its owner thread.
    #[allow(dead_code)]
    value: Box<dyn std::any::Any>,
}

// SAFETY: the boxed value was moved here untouched and is only moved again until its
// owner thread takes it out and drops it (`drop_kept`): no thread but the owner ever
// uses it.
unsafe impl Send for Kept {}

/// Values kept for their owner threads, and how many (read without the lock).
static KEPT: ForkLock<Vec<Kept>> = ForkLock::new(Rank::PythonDeferredDrops, Vec::new());
static KEPT_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Drops the values other threads kept for this one (after releasing the lock: their
/// drops take other locks).
fn drop_kept() {
    if KEPT_COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let me = this_thread();
    let mine: Vec<Kept> = {
        let mut kept = KEPT.lock();
        let (mine, others) = std::mem::take(&mut *kept)
            .into_iter()
            .partition(|k| k.owner == me);
        *kept = others;
        KEPT_COUNT.fetch_sub(mine.len(), Ordering::Release);
        mine
    };
    drop(mine);
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
        let result = f(value);
        park_if_finalizing();
        SameThread(result)
    })
    .into_inner()
}

/// Set by the module's `atexit` hook: the interpreter is finalizing.
static FINALIZING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Whether this thread ran the `atexit` hook (the thread that finalizes).
    static FINALIZER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Called by `atexit` (registered when the module loads): from now on a thread other
/// than this one that comes back from a wait without the GIL does not take it again.
#[pyfunction]
pub(crate) fn _finalizing() {
    FINALIZER.with(|f| f.set(true));
    FINALIZING.store(true, Ordering::Release);
}

/// Parks this thread for good if the interpreter is finalizing and this is not the
/// finalizing thread: CPython (before 3.14) ends a thread that takes the GIL again
/// then with `pthread_exit`, whose forced unwinding cannot cross Rust frames (the
/// process aborted, "exception not rethrown", when a daemon thread was waiting in iox
/// at exit). Parked, it ends with the process.
fn park_if_finalizing() {
    if FINALIZING.load(Ordering::Acquire) && !FINALIZER.with(std::cell::Cell::get) {
        loop {
            std::thread::park();
        }
    }
}
