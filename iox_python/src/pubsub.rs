//! Publish-subscribe services: opening them from Python, and their handles.
//!
//! A service is opened by `open_pubsub` (called by `iox.PubSubBuilder` in Python)
//! as a `[u8]` service recording the payload type Python derived from the dtype and
//! shape (`raw_payload_type`) and the dtype's schema (`payload_schema`, see
//! `schema.rs`), or by `open_pubsub_from_schema` (no dtype given) with the payload type
//! and schema the existing service records and the dtype its schema gives. Its handle
//! keeps the dtype and shape for the arrays.
//!
//! User headers (`user_header=` in Python, see `iox_service::user_header`): a header
//! dtype becomes a `HeaderType` the way a payload dtype becomes a payload type (its
//! name, size, alignment, bit-pattern validity and schema, `raw_user_header`); opened
//! without a dtype, the header's recorded schema gives its dtype as the payload's does.
//! Loans and samples show the header as a numpy view of the chunk's first bytes
//! (`loan.header`, `sample.header`) under the same rules as their payload arrays.
//!
//! Their subscribers and samples are in `subscriber.rs`, what their arrays look like
//! in `spec.rs`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iox_service::{HeaderType, PageSize, PayloadType, PubSubBuilder, PubSubService, Schema, Service};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::access::PyAccessPolicy;
use crate::spec::{ArraySpec, HeaderSpec, any_bit_pattern, memory_type};
use crate::subscriber::{PySample, PySubscriber};
use crate::{errors, schema};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open_pubsub, m)?)?;
    m.add_function(wrap_pyfunction!(page_size_short, m)?)?;
    m.add_function(wrap_pyfunction!(open_pubsub_from_schema, m)?)?;
    m.add_class::<PyPubSubService>()?;
    m.add_class::<PySubscriber>()?;
    m.add_class::<PySample>()?;
    Ok(())
}

/// The user header `opts["user_header"]` declares (`(name, alignment, dtype)`, made by
/// `iox.PubSubBuilder` from a dtype or an `iox.Type` as for payloads), as the static
/// config records it, with the dtype of its views. `None` if not given.
fn declared_header<'py>(
    opts: &Bound<'py, PyDict>,
) -> PyResult<Option<(HeaderType, Bound<'py, PyArrayDescr>)>> {
    let Some(v) = opt(opts, "user_header") else {
        return Ok(None);
    };
    let (name, alignment, dtype): (String, u64, Bound<'py, PyArrayDescr>) = v.extract()?;
    let size = dtype.itemsize() as u64;
    if size == 0 {
        return Err(PyValueError::new_err(format!(
            "user_header {name:?}: dtype {dtype} has no bytes; a user header is a value of at \
             least one byte"
        )));
    }
    if !alignment.is_power_of_two() {
        return Err(PyValueError::new_err(format!(
            "user_header {name:?}: alignment {alignment} is not a power of two"
        )));
    }
    let identity = PayloadType::Typed {
        type_name: name.clone(),
        size,
        alignment,
        invalid_bit_patterns: !any_bit_pattern(&dtype),
    };
    let schema = schema::of_dtype(&dtype, &[], &name, alignment);
    Ok(Some((HeaderType { identity, schema }, dtype)))
}

/// Opens, creates or opens-or-creates a publish-subscribe service of `dtype` (and
/// `shape`), recording the dtype's schema when it has one (`schema.rs`).
/// `element_name` is the type name of one element (`type_name` without the shape's
/// brackets): the schema's outermost struct is named after it.
#[pyfunction]
#[pyo3(signature = (name, mode, kind, type_name, element_name, size, alignment, dtype, shape, opts))]
#[allow(clippy::too_many_arguments)]
fn open_pubsub(
    py: Python<'_>,
    name: &str,
    mode: &str,
    kind: &str,
    type_name: String,
    element_name: &str,
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
    let schema = schema::of_dtype(&dtype, shape.as_deref().unwrap_or(&[]), element_name, alignment);
    let (header, header_view) = match declared_header(opts)? {
        Some((h, dtype)) => {
            let view = HeaderSpec::new(&dtype, Vec::new(), h.size())?;
            (Some(h), Some(view))
        }
        None => (None, None),
    };
    let builder = builder(name, opts, payload, schema, header)?;
    finish(py, builder, mode, dtype, shape, header_view)
}

/// Opens an existing publish-subscribe service with the dtype and shape its recorded
/// schema gives (`publish_subscribe()` without a payload in Python): the payload type
/// and schema as recorded, so only a service replaced meanwhile is refused. Its user
/// header likewise, unless `opts` declares one (then that one is checked on open).
#[pyfunction]
#[pyo3(signature = (name, opts))]
fn open_pubsub_from_schema(
    py: Python<'_>,
    name: &str,
    opts: &Bound<'_, PyDict>,
) -> PyResult<PyPubSubService> {
    let root = match opt(opts, "root") {
        Some(r) => r.extract::<std::path::PathBuf>()?,
        None => iox_mempool::root::root_dir(),
    };
    let timeout = match opt(opts, "timeout") {
        Some(t) => Duration::from_secs_f64(t.extract()?),
        None => Duration::from_secs(10), // the builder's default
    };
    let config = py.detach(|| read_config(&root, name, timeout))?;
    if config.publish_subscribe().is_none() {
        return Err(errors::IncompatibleService::new_err(format!(
            "service {name:?} is not a publish-subscribe service (its pattern: {})",
            config.messaging_pattern()
        )));
    }
    let Some(recorded) = config.schema else {
        return Err(errors::Error::new_err(format!(
            "service {name:?} records no payload schema, so its dtype is unknown here (it \
             carries {}; its creator's type records no field layout, or it predates \
             schemas): open it with the payload's dtype, e.g. \
             publish_subscribe(iox.Type(\"{}\", np.dtype([...], align=True)))",
            config.payload,
            config.payload.type_name(),
        )));
    };
    let slice = matches!(config.payload, PayloadType::Slice { .. });
    let (dtype, shape) = schema::to_dtype(py, &recorded, !slice)?;
    // The arrays' size must be the payload's (the views rely on it): it is, as the
    // config's check made the schema's size the element's; checked again here.
    let value = shape
        .iter()
        .try_fold(dtype.itemsize(), |n, &d| n.checked_mul(d))
        .unwrap_or(usize::MAX);
    if value != config.payload.element_size() {
        return Err(errors::Error::new_err(format!(
            "service {name:?}: its schema gives {value}-byte values, its payload is {}",
            config.payload
        )));
    }
    let (header, header_view) = match (declared_header(opts)?, &config.user_header) {
        (Some((h, dtype)), _) => {
            let view = HeaderSpec::new(&dtype, Vec::new(), h.size())?;
            (Some(h), Some(view))
        }
        (None, Some(recorded)) => {
            let Some(layout) = &recorded.schema else {
                return Err(errors::Error::new_err(format!(
                    "service {name:?} carries a user header {} that records no field layout, \
                     so its dtype is unknown here: open it with the header's dtype too, e.g. \
                     publish_subscribe(user_header=iox.Type(\"{}\", np.dtype([...], align=True)))",
                    recorded.identity,
                    recorded.type_name(),
                )));
            };
            let (dtype, shape) = schema::to_dtype(py, layout, true)?;
            let view = HeaderSpec::new(&dtype, shape, recorded.size())?;
            (Some(recorded.clone()), Some(view))
        }
        (None, None) => (None, None),
    };
    let builder = builder(name, opts, config.payload.clone(), Some(recorded), header)?;
    finish(py, builder, "open", dtype, (!slice).then_some(shape), header_view)
}

/// The static config of service `name` under `root`, read-only (as `iox show` reads
/// it). A service another process is creating has its dynamic segment before its
/// config: that is waited for, up to `timeout`, as opening waits for a creator.
fn read_config(root: &std::path::Path, name: &str, timeout: Duration) -> PyResult<iox_service::StaticConfig> {
    use iox_service::inspect::{Health, InspectError, inspect_in};
    let start = Instant::now();
    loop {
        let info = inspect_in(root, name).map_err(|e| match e {
            InspectError::NotFound(_) => errors::ServiceNotFound::new_err(format!(
                "{e} (opening without a dtype reads the payload's layout from the existing \
                 service; to create one, give publish_subscribe a dtype)"
            )),
            e => errors::other(e),
        })?;
        if let Some(config) = info.config {
            return Ok(config);
        }
        let creating = info.health == Health::Creating;
        if !creating || start.elapsed() >= timeout {
            let why = if creating {
                format!("it is still being created after {timeout:?}")
            } else if info.problems.is_empty() {
                "it has none (its creator died, or it is being removed)".to_owned()
            } else {
                info.problems.join("; ")
            };
            return Err(errors::Error::new_err(format!(
                "service {name:?} has no readable static config: {why}"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The page size `name` says ("4k", "2m", "1g", "thp", or a longer spelling
/// `PageSize` reads); `ValueError` with what is allowed otherwise.
fn page_size(name: &str) -> PyResult<PageSize> {
    name.parse()
        .map_err(|e: iox_service::pages::PageSizeError| PyValueError::new_err(e.to_string()))
}

/// `name` as a page size's short form ("2mib" is "2m"): what `PubSubBuilder.page_size`
/// checks (and records) at once; `ValueError` for an unknown one.
#[pyfunction]
fn page_size_short(name: &str) -> PyResult<&'static str> {
    Ok(page_size(name)?.short())
}

/// `opts[key]` unless missing or `None`.
fn opt<'py>(opts: &Bound<'py, PyDict>, key: &str) -> Option<Bound<'py, PyAny>> {
    opts.get_item(key).ok().flatten().filter(|v| !v.is_none())
}

/// A builder of a `[u8]` service recording `payload` (and `schema`, if any) and user
/// header `header` (if any), with the settings in `opts`.
fn builder(
    name: &str,
    opts: &Bound<'_, PyDict>,
    payload: PayloadType,
    schema: Option<Schema>,
    header: Option<HeaderType>,
) -> PyResult<PubSubBuilder<[u8]>> {
    let mut service = Service::named(name).map_err(errors::other)?;
    let get = |k: &str| opt(opts, k);
    if let Some(root) = get("root") {
        service = service.root(root.extract::<std::path::PathBuf>()?);
    }
    // SAFETY: the ports built from this service (here and in publisher.rs) loan only
    // with `loan_raw`, receive only with `receive_raw`, and read samples only through
    // their addresses (numpy views), as `raw_payload_type` requires.
    let mut b = unsafe { service.publish_subscribe::<[u8]>().raw_payload_type(payload) };
    if let Some(schema) = schema {
        b = b.payload_schema(schema);
    }
    if let Some(header) = header {
        // SAFETY: the ports of this service write and read the header only through
        // the raw loans' and samples' `header_ptr` (numpy views, and the copy in
        // `Publisher.send`), as `raw_user_header` requires.
        b = unsafe { b.raw_user_header(header) };
    }
    if let Some(v) = get("memory_type") {
        b = b.memory_type(memory_type(v.extract()?)?);
    }
    if let Some(v) = get("page_size") {
        b = b.page_size(page_size(&v.extract::<String>()?)?);
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
    if let Some(v) = get("tensors") {
        b = b.tensors(v.extract()?);
    }
    if let Some(v) = get("access") {
        b = b.access(v.cast::<PyAccessPolicy>()?.get().inner.clone());
    }
    if let Some(v) = get("allow_pool_exhaustion") {
        b = b.allow_pool_exhaustion(v.extract()?);
    }
    if let Some(v) = get("timeout") {
        b = b.timeout(Duration::from_secs_f64(v.extract()?));
    }
    crate::attributes::apply(b, opts)
}

/// Opens (`mode`: "open", "create" or "open_or_create") with `b`; the arrays are of
/// `dtype` and `shape` (`None`: slices), the header's views as `header` says.
fn finish(
    py: Python<'_>,
    b: PubSubBuilder<[u8]>,
    mode: &str,
    dtype: Bound<'_, PyArrayDescr>,
    shape: Option<Vec<usize>>,
    header: Option<HeaderSpec>,
) -> PyResult<PyPubSubService> {
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
            header,
        }),
    })
}

/// Why a package built without the `cuda` feature refuses device ports.
#[cfg(not(feature = "cuda"))]
const NO_CUDA: &str =
    "this iox package was built without the `cuda` feature: it cannot use CUDA_DEVICE services";

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
    /// The payload's field layout as recorded in the service (`None` if it records
    /// none), in plain Python values: a number as its Rust name (`"f64"`, `"bool"`),
    /// an array as `{"array": element, "len": n}`, a struct as `{"struct": name, "size":
    /// s, "alignment": a, "fields": [(name, offset, schema), ...]}`, bytes of unknown
    /// layout as `{"bytes": size}`. A slice service's is its element's.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .static_config()
            .schema
            .as_ref()
            .map(|s| schema::to_python(py, s))
            .transpose()
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
    /// The user header as recorded, e.g. `"FrameHeader (size 32, alignment 8)"`, or
    /// `None` for a service without one.
    #[getter]
    fn user_header(&self) -> Option<String> {
        self.inner
            .static_config()
            .user_header
            .as_ref()
            .map(|h| h.identity.to_string())
    }
    /// The dtype of the header views (`loan.header`, `sample.header`), or `None`.
    #[getter]
    fn header_dtype(&self, py: Python<'_>) -> Option<Py<PyArrayDescr>> {
        self.spec.header.as_ref().map(|h| h.dtype.clone_ref(py))
    }
    /// The shape of the header views (`()` for one number or record), or `None`.
    #[getter]
    fn header_shape<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.spec
            .header
            .as_ref()
            .map(|h| PyTuple::new(py, &h.shape))
            .transpose()
    }
    /// The user header's field layout as recorded (as `schema` for the payload), or
    /// `None` (no header, or one without a recorded layout).
    #[getter]
    fn header_schema<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .static_config()
            .user_header
            .as_ref()
            .and_then(|h| h.schema.as_ref())
            .map(|s| schema::to_python(py, s))
            .transpose()
    }
    /// The pages the service's pool lives on, as its creator chose them: `"4k"` (the
    /// default), `"2m"` or `"1g"` (reserved hugetlb pages), `"thp"` (transparent huge
    /// pages, best effort).
    #[getter]
    fn page_size(&self) -> &'static str {
        self.inner.static_config().layout.page_size().short()
    }
    /// The access policy the service's creator recorded (`iox.AccessPolicy`, with its
    /// `creator` uid), or `None` for a service without one.
    #[getter]
    fn access_policy(&self) -> Option<PyAccessPolicy> {
        self.inner.access_policy().map(PyAccessPolicy::recorded)
    }
    /// `(publishers, subscribers)` connected now.
    fn port_counts(&self) -> (usize, usize) {
        self.inner.port_counts()
    }
    /// The attributes the service's creator recorded: a new dict, key to value.
    #[getter]
    fn attributes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::attributes::to_dict(py, self.inner.attributes())
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
            .map_err(errors::port)?;
        Ok(PySubscriber {
            inner: Mutex::new(sub),
            spec: self.spec.clone(),
        })
    }
    /// A subscriber of a `CUDA_DEVICE` service: its samples are DLPack producers of
    /// GPU memory (`torch.from_dlpack(sample)`). Needs the package built with the
    /// `cuda` feature and this process's CUDA device with the service's GPU UUID.
    fn device_subscriber(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        #[cfg(feature = "cuda")]
        {
            let sub = self
                .inner
                .device_subscriber_builder()
                .create()
                .map_err(errors::port)?;
            Ok(Py::new(py, crate::device::PyDeviceSubscriber::new(sub))?.into_any())
        }
        #[cfg(not(feature = "cuda"))]
        let _ = py;
        #[cfg(not(feature = "cuda"))]
        Err(errors::other(NO_CUDA))
    }
    /// A publisher of a `CUDA_DEVICE` service: loans are writable DLPack tensors of GPU
    /// memory, `send_tensor` copies any DLPack tensor in (see `iox.DevicePublisher`).
    /// Owned by the calling thread. Needs the package built with the `cuda` feature.
    fn device_publisher(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        #[cfg(feature = "cuda")]
        {
            let publisher = self
                .inner
                .device_publisher_builder()
                .create()
                .map_err(errors::port)?;
            Ok(Py::new(py, crate::device_publisher::PyDevicePublisher::new(publisher))?.into_any())
        }
        #[cfg(not(feature = "cuda"))]
        let _ = py;
        #[cfg(not(feature = "cuda"))]
        Err(errors::other(NO_CUDA))
    }
    /// The tensor publisher the service's memory takes: a device publisher of a
    /// `CUDA_DEVICE` service, a host tensor publisher of one created with
    /// `tensors=True` (the same calls; see `iox.TensorPublisher`).
    fn tensor_publisher(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.inner.static_config().memory_type == iox_service::MemoryType::CudaDevice {
            return self.device_publisher(py);
        }
        let publisher = self
            .inner
            .tensor_publisher_builder()
            .create()
            .map_err(errors::port)?;
        Ok(Py::new(py, crate::tensor::PyTensorPublisher::new(publisher))?.into_any())
    }
    /// The tensor subscriber the service's memory takes (see `tensor_publisher`).
    fn tensor_subscriber(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.inner.static_config().memory_type == iox_service::MemoryType::CudaDevice {
            return self.device_subscriber(py);
        }
        let subscriber = self
            .inner
            .tensor_subscriber_builder()
            .create()
            .map_err(errors::port)?;
        Ok(Py::new(py, crate::tensor::PyTensorSubscriber::new(subscriber))?.into_any())
    }
    /// A publisher (owned by the calling thread). See `iox.Publisher`.
    #[pyo3(signature = (pin = false))]
    fn publisher(&self, py: Python<'_>, pin: bool) -> PyResult<crate::publisher::PyPublisher> {
        crate::publisher::PyPublisher::new(py, &self.inner, &self.spec, pin)
    }
    fn __repr__(&self) -> String {
        format!(
            "<iox.PubSubService {:?} carrying {}>",
            self.inner.name(),
            self.inner.static_config().payload
        )
    }
}
