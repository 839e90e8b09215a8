//! Loading the CUDA driver once, and turning its result codes into [`CudaError`].
//!
//! Every call into the driver goes through [`check`]; [`load`] runs `cuInit` once per
//! process after confirming that `libcuda` can be loaded at all (cudarc would panic on
//! its first call otherwise). Calls that need a context run inside [`in_context`],
//! which pushes iox's context and pops it again: the calling thread's current context
//! (a user's own, or none) is what it was before.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

use iox_mempool::fork::{ForkLock, Rank};

use cudarc::driver::sys::{self, CUresult};
use thiserror::Error;

/// Why CUDA pinning is not available, or a driver call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CudaError {
    /// `libcuda.so` could not be loaded: no NVIDIA driver on this machine.
    #[error("no CUDA driver could be loaded (libcuda.so not found): this process cannot use CUDA memory")]
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
    /// The pool is mapped read-only in this process (it has only subscribers of the
    /// service) and the device cannot register read-only host memory.
    #[error(
        "CUDA device {0} cannot register read-only host memory (CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED is 0) and this process maps the pool read-only (it has only subscribers of it); build a pinned publisher in this process first, or build the subscriber with .pin_memory(false) and copy from the CPU"
    )]
    ReadOnlyRegisterUnsupported(i32),
    /// A descriptor handed over as a service's device memory is another allocation
    /// (its token is not there).
    #[error("the descriptor handed over is not this service's device memory (its identity mark differs)")]
    WrongAllocation,
    /// A device allocation too large to describe (its length and 16-byte mark,
    /// rounded up to the granularity, overflow).
    #[error("a device allocation for {len} payload bytes is too large")]
    TooLarge {
        /// The payload length asked for.
        len: usize,
    },
    /// A copy outside a device allocation.
    #[error("a copy outside the {len}-byte device allocation")]
    OutOfBounds {
        /// The allocation's length.
        len: usize,
    },
    /// This process was forked (without `exec`) from one that had initialised CUDA.
    #[error(
        "CUDA was initialised in the process this one was forked from, and CUDA cannot be used in a forked child; start the child with exec (Python: multiprocessing's 'spawn' start method)"
    )]
    ForkedChild,
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

/// The fork generation (see [`iox_mempool::fork`]) that loaded the driver; `u64::MAX`
/// while none did.
static LOADED_IN: AtomicU64 = AtomicU64::new(u64::MAX);

/// Loads the driver and runs `cuInit`, once per process. Under a
/// [`ForkLock`](iox_mempool::fork::ForkLock), so a fork waits for a load in progress; a
/// forked child of a process that loaded it gets [`CudaError::ForkedChild`] (CUDA does
/// not survive `fork`).
pub(crate) fn load() -> Result<(), CudaError> {
    static LOADED: ForkLock<Option<Result<(), CudaError>>> = ForkLock::new(Rank::CudaDriver, None);
    let mut loaded = LOADED.lock();
    let generation = iox_mempool::fork::generation();
    match LOADED_IN.load(Ordering::Relaxed) {
        u64::MAX => {}
        g if g == generation => {}
        _ => return Err(CudaError::ForkedChild),
    }
    loaded
        .get_or_insert_with(|| {
            LOADED_IN.store(generation, Ordering::Relaxed);
            // SAFETY: only tries to dlopen the library by its usual names.
            if !unsafe { sys::is_culib_present() } {
                return Err(CudaError::NoDriver);
            }
            // SAFETY: the library is present, so cudarc's lazy loader succeeds.
            check("cuInit", unsafe { sys::cuInit(0) })
        })
        .clone()
}

/// `Err(ForkedChild)` in a forked child of the process that loaded the driver.
#[inline]
fn not_forked() -> Result<(), CudaError> {
    match LOADED_IN.load(Ordering::Relaxed) {
        u64::MAX => Ok(()),
        g if iox_mempool::fork::is_same_process(g) => Ok(()),
        _ => Err(CudaError::ForkedChild),
    }
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

/// Runs `f` with `ctx` current on this thread and restores the thread's previous
/// current context afterwards (push, then pop), so iox never changes which context a
/// user's thread has current.
///
/// Decision: a failed pop after `f` succeeded is not reported: `f`'s result (a
/// registration, an allocation) is returned so its owner records it and undoes it
/// later; an error here would leak it. (A pop fails only if the driver's context
/// stack was corrupted behind iox's back.)
pub(crate) fn in_context<T>(
    ctx: sys::CUcontext,
    f: impl FnOnce() -> Result<T, CudaError>,
) -> Result<T, CudaError> {
    not_forked()?;
    // SAFETY: `ctx` is a retained primary context (see CudaPinner, DeviceBuffer),
    // valid until released, which its holder does only after its last use here.
    check("cuCtxPushCurrent", unsafe { sys::cuCtxPushCurrent_v2(ctx) })?;
    let result = f();
    let mut popped = std::ptr::null_mut();
    // SAFETY: pops what was pushed above (calls made by `f` are balanced); valid
    // out-pointer.
    let pop = check("cuCtxPopCurrent", unsafe { sys::cuCtxPopCurrent_v2(&mut popped) });
    debug_assert!(
        pop.is_err() || popped == ctx,
        "popped another context than pushed"
    );
    result
}

/// The driver's name of device `device`.
pub(crate) fn device_name(device: i32) -> Result<String, CudaError> {
    let handle = self::device(device)?;
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: driver loaded; the buffer holds 256 bytes, as passed.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, handle)
    })?;
    // SAFETY: the driver NUL-terminates the name inside the buffer.
    Ok(unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}
