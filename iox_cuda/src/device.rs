//! A buffer in device memory, for copying samples to the GPU (examples, checks). Its
//! calls push the device's primary context and pop it again, like the pinner's, so
//! the calling thread's current context is left as it was.

use cudarc::driver::sys;

use crate::driver::{self, CudaError, check};

/// `len` bytes of device memory on one device, freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer {
    handle: sys::CUdevice,
    ctx: sys::CUcontext,
    ptr: sys::CUdeviceptr,
    len: usize,
}

impl DeviceBuffer {
    /// Allocates `len` bytes on device `device`.
    pub fn new(device: i32, len: usize) -> Result<Self, CudaError> {
        let handle = driver::device(device)?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid device and out-pointer; released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, handle)
        })?;
        let mut ptr = 0;
        let allocated = driver::in_context(ctx, || {
            // SAFETY: a context is current; valid out-pointer.
            check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, len.max(1)) })
        });
        if let Err(e) = allocated {
            // SAFETY: balances the retain above.
            unsafe { sys::cuDevicePrimaryCtxRelease_v2(handle) };
            return Err(e);
        }
        Ok(Self {
            handle,
            ctx,
            ptr,
            len,
        })
    }

    /// Copies `src` (at most `len` bytes) from host memory to the start of the buffer.
    /// Synchronous.
    pub fn copy_from_host(&mut self, src: &[u8]) -> Result<(), CudaError> {
        assert!(
            src.len() <= self.len,
            "copy of {} bytes into a {}-byte buffer",
            src.len(),
            self.len
        );
        driver::in_context(self.ctx, || {
            // SAFETY: src is valid for src.len() bytes; the buffer holds at least as many.
            check("cuMemcpyHtoD", unsafe {
                sys::cuMemcpyHtoD_v2(self.ptr, src.as_ptr().cast(), src.len())
            })
        })
    }

    /// Copies `dst.len()` bytes from device address `src` (e.g. a pinned sample's
    /// device pointer) into `dst`. Synchronous.
    pub fn copy_device_to_host(&self, src: u64, dst: &mut [u8]) -> Result<(), CudaError> {
        driver::in_context(self.ctx, || {
            // SAFETY: dst is valid for dst.len() bytes; the driver checks the device range.
            check("cuMemcpyDtoH", unsafe {
                sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), src, dst.len())
            })
        })
    }

    /// The buffer's device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = driver::in_context(self.ctx, || {
            // SAFETY: frees what `new` allocated, in its context.
            check("cuMemFree", unsafe { sys::cuMemFree_v2(self.ptr) })
        });
        // SAFETY: balances the context retain of `new`, after the last use of it.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.handle) };
    }
}
