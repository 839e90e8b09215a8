//! The exception hierarchy: `iox.Error` and its subclasses, each raised with the Rust
//! error's message (which names the service and both sides of a mismatch).
//!
//! Mapping: a payload (type or field layout), user header, memory type, limit, pattern
//! or required attribute mismatch on open is `IncompatibleService`; no such service on open is `ServiceNotFound`; an existing
//! one on create is `ServiceExists`; an empty pool class is `PoolExhausted`; a loan
//! beyond `max_loans` or samples beyond `max_held` are `LimitReached`; a send refused
//! because numpy views of the loan are alive is `ViewsAlive`; a publisher or loan
//! used from another thread than its publisher's is `WrongThread`; everything else
//! is `Error`.

use iox_service::{CreateError, LoanError, OpenError, OpenOrCreateError, ReceiveError};
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
    "The service exists with another payload, memory type or limits, or without an attribute required of it."
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
    "A port's limit: loans (`max_loans`) or held samples (`max_held`)."
);
create_exception!(
    iox,
    WrongThread,
    Error,
    "A publisher or loan used from another thread than the one that created the publisher."
);
create_exception!(
    iox,
    ViewsAlive,
    Error,
    "`send()` refused: numpy views of the loan are still alive."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("IncompatibleService", py.get_type::<IncompatibleService>())?;
    m.add("ServiceNotFound", py.get_type::<ServiceNotFound>())?;
    m.add("ServiceExists", py.get_type::<ServiceExists>())?;
    m.add("PoolExhausted", py.get_type::<PoolExhausted>())?;
    m.add("LimitReached", py.get_type::<LimitReached>())?;
    m.add("ViewsAlive", py.get_type::<ViewsAlive>())?;
    m.add("WrongThread", py.get_type::<WrongThread>())?;
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
        | OpenError::WrongPattern { .. } => IncompatibleService::new_err(msg),
        _ => Error::new_err(msg),
    }
}

pub(crate) fn create(e: &CreateError) -> PyErr {
    match e {
        CreateError::AlreadyExists(_) => ServiceExists::new_err(e.to_string()),
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

pub(crate) fn loan(e: &LoanError) -> PyErr {
    let msg = e.to_string();
    match e {
        LoanError::Pool(iox_mempool::LoanError::Exhausted { .. }) => PoolExhausted::new_err(msg),
        LoanError::TooManyLoans { .. } => LimitReached::new_err(msg),
        _ => Error::new_err(msg),
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

/// Any other iox error.
pub(crate) fn other(e: impl std::fmt::Display) -> PyErr {
    Error::new_err(e.to_string())
}
