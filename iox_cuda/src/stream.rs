//! CUDA streams as iox takes them: a borrowed handle ([`Stream`], what a user's
//! framework hands over) or one iox made ([`OwnedStream`]).

use std::sync::Arc;

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::{CudaError, check};

/// A CUDA stream handle (`CUstream`), borrowed: its owner keeps it alive while work
/// is enqueued through it. [`Stream::null`] is the legacy default stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stream(sys::CUstream);

// SAFETY: a stream handle may be used from any thread (the driver serialises work
// enqueued on one stream); the handle is only passed to the driver.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// The legacy default stream (handle 0).
    pub fn null() -> Self {
        Self(std::ptr::null_mut())
    }

    /// A stream handle from a framework (e.g. `torch.cuda.Stream().cuda_stream`).
    ///
    /// # Safety
    ///
    /// `raw` is a valid `CUstream` of a context of the device it is used with (or
    /// null, or one of the driver's special handles), alive while this is used.
    pub unsafe fn from_raw(raw: *mut std::ffi::c_void) -> Self {
        Self(raw.cast())
    }

    /// The handle.
    pub fn as_raw(self) -> *mut std::ffi::c_void {
        self.0.cast()
    }

    /// Waits on the host until all work enqueued on the stream (of device `ordinal`)
    /// is done.
    pub fn synchronize(self, ordinal: i32) -> Result<(), CudaError> {
        let ctx = Context::retain(ordinal)?;
        ctx.run(|| {
            // SAFETY: the stream is the caller's (valid for as long as this type's
            // contract says).
            check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.0) })
        })
    }
}

/// A stream iox made on one device, destroyed when dropped.
///
/// ```
/// match iox_cuda::OwnedStream::new(0) {
///     Ok(s) => s.synchronize().unwrap(),
///     Err(e) => println!("no CUDA device here: {e}"),
/// }
/// ```
#[derive(Debug)]
pub struct OwnedStream {
    stream: Stream,
    ctx: Arc<Context>,
}

impl OwnedStream {
    /// A non-blocking stream on device `ordinal`.
    pub fn new(ordinal: i32) -> Result<Self, CudaError> {
        let ctx = Context::retain(ordinal)?;
        let mut raw = std::ptr::null_mut();
        ctx.run(|| {
            // SAFETY: a context is current; valid out-pointer.
            check("cuStreamCreate", unsafe {
                sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
            })
        })?;
        Ok(Self {
            stream: Stream(raw),
            ctx,
        })
    }

    /// The handle, to enqueue work on.
    pub fn stream(&self) -> Stream {
        self.stream
    }

    /// Waits on the host until all work enqueued on the stream is done.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.ctx.run(|| {
            // SAFETY: the stream is alive (owned).
            check("cuStreamSynchronize", unsafe {
                sys::cuStreamSynchronize(self.stream.0)
            })
        })
    }
}

impl Drop for OwnedStream {
    fn drop(&mut self) {
        let _ = self.ctx.run(|| {
            // SAFETY: destroys the stream made in `new`, once.
            check("cuStreamDestroy", unsafe {
                sys::cuStreamDestroy_v2(self.stream.0)
            })
        });
    }
}
