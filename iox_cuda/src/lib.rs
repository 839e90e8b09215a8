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
//! Device memory for `CudaDevice` pools ([`DeviceMemory`]): allocated with the
//! driver's virtual memory management, exported as a file descriptor, imported and
//! mapped once per process per allocation, unmapped, freed and released in that order
//! by the last user in the process. Stream order between processes: inter-process
//! events ([`IpcEvent`], [`OpenedEvent`]) recorded on and waited for by streams
//! ([`Stream`], [`OwnedStream`]), never on the host per sample. GPUs are named by UUID
//! ([`device_uuid`], [`ordinal_of`]).
//!
//! ```
//! match iox_cuda::register(0) {
//!     Ok(()) => println!("CudaPinned pools are now pinned with the CUDA driver"),
//!     Err(e) => println!("no CUDA pinning here: {e}"),
//! }
//! ```

mod context;
mod copy;
mod device;
mod device_memory;
mod driver;
mod events;
mod pinner;
mod stream;
mod uuid;

pub use copy::{copy_device_to_device, copy_host_ptr_to_device, copy_to_device, copy_to_host};
pub use device::DeviceBuffer;
pub use device_memory::DeviceMemory;
pub use driver::CudaError;
pub use events::{EventHandle, IpcEvent, OpenedEvent};
pub use pinner::CudaPinner;
pub use stream::{OwnedStream, Stream};
pub use uuid::{device_uuid, format_uuid, ordinal_of, parse_uuid};

use std::sync::Arc;

use iox_mempool::fork::{ForkLock, Rank};
use iox_mempool::{MemoryType, register_pinner};

/// The process's CUDA pinner. Every process-global lock of this crate is a
/// [`ForkLock`]: a `fork` waits for a thread inside one, so a forked child never finds
/// one held (and gets [`CudaError::ForkedChild`] from anything that would call the
/// driver its parent initialised).
static REGISTERED: ForkLock<Option<Arc<CudaPinner>>> = ForkLock::new(Rank::CudaPinnerRegistration, None);

/// Registers a [`CudaPinner`] for device `device` as this process's pinner of
/// [`MemoryType::CudaPinned`]. Idempotent for the same device; a second device is an
/// error (one process pins its CUDA pools for one device).
pub fn register(device: i32) -> Result<(), CudaError> {
    let mut registered = REGISTERED.lock();
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
    let pinner = REGISTERED.lock().clone().ok_or(CudaError::NotRegistered)?;
    pinner.device_pointer(host)
}
