//! `iox` for Python: the extension module `iox._iox` (the package `iox` in
//! `python/iox/` wraps it with the builder API, asyncio helpers and a WaitSet).
//!
//! What lives here: the ports and samples (`pubsub`, `event`), blackboards
//! (`blackboard`), request-response services, clients and servers (`reqres`,
//! `client`, `server`), service attributes (`attributes`), access policies
//! (`access`), numpy views of chunks
//! (`array`), and the exception hierarchy (`errors`). The payload's numpy dtype and
//! shape are decided in Python (`iox/_types.py`) and arrive here as a
//! [`iox_service::PayloadType`] plus a dtype and shape; the service is a `[u8]` service
//! that records that payload type (`PubSubBuilder::raw_payload_type`), so Rust
//! programs that use the real type share it, and the dtype's field layout as a
//! schema (`schema`, `PubSubBuilder::payload_schema`), so Rust tools read its fields
//! and a service Rust created opens without a dtype (its schema gives one). A user
//! header dtype (`user_header=`) is recorded the same way (`raw_user_header`), and
//! loans and samples view it in place beside the payload (`pubsub`, `publisher`).
//!
//! Threading rule: a publisher and its loans, and a client or server and what it gives
//! out, belong to the thread that made the port (using them from another thread raises
//! `iox.WrongThread`, see `thread_bound.rs`); one dropped on another thread is kept,
//! untouched, for its thread to drop at its next call.
//! Services, subscribers, samples, listeners and notifiers may be used from any
//! thread; blocking calls (`receive(timeout=...)`, `Listener.wait`, opening a
//! service) release the GIL.

mod access;
mod array;
mod attributes;
mod blackboard;
mod client;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod device_publisher;
mod dlpack;
mod errors;
mod event;
mod inspect;
mod publisher;
mod pubsub;
mod reqres;
mod schema;
mod server;
mod source;
mod spec;
mod subscriber;
mod tensor;
mod thread_bound;

use pyo3::prelude::*;

#[pymodule]
fn _iox(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    access::register(m)?;
    pubsub::register(m)?;
    publisher::register(m)?;
    event::register(m)?;
    blackboard::register(m)?;
    reqres::register(m)?;
    #[cfg(feature = "cuda")]
    device::register(m)?;
    #[cfg(feature = "cuda")]
    device_publisher::register(m)?;
    tensor::register(m)?;
    inspect::register(m)?;
    m.add_function(wrap_pyfunction!(check_name, m)?)?;
    // Threads waiting in iox at exit park instead of taking the GIL back (see
    // `thread_bound::park_if_finalizing`).
    let hook = wrap_pyfunction!(thread_bound::_finalizing, m)?;
    m.py().import("atexit")?.call_method1("register", (hook,))?;
    // The version of the Rust crates this extension was built from (the package's
    // version: pyproject.toml carries the same, checked by examples/tests/versions.rs).
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// Raises `iox.Error` with the rule if `name` is not a valid service name (what
/// `iox.Service(name)` checks at once).
#[pyfunction]
fn check_name(name: &str) -> PyResult<()> {
    iox_service::ServiceName::new(name)
        .map(drop)
        .map_err(errors::other)
}
