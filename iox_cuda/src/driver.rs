//! Loading the CUDA driver once, and turning its result codes into [`CudaError`].
//!
//! Every call into the driver goes through [`check`]; [`load`] runs `cuInit` once per
//! process after confirming that `libcuda` can be loaded at all (cudarc would panic on
//! its first call otherwise).

use std::ffi::CStr;
use std::sync::OnceLock;

use cudarc::driver::sys::{self, CUresult};
use thiserror::Error;

/// Why CUDA pinning is not available, or a driver call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CudaError {
    /// `libcuda.so` could not be loaded: no NVIDIA driver on this machine.
    #[error(
        "no CUDA driver could be loaded (libcuda.so not found); CudaPinned services can only be used unpinned here"
    )]
    NoDriver,
    /// The driver loaded but has no such device.
    #[error("CUDA device {requested} does not exist ({count} device(s) present)")]
    NoDevice {
        /// The ordinal asked for.
        requested: i32,
        /// How many devices the driver reports.
        count: i32,
    },
    /// The device cannot map host memory into its address space.
    #[error(
        "CUDA device {0} cannot map host memory (no unified addressing); it cannot use pinned iox pools in place"
    )]
    CannotMapHostMemory(i32),
    /// A driver call failed.
    #[error("{call} failed: {name} ({code})")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The CUresult code.
        code: u32,
        /// The driver's name for it.
        name: String,
    },
    /// Another device's pinner is registered in this process already.
    #[error(
        "the CUDA pinner of device {registered} is registered already; device {requested} cannot be added"
    )]
    OtherDeviceRegistered {
        /// The device registered.
        registered: i32,
        /// The device asked for.
        requested: i32,
    },
    /// `device_pointer` was asked before `register`.
    #[error("no CUDA pinner is registered in this process; call iox_cuda::register first")]
    NotRegistered,
}

/// Turns a driver result into `Ok` or a [`CudaError::Driver`] naming `call`.
pub(crate) fn check(call: &'static str, result: CUresult) -> Result<(), CudaError> {
    if result == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the driver is loaded (we only get results from it after `load`); the
    // out-pointer is valid; the string it returns is static in the driver.
    let name = unsafe {
        if sys::cuGetErrorName(result, &mut text) == CUresult::CUDA_SUCCESS && !text.is_null() {
            CStr::from_ptr(text).to_string_lossy().into_owned()
        } else {
            format!("{result:?}")
        }
    };
    Err(CudaError::Driver {
        call,
        code: result as u32,
        name,
    })
}

/// Loads the driver and runs `cuInit`, once per process.
pub(crate) fn load() -> Result<(), CudaError> {
    static LOADED: OnceLock<Result<(), CudaError>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            // SAFETY: only tries to dlopen the library by its usual names.
            if !unsafe { sys::is_culib_present() } {
                return Err(CudaError::NoDriver);
            }
            // SAFETY: the library is present, so cudarc's lazy loader succeeds.
            check("cuInit", unsafe { sys::cuInit(0) })
        })
        .clone()
}

/// The device handle of ordinal `device`, checking it exists.
pub(crate) fn device(device: i32) -> Result<sys::CUdevice, CudaError> {
    load()?;
    let mut count = 0;
    // SAFETY: driver loaded and initialised; valid out-pointer.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut count) })?;
    if device < 0 || device >= count {
        return Err(CudaError::NoDevice {
            requested: device,
            count,
        });
    }
    let mut handle = 0;
    // SAFETY: as above; the ordinal is in range.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut handle, device) })?;
    Ok(handle)
}

/// Makes the primary context of `device` current on this thread.
pub(crate) fn make_current(ctx: sys::CUcontext) -> Result<(), CudaError> {
    // SAFETY: `ctx` is a retained primary context (see CudaPinner), valid until released.
    check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })
}

pub(crate) fn device_pointer(device: i32, host: *const u8) -> Result<u64, CudaError> {
    let handle = self::device(device)?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: valid device handle and out-pointer; retained here, released below.
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut ctx, handle)
    })?;
    let result = make_current(ctx).and_then(|()| {
        let mut dptr = 0;
        // SAFETY: valid out-pointer; the driver checks `host` itself and reports an
        // error for memory it did not register.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut dptr, host as *mut _, 0)
        })
        .map(|()| dptr)
    });
    // SAFETY: balances the retain above; the pinner holds its own retain.
    unsafe { sys::cuDevicePrimaryCtxRelease_v2(handle) };
    result
}
