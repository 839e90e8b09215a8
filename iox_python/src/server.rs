//! Servers of request-response services (`iox.Server`) and the requests they handle
//! (`iox.ActiveRequest`).
//!
//! Threads: as for clients (see `client.rs`): a server and its requests belong to the
//! thread that made the server; another thread's call raises `iox.WrongThread`.
//!
//! A request's stream. `req.respond(data)` copies one response in and sends it (any
//! number of times: a stream); `req.finish()`, leaving `with server.receive(...) as
//! req:`, or dropping the last reference ends the stream, after which the client's
//! `PendingResponse` reports the end. A respond to a client whose queue is full waits
//! for it without the GIL (the core's rule: a stream is useful only complete), and
//! raises `iox.ClientGone` when the client went away or closed its pending response:
//! stop working on that request.
//!
//! Views. `req.array` is a read-only view of the request in place, whose base is the
//! request's cell (`_RequestCell`, which holds the request), so the chunk stays while
//! any view lives. Ending the stream releases the chunk, so `finish()` is refused
//! (`iox.ViewsAlive`) while views of the request are alive; leaving a `with` block or
//! dropping the request ends the stream once the last view is gone.

use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use iox_service::{RawActiveRequest, ResponseSendError, Server};
use numpy::PyUntypedArrayMethods;
use pyo3::prelude::*;

use crate::spec::ArraySpec;
use crate::subscriber::{SIGNAL_SLICE, wait_with};
use crate::thread_bound::{Owner, ThreadBound, detached};
use crate::{array, errors, source};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyServer>()?;
    m.add_class::<RequestCell>()?;
    m.add_class::<PyActiveRequest>()?;
    Ok(())
}

const SERVER: (&str, &str) = ("Server", "server");
const REQUEST: (&str, &str) = ("ActiveRequest", "server");

/// A server (`iox.Server`): takes requests and answers each with a stream.
#[pyclass(name = "Server", module = "iox", frozen)]
pub(crate) struct PyServer {
    inner: ThreadBound<Server<[u8], [u8]>>,
    request: Arc<ArraySpec>,
    response: Arc<ArraySpec>,
}

impl PyServer {
    pub(crate) fn new(
        py: Python<'_>,
        server: Server<[u8], [u8]>,
        request: &Arc<ArraySpec>,
        response: &Arc<ArraySpec>,
    ) -> PyResult<Self> {
        Ok(Self {
            inner: ThreadBound::new(Owner::current(py)?, SERVER, server),
            request: request.clone(),
            response: response.clone(),
        })
    }
}

#[pymethods]
impl PyServer {
    /// The next request, or `None`. `timeout=None` (the default) does not wait; a
    /// number of seconds waits up to that long (`math.inf`: forever), without the GIL
    /// and waking for Ctrl-C.
    #[pyo3(signature = (timeout = None))]
    fn receive(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyActiveRequest>> {
        let server = self.inner.get()?;
        let got = wait_with(
            py,
            timeout,
            || server.receive_raw(),
            |slice| server.receive_timeout_raw(slice),
            errors::other,
        )?;
        let Some(request) = got else {
            return Ok(None);
        };
        let (ptr, nbytes) = (request.as_ptr() as usize, request.len_bytes());
        let cell = RequestCell {
            request: ThreadBound::new(self.inner.owner().clone(), REQUEST, RefCell::new(Some(request))),
        };
        Ok(Some(PyActiveRequest {
            cell: Some(Py::new(py, cell)?),
            ptr,
            nbytes,
            request: self.request.clone(),
            response: self.response.clone(),
        }))
    }

    /// `await server.receive_async()`: the next request, waiting in the running asyncio
    /// loop (see `iox._aio`).
    fn receive_async<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("iox._aio")?
            .getattr("receive_async")?
            .call1((slf,))
    }

    /// The readiness descriptor, readable when a request may be waiting.
    fn fileno(&self) -> PyResult<i32> {
        Ok(self.inner.get()?.as_raw_fd())
    }

    /// Requests queued for this server now.
    #[getter]
    fn pending_requests(&self) -> PyResult<usize> {
        Ok(self.inner.get()?.pending_requests())
    }

    /// Whether this port pinned the pool.
    #[getter]
    fn is_pinned(&self) -> PyResult<bool> {
        Ok(self.inner.get()?.is_pinned())
    }
}

/// Holds a request being handled; the base object of its views (see the module docs).
#[pyclass(name = "_RequestCell", module = "iox", frozen)]
pub(crate) struct RequestCell {
    /// `None` once the stream ended.
    request: ThreadBound<RefCell<Option<RawActiveRequest>>>,
}

/// A request a server handles (`iox.ActiveRequest`): read `array`, answer with
/// `respond`, end with `finish` (or `with`).
#[pyclass(name = "ActiveRequest", module = "iox")]
pub(crate) struct PyActiveRequest {
    /// `None` once finished or released.
    cell: Option<Py<RequestCell>>,
    ptr: usize,
    nbytes: usize,
    request: Arc<ArraySpec>,
    response: Arc<ArraySpec>,
}

impl PyActiveRequest {
    /// Copies `data` into a response and sends it: waiting while the client's queue is
    /// full (`wait`, in slices, looking at Python's signals between them), or not
    /// (`Ok(false)`: nothing sent).
    fn send_response(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        casting: &str,
        wait: bool,
    ) -> PyResult<bool> {
        let cell = self.cell(py)?;
        let slot = cell.get().request.get()?.borrow();
        let Some(request) = slot.as_ref() else {
            return Err(errors::Error::new_err(
                "this request was finished: its stream has ended",
            ));
        };
        let src = source::payload(py, &self.response, data, casting, "response to this service")?;
        let bytes = src.len() * self.response.itemsize;
        let slice = if wait { SIGNAL_SLICE } else { Duration::ZERO };
        loop {
            let mut loan = request
                .loan_raw(bytes)
                .map_err(|e| errors::loan_of(&e, "response", self.response.itemsize))?;
            // SAFETY: the loan holds `len_bytes` bytes, ours alone; the source is a numpy
            // array outside the loaned chunk.
            unsafe { source::copy_to(&src, loan.as_mut_ptr(), loan.len_bytes()) }?;
            // SAFETY: `detached`: the closure uses the loan only, no Python object;
            // `send_timeout`: every byte was just written with values of the recorded
            // type (numpy's conversion to the response's dtype, bools checked).
            let sent = unsafe { detached(py, loan, |loan| loan.send_timeout(slice)) };
            match sent {
                Ok(()) => return Ok(true),
                // A refused slice returned its chunk: loaned and copied again.
                Err(ResponseSendError::Timeout(_)) if wait => py.check_signals()?,
                Err(ResponseSendError::Timeout(_)) => return Ok(false),
                Err(e) => return Err(errors::response_send(&e)),
            }
        }
    }

    fn cell<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, RequestCell>> {
        match &self.cell {
            Some(c) => Ok(c.bind(py)),
            None => Err(errors::Error::new_err(
                "this request was finished: its stream has ended",
            )),
        }
    }
}

#[pymethods]
impl PyActiveRequest {
    /// A read-only numpy view of the request, in place: a 0-d array for one value, a
    /// 1-D array for a slice. Drop it (and views of it) before `finish()`.
    #[getter]
    fn array<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cell = self.cell(py)?;
        cell.get().request.get()?;
        // SAFETY: the cell holds the request, whose chunk holds `nbytes` bytes of the
        // recorded request type (checked against the chunk at receive), aligned for it;
        // the cell (the base) keeps the request until it is destroyed, and the view is
        // read-only (a client does not write a sent request).
        unsafe {
            array::payload_view(
                py,
                &self.request,
                self.ptr as *const u8,
                self.nbytes,
                cell.clone().into_any(),
            )
        }
    }

    /// Request bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// A copy of the request as `bytes`.
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.array(py)?.call_method0("tobytes")
    }

    fn __len__(&self) -> usize {
        self.request.shape_for(self.nbytes).first().copied().unwrap_or(1)
    }

    /// Whether the client still waits for responses (a snapshot).
    #[getter]
    fn is_connected(&self, py: Python<'_>) -> PyResult<bool> {
        let cell = self.cell(py)?;
        let slot = cell.get().request.get()?.borrow();
        Ok(slot.as_ref().is_some_and(|r| r.is_connected()))
    }

    /// Copies `data` into a response (converted as `Publisher.send` converts) and
    /// sends it to the client; call it as often as the stream has responses. Waits
    /// (without the GIL, waking for Ctrl-C) while the client's queue for this request is
    /// full. Raises `iox.ClientGone` when the client went away or closed its pending
    /// response. In asyncio, `await req.respond_async(data)` waits without blocking the
    /// loop.
    #[pyo3(signature = (data, *, casting = "safe"))]
    fn respond(&self, py: Python<'_>, data: &Bound<'_, PyAny>, casting: &str) -> PyResult<()> {
        self.send_response(py, data, casting, true).map(drop)
    }

    /// `respond` that never waits: `False` (nothing sent) while the client's queue for
    /// this request is full.
    #[pyo3(signature = (data, *, casting = "safe"))]
    fn try_respond(&self, py: Python<'_>, data: &Bound<'_, PyAny>, casting: &str) -> PyResult<bool> {
        self.send_response(py, data, casting, false)
    }

    /// `await req.respond_async(data)`: `respond`, waiting for room in the running
    /// asyncio loop (see `iox._aio`).
    #[pyo3(signature = (data, *, casting = "safe"))]
    fn respond_async<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyAny>,
        casting: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("iox._aio")?
            .getattr("respond_async")?
            .call1((slf, data, casting))
    }

    /// Ends the stream: the client's pending response reports the end after the
    /// responses sent. Refused with `iox.ViewsAlive` while views of the request are
    /// alive (they would outlive its chunk).
    fn finish(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(cell) = &self.cell else {
            return Ok(());
        };
        let cell = cell.bind(py);
        let request = cell.get().request.get()?;
        // One reference is ours (`self.cell`); more are views' bases.
        let views = cell.get_refcnt() - 1;
        if views > 0 {
            return Err(errors::ViewsAlive::new_err(format!(
                "finish() refused: {views} numpy view(s) of this request are still alive, and \
                 ending the stream releases its memory; `del` them first, or copy what you \
                 keep (np.array(req.array))"
            )));
        }
        let taken = request
            .try_borrow_mut()
            .map_err(|_| errors::Error::new_err("this request is in use (responding)"))?
            .take();
        drop(taken);
        self.cell = None;
        Ok(())
    }

    /// Whether the stream is still open (not finished).
    #[getter]
    fn is_active(&self) -> bool {
        self.cell.is_some()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Ends the stream, or, while views of the request are alive, lets it end when
    /// the last is gone; does not suppress exceptions.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        match self.finish(py) {
            Ok(()) => {}
            // Views alive: the cell ends the stream as the last of them goes.
            Err(e) if e.is_instance_of::<errors::ViewsAlive>(py) => self.cell = None,
            Err(e) => return Err(e),
        }
        Ok(false)
    }
}
