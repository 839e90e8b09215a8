//! # iox_cuda
//!
//! Pins iox pools for a GPU: registers the payload mapping of a `CudaPinned` service
//! with the CUDA driver (`cuMemHostRegister`, page-locked and mapped into the device's
//! address space), once per process and pool, through `iox_mempool`'s pin registry.
//!
//! The driver is loaded at run time (cudarc's dynamic loading): a build and a run on
//! a machine without CUDA work; asking for the pinner there is a [`CudaError`], never a
//! panic (cudarc panics on a missing library, so presence is checked first, once).
//!
//! ```
//! match iox_cuda::register(0) {
//!     Ok(()) => println!("CudaPinned pools are now pinned with the CUDA driver"),
//!     Err(e) => println!("no CUDA pinning here: {e}"),
//! }
//! ```

mod device;
mod driver;
mod pinner;

pub use device::DeviceBuffer;
pub use driver::CudaError;
pub use pinner::CudaPinner;

use std::sync::{Arc, Mutex};

use iox_mempool::{MemoryType, register_pinner};

static REGISTERED: Mutex<Option<Arc<CudaPinner>>> = Mutex::new(None);

/// Registers a [`CudaPinner`] for device `device` as this process's pinner of
/// [`MemoryType::CudaPinned`]. Idempotent for the same device; a second device is an
/// error (one process pins its CUDA pools for one device).
pub fn register(device: i32) -> Result<(), CudaError> {
    let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    match registered.as_ref().map(|p| p.ordinal()) {
        Some(d) if d == device => return Ok(()),
        Some(d) => {
            return Err(CudaError::OtherDeviceRegistered {
                registered: d,
                requested: device,
            });
        }
        None => {}
    }
    let pinner = Arc::new(CudaPinner::new(device)?);
    register_pinner(MemoryType::CudaPinned, pinner.clone()).expect("CudaPinned is a pinnable type");
    *registered = Some(pinner);
    Ok(())
}

/// The name the driver gives device `device` (a machine's GPU model, or the test
/// double's "iox CUDA driver double (no GPU)"), to label measurements.
///
/// ```
/// if let Ok(name) = iox_cuda::device_name(0) {
///     println!("measured on {name}");
/// }
/// ```
pub fn device_name(device: i32) -> Result<String, CudaError> {
    driver::device_name(device)
}

/// The device address of a host address inside a pool pinned by the CUDA pinner,
/// asked of the driver (a context push, `cuMemHostGetDevicePointer`, a pop). A
/// received sample's `device_ptr()` needs no driver call: it adds the chunk's offset
/// to the device address learned when the pool was pinned.
///
/// ```
/// // Before `register` there is no pinner to ask.
/// assert!(iox_cuda::device_pointer(std::ptr::null()).is_err());
/// ```
pub fn device_pointer(host: *const u8) -> Result<u64, CudaError> {
    let pinner = REGISTERED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or(CudaError::NotRegistered)?;
    pinner.device_pointer(host)
}
