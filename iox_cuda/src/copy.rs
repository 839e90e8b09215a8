//! Copies between the host and device addresses (a sample's `device_ptr()`), for
//! programs that fill or check device samples without a kernel.

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::{CudaError, check};
use crate::stream::Stream;

/// Enqueues a copy of `src` to device address `dst` (device `ordinal`) on `stream`.
/// `src` may be dropped when this returns: from pageable host memory the driver
/// stages the bytes before returning, as its reference documents.
///
/// ```
/// // No device address is valid without a driver.
/// assert!(iox_cuda::copy_to_device(0, 0, &[1, 2, 3], iox_cuda::Stream::null()).is_err());
/// ```
pub fn copy_to_device(ordinal: i32, dst: u64, src: &[u8], stream: Stream) -> Result<(), CudaError> {
    let ctx = Context::retain(ordinal)?;
    ctx.run(|| {
        // SAFETY: src is valid for src.len() bytes; the driver checks the device range;
        // the stream is the caller's (Stream's contract).
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), src.len(), stream.as_raw().cast())
        })
    })
}

/// Copies `dst.len()` bytes from device address `src` (device `ordinal`) to `dst`:
/// enqueued on `stream` (after the work there, e.g. a sample's `wait_on`), then
/// waited for on the host.
pub fn copy_to_host(ordinal: i32, src: u64, dst: &mut [u8], stream: Stream) -> Result<(), CudaError> {
    let ctx = Context::retain(ordinal)?;
    ctx.run(|| {
        // SAFETY: dst is valid for dst.len() bytes; the driver checks the device range.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), src, dst.len(), stream.as_raw().cast())
        })?;
        // SAFETY: as above.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(stream.as_raw().cast())
        })
    })
}

/// Enqueues a copy of `len` bytes from device address `src` to `dst` (device
/// `ordinal`) on `stream`.
pub fn copy_device_to_device(
    ordinal: i32,
    dst: u64,
    src: u64,
    len: usize,
    stream: Stream,
) -> Result<(), CudaError> {
    let ctx = Context::retain(ordinal)?;
    ctx.run(|| {
        // SAFETY: device addresses, checked by the driver; the stream is the caller's.
        check("cuMemcpyDtoDAsync", unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream.as_raw().cast())
        })
    })
}
