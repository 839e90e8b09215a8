//! The CUDA pinner: `cuMemHostRegister` / `cuMemHostUnregister` on a retained primary
//! context of one device, pushed for each call and popped after it (the calling
//! thread's own current context is left as it was).
//!
//! Flags: `PORTABLE` (the registration counts for every context) and `DEVICEMAP`
//! (the memory gets a device address), plus `READ_ONLY` for read-only mappings, only
//! where the device reports `CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED`;
//! elsewhere a read-only mapping is [`CudaError::ReadOnlyRegisterUnsupported`], which
//! names the attribute (the driver would only say "not supported").
//!
//! Device address: asked once per registration (`cuMemHostGetDevicePointer` of the
//! region's base, in the same pushed context) and handed to the pin registry through
//! [`Pinner::device_address`], so a sample's device address is that base plus the
//! chunk's offset, with no driver call per sample. A registration whose device address
//! cannot be had is undone, and the pin fails.
//!
//! "Already registered": if the driver says the range is registered already (the
//! user, or another library in this process, registered it), the pin succeeds without
//! a registration of ours, and the matching unpin leaves that registration alone.
//! iox's registry calls pin once per mapping, so this only happens with foreign
//! registrations.

use std::collections::HashMap;
use std::sync::Mutex;

use cudarc::driver::sys::{self, CUresult};
use iox_mempool::{PinError, Pinner, Region};

use crate::driver::{self, CudaError, check};

/// Pins regions with the CUDA driver for one device.
#[derive(Debug)]
pub struct CudaPinner {
    ordinal: i32,
    device: sys::CUdevice,
    ctx: Context,
    /// Whether the device registers read-only host memory.
    read_only_supported: bool,
    /// Regions pinned through this pinner, (address, length) -> how.
    pinned: Mutex<HashMap<(usize, usize), Pinned>>,
}

/// One region this pinner was asked to pin.
#[derive(Debug, Clone, Copy)]
struct Pinned {
    /// False if someone else had registered it (then unpin leaves it alone).
    ours: bool,
    /// Its base's device address, if the driver gave one.
    device_base: Option<u64>,
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
    /// device exists and can map host memory, reads whether it registers read-only
    /// memory, retains its primary context.
    ///
    /// ```
    /// match iox_cuda::CudaPinner::new(0) {
    ///     Ok(p) => println!("device 0 registers read-only memory: {}", p.read_only_supported()),
    ///     Err(e) => println!("no CUDA pinning here: {e}"),
    /// }
    /// ```
    pub fn new(device: i32) -> Result<Self, CudaError> {
        let handle = driver::device(device)?;
        let attribute = |attribute| {
            let mut value = 0;
            // SAFETY: driver loaded, valid device and out-pointer.
            check("cuDeviceGetAttribute", unsafe {
                sys::cuDeviceGetAttribute(&mut value, attribute, handle)
            })
            .map(|()| value != 0)
        };
        if !attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? {
            return Err(CudaError::CannotMapHostMemory(device));
        }
        let read_only_supported =
            attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED)?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid device and out-pointer; released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, handle)
        })?;
        Ok(Self {
            ordinal: device,
            device: handle,
            ctx: Context(ctx),
            read_only_supported,
            pinned: Mutex::new(HashMap::new()),
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// Whether the device registers read-only host memory
    /// (`CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED`).
    pub fn read_only_supported(&self) -> bool {
        self.read_only_supported
    }

    /// The device address of `host`, asked of the driver (one push, one
    /// `cuMemHostGetDevicePointer`, one pop). For addresses inside pinned pools,
    /// [`iox_mempool::PoolPin::device_base`] plus the offset gives the same without a call.
    pub fn device_pointer(&self, host: *const u8) -> Result<u64, CudaError> {
        driver::in_context(self.ctx.0, || get_device_pointer(host))
    }

    fn pinned(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, usize), Pinned>> {
        self.pinned.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, region: &Region) -> Result<(), CudaError> {
        let mut flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        if region.read_only() {
            if !self.read_only_supported {
                return Err(CudaError::ReadOnlyRegisterUnsupported(self.ordinal));
            }
            flags |= sys::CU_MEMHOSTREGISTER_READ_ONLY;
        }
        let pinned = driver::in_context(self.ctx.0, || {
            // SAFETY: a Region borrows a live mapping, so the range is mapped during
            // this call, and the registry unpins before it is unmapped; READ_ONLY is
            // set for a read-only mapping, so the driver never needs write access to
            // it. The driver validates the range itself.
            let result = unsafe { sys::cuMemHostRegister_v2(region.addr().cast(), region.len(), flags) };
            let ours = result != CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
            if ours {
                check("cuMemHostRegister", result)?;
            }
            match get_device_pointer(region.addr()) {
                Ok(base) => Ok(Pinned {
                    ours,
                    device_base: Some(base),
                }),
                // Someone else's registration, perhaps without DEVICEMAP: pinned, but
                // no device address to hand out.
                Err(_) if !ours => Ok(Pinned {
                    ours,
                    device_base: None,
                }),
                Err(e) => {
                    // SAFETY: we registered exactly this address just now; still mapped.
                    unsafe { sys::cuMemHostUnregister(region.addr().cast()) };
                    Err(e)
                }
            }
        })?;
        self.pinned()
            .insert((region.addr() as usize, region.len()), pinned);
        Ok(())
    }

    fn unregister(&self, region: &Region) -> Result<(), CudaError> {
        let key = (region.addr() as usize, region.len());
        if let Some(Pinned { ours: false, .. }) = self.pinned().remove(&key) {
            return Ok(());
        }
        driver::in_context(self.ctx.0, || {
            // SAFETY: we registered exactly this address; it is still mapped (the
            // registry unpins before unmapping).
            check("cuMemHostUnregister", unsafe {
                sys::cuMemHostUnregister(region.addr().cast())
            })
        })
    }
}

/// `cuMemHostGetDevicePointer` of `host`, in the current context.
fn get_device_pointer(host: *const u8) -> Result<u64, CudaError> {
    let mut dptr = 0;
    // SAFETY: valid out-pointer; the driver checks `host` itself and reports an error
    // for memory it did not register.
    check("cuMemHostGetDevicePointer", unsafe {
        sys::cuMemHostGetDevicePointer_v2(&mut dptr, host as *mut _, 0)
    })
    .map(|()| dptr)
}

impl Pinner for CudaPinner {
    fn pin(&self, region: &Region) -> Result<(), PinError> {
        self.register(region).map_err(|e| PinError::Pinner(e.to_string()))
    }

    fn unpin(&self, region: &Region) -> Result<(), PinError> {
        self.unregister(region)
            .map_err(|e| PinError::Pinner(e.to_string()))
    }

    fn device_address(&self, region: &Region<'_>) -> Option<u64> {
        self.pinned()
            .get(&(region.addr() as usize, region.len()))
            .and_then(|p| p.device_base)
    }
}

impl Drop for CudaPinner {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `new`.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}
