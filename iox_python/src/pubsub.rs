//! Publish-subscribe services, subscribers and received samples.
//!
//! A service is opened by `open_pubsub` (called by `iox.PubSubBuilder` in Python)
//! as a `[u8]` service recording the payload type Python derived from the dtype and
//! shape (`raw_payload_type`). Its handle keeps the dtype and shape for the arrays.
//!
//! A `Sample` owns its chunk; `sample.array` is a read-only numpy view whose base is
//! the sample, so the chunk stays held while any view of it lives (also after
//! `del sample`). Samples count against `max_held` until they and their views are gone.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iox_service::{MemoryType, PayloadType, PubSubService, RawSample, Service, Subscriber};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::{array, errors};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open_pubsub, m)?)?;
    m.add_class::<PyPubSubService>()?;
    m.add_class::<PySubscriber>()?;
    m.add_class::<PySample>()?;
    Ok(())
}

/// What the arrays of a service look like: element dtype and shape (`None`: a 1-D
/// array as long as the sample, for slice services).
pub(crate) struct ArraySpec {
    pub(crate) dtype: Py<PyArrayDescr>,
    pub(crate) shape: Option<Vec<usize>>,
    pub(crate) itemsize: usize,
}

impl ArraySpec {
    /// The shape of an array of `bytes` bytes.
    pub(crate) fn shape_for(&self, bytes: usize) -> Vec<usize> {
        match &self.shape {
            Some(s) => s.clone(),
            None => vec![bytes / self.itemsize.max(1)],
        }
    }
}

pub(crate) fn memory_type(code: u16) -> PyResult<MemoryType> {
    MemoryType::from_code(code).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Whether every byte string of `dtype`'s size is a value of it, as Rust's
/// `ZeroCopySafe::ANY_BIT_PATTERN` says of a type: integers, floats and complex
/// numbers; sub-arrays of them; structured dtypes whose fields are such and cover
/// every byte once (no padding). Not `bool` (`?`), objects, strings or datetimes
/// (conservatively). Recorded in the payload's identity, so it matches what a Rust
/// program's type records.
fn any_bit_pattern(dtype: &Bound<'_, PyArrayDescr>) -> bool {
    if dtype.has_subarray() {
        return any_bit_pattern(&dtype.base());
    }
    let Some(names) = dtype.names() else {
        return matches!(dtype.kind(), b'i' | b'u' | b'f' | b'c');
    };
    let mut fields = Vec::with_capacity(names.len());
    for name in &names {
        match dtype.get_field(name) {
            Ok((field, offset)) if any_bit_pattern(&field) => fields.push((offset, field.itemsize())),
            _ => return false,
        }
    }
    fields.sort_unstable();
    let mut end = 0;
    for (offset, size) in fields {
        if offset != end {
            return false; // padding before this field, or fields that overlap
        }
        end = offset + size;
    }
    end == dtype.itemsize()
}

/// Opens, creates or opens-or-creates a publish-subscribe service.
#[pyfunction]
#[pyo3(signature = (name, mode, kind, type_name, size, alignment, dtype, shape, opts))]
#[allow(clippy::too_many_arguments)]
fn open_pubsub(
    py: Python<'_>,
    name: &str,
    mode: &str,
    kind: &str,
    type_name: String,
    size: u64,
    alignment: u64,
    dtype: Bound<'_, PyArrayDescr>,
    shape: Option<Vec<usize>>,
    opts: &Bound<'_, PyDict>,
) -> PyResult<PyPubSubService> {
    let invalid_bit_patterns = !any_bit_pattern(&dtype);
    let payload = match kind {
        "typed" => PayloadType::Typed {
            type_name,
            size,
            alignment,
            invalid_bit_patterns,
        },
        "slice" => PayloadType::Slice {
            element: type_name,
            size,
            alignment,
            invalid_bit_patterns,
        },
        _ => return Err(PyValueError::new_err(format!("unknown payload kind {kind:?}"))),
    };
    let mut service = Service::named(name).map_err(errors::other)?;
    let get = |k: &str| opts.get_item(k).ok().flatten().filter(|v| !v.is_none());
    if let Some(root) = get("root") {
        service = service.root(root.extract::<std::path::PathBuf>()?);
    }
    // SAFETY: the ports built from this service (here and in publisher.rs) loan only
    // with `loan_raw`, receive only with `receive_raw`, and read samples only through
    // their addresses (numpy views), as `raw_payload_type` requires.
    let mut b = unsafe {
        service
            .publish_subscribe::<[u8]>()
            .raw_payload_type(payload.clone())
    };
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
        max_publishers,
        max_subscribers,
        subscriber_buffer,
        max_loans,
        max_held,
        history,
        permissions
    );
    if let Some(v) = get("size_classes") {
        b = b.size_classes(&v.extract::<Vec<(usize, usize)>>()?);
    }
    if let Some(v) = get("chunk_sizes") {
        b = b.chunk_sizes(&v.extract::<Vec<usize>>()?);
    }
    // In elements of the recorded payload (the builder multiplies by its size).
    if let Some(v) = get("max_len") {
        b = b.max_slice_len(v.extract()?);
    }
    if let Some(v) = get("allow_pool_exhaustion") {
        b = b.allow_pool_exhaustion(v.extract()?);
    }
    if let Some(v) = get("timeout") {
        b = b.timeout(Duration::from_secs_f64(v.extract()?));
    }
    // Opening may wait for a service another process is creating: without the GIL.
    let inner = py.detach(|| match mode {
        "open" => b.open().map_err(|e| errors::open(&e)),
        "create" => b.create().map_err(|e| errors::create(&e)),
        _ => b.open_or_create().map_err(|e| errors::open_or_create(&e)),
    })?;
    let itemsize = dtype.itemsize();
    Ok(PyPubSubService {
        inner,
        spec: Arc::new(ArraySpec {
            dtype: dtype.unbind(),
            shape,
            itemsize,
        }),
    })
}

/// An open publish-subscribe service (`iox.PubSubService`).
#[pyclass(name = "PubSubService", module = "iox", frozen)]
pub(crate) struct PyPubSubService {
    pub(crate) inner: PubSubService<[u8]>,
    pub(crate) spec: Arc<ArraySpec>,
}

#[pymethods]
impl PyPubSubService {
    /// The service name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    /// The payload as recorded, e.g. `"[[[u8; 3]; 640]; 480] (size 921600, alignment 1)"`.
    #[getter]
    fn payload_type(&self) -> String {
        self.inner.static_config().payload.to_string()
    }
    /// Whether this handle created the service.
    #[getter]
    fn is_creator(&self) -> bool {
        self.inner.is_creator()
    }
    /// The dtype of the arrays' elements.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> Py<PyArrayDescr> {
        self.spec.dtype.clone_ref(py)
    }
    /// The arrays' shape (`None` for slice services: 1-D, as long as the sample).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.spec.shape.as_ref().map(|s| PyTuple::new(py, s)).transpose()
    }
    /// `(publishers, subscribers)` connected now.
    fn port_counts(&self) -> (usize, usize) {
        self.inner.port_counts()
    }
    /// A subscriber. `pin=True` pins the pool for this port (mlock, or CUDA
    /// registration on a `CUDA_PINNED` service built with the `cuda` feature).
    #[pyo3(signature = (pin = false))]
    fn subscriber(&self, pin: bool) -> PyResult<PySubscriber> {
        let sub = self
            .inner
            .subscriber_builder()
            .pin_memory(pin)
            .create()
            .map_err(errors::other)?;
        Ok(PySubscriber {
            inner: Mutex::new(sub),
            spec: self.spec.clone(),
        })
    }
    /// A publisher (owned by the calling thread). See `iox.Publisher`.
    #[pyo3(signature = (pin = false))]
    fn publisher(&self, py: Python<'_>, pin: bool) -> PyResult<crate::publisher::PyPublisher> {
        crate::publisher::PyPublisher::new(py, self, pin)
    }
    fn __repr__(&self) -> String {
        format!(
            "<iox.PubSubService {:?} carrying {}>",
            self.inner.name(),
            self.inner.static_config().payload
        )
    }
}

/// A subscriber (`iox.Subscriber`): usable from any thread; one receive at a time.
#[pyclass(name = "Subscriber", module = "iox", frozen)]
pub(crate) struct PySubscriber {
    inner: Mutex<Subscriber<[u8]>>,
    spec: Arc<ArraySpec>,
}

/// How long a blocking wait sleeps between looks at Python's signals (Ctrl-C).
const SIGNAL_SLICE: Duration = Duration::from_millis(100);

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
        let got = match timeout {
            None => self.lock().receive_raw().map_err(|e| errors::receive(&e))?,
            Some(t) if t.is_nan() || t < 0.0 => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be >= 0 seconds, not {t}"
                )));
            }
            Some(t) => {
                let deadline = Duration::try_from_secs_f64(t)
                    .ok()
                    .and_then(|d| Instant::now().checked_add(d));
                loop {
                    let slice = match deadline {
                        Some(d) => d.saturating_duration_since(Instant::now()).min(SIGNAL_SLICE),
                        None => SIGNAL_SLICE,
                    };
                    let got = py
                        .detach(|| self.lock().receive_timeout_raw(slice))
                        .map_err(|e| errors::receive(&e))?;
                    if got.is_some() || deadline.is_some_and(|d| Instant::now() >= d) {
                        break got;
                    }
                    py.check_signals()?;
                }
            }
        };
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
