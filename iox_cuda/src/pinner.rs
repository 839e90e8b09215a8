//! The CUDA pinner: `cuMemHostRegister` / `cuMemHostUnregister` on a retained primary
//! context of one device.
//!
//! Flags: `PORTABLE` (the registration counts for every context) and `DEVICEMAP`
//! (the memory gets a device address, see [`crate::device_pointer`]), plus
//! `READ_ONLY` for read-only mappings.
//!
//! "Already registered": if the driver says the range is registered already (another
//! library in this process registered it), the pin succeeds without a registration of
//! ours, and the matching unpin leaves the other library's registration alone. iox's
//! registry calls pin once per mapping, so this only happens with foreign
//! registrations.

use std::collections::HashSet;
use std::sync::Mutex;

use cudarc::driver::sys::{self, CUresult};
use iox_mempool::{PinError, Pinner, Region};

use crate::driver::{self, CudaError, check};

/// Pins regions with the CUDA driver for one device.
#[derive(Debug)]
pub struct CudaPinner {
    device: sys::CUdevice,
    ctx: Context,
    /// Regions the driver reported as registered by someone else.
    foreign: Mutex<HashSet<(usize, usize)>>,
}

#[derive(Debug)]
struct Context(sys::CUcontext);
// SAFETY: a CUDA context handle may be made current on any thread; the driver is
// thread-safe for the calls made with it here.
unsafe impl Send for Context {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for Context {}

impl CudaPinner {
    /// A pinner for device `device` (0 is the first GPU): loads the driver, checks the
    /// device exists and can map host memory, retains its primary context.
    pub fn new(device: i32) -> Result<Self, CudaError> {
        let handle = driver::device(device)?;
        let mut can_map = 0;
        // SAFETY: driver loaded, valid device and out-pointer.
        check("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(
                &mut can_map,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
                handle,
            )
        })?;
        if can_map == 0 {
            return Err(CudaError::CannotMapHostMemory(device));
        }
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid device and out-pointer; released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, handle)
        })?;
        Ok(Self {
            device: handle,
            ctx: Context(ctx),
            foreign: Mutex::new(HashSet::new()),
        })
    }

    fn register(&self, region: &Region) -> Result<(), CudaError> {
        driver::make_current(self.ctx.0)?;
        let mut flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        if region.read_only() {
            flags |= sys::CU_MEMHOSTREGISTER_READ_ONLY;
        }
        // SAFETY: a Region borrows a live mapping, so the range is mapped during this
        // call, and the registry unpins before it is unmapped; READ_ONLY is set for a
        // read-only mapping, so the driver never needs write access to it. The driver
        // validates the range itself.
        let result = unsafe { sys::cuMemHostRegister_v2(region.addr().cast(), region.len(), flags) };
        if result == CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED {
            self.foreign
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((region.addr() as usize, region.len()));
            return Ok(());
        }
        check("cuMemHostRegister", result)
    }

    fn unregister(&self, region: &Region) -> Result<(), CudaError> {
        let key = (region.addr() as usize, region.len());
        if self
            .foreign
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key)
        {
            return Ok(());
        }
        driver::make_current(self.ctx.0)?;
        // SAFETY: we registered exactly this address; it is still mapped.
        check("cuMemHostUnregister", unsafe {
            sys::cuMemHostUnregister(region.addr().cast())
        })
    }
}

impl Pinner for CudaPinner {
    fn pin(&self, region: &Region) -> Result<(), PinError> {
        self.register(region).map_err(|e| PinError::Pinner(e.to_string()))
    }

    fn unpin(&self, region: &Region) -> Result<(), PinError> {
        self.unregister(region)
            .map_err(|e| PinError::Pinner(e.to_string()))
    }
}

impl Drop for CudaPinner {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `new`.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}
