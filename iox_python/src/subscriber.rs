//! Subscribers (`iox.Subscriber`) and received samples (`iox.Sample`) of
//! publish-subscribe services, and the receive with a timeout that every Python
//! receiver shares (it waits without the GIL, looking at Python's signals).
//!
//! A `Sample` owns its chunk; `sample.array` is a read-only numpy view whose base is
//! the sample, so the chunk stays held while any view of it lives (also after
//! `del sample`). Samples count against `max_held` until they and their views are gone.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iox_service::{RawSample, Subscriber};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::spec::{ArraySpec, check_header_len};
use crate::{array, errors};

/// A subscriber (`iox.Subscriber`): usable from any thread; one receive at a time.
#[pyclass(name = "Subscriber", module = "iox", frozen)]
pub(crate) struct PySubscriber {
    pub(crate) inner: Mutex<Subscriber<[u8]>>,
    pub(crate) spec: Arc<ArraySpec>,
}

/// How long a blocking wait sleeps between looks at Python's signals (Ctrl-C).
pub(crate) const SIGNAL_SLICE: Duration = Duration::from_millis(100);

/// A receive as Python's `receive(timeout)` means it: `None` does not wait (`now`); a
/// number of seconds waits up to that long (`math.inf`: forever) in slices of `wait`
/// without the GIL, looking at Python's signals between them.
pub(crate) fn receive_with<T>(
    py: Python<'_>,
    timeout: Option<f64>,
    now: impl FnOnce() -> Result<Option<T>, iox_service::ReceiveError>,
    wait: impl Fn(Duration) -> Result<Option<T>, iox_service::ReceiveError>,
) -> PyResult<Option<T>> {
    wait_with(py, timeout, now, wait, |e| errors::receive(&e))
}

/// [`receive_with`] for any port's receive: its errors become Python's by `err`. The
/// closures may use ports that are not `Send` (they run on this thread, see
/// `thread_bound::detached`), never Python objects (`wait` runs without the GIL).
pub(crate) fn wait_with<T, E>(
    py: Python<'_>,
    timeout: Option<f64>,
    now: impl FnOnce() -> Result<Option<T>, E>,
    wait: impl Fn(Duration) -> Result<Option<T>, E>,
    err: impl Fn(E) -> PyErr,
) -> PyResult<Option<T>> {
    match timeout {
        None => now().map_err(err),
        Some(t) if t.is_nan() || t < 0.0 => Err(PyValueError::new_err(format!(
            "timeout must be >= 0 seconds, not {t}"
        ))),
        Some(t) => {
            let deadline = Duration::try_from_secs_f64(t)
                .ok()
                .and_then(|d| Instant::now().checked_add(d));
            loop {
                let slice = match deadline {
                    Some(d) => d.saturating_duration_since(Instant::now()).min(SIGNAL_SLICE),
                    None => SIGNAL_SLICE,
                };
                // SAFETY: `wait` uses no Python object (this function's contract).
                let got =
                    unsafe { crate::thread_bound::detached(py, &wait, |wait| wait(slice)) }.map_err(&err)?;
                if got.is_some() || deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(got);
                }
                py.check_signals()?;
            }
        }
    }
}

impl PySubscriber {
    fn lock(&self) -> std::sync::MutexGuard<'_, Subscriber<[u8]>> {
        // A panic while holding the lock cannot leave the subscriber inconsistent
        // (receive is atomic on the shared queues): go on with it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PySubscriber {
    /// The next sample, or `None`. `timeout=None` (the default) does not wait; a number
    /// of seconds waits up to that long (`math.inf`: forever), without the GIL and
    /// waking for Ctrl-C.
    #[pyo3(signature = (timeout = None))]
    fn receive(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PySample>> {
        let got = receive_with(
            py,
            timeout,
            || self.lock().receive_raw(),
            |slice| self.lock().receive_timeout_raw(slice),
        )?;
        Ok(got.map(|inner| PySample {
            inner,
            spec: self.spec.clone(),
        }))
    }
    /// The readiness descriptor, for `select`, `selectors` or asyncio's
    /// `loop.add_reader`: readable when a sample may be waiting. On readability,
    /// receive until `None` (a wake-up may find nothing).
    fn fileno(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.lock().as_raw_fd()
    }
    /// Samples queued for this subscriber now.
    fn pending(&self) -> usize {
        self.lock().pending()
    }
    /// Samples this subscriber missed since it was created because its queue was
    /// full when a publisher sent (the oldest dropped under `Overflow.DROP_OLDEST`, the
    /// default; the new one refused under `Overflow.REJECT`). A publisher's `send`
    /// still returns the subscribers it reached: this count is where loss shows.
    fn missed(&self) -> u64 {
        self.lock().missed()
    }
    /// Waits up to `timeout` seconds until `n` publishers are connected; returns how many are.
    fn wait_for_publishers(&self, py: Python<'_>, n: usize, timeout: f64) -> PyResult<usize> {
        let t = Duration::from_secs_f64(timeout.max(0.0));
        py.detach(|| self.lock().wait_for_publishers(n, t))
            .map_err(errors::other)
    }
    /// `await sub.receive_async()`: the next sample, waiting on the descriptor in the
    /// running asyncio loop (see `iox._aio`).
    fn receive_async<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("iox._aio")?
            .getattr("receive_async")?
            .call1((slf,))
    }
}

/// A received sample (`iox.Sample`): holds its chunk until it and every array viewing
/// it are gone.
#[pyclass(name = "Sample", module = "iox", frozen)]
pub(crate) struct PySample {
    inner: RawSample,
    spec: Arc<ArraySpec>,
}

#[pymethods]
impl PySample {
    /// A read-only numpy view of the payload, in place (no copy). It keeps the sample,
    /// hence the chunk, alive.
    #[getter]
    fn array<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let shape = me.spec.shape_for(me.inner.len_bytes());
        // SAFETY: the chunk holds `len_bytes` (checked against the chunk at receive,
        // and dtype x shape is that size: the service records it), aligned for the
        // recorded type; the sample (the base) holds the chunk until it is destroyed,
        // and the view is read-only (publishers do not write a sent chunk).
        unsafe {
            array::view(
                py,
                me.spec.dtype.bind(py),
                &shape,
                me.inner.as_ptr(),
                false,
                slf.clone().into_any(),
            )
        }
    }
    /// A read-only numpy view of the user header the publisher wrote, in place: a 0-d
    /// array for a structured or scalar header (`sample.header["width"]`), `None` for a
    /// service without a header. It keeps the sample, hence the chunk, alive.
    #[getter]
    fn header<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = slf.py();
        let me = slf.get();
        let Some(h) = &me.spec.header else {
            return Ok(None);
        };
        check_header_len(h, me.inner.header_len())?;
        // SAFETY: the chunk's first `header_len` bytes are the header (the receive
        // checked the chunk holds the header and the payload), aligned for the
        // recorded header type, and dtype x shape is that size (checked above); the
        // sample (the base) holds the chunk until it is destroyed, and the view is
        // read-only (publishers do not write a sent chunk).
        unsafe {
            array::view(
                py,
                h.dtype.bind(py),
                &h.shape,
                me.inner.header_ptr(),
                false,
                slf.clone().into_any(),
            )
        }
        .map(Some)
    }
    /// Payload bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.len_bytes()
    }
    /// The chunk's offset in the pool (the same in every process).
    #[getter]
    fn offset(&self) -> usize {
        self.inner.offset()
    }
    /// The payload's device address, for CUDA: the subscriber must have pinned a
    /// `CUDA_PINNED` service (`svc.subscriber(pin=True)`, `cuda` feature).
    #[getter]
    fn device_ptr(&self) -> PyResult<u64> {
        self.inner.device_ptr().map_err(errors::other)
    }
    /// A copy of the payload as `bytes`.
    fn tobytes<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Self::array(slf)?.call_method0("tobytes")
    }
    /// DLPack export (CPU memory): delegated to the read-only view, so consumers get a
    /// read-only tensor that keeps the sample alive. Needs a consumer that asks for
    /// DLPack 1.0 (`max_version`), as numpy 2 and recent torch do: a read-only array
    /// cannot be exported through the older protocol.
    #[pyo3(signature = (*args, **kwargs))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Self::array(slf)?.getattr("__dlpack__")?.call(args, kwargs)
    }
    /// `(kDLCPU, 0)`: the payload is host memory (also when pinned for CUDA).
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }
    fn __len__(&self) -> usize {
        self.spec
            .shape_for(self.inner.len_bytes())
            .first()
            .copied()
            .unwrap_or(1)
    }
    fn __repr__(&self) -> String {
        format!(
            "<iox.Sample {} bytes at offset {}>",
            self.inner.len_bytes(),
            self.inner.offset()
        )
    }
}
