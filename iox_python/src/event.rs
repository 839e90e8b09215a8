//! Event services, notifiers and listeners (the minimal event pattern): a notifier
//! sets event ids, a listener wakes up. A listener's `fileno()` goes into asyncio or
//! `selectors` like a subscriber's.

use std::sync::Mutex;

use iox_service::{EventId, EventService, Listener, Notifier, Service};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open_event, m)?)?;
    m.add_class::<PyEventService>()?;
    m.add_class::<PyNotifier>()?;
    m.add_class::<PyListener>()?;
    Ok(())
}

/// Opens, creates or opens-or-creates an event service.
#[pyfunction]
fn open_event(py: Python<'_>, name: &str, mode: &str, opts: &Bound<'_, PyDict>) -> PyResult<PyEventService> {
    let mut service = Service::named(name).map_err(errors::other)?;
    let get = |k: &str| opts.get_item(k).ok().flatten().filter(|v| !v.is_none());
    if let Some(root) = get("root") {
        service = service.root(root.extract::<std::path::PathBuf>()?);
    }
    let mut b = service.event();
    if let Some(v) = get("max_notifiers") {
        b = b.max_notifiers(v.extract()?);
    }
    if let Some(v) = get("max_listeners") {
        b = b.max_listeners(v.extract()?);
    }
    if let Some(v) = get("event_id_max") {
        b = b.event_id_max(v.extract()?);
    }
    let b = crate::attributes::apply(b, opts)?;
    let inner = py.detach(|| match mode {
        "open" => b.open().map_err(|e| errors::open(&e)),
        "create" => b.create().map_err(|e| errors::create(&e)),
        _ => b.open_or_create().map_err(|e| errors::open_or_create(&e)),
    })?;
    Ok(PyEventService { inner })
}

/// An open event service (`iox.EventService`).
#[pyclass(name = "EventService", module = "iox", frozen)]
struct PyEventService {
    inner: EventService,
}

#[pymethods]
impl PyEventService {
    /// A notifier; `notify()` without an id sends `default_event_id`.
    #[pyo3(signature = (default_event_id = 0))]
    fn notifier(&self, default_event_id: u32) -> PyResult<PyNotifier> {
        let n = self
            .inner
            .notifier_builder()
            .default_event_id(EventId::new(default_event_id))
            .create()
            .map_err(errors::other)?;
        Ok(PyNotifier { inner: Mutex::new(n) })
    }
    /// A listener.
    fn listener(&self) -> PyResult<PyListener> {
        let l = self.inner.listener_builder().create().map_err(errors::other)?;
        Ok(PyListener { inner: Mutex::new(l) })
    }
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    /// The attributes the service's creator recorded: a new dict, key to value.
    #[getter]
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::attributes::to_dict(py, self.inner.attributes())
    }
}

/// A notifier (`iox.Notifier`).
#[pyclass(name = "Notifier", module = "iox", frozen)]
struct PyNotifier {
    inner: Mutex<Notifier>,
}

#[pymethods]
impl PyNotifier {
    /// Sets `event_id` (default: the notifier's) on every listener; returns how many.
    #[pyo3(signature = (event_id = None))]
    fn notify(&self, event_id: Option<u32>) -> PyResult<usize> {
        let n = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match event_id {
            None => n.notify(),
            Some(id) => n.notify_with_custom_event_id(EventId::new(id)),
        }
        .map_err(errors::other)
    }
}

/// A listener (`iox.Listener`).
#[pyclass(name = "Listener", module = "iox", frozen)]
pub(crate) struct PyListener {
    inner: Mutex<Listener>,
}

impl PyListener {
    /// Wraps `listener` (a blackboard's change listener, say).
    pub(crate) fn new(listener: Listener) -> Self {
        Self {
            inner: Mutex::new(listener),
        }
    }
}

#[pymethods]
impl PyListener {
    /// The event ids pending now (each once), without waiting; with `timeout`
    /// (seconds; `math.inf`: forever), waits up to that long for the first, without the
    /// GIL and waking for Ctrl-C.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Vec<u32>> {
        let lock = || self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let some = |ids: Vec<u32>| (!ids.is_empty()).then_some(ids);
        let got = crate::subscriber::wait_with(
            py,
            timeout,
            || {
                let mut ids = Vec::new();
                lock()
                    .try_wait_all(|id| ids.push(id.as_value()))
                    .map(|_| some(ids))
            },
            |slice| {
                let mut ids = Vec::new();
                lock()
                    .timed_wait_all(|id| ids.push(id.as_value()), slice)
                    .map(|_| some(ids))
            },
            errors::other,
        )?;
        Ok(got.unwrap_or_default())
    }
    /// The readiness descriptor (see `Subscriber.fileno`).
    fn fileno(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).as_raw_fd()
    }
}
