//! Device-memory services from Python (`MemoryType.CUDA_DEVICE`, needs the `cuda`
//! feature): a device subscriber whose samples are DLPack capsules of `kDLCUDA`
//! memory, so `torch.from_dlpack(sample)` or `cupy.from_dlpack(sample)` views the
//! GPU bytes in place.
//!
//! Stream order, as DLPack asks of a producer: `__dlpack__(stream=S)` makes the
//! consumer's stream `S` wait for the publisher's write (`DeviceSample::wait_on`)
//! before the capsule is handed out; `S` is `None` or `1` (the legacy default
//! stream) or a `CUstream` as an int; `-1` asks for no ordering. `2` (the per-thread
//! default stream) is refused: the release records on the stream later, perhaps on
//! another thread, where it names another stream. The stream must outlive the
//! tensor (DLPack's consumers use their current stream, which they keep).
//! When the consumer drops the tensor, the capsule's deleter releases the sample, which
//! records the end of the reads on that stream, so the chunk's next writer waits for
//! them. A sample is exported once (the capsule then owns it); `release(stream)` lets
//! go of one never exported.
//!
//! The capsule (see `dlpack`) has the element type, shape and strides the publisher
//! recorded with the sample (checked against the service and the sample's bytes: a
//! damaged record raises `BufferError`); a service whose payload is not a slice of
//! numbers gives a 1-D `uint8` tensor of the sample's bytes. Other subscribers read
//! the same chunk, so the consumer must not write it: a consumer that asks for a
//! versioned capsule (`max_version` of DLPack 1.0 or later) gets it marked read-only;
//! the classic capsule has no such flag, and the rule is the consumer's to keep.
//!
//! Device publishers are in `device_publisher`.

use std::sync::Mutex;
use std::time::Duration;

use iox_service::tensor::{DType, TensorError, TensorLayout};
use iox_service::{DeviceSample, DeviceSubscriber};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;

use crate::dlpack::{self, KDL_CUDA, dlpack_stream};
use crate::errors;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceSubscriber>()?;
    m.add_class::<PyDeviceSample>()?;
    Ok(())
}

/// A subscriber of a `CUDA_DEVICE` service (`iox.DeviceSubscriber`).
#[pyclass(name = "DeviceSubscriber", module = "iox", frozen)]
pub(crate) struct PyDeviceSubscriber {
    inner: Mutex<DeviceSubscriber>,
}

impl PyDeviceSubscriber {
    pub(crate) fn new(inner: DeviceSubscriber) -> Self {
        Self {
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DeviceSubscriber> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyDeviceSubscriber {
    /// The next sample, or `None`; `timeout` seconds to wait (without the GIL, waking
    /// for Ctrl-C), `None` not to wait.
    #[pyo3(signature = (timeout = None))]
    fn receive(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyDeviceSample>> {
        let got = crate::subscriber::receive_with(
            py,
            timeout,
            || self.lock().receive(),
            |slice| self.lock().receive_timeout(slice),
        )?;
        Ok(got.map(|s| PyDeviceSample {
            nbytes: s.len(),
            device_ptr: s.device_ptr(),
            ordinal: s.device_ordinal(),
            tensor: tensor_of(&s),
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

/// A received sample in GPU memory (`iox.DeviceSample`): a DLPack producer.
#[pyclass(name = "DeviceSample", module = "iox", frozen)]
pub(crate) struct PyDeviceSample {
    inner: Mutex<Option<DeviceSample>>,
    nbytes: usize,
    device_ptr: u64,
    ordinal: i32,
    /// The tensor the sample holds, read once at the receive (`Err`: a damaged record,
    /// raised when the tensor is asked for).
    tensor: Result<TensorLayout, TensorError>,
}

/// The sample's tensor: its record, or its bytes on a service that carries no tensors.
fn tensor_of(sample: &DeviceSample) -> Result<TensorLayout, TensorError> {
    match sample.tensor() {
        Err(TensorError::NotATensorService { .. }) => TensorLayout::contiguous(DType::U8, &[sample.len()]),
        other => other,
    }
}

#[pymethods]
impl PyDeviceSample {
    /// Payload bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    /// The payload's device address (for this process's CUDA context of the GPU).
    #[getter]
    fn device_ptr(&self) -> u64 {
        self.device_ptr
    }
    /// This process's ordinal of the GPU.
    #[getter]
    fn device(&self) -> i32 {
        self.ordinal
    }
    /// The tensor's shape (its element type's name is `dtype`).
    #[getter]
    fn shape(&self) -> PyResult<Vec<u64>> {
        Ok(self.layout()?.shape().to_vec())
    }
    /// The tensor's strides, in elements.
    #[getter]
    fn strides(&self) -> PyResult<Vec<i64>> {
        Ok(self.layout()?.strides().to_vec())
    }
    /// The element type's name (`"float32"`, `"bfloat16"`, ...; `"uint8"` for a
    /// service that carries bytes).
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(self.layout()?.dtype().name())
    }
    /// Makes `stream` (a `CUstream` as an int, or 1 / 2) wait for the publisher's
    /// write; the release then records the end of the reads on it.
    fn wait_on(&self, stream: i64) -> PyResult<()> {
        let stream =
            dlpack_stream(Some(stream))?.ok_or_else(|| PyValueError::new_err("stream=-1 orders nothing"))?;
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let sample = inner
            .as_mut()
            .ok_or_else(|| PyBufferError::new_err("the sample was exported or released"))?;
        sample.wait_on(stream).map_err(errors::other)
    }
    /// Releases the sample (after the reads on `stream`, if given) unless exported.
    #[pyo3(signature = (stream = None))]
    fn release(&self, stream: Option<i64>) -> PyResult<()> {
        let stream = match stream {
            Some(s) => dlpack_stream(Some(s))?,
            None => None,
        };
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        match (taken, stream) {
            (Some(sample), Some(s)) => sample.release_on(s).map_err(errors::other),
            _ => Ok(()),
        }
    }
    /// `(kDLCUDA, ordinal)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (KDL_CUDA, self.ordinal)
    }
    /// The DLPack capsule (once): the consumer's `stream` waits for the write first.
    #[pyo3(signature = (stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        dlpack::refuse_copies("a sample", (KDL_CUDA, self.ordinal), dl_device, copy)?;
        let stream = dlpack_stream(stream)?;
        let layout = self.layout()?;
        let mut sample = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                PyBufferError::new_err(
                    "the sample was exported already (a DLPack capsule owns it) or released",
                )
            })?;
        if let Some(s) = stream {
            sample.wait_on(s).map_err(errors::other)?;
        }
        dlpack::export(
            py,
            self.device_ptr,
            (KDL_CUDA, self.ordinal),
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
            Ok(t) => format!(
                "<iox.DeviceSample {} {:?} on GPU {} at {:#x}>",
                t.dtype(),
                t.shape(),
                self.ordinal,
                self.device_ptr
            ),
            Err(_) => format!(
                "<iox.DeviceSample {} bytes on GPU {} at {:#x}>",
                self.nbytes, self.ordinal, self.device_ptr
            ),
        }
    }
}

impl PyDeviceSample {
    fn layout(&self) -> PyResult<TensorLayout> {
        self.tensor.clone().map_err(dlpack::tensor_error)
    }
}
