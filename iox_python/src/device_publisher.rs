//! Device publishers from Python (`svc.device_publisher()`, `MemoryType.CUDA_DEVICE`):
//! tensors written in place through a loan, or copied from any DLPack producer.
//!
//! - `pub.loan(shape, strides=None, stream=None)` loans a chunk for a tensor of the
//!   service's element type; its stream (a `CUstream` as an int, `None` the legacy
//!   default) waits for the chunk's last readers. The loan is a DLPack producer of
//!   writable `kDLCUDA` memory: `torch.from_dlpack(loan)` views it in place (on the
//!   loan's stream; another consumer stream is refused, as no event orders it after
//!   the loan). `loan.send(stream=None)` records the end of the writes on the stream
//!   (the loan's unless given) and sends; it is refused (`ViewsAlive`) while a DLPack
//!   view of the loan is alive, since the chunk is the subscribers' after the send and
//!   Python cannot revoke a view DLPack handed out (`del` the view first). A loan
//!   dropped or `close()`d unsent gives its chunk back once no view of it is alive.
//! - `pub.send_tensor(t, stream=None)` loans for `t`'s element type, shape and strides
//!   (refused, naming the sizes, if they do not fit the service), copies its bytes
//!   into the chunk on the stream (device to device from `kDLCUDA` memory of the
//!   service's GPU; from host memory, `kDLCPU` numpy arrays or CPU tensors, host to
//!   device), waits on the host for the copy and sends. The wait is the price of the
//!   convenience: the producer frees its tensor's memory when its deleter runs (a
//!   caching allocator may reuse it at once), so the copy must be done by then. The
//!   path that waits for nothing is the loan, written in place on the stream.
//!
//! A device publisher and its loans belong to the thread that made them (`unsendable`
//! objects: another thread gets a `RuntimeError`), as host publishers do.

use std::time::Duration;

use iox_service::cuda::Stream;
use iox_service::tensor::TensorLayout;
use iox_service::{DeviceLoan, DevicePublisher};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dlpack::{self, KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, LoanViews, dlpack_stream};
use crate::errors;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDevicePublisher>()?;
    m.add_class::<PyDeviceLoan>()?;
    Ok(())
}

/// A publisher of a `CUDA_DEVICE` service (`iox.DevicePublisher`).
#[pyclass(name = "DevicePublisher", module = "iox", unsendable)]
pub(crate) struct PyDevicePublisher {
    inner: DevicePublisher,
}

impl PyDevicePublisher {
    pub(crate) fn new(inner: DevicePublisher) -> Self {
        Self { inner }
    }
}

/// The stream a loan or send is ordered on: `None` is the legacy default stream.
fn stream_arg(stream: Option<i64>) -> PyResult<Stream> {
    dlpack_stream(stream)?
        .ok_or_else(|| PyValueError::new_err("stream=-1 orders nothing; a loan and a send need a stream"))
}

/// The raw handle, with the legacy default's two names (null and 1) as one.
fn stream_key(stream: Stream) -> usize {
    match stream.as_raw() as usize {
        0 | 1 => 0,
        s => s,
    }
}

#[pymethods]
impl PyDevicePublisher {
    /// Loans a chunk for a tensor of `shape` (and `strides`, in elements; row-major
    /// when `None`) of the service's element type, ordered on `stream`.
    #[pyo3(signature = (shape, strides = None, stream = None))]
    fn loan(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        strides: Option<Vec<i64>>,
        stream: Option<i64>,
    ) -> PyResult<PyDeviceLoan> {
        let s = stream_arg(stream)?;
        let dtype = self.inner.element_type().ok_or_else(|| {
            errors::other("the service's payload is not a slice of numbers: it carries no tensors")
        })?;
        let layout = crate::tensor::layout_arg(dtype, shape, strides)?;
        let mut loan = self
            .inner
            .loan_tensor_on(s, &layout)
            .map_err(errors::device_loan)?;
        Ok(PyDeviceLoan {
            keep: loan.pool_keep_alive(),
            device_ptr: loan.device_ptr(),
            ordinal: self.inner.device_ordinal(),
            layout,
            stream: s,
            views: LoanViews::new(py, loan)?,
        })
    }

    /// Copies the DLPack tensor `tensor` into a loan on `stream` and sends it; returns
    /// how many subscribers got it.
    #[pyo3(signature = (tensor, stream = None))]
    fn send_tensor(&self, py: Python<'_>, tensor: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<usize> {
        let s = stream_arg(stream)?;
        let ordinal = self.inner.device_ordinal();
        let (device_type, device_id): (i32, i32) = tensor.call_method0("__dlpack_device__")?.extract()?;
        let capsule = match device_type {
            KDL_CUDA if device_id != ordinal => {
                return Err(errors::tensor(format!(
                    "the tensor is on GPU {device_id}; the service's memory is on GPU {ordinal}"
                )));
            }
            KDL_CUDA => {
                // The producer orders its work before our stream's next work.
                let kwargs = PyDict::new(py);
                if let Some(raw) = stream {
                    kwargs.set_item("stream", raw)?;
                }
                tensor.call_method("__dlpack__", (), Some(&kwargs))?
            }
            KDL_CPU | KDL_CUDA_HOST => tensor.call_method0("__dlpack__")?,
            other => {
                return Err(errors::tensor(format!(
                    "a tensor on DLPack device type {other}: iox copies from CUDA memory of the service's GPU or from host memory"
                )));
            }
        };
        let source = dlpack::Imported::take(capsule)?;
        // The capsule's own device decides the copy (what `__dlpack_device__` said
        // only chose how to ask for it).
        match source.device {
            (KDL_CUDA, id) if id == ordinal => {}
            (KDL_CPU | KDL_CUDA_HOST, _) => {}
            (t, id) => {
                return Err(errors::tensor(format!(
                    "the tensor's memory is DLPack device ({t}, {id}); the service's is GPU {ordinal} (copied from there or from host memory)"
                )));
            }
        }
        let mut loan = self
            .inner
            .loan_tensor_on(s, &source.layout)
            .map_err(errors::device_loan)?;
        let (dst, bytes) = (loan.device_ptr(), loan.len());
        if bytes > 0 {
            // SAFETY: the loan's chunk is ours until sent (after the copy, on the same
            // stream); the source is the producer's tensor, `bytes` long from its first
            // element (its layout's span), readable until its deleter runs, which is
            // after the copy is done (waited for below).
            let copied = unsafe {
                if source.device.0 == KDL_CUDA {
                    iox_service::cuda::copy_device_to_device(ordinal, dst, source.data, bytes, s)
                } else {
                    iox_service::cuda::copy_host_ptr_to_device(
                        ordinal,
                        dst,
                        source.data as usize as *const u8,
                        bytes,
                        s,
                    )
                }
            };
            // The source must stay valid until the copy is done, and only the producer
            // knows when it frees it (its deleter may hand the memory to an allocator
            // at once): wait for the copy before the deleter runs.
            copied
                .and_then(|()| s.synchronize(ordinal))
                .map_err(errors::other)?;
        }
        drop(source);
        loan.send_on(s).map_err(errors::other)
    }

    /// Waits up to `timeout` seconds until `n` subscribers are connected.
    fn wait_for_subscribers(&self, n: usize, timeout: f64) -> PyResult<usize> {
        self.inner
            .wait_for_subscribers(n, Duration::from_secs_f64(timeout.max(0.0)))
            .map_err(errors::other)
    }

    /// The service's element type (`"float32"`, ...), or `None` for a service whose
    /// payload is not a slice of numbers.
    #[getter]
    fn dtype(&self) -> Option<&'static str> {
        self.inner.element_type().map(|t| t.name())
    }

    /// The largest tensor in bytes.
    #[getter]
    fn max_bytes(&self) -> usize {
        self.inner.max_bytes()
    }

    /// This process's ordinal of the service's GPU.
    #[getter]
    fn device(&self) -> i32 {
        self.inner.device_ordinal()
    }
}

/// A loaned chunk of GPU memory (`iox.DeviceLoan`): a writable DLPack producer until
/// sent.
#[pyclass(name = "DeviceLoan", module = "iox", unsendable)]
pub(crate) struct PyDeviceLoan {
    views: LoanViews<DeviceLoan>,
    keep: iox_service::PoolKeepAlive,
    device_ptr: u64,
    ordinal: i32,
    layout: TensorLayout,
    stream: Stream,
}

#[pymethods]
impl PyDeviceLoan {
    /// The chunk's device address.
    #[getter]
    fn device_ptr(&self) -> u64 {
        self.device_ptr
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
    /// `(kDLCUDA, ordinal)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (KDL_CUDA, self.ordinal)
    }
    /// A writable view of the chunk for work on the loan's stream (`stream` must be
    /// that stream, `None` or -1).
    #[pyo3(signature = (stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        dlpack::refuse_copies("a loan", (KDL_CUDA, self.ordinal), dl_device, copy)?;
        if let Some(consumer) = dlpack_stream(stream)?
            && stream_key(consumer) != stream_key(self.stream)
        {
            return Err(PyBufferError::new_err(format!(
                "the loan is ordered on stream {:#x}; write it on that stream (loan(..., stream=torch.cuda.current_stream().cuda_stream)), not on {:#x}",
                stream_key(self.stream),
                stream_key(consumer)
            )));
        }
        self.views.export(
            py,
            self.device_ptr,
            (KDL_CUDA, self.ordinal),
            &self.layout,
            &self.keep,
            max_version,
        )
    }
    /// Records the end of the writes on `stream` (the loan's unless given) and sends;
    /// returns how many subscribers got it. Refused (`ViewsAlive`) while DLPack views
    /// of the loan are alive.
    #[pyo3(signature = (stream = None))]
    fn send(&self, py: Python<'_>, stream: Option<i64>) -> PyResult<usize> {
        let s = match stream {
            None => self.stream,
            Some(raw) => stream_arg(Some(raw))?,
        };
        let loan = self.views.take_to_send(py)?;
        loan.send_on(s).map_err(errors::other)
    }
    /// Gives the chunk back unsent, once no view of it is alive (work still writing it
    /// must be done or ordered before its next loan, as for a dropped loan).
    fn close(&self, py: Python<'_>) {
        self.views.close(py);
    }
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.close(py);
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<iox.DeviceLoan {} {:?} on GPU {} at {:#x}{}>",
            self.layout.dtype(),
            self.layout.shape(),
            self.ordinal,
            self.device_ptr,
            if self.views.is_open(py) {
                ""
            } else {
                ", sent or closed"
            }
        )
    }
}
