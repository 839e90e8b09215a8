//! Clients of request-response services (`iox.Client`), the stream of responses to one
//! request (`iox.PendingResponse`) and a received response (`iox.Response`).
//!
//! Threads: a client, its pending responses and its responses belong to the thread
//! that made the client (iox's client shares its port with them through an `Rc`); each
//! keeps its port in a [`ThreadBound`], so a call from another thread raises
//! `iox.WrongThread`, and one dropped on another thread is kept, untouched, for the
//! client's thread to drop at its next call (see `thread_bound`). A response's `array` is a read-only view
//! in place that any thread may read while the response lives; copy it
//! (`np.array(r.array)`, `r.tobytes()`) to keep the values past it or on another thread.
//!
//! Waiting: `PendingResponse.receive(timeout)` waits without the GIL in slices, looking
//! at Python's signals between them, as subscribers do; the core's wait looks at the
//! server's liveness every 10 ms, so a server that died ends the stream with
//! `iox.ServerGone` after the responses that reached the client.
//!
//! Requests are copied in (`send(data)`: one copy, as `Publisher.send`), responses
//! are read in place. Decision: no request loans from Python: a request is usually
//! small, and a loan's `ViewsAlive` rules buy little for it.

use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use iox_service::{Client, PendingResponse, RawResponse};
use numpy::PyUntypedArrayMethods;
use pyo3::exceptions::PyTimeoutError;
use pyo3::prelude::*;

use crate::spec::ArraySpec;
use crate::subscriber::wait_with;
use crate::thread_bound::{Owner, ThreadBound};
use crate::{array, errors, source};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyClient>()?;
    m.add_class::<PyPendingResponse>()?;
    m.add_class::<PyResponse>()?;
    Ok(())
}

/// The core's pending response of a raw-payload service.
type Pending = PendingResponse<[u8], [u8]>;

const CLIENT: (&str, &str) = ("Client", "client");
const PENDING: (&str, &str) = ("PendingResponse", "client");
const RESPONSE: (&str, &str) = ("Response", "client");

/// A client (`iox.Client`): sends requests, each answered by one server's stream.
#[pyclass(name = "Client", module = "iox", frozen)]
pub(crate) struct PyClient {
    inner: ThreadBound<Client<[u8], [u8]>>,
    request: Arc<ArraySpec>,
    response: Arc<ArraySpec>,
}

impl PyClient {
    pub(crate) fn new(
        py: Python<'_>,
        client: Client<[u8], [u8]>,
        request: &Arc<ArraySpec>,
        response: &Arc<ArraySpec>,
    ) -> PyResult<Self> {
        Ok(Self {
            inner: ThreadBound::new(Owner::current(py)?, CLIENT, client),
            request: request.clone(),
            response: response.clone(),
        })
    }

    /// Copies `data` into a request and sends it.
    fn send_request(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        casting: &str,
    ) -> PyResult<PyPendingResponse> {
        let client = self.inner.get()?;
        let src = source::payload(py, &self.request, data, casting, "request to this service")?;
        let bytes = src.len() * self.request.itemsize;
        let mut loan = client
            .loan_raw(bytes)
            .map_err(|e| errors::loan_of(&e, "request", self.request.itemsize))?;
        // SAFETY: the loan holds `len_bytes` bytes, ours alone; the source is a numpy
        // array outside the loaned chunk.
        unsafe { source::copy_to(&src, loan.as_mut_ptr(), loan.len_bytes()) }?;
        // SAFETY: every byte was just written with values of the recorded type (numpy's
        // conversion to the request's dtype).
        let pending = unsafe { loan.send() }.map_err(|e| errors::request_send(&e))?;
        Ok(PyPendingResponse {
            inner: ThreadBound::new(self.inner.owner().clone(), PENDING, RefCell::new(Some(pending))),
            response: self.response.clone(),
        })
    }
}

#[pymethods]
impl PyClient {
    /// Copies `data` into a request (converted as `Publisher.send` converts: to the
    /// request's dtype under numpy's `casting` rule; `bytes` as they are) and sends it
    /// to one server. Returns its `PendingResponse`. Raises `iox.NoServer` when no
    /// server is connected, `iox.LimitReached` at `max_active_requests_per_client`
    /// (close or drop a pending response first).
    #[pyo3(signature = (data, *, casting = "safe"))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, casting: &str) -> PyResult<PyPendingResponse> {
        self.send_request(py, data, casting)
    }

    /// Sends `data` and returns the first response, waiting up to `timeout` seconds
    /// (default: forever; Ctrl-C still ends it). Raises `TimeoutError` when none came
    /// in time, `iox.Error` when the server ended the request without a response,
    /// `iox.ServerGone` when it went away. Later responses of the stream are dropped.
    #[pyo3(signature = (data, *, timeout = f64::INFINITY, casting = "safe"))]
    fn call(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        timeout: f64,
        casting: &str,
    ) -> PyResult<PyResponse> {
        let pending = self.send_request(py, data, casting)?;
        match pending.next(py, Some(timeout))? {
            Some(Some(response)) => Ok(response),
            Some(None) => Err(errors::Error::new_err(
                "the server ended the request without a response",
            )),
            None => Err(PyTimeoutError::new_err(format!("no response within {timeout} s"))),
        }
    }

    /// The readiness descriptor, readable when a response (or a stream's end) may have
    /// arrived for any of this client's requests.
    fn fileno(&self) -> PyResult<i32> {
        Ok(self.inner.get()?.as_raw_fd())
    }

    /// Requests of this client whose pending responses are alive (neither closed nor
    /// dropped; a finished stream's counts until its pending response goes), out of
    /// `max_active_requests_per_client`.
    #[getter]
    fn active_requests(&self) -> PyResult<usize> {
        Ok(self.inner.get()?.active_requests())
    }

    /// Whether this port pinned the pool.
    #[getter]
    fn is_pinned(&self) -> PyResult<bool> {
        Ok(self.inner.get()?.is_pinned())
    }
}

/// The stream of responses to one request (`iox.PendingResponse`). Closing it (or
/// dropping it) before the end abandons the request: the server's next response
/// raises `iox.ClientGone` there.
#[pyclass(name = "PendingResponse", module = "iox", frozen)]
pub(crate) struct PyPendingResponse {
    /// `None` once closed.
    inner: ThreadBound<RefCell<Option<Pending>>>,
    response: Arc<ArraySpec>,
}

impl PyPendingResponse {
    /// The next step of the stream within `timeout` (as `receive`'s): `Some(Some(r))` a
    /// response, `Some(None)` the end, `None` nothing yet.
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Option<PyResponse>>> {
        let cell = self.inner.get()?;
        let slot = cell
            .try_borrow()
            .map_err(|_| errors::Error::new_err("this pending response is being closed"))?;
        let Some(pending) = slot.as_ref() else {
            return Err(errors::Error::new_err(
                "this pending response was closed; its request is abandoned",
            ));
        };
        let step = |got: Option<RawResponse>| match got {
            Some(r) => Some(Some(r)),
            None if pending.is_finished() => Some(None),
            None => None,
        };
        let got = wait_with(
            py,
            timeout,
            || pending.receive_raw().map(step),
            |slice| pending.receive_timeout_raw(slice).map(step),
            |e| errors::response_receive(&e),
        )?;
        let owner = self.inner.owner();
        Ok(got.map(|step| {
            step.map(|r| PyResponse {
                ptr: r.as_ptr() as usize,
                nbytes: r.len_bytes(),
                inner: ThreadBound::new(owner.clone(), RESPONSE, r),
                spec: self.response.clone(),
            })
        }))
    }
}

#[pymethods]
impl PyPendingResponse {
    /// The next response, or `None`: nothing yet, or the end of the stream
    /// (`is_finished` tells which). `timeout=None` (the default) does not wait; a
    /// number of seconds waits up to that long (`math.inf`: forever), without the GIL
    /// and waking for Ctrl-C; the end of the stream returns at once. Raises
    /// `iox.ServerGone` once, after the responses that arrived, when the server went away.
    #[pyo3(signature = (timeout = None))]
    fn receive(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyResponse>> {
        Ok(self.next(py, timeout)?.flatten())
    }

    /// Whether the stream ended: the server finished the request and every response
    /// was received, or the server is gone.
    #[getter]
    fn is_finished(&self) -> PyResult<bool> {
        let cell = self.inner.get()?;
        Ok(cell.borrow().as_ref().is_none_or(|p| p.is_finished()))
    }

    /// Whether the stream ended because the server went away.
    #[getter]
    fn is_server_gone(&self) -> PyResult<bool> {
        let cell = self.inner.get()?;
        Ok(cell.borrow().as_ref().is_some_and(|p| p.is_server_gone()))
    }

    /// The client's readiness descriptor (shared by its pending responses).
    fn fileno(&self) -> PyResult<i32> {
        let cell = self.inner.get()?;
        match cell.borrow().as_ref() {
            Some(p) => Ok(p.as_raw_fd()),
            None => Err(errors::Error::new_err("this pending response was closed")),
        }
    }

    /// Abandons the request (if its stream has not ended): the server's next response
    /// raises `iox.ClientGone`, and responses already queued are released.
    fn close(&self) -> PyResult<()> {
        let cell = self.inner.get()?;
        let taken = cell
            .try_borrow_mut()
            .map_err(|_| errors::Error::new_err("this pending response is in use (receiving)"))?
            .take();
        drop(taken);
        Ok(())
    }

    /// The responses until the end of the stream, each waited for without a timeout.
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyResponse>> {
        Ok(self.next(py, Some(f64::INFINITY))?.flatten())
    }

    /// `await pending.receive_async()`: the next response, or `None` at the end of the
    /// stream, waiting in the running asyncio loop (see `iox._aio`).
    fn receive_async<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("iox._aio")?
            .getattr("response_async")?
            .call1((slf,))
    }

    /// `async for response in pending`: the responses until the end of the stream.
    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("iox._aio")?
            .getattr("next_response_async")?
            .call1((slf,))
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Closes it; does not suppress exceptions.
    fn __exit__(
        &self,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }
}

/// A received response (`iox.Response`): holds its chunk until it and every array
/// viewing it are gone.
#[pyclass(name = "Response", module = "iox", frozen)]
pub(crate) struct PyResponse {
    /// Held for its chunk; dropped on the client's thread.
    #[allow(dead_code)]
    inner: ThreadBound<RawResponse>,
    ptr: usize,
    nbytes: usize,
    spec: Arc<ArraySpec>,
}

#[pymethods]
impl PyResponse {
    /// A read-only numpy view of the response, in place: a 0-d array for one value, a
    /// 1-D array for a slice. It keeps the response, hence its chunk, alive.
    #[getter]
    fn array<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let me = slf.get();
        // SAFETY: the chunk holds `nbytes` bytes of the recorded response type (the
        // receive checked them against the chunk), aligned for it, and dtype x shape is
        // that size; the response (the base) holds the chunk until it is destroyed, and
        // the view is read-only (a server does not write a sent response).
        unsafe {
            array::payload_view(
                slf.py(),
                &me.spec,
                me.ptr as *const u8,
                me.nbytes,
                slf.clone().into_any(),
            )
        }
    }
    /// Payload bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    /// A copy of the payload as `bytes`.
    fn tobytes<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::array(slf)?.call_method0("tobytes")
    }
    fn __len__(&self) -> usize {
        self.spec.shape_for(self.nbytes).first().copied().unwrap_or(1)
    }
    fn __repr__(&self) -> String {
        format!("<iox.Response {} bytes>", self.nbytes)
    }
}
