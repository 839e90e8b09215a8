//! Tensor ports of host-memory services from Python (`tensors=True` at creation):
//! the same calls as a `CUDA_DEVICE` service's device ports (`device_publisher`), so a
//! program moves tensors with or without a GPU (`svc.tensor_publisher()` and
//! `svc.tensor_subscriber()` give whichever ports the service's memory takes).
//!
//! - `pub.loan(shape, strides=None, stream=None)` loans a chunk for a tensor of the
//!   service's element type (zero-filled, so every byte of the span is written), a
//!   DLPack producer of writable `kDLCPU` memory (`np.from_dlpack(loan)`,
//!   `torch.from_dlpack(loan)` write it in place); `loan.send()` sends it. `stream` is
//!   accepted and unused (host memory is written by the host).
//! - `pub.send_tensor(t, stream=None)` copies any DLPack tensor in: from host memory
//!   with a copy on the host; from CUDA memory (with the `cuda` feature) with a copy
//!   from the device, ordered on `stream` and waited for.
//! - Samples are DLPack producers of read-only `kDLCPU` memory with the recorded
//!   element type, shape and strides (a damaged record raises `BufferError`), exported
//!   once; the capsule owns the sample until the consumer's deleter releases it.
//!
//! A loan's `send()` is refused (`ViewsAlive`) while DLPack views of it are alive (as
//! for plain loans and device loans): writing through one after the send would change
//! what subscribers read. A loan closed unsent gives its chunk back once no view is.

use std::sync::Mutex;
use std::time::Duration;

use iox_service::tensor::{TensorError, TensorLayout};
use iox_service::{TensorLoan, TensorPublisher, TensorSample, TensorSubscriber};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;

use crate::dlpack::{self, KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, LoanViews};
use crate::errors;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTensorPublisher>()?;
    m.add_class::<PyTensorLoan>()?;
    m.add_class::<PyTensorSubscriber>()?;
    m.add_class::<PyTensorSample>()?;
    Ok(())
}

/// `shape` as a Python int or sequence of ints.
pub(crate) fn shape_arg(shape: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(n) = shape.extract::<usize>() {
        return Ok(vec![n]);
    }
    shape
        .extract::<Vec<usize>>()
        .map_err(|_| PyValueError::new_err("shape: an int or a sequence of non-negative ints"))
}

/// The layout `shape` and `strides` describe, of `dtype`.
pub(crate) fn layout_arg(
    dtype: iox_service::tensor::DType,
    shape: &Bound<'_, PyAny>,
    strides: Option<Vec<i64>>,
) -> PyResult<TensorLayout> {
    let dims = shape_arg(shape)?;
    match strides {
        None => TensorLayout::contiguous(dtype, &dims),
        Some(st) => TensorLayout::strided(dtype, &dims, &st),
    }
    .map_err(dlpack::tensor_error)
}

/// A tensor publisher of a host tensor service (`iox.TensorPublisher`), owned by the
/// thread that made it.
#[pyclass(name = "TensorPublisher", module = "iox", unsendable)]
pub(crate) struct PyTensorPublisher {
    inner: TensorPublisher,
}

impl PyTensorPublisher {
    pub(crate) fn new(inner: TensorPublisher) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl PyTensorPublisher {
    /// Loans a zero-filled chunk for a tensor of `shape` (and `strides`, in elements;
    /// row-major when `None`) of the service's element type.
    #[pyo3(signature = (shape, strides = None, stream = None))]
    fn loan(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        strides: Option<Vec<i64>>,
        stream: Option<i64>,
    ) -> PyResult<PyTensorLoan> {
        let _ = stream; // host memory: nothing to order
        let layout = layout_arg(self.inner.element_type(), shape, strides)?;
        let mut loan = self.inner.loan_tensor(&layout).map_err(errors::tensor_loan)?;
        let ptr = loan.as_mut_ptr();
        // SAFETY: the loan's chunk holds `len` bytes and is ours until sent.
        unsafe { std::ptr::write_bytes(ptr, 0, loan.len()) };
        Ok(PyTensorLoan {
            keep: loan.pool_keep_alive(),
            ptr: ptr as u64,
            layout,
            views: LoanViews::new(py, loan)?,
        })
    }

    /// Copies the DLPack tensor `tensor` into a loan and sends it; returns how many
    /// subscribers got it.
    #[pyo3(signature = (tensor, stream = None))]
    fn send_tensor(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<usize> {
        let (device_type, _device_id): (i32, i32) = tensor.call_method0("__dlpack_device__")?.extract()?;
        let capsule = match device_type {
            KDL_CPU | KDL_CUDA_HOST => tensor.call_method0("__dlpack__")?,
            KDL_CUDA => {
                let kwargs = pyo3::types::PyDict::new(py);
                if let Some(raw) = stream {
                    kwargs.set_item("stream", raw)?;
                }
                tensor.call_method("__dlpack__", (), Some(&kwargs))?
            }
            other => {
                return Err(errors::tensor(format!(
                    "a tensor on DLPack device type {other}: a host service takes host or CUDA memory"
                )));
            }
        };
        let source = dlpack::Imported::take(capsule)?;
        // The capsule's own device decides the copy.
        if !matches!(source.device.0, KDL_CPU | KDL_CUDA_HOST | KDL_CUDA) {
            return Err(errors::tensor(format!(
                "the tensor's memory is DLPack device {:?}: a host service takes host or CUDA memory",
                source.device
            )));
        }
        let mut loan = self
            .inner
            .loan_tensor(&source.layout)
            .map_err(errors::tensor_loan)?;
        let (dst, bytes) = (loan.as_mut_ptr(), loan.len());
        if bytes == 0 {
            // Nothing to copy (an empty tensor's data pointer may be null).
        } else if source.device.0 == KDL_CUDA {
            copy_from_device(source.device.1, source.data, dst, bytes, stream)?;
        } else {
            // SAFETY: the source is the producer's host tensor, alive until `source`
            // drops, `bytes` long from its first element (its layout's span), not null
            // (it has bytes); the loan's chunk is ours, another allocation.
            unsafe { std::ptr::copy_nonoverlapping(source.data as usize as *const u8, dst, bytes) };
        }
        drop(source);
        // SAFETY: every byte of the span was copied from the source tensor's span (its
        // elements, and between strided ones whatever its memory held), and its element
        // type is the service's (the loan checked it); no Rust code reads the bytes as
        // values, subscribers hand out their address.
        unsafe { loan.send() }.map_err(errors::other)
    }

    /// Waits up to `timeout` seconds until `n` subscribers are connected.
    fn wait_for_subscribers(&self, n: usize, timeout: f64) -> PyResult<usize> {
        self.inner
            .wait_for_subscribers(n, Duration::from_secs_f64(timeout.max(0.0)))
            .map_err(errors::other)
    }

    /// The service's element type (`"float32"`, ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.element_type().name()
    }

    /// The largest tensor in bytes.
    #[getter]
    fn max_bytes(&self) -> usize {
        self.inner.max_bytes()
    }

    /// `None`: host memory (a device publisher's is its GPU's ordinal).
    #[getter]
    fn device(&self) -> Option<i32> {
        None
    }
}

/// Copies `bytes` bytes of CUDA memory at `src` (device `ordinal`) to host `dst`, on
/// `stream` (`None`: the legacy default), waited for.
#[cfg(feature = "cuda")]
fn copy_from_device(ordinal: i32, src: u64, dst: *mut u8, bytes: usize, stream: Option<i64>) -> PyResult<()> {
    let s = dlpack::dlpack_stream(stream)?.unwrap_or_else(iox_service::cuda::Stream::null);
    // SAFETY: `dst` is the loan's chunk, `bytes` long and ours; the source is the
    // producer's device tensor, alive until its deleter runs (after this returns, the
    // copy done).
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
    // SAFETY: as above: a readable device range for the copy's duration.
    unsafe { iox_service::cuda::copy_to_host(ordinal, src, dst, s) }.map_err(errors::other)
}

#[cfg(not(feature = "cuda"))]
fn copy_from_device(_: i32, _: u64, _: *mut u8, _: usize, _: Option<i64>) -> PyResult<()> {
    Err(errors::other(
        "this iox package was built without the `cuda` feature: it cannot copy from CUDA memory",
    ))
}

/// A loaned chunk of a host tensor service (`iox.TensorLoan`): a writable DLPack
/// producer until sent.
#[pyclass(name = "TensorLoan", module = "iox", unsendable)]
pub(crate) struct PyTensorLoan {
    views: LoanViews<TensorLoan>,
    keep: iox_service::PoolKeepAlive,
    ptr: u64,
    layout: TensorLayout,
}

#[pymethods]
impl PyTensorLoan {
    /// The chunk's host address.
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.ptr
    }
    /// Bytes the tensor spans.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.layout.span_bytes().unwrap_or(0)
    }
    /// The tensor's shape.
    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.layout.shape().to_vec()
    }
    /// The tensor's strides, in elements.
    #[getter]
    fn strides(&self) -> Vec<i64> {
        self.layout.strides().to_vec()
    }
    /// The element type's name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.layout.dtype().name()
    }
    /// `(kDLCPU, 0)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (KDL_CPU, 0)
    }
    /// A writable view of the chunk.
    #[pyo3(signature = (stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream; // host memory: nothing to order
        dlpack::refuse_copies("a loan", (KDL_CPU, 0), dl_device, copy)?;
        self.views
            .export(py, self.ptr, (KDL_CPU, 0), &self.layout, &self.keep, max_version)
    }
    /// Sends the tensor; returns how many subscribers got it. Refused (`ViewsAlive`)
    /// while DLPack views of the loan are alive.
    #[pyo3(signature = (stream = None))]
    fn send(&self, py: Python<'_>, stream: Option<i64>) -> PyResult<usize> {
        let _ = stream;
        let loan = self.views.take_to_send(py)?;
        // SAFETY: the span was zero-filled at the loan (then written, or not, by the
        // program): every byte is written; typed readers check `bool` values.
        unsafe { loan.send() }.map_err(errors::other)
    }
    /// Gives the chunk back unsent (once no view of it is alive).
    fn close(&self, py: Python<'_>) {
        self.views.close(py);
    }
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<&Bound<'_, PyAny>>,
        _e: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.close(py);
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<iox.TensorLoan {} {:?} in host memory{}>",
            self.layout.dtype(),
            self.layout.shape(),
            if self.views.is_open(py) {
                ""
            } else {
                ", sent or closed"
            }
        )
    }
}

/// A tensor subscriber of a host tensor service (`iox.TensorSubscriber`).
#[pyclass(name = "TensorSubscriber", module = "iox", frozen)]
pub(crate) struct PyTensorSubscriber {
    inner: Mutex<TensorSubscriber>,
}

impl PyTensorSubscriber {
    pub(crate) fn new(inner: TensorSubscriber) -> Self {
        Self {
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TensorSubscriber> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyTensorSubscriber {
    /// The next tensor, or `None`; `timeout` seconds to wait (without the GIL, waking
    /// for Ctrl-C), `None` not to wait.
    #[pyo3(signature = (timeout = None))]
    fn receive(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyTensorSample>> {
        let got = crate::subscriber::receive_with(
            py,
            timeout,
            || self.lock().receive(),
            |slice| self.lock().receive_timeout(slice),
        )?;
        Ok(got.map(|s| PyTensorSample {
            ptr: s.as_ptr() as u64,
            nbytes: s.len(),
            tensor: s.tensor(),
            inner: Mutex::new(Some(s)),
        }))
    }

    /// Waits up to `timeout` seconds until `n` publishers are connected.
    fn wait_for_publishers(&self, py: Python<'_>, n: usize, timeout: f64) -> PyResult<usize> {
        let t = Duration::from_secs_f64(timeout.max(0.0));
        py.detach(|| self.lock().wait_for_publishers(n, t))
            .map_err(errors::other)
    }
}

/// A received tensor in host memory (`iox.TensorSample`): a DLPack producer.
#[pyclass(name = "TensorSample", module = "iox", frozen)]
pub(crate) struct PyTensorSample {
    inner: Mutex<Option<TensorSample>>,
    ptr: u64,
    nbytes: usize,
    tensor: Result<TensorLayout, TensorError>,
}

impl PyTensorSample {
    fn layout(&self) -> PyResult<TensorLayout> {
        self.tensor.clone().map_err(dlpack::tensor_error)
    }
}

#[pymethods]
impl PyTensorSample {
    /// Bytes the tensor spans.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    /// The tensor's host address.
    #[getter]
    fn data_ptr(&self) -> u64 {
        self.ptr
    }
    /// `None`: host memory.
    #[getter]
    fn device(&self) -> Option<i32> {
        None
    }
    #[getter]
    fn shape(&self) -> PyResult<Vec<u64>> {
        Ok(self.layout()?.shape().to_vec())
    }
    #[getter]
    fn strides(&self) -> PyResult<Vec<i64>> {
        Ok(self.layout()?.strides().to_vec())
    }
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(self.layout()?.dtype().name())
    }
    /// Releases the sample unless exported (`stream` is accepted and unused).
    #[pyo3(signature = (stream = None))]
    fn release(&self, stream: Option<i64>) {
        let _ = stream;
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
    /// `(kDLCPU, 0)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (KDL_CPU, 0)
    }
    /// The DLPack capsule (once); it owns the sample until the consumer is done.
    #[pyo3(signature = (stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream; // host memory: nothing to order
        dlpack::refuse_copies("a sample", (KDL_CPU, 0), dl_device, copy)?;
        let layout = self.layout()?;
        let sample = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| PyBufferError::new_err("the sample was exported already or released"))?;
        dlpack::export(
            py,
            self.ptr,
            (KDL_CPU, 0),
            &layout,
            dlpack::Export {
                max_version,
                read_only: true,
            },
            Some(Box::new(sample)),
        )
    }
    fn __repr__(&self) -> String {
        match &self.tensor {
            Ok(t) => format!("<iox.TensorSample {} {:?} in host memory>", t.dtype(), t.shape()),
            Err(e) => format!("<iox.TensorSample of {} bytes ({e})>", self.nbytes),
        }
    }
}
