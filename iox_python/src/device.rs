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
//! The capsule is the classic unversioned `DLManagedTensor` (`"dltensor"`): a 1-D
//! `uint8` tensor of the sample's bytes, no strides, offset 0.

use std::ffi::{CStr, c_void};
use std::sync::Mutex;
use std::time::Duration;

use iox_service::cuda::Stream;
use iox_service::{DeviceSample, DeviceSubscriber};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;

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
}

/// The stream DLPack's `stream` argument names (`None` for -1: no ordering).
fn dlpack_stream(stream: Option<i64>) -> PyResult<Option<Stream>> {
    match stream {
        None => Ok(Some(Stream::null())),
        Some(-1) => Ok(None),
        Some(0) => Err(PyValueError::new_err(
            "stream=0 is ambiguous for CUDA in DLPack; pass 1 (legacy default) or a stream handle",
        )),
        // The release records on the stream later, maybe on another thread, where the
        // per-thread default stream is another stream.
        Some(2) => Err(PyValueError::new_err(
            "stream=2 (the per-thread default stream) is not accepted: the tensor's release may run on another thread, whose per-thread stream is another one; pass a stream handle",
        )),
        Some(s) if s < -1 => Err(PyValueError::new_err(format!("stream={s} is not a CUDA stream"))),
        // SAFETY: DLPack's contract: the consumer passes a valid stream of the
        // device (or the special handles 1 and 2), alive while it uses the tensor.
        Some(s) => Ok(Some(unsafe { Stream::from_raw(s as usize as *mut c_void) })),
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
        let _ = max_version; // the unversioned capsule is what every consumer reads
        if dl_device.is_some_and(|d| d != (KDL_CUDA, self.ordinal)) {
            return Err(PyBufferError::new_err(
                "the sample is on its GPU; no copy to another device is made",
            ));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "iox exports samples in place; copy=True is not offered",
            ));
        }
        let stream = dlpack_stream(stream)?;
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
        capsule(py, sample, self.ordinal)
    }
    fn __repr__(&self) -> String {
        format!(
            "<iox.DeviceSample {} bytes on GPU {} at {:#x}>",
            self.nbytes, self.ordinal, self.device_ptr
        )
    }
}

const KDL_CUDA: i32 = 2;
const KDL_UINT: u8 = 1;
const NAME: &CStr = c"dltensor";

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`, followed by what it owns (one allocation: the tensor first, so
/// its address is the box's).
#[repr(C)]
struct Managed {
    tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut Managed)>,
    shape: [i64; 1],
    sample: Option<DeviceSample>,
}

/// The deleter DLPack consumers call when done: releases the sample (recording the
/// end of the reads on the stream it waited on) and frees the tensor.
unsafe extern "C" fn delete(managed: *mut Managed) {
    if !managed.is_null() {
        // SAFETY: made by `Box::into_raw` in `capsule`, deleted once (DLPack's
        // contract: the consumer calls it once; the capsule destructor only for an
        // unconsumed capsule).
        drop(unsafe { Box::from_raw(managed) });
    }
}

/// Destroys a capsule: an unconsumed one (still named "dltensor") deletes its tensor.
unsafe extern "C" fn destroy_capsule(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let managed = pyo3::ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()).cast::<Managed>();
            delete(managed);
        }
    }
}

fn capsule(py: Python<'_>, sample: DeviceSample, ordinal: i32) -> PyResult<Bound<'_, PyAny>> {
    let ptr = sample.device_ptr();
    let mut managed = Box::new(Managed {
        tensor: DlTensor {
            data: ptr as usize as *mut c_void,
            device: DlDevice {
                device_type: KDL_CUDA,
                device_id: ordinal,
            },
            ndim: 1,
            dtype: DlDataType {
                code: KDL_UINT,
                bits: 8,
                lanes: 1,
            },
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete),
        shape: [sample.len() as i64],
        sample: Some(sample),
    });
    managed.tensor.shape = managed.shape.as_mut_ptr();
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` is a live Managed; the name is static; the destructor deletes an
    // unconsumed capsule's tensor. On failure the tensor is ours to delete.
    unsafe {
        (*raw).manager_ctx = raw.cast();
        let capsule = pyo3::ffi::PyCapsule_New(raw.cast(), NAME.as_ptr(), Some(destroy_capsule));
        if capsule.is_null() {
            delete(raw);
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule))
    }
}
