//! Request-response services from Python: opening them (`open_request_response`,
//! called by `iox.RequestResponseBuilder` in `iox/_request_response.py`) and their
//! handle, `iox.RequestResponseService`, which makes clients (`client.rs`) and servers
//! (`server.rs`).
//!
//! A service is a `[u8]`-both-ways service recording the request and response types
//! Python derived from each side's dtype (`raw_payload_types`), so Rust and C/C++
//! programs that use the real types share it: one value of a dtype or an `iox.Type`
//! (typed), or a slice of them (`bytes`, or a dtype with `request_max_len` /
//! `response_max_len`). Request-response services record no field layout (Rust's
//! builder records none for them), so every program declares both types; a mismatch
//! is `IncompatibleService` naming both sides, as for publish-subscribe.

use std::sync::Arc;
use std::time::Duration;

use iox_service::{PayloadType, RequestResponseBuilder, RequestResponseService, Service};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::client::PyClient;
use crate::server::PyServer;
use crate::spec::{ArraySpec, any_bit_pattern, memory_type};
use crate::{attributes, errors};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open_request_response, m)?)?;
    m.add_class::<PyRequestResponseService>()?;
    crate::client::register(m)?;
    crate::server::register(m)?;
    Ok(())
}

/// One side's type from Python: `(kind, type name, element size, alignment, dtype)`,
/// kind `"typed"` (one value) or `"slice"` (any number of elements).
type Side<'py> = (String, String, u64, u64, Bound<'py, PyArrayDescr>);

/// The payload type `side` records, and the arrays it reads and writes.
fn side_type(side: Side<'_>, what: &str) -> PyResult<(PayloadType, ArraySpec)> {
    let (kind, type_name, size, alignment, dtype) = side;
    if dtype.has_subarray() || dtype.has_object() || dtype.itemsize() == 0 || dtype.itemsize() as u64 != size
    {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} dtype {dtype}: a request or response is a value of a sized dtype without \
             Python objects, not a sub-array (give a struct, or a slice with {what}_max_len)"
        )));
    }
    let invalid_bit_patterns = !any_bit_pattern(&dtype);
    let (payload, shape) = match kind.as_str() {
        "typed" => (
            PayloadType::Typed {
                type_name,
                size,
                alignment,
                invalid_bit_patterns,
            },
            Some(Vec::new()),
        ),
        "slice" => (
            PayloadType::Slice {
                element: type_name,
                size,
                alignment,
                invalid_bit_patterns,
            },
            None,
        ),
        _ => return Err(PyValueError::new_err(format!("unknown {what} kind {kind:?}"))),
    };
    let itemsize = dtype.itemsize();
    let spec = ArraySpec {
        dtype: dtype.unbind(),
        shape,
        itemsize,
        header: None,
    };
    Ok((payload, spec))
}

/// `opts[key]` unless missing or `None`.
fn opt<'py>(opts: &Bound<'py, PyDict>, key: &str) -> Option<Bound<'py, PyAny>> {
    opts.get_item(key).ok().flatten().filter(|v| !v.is_none())
}

/// Opens, creates or opens-or-creates (`mode`) request-response service `name` with
/// requests of `request` and responses of `response`, and the settings in `opts`.
#[pyfunction]
#[pyo3(signature = (name, mode, request, response, opts))]
fn open_request_response(
    py: Python<'_>,
    name: &str,
    mode: &str,
    request: Side<'_>,
    response: Side<'_>,
    opts: &Bound<'_, PyDict>,
) -> PyResult<PyRequestResponseService> {
    let (request_type, request) = side_type(request, "request")?;
    let (response_type, response) = side_type(response, "response")?;
    let mut service = Service::named(name).map_err(errors::other)?;
    if let Some(root) = opt(opts, "root") {
        service = service.root(root.extract::<std::path::PathBuf>()?);
    }
    // SAFETY: the ports built from this service (`client.rs`, `server.rs`) loan only
    // with `loan_raw`, receive only with `receive_raw` / `receive_timeout_raw`, and
    // read payloads only through their addresses (numpy views and copies), as
    // `raw_payload_types` requires.
    let mut b: RequestResponseBuilder<[u8], [u8]> = unsafe {
        service
            .request_response::<[u8], [u8]>()
            .raw_payload_types(request_type, response_type)
    };
    let get = |k: &str| opt(opts, k);
    if let Some(v) = get("memory_type") {
        b = b.memory_type(memory_type(v.extract()?)?);
    }
    macro_rules! limit {
        ($($key:ident),*) => {$(
            if let Some(v) = get(stringify!($key)) {
                b = b.$key(v.extract()?);
            }
        )*};
    }
    limit!(
        max_clients,
        max_servers,
        max_active_requests_per_client,
        max_response_buffer,
        permissions
    );
    // In elements of the recorded types (the builder multiplies by their sizes).
    if let Some(v) = get("request_max_len") {
        b = b.request_slice_len(v.extract()?);
    }
    if let Some(v) = get("response_max_len") {
        b = b.response_slice_len(v.extract()?);
    }
    if let Some(v) = get("timeout") {
        b = b.timeout(Duration::from_secs_f64(v.extract()?));
    }
    let b = attributes::apply(b, opts)?;
    // Opening may wait for a service another process is creating: without the GIL.
    let inner = py.detach(|| match mode {
        "open" => b.open().map_err(|e| errors::open(&e)),
        "create" => b.create().map_err(|e| create_error(&e)),
        _ => b.open_or_create().map_err(|e| match e {
            iox_service::OpenOrCreateError::Create(c) => create_error(&c),
            e => errors::open_or_create(&e),
        }),
    })?;
    Ok(PyRequestResponseService {
        inner,
        request: Arc::new(request),
        response: Arc::new(response),
    })
}

/// A create's refusal, with Python's name for a slice's missing length.
fn create_error(e: &iox_service::CreateError) -> PyErr {
    match e {
        iox_service::CreateError::MissingSliceSize(name, _) => errors::Error::new_err(format!(
            "request-response service {name:?} carries slices: to create it, give the longest \
             request and response in elements, request_response(..., request_max_len=N, \
             response_max_len=M)"
        )),
        e => errors::create(e),
    }
}

/// An open request-response service (`iox.RequestResponseService`).
#[pyclass(name = "RequestResponseService", module = "iox", frozen)]
pub(crate) struct PyRequestResponseService {
    inner: RequestResponseService<[u8], [u8]>,
    request: Arc<ArraySpec>,
    response: Arc<ArraySpec>,
}

#[pymethods]
impl PyRequestResponseService {
    /// The service name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    /// The request type as recorded, e.g. `"u64 (size 8, alignment 8)"`.
    #[getter]
    fn request_type(&self) -> String {
        self.inner.static_config().payload.to_string()
    }
    /// The response type as recorded.
    #[getter]
    fn response_type(&self) -> String {
        self.inner.request_response_config().response.to_string()
    }
    /// The dtype of requests' elements.
    #[getter]
    fn request_dtype(&self, py: Python<'_>) -> Py<PyArrayDescr> {
        self.request.dtype.clone_ref(py)
    }
    /// The dtype of responses' elements.
    #[getter]
    fn response_dtype(&self, py: Python<'_>) -> Py<PyArrayDescr> {
        self.response.dtype.clone_ref(py)
    }
    /// Whether this handle created the service.
    #[getter]
    fn is_creator(&self) -> bool {
        self.inner.is_creator()
    }
    /// The attributes the service's creator recorded: a new dict, key to value.
    #[getter]
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        attributes::to_dict(py, self.inner.attributes())
    }
    /// `(clients, servers)` connected now.
    fn port_counts(&self) -> (usize, usize) {
        self.inner.port_counts()
    }
    /// Requests sent and not yet ended or released, by every client (a snapshot).
    fn requests_in_flight(&self) -> usize {
        self.inner.requests_in_flight()
    }
    /// A client, owned by the calling thread (see `iox.Client`). `pin=True` pins the
    /// pool for this port.
    #[pyo3(signature = (pin = false))]
    fn client(&self, py: Python<'_>, pin: bool) -> PyResult<PyClient> {
        let client = self
            .inner
            .client_builder()
            .pin_memory(pin)
            .create()
            .map_err(errors::other)?;
        PyClient::new(py, client, &self.request, &self.response)
    }
    /// A server, owned by the calling thread (see `iox.Server`). `pin=True` pins the
    /// pool for this port.
    #[pyo3(signature = (pin = false))]
    fn server(&self, py: Python<'_>, pin: bool) -> PyResult<PyServer> {
        let server = self
            .inner
            .server_builder()
            .pin_memory(pin)
            .create()
            .map_err(errors::other)?;
        PyServer::new(py, server, &self.request, &self.response)
    }
    fn __repr__(&self) -> String {
        format!(
            "<iox.RequestResponseService {:?}: {} -> {}>",
            self.inner.name(),
            self.inner.static_config().payload,
            self.inner.request_response_config().response
        )
    }
}
