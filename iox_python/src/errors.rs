//! The exception hierarchy: `iox.Error` and its subclasses, each raised with the Rust
//! error's message (which names the service and both sides of a mismatch).
//!
//! Mapping: a payload (type or field layout), user header, memory type, limit (the
//! page size too), pattern or required attribute mismatch on open is
//! `IncompatibleService`; no such service on open is `ServiceNotFound`; an existing
//! one on create is `ServiceExists`; too few huge pages reserved for a pool on
//! `page_size("2m")` or `("1g")`, on create, is `HugePagesUnavailable`; an empty pool class is `PoolExhausted`; a loan
//! beyond `max_loans` or samples beyond `max_held` are `LimitReached`; a send refused
//! because numpy views of the loan are alive is `ViewsAlive`; a port (publisher,
//! client, server) or what it lent, used from another thread than its port's, is
//! `WrongThread`; a tensor refused
//! (its element type, shape, strides, size or memory: a loan's layout, `send_tensor`'s
//! argument, a damaged tensor record) is `TensorError`, which is also a `BufferError`
//! (what DLPack code catches), whatever the refusal. Request-response: a request sent
//! with no server connected is `NoServer`; a client at `max_active_requests_per_client`
//! or a server that has not taken the client's earlier requests is `LimitReached`; a
//! stream whose server went away (died, or dropped the request unreceived) is
//! `ServerGone`; a response to a client that went away or dropped its pending
//! response is `ClientGone`. Access policies (`access.rs`): a process the service's
//! policy does not name, refused at open, is `AccessDenied`; a reader's publisher is
//! `NotAPublisher` (an `AccessDenied` too); a policy that differs from the one asked
//! for on open is `IncompatibleService`. Everything else is `Error`.
//! DLPack's own exchange (`__dlpack__` asked for a copy, another device or a stream it
//! cannot order, an export made already) raises `BufferError`, as the protocol says.

use iox_service::{
    CreateError, LoanError, OpenError, OpenOrCreateError, PortCreateError, ReceiveError, RequestSendError,
    ResponseReceiveError, ResponseSendError,
};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    iox,
    Error,
    PyException,
    "Any error of iox (the message is iox's)."
);
create_exception!(
    iox,
    IncompatibleService,
    Error,
    "The service exists with another payload, memory type, limits or access policy, or without an attribute required of it."
);
create_exception!(
    iox,
    ServiceNotFound,
    Error,
    "`open()` of a service that does not exist."
);
create_exception!(
    iox,
    ServiceExists,
    Error,
    "`create()` of a service that exists already."
);
create_exception!(
    iox,
    PoolExhausted,
    Error,
    "No free chunk in the size class a loan needs."
);
create_exception!(
    iox,
    LimitReached,
    Error,
    "A port's limit: loans (`max_loans`), held samples (`max_held`), active requests (`max_active_requests_per_client`), or a server's queue of this client's requests."
);
create_exception!(
    iox,
    NoServer,
    Error,
    "A request sent while no server is connected to the service."
);
create_exception!(
    iox,
    ServerGone,
    Error,
    "The server handling a request went away before ending its stream of responses."
);
create_exception!(
    iox,
    ClientGone,
    Error,
    "A response to a request whose client went away or dropped its pending response."
);
create_exception!(
    iox,
    WrongThread,
    Error,
    "A port (publisher, client, server) or what it lent, used from another thread than the one that created the port."
);
create_exception!(
    iox,
    AccessDenied,
    Error,
    "The service's access policy does not let this process do that: open the service (its uid and groups are not named), or publish (`NotAPublisher`)."
);
create_exception!(
    iox,
    NotAPublisher,
    AccessDenied,
    "A publisher refused: the service's access policy makes this process a reader (it may only subscribe), or only readers held the service when this process opened it."
);
create_exception!(
    iox,
    HugePagesUnavailable,
    Error,
    "`create()` of a service on huge pages (`page_size(\"2m\")` or `\"1g\"`) the machine has not reserved enough of: the message says how many are needed and how to reserve them (`nr_hugepages`, `hugepages=` at boot)."
);
create_exception!(
    iox,
    ViewsAlive,
    Error,
    "`send()` refused: numpy views of the loan are still alive."
);

/// `iox.TensorError`, made once as the module is imported (a subclass of both
/// `iox.Error` and Python's `BufferError`, which `create_exception!` cannot make) and
/// looked up in the module where it is raised (no process-global cell: see the fork
/// handlers' rule that every process-global lock is a `ForkLock`).
fn make_tensor_error(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyType>> {
    let namespace = pyo3::types::PyDict::new(py);
    namespace.set_item("__module__", "iox")?;
    namespace.set_item(
        "__doc__",
        "A tensor refused: its element type, shape, strides, size or memory (an iox.Error and a BufferError).",
    )?;
    let bases = (
        py.get_type::<Error>(),
        py.get_type::<pyo3::exceptions::PyBufferError>(),
    );
    let made = py
        .import("builtins")?
        .getattr("type")?
        .call1(("TensorError", bases, namespace))?;
    Ok(made.cast_into::<pyo3::types::PyType>()?)
}

/// An `iox.TensorError` saying `msg`.
pub(crate) fn tensor(msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::attach(|py| {
        let ty = py
            .import("iox._iox")
            .and_then(|m| m.getattr("TensorError"))
            .and_then(|t| Ok(t.cast_into::<pyo3::types::PyType>()?));
        match ty {
            Ok(ty) => PyErr::from_type(ty, msg),
            Err(e) => e,
        }
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TensorError", make_tensor_error(py)?)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("IncompatibleService", py.get_type::<IncompatibleService>())?;
    m.add("ServiceNotFound", py.get_type::<ServiceNotFound>())?;
    m.add("ServiceExists", py.get_type::<ServiceExists>())?;
    m.add("PoolExhausted", py.get_type::<PoolExhausted>())?;
    m.add("LimitReached", py.get_type::<LimitReached>())?;
    m.add("ViewsAlive", py.get_type::<ViewsAlive>())?;
    m.add("WrongThread", py.get_type::<WrongThread>())?;
    m.add("NoServer", py.get_type::<NoServer>())?;
    m.add("ServerGone", py.get_type::<ServerGone>())?;
    m.add("ClientGone", py.get_type::<ClientGone>())?;
    m.add("AccessDenied", py.get_type::<AccessDenied>())?;
    m.add("NotAPublisher", py.get_type::<NotAPublisher>())?;
    m.add("HugePagesUnavailable", py.get_type::<HugePagesUnavailable>())?;
    Ok(())
}

pub(crate) fn open(e: &OpenError) -> PyErr {
    let msg = e.to_string();
    match e {
        OpenError::DoesNotExist(_) => ServiceNotFound::new_err(msg),
        // Declared no header where the service has one: Python can also take it from
        // the service.
        OpenError::IncompatibleUserHeader(m) if m.requested.is_none() => {
            IncompatibleService::new_err(format!(
                "{msg} (or open it with publish_subscribe() and no dtype, which takes the payload's \
             and the header's dtypes from the service's recorded schemas)"
            ))
        }
        OpenError::IncompatiblePayload { .. }
        | OpenError::IncompatibleUserHeader(_)
        | OpenError::IncompatibleSchema(_)
        | OpenError::IncompatibleMemoryType { .. }
        | OpenError::IncompatibleLimit { .. }
        | OpenError::MissingAttribute { .. }
        | OpenError::IncompatibleAttribute { .. }
        | OpenError::WrongPattern { .. }
        | OpenError::IncompatibleAccess { .. } => IncompatibleService::new_err(msg),
        OpenError::NotInAccessPolicy { .. } => AccessDenied::new_err(msg),
        _ => Error::new_err(msg),
    }
}

pub(crate) fn create(e: &CreateError) -> PyErr {
    match e {
        CreateError::AlreadyExists(_) => ServiceExists::new_err(e.to_string()),
        CreateError::HugePages { .. } => HugePagesUnavailable::new_err(e.to_string()),
        _ => Error::new_err(e.to_string()),
    }
}

pub(crate) fn open_or_create(e: &OpenOrCreateError) -> PyErr {
    match e {
        OpenOrCreateError::Open(e) => open(e),
        OpenOrCreateError::Create(e) => create(e),
        _ => Error::new_err(e.to_string()),
    }
}

/// A port (publisher, subscriber) refused.
pub(crate) fn port(e: PortCreateError) -> PyErr {
    match e {
        PortCreateError::NotAPublisher { .. } => NotAPublisher::new_err(e.to_string()),
        e => other(e),
    }
}

pub(crate) fn loan(e: &LoanError) -> PyErr {
    let msg = e.to_string();
    match e {
        LoanError::Pool(iox_mempool::LoanError::Exhausted { .. }) => PoolExhausted::new_err(msg),
        LoanError::TooManyLoans { .. } => LimitReached::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// A request's or response's loan refused (`what`: "request" or "response", whose
/// elements are `itemsize` bytes): a payload longer than the service takes is said in
/// elements, with the builder setting that decides it.
pub(crate) fn loan_of(e: &LoanError, what: &str, itemsize: usize) -> PyErr {
    match e {
        LoanError::TooManyBytes { bytes, max } => {
            let item = itemsize.max(1);
            Error::new_err(format!(
                "a {what} of {} elements ({bytes} bytes) is longer than this service takes: at \
                 most {} fit its chunks ({what}_max_len when the service was created, rounded \
                 up to whole chunks)",
                bytes / item,
                max / item
            ))
        }
        e => loan(e),
    }
}

/// A tensor loan's refusal: the layout (`TensorError`), or no chunk (as [`loan`]).
pub(crate) fn tensor_loan(e: iox_service::TensorLoanError) -> PyErr {
    match e {
        iox_service::TensorLoanError::Loan(l) => loan(&l),
        iox_service::TensorLoanError::Tensor(t) => tensor(t.to_string()),
        e => other(e),
    }
}

/// A device loan's refusal: the layout (`TensorError`), or no chunk (as [`loan`]).
#[cfg(feature = "cuda")]
pub(crate) fn device_loan(e: iox_service::DeviceLoanError) -> PyErr {
    match e {
        iox_service::DeviceLoanError::Loan(l) => loan(&l),
        iox_service::DeviceLoanError::Tensor(t) => tensor(t.to_string()),
        e => other(e),
    }
}

pub(crate) fn receive(e: &ReceiveError) -> PyErr {
    match e {
        ReceiveError::TooManyHeld { .. } => LimitReached::new_err(format!(
            "{e} (drop samples, and numpy arrays viewing them, before receiving more)"
        )),
        _ => Error::new_err(e.to_string()),
    }
}

/// A request's refusal.
pub(crate) fn request_send(e: &RequestSendError) -> PyErr {
    let msg = e.to_string();
    match e {
        RequestSendError::NoServer => NoServer::new_err(msg),
        RequestSendError::TooManyActiveRequests { .. } | RequestSendError::ServerBusy { .. } => {
            LimitReached::new_err(msg)
        }
        _ => Error::new_err(msg),
    }
}

/// A response stream's failure.
pub(crate) fn response_receive(e: &ResponseReceiveError) -> PyErr {
    match e {
        ResponseReceiveError::ServerGone => ServerGone::new_err(e.to_string()),
        _ => Error::new_err(e.to_string()),
    }
}

/// A response's refusal.
pub(crate) fn response_send(e: &ResponseSendError) -> PyErr {
    match e {
        ResponseSendError::ClientGone | ResponseSendError::Abandoned => ClientGone::new_err(e.to_string()),
        _ => Error::new_err(e.to_string()),
    }
}

/// Any other iox error.
pub(crate) fn other(e: impl std::fmt::Display) -> PyErr {
    Error::new_err(e.to_string())
}
