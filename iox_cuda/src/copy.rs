//! Copies between the host and device addresses (a sample's `device_ptr()`), for
//! programs that fill or check device samples without a kernel. They take raw device
//! addresses, which with unified addressing may be host memory too, so they are
//! `unsafe`: the caller vouches for the ranges.

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::{CudaError, check};
use crate::stream::Stream;

/// Enqueues a copy of `src` to device address `dst` (device `ordinal`) on `stream`.
///
/// ```
/// // No device address is valid without a driver.
/// // SAFETY: nothing is copied (the driver refuses first).
/// assert!(unsafe { iox_cuda::copy_to_device(0, 0, &[1, 2, 3], iox_cuda::Stream::null()) }.is_err());
/// ```
///
/// # Safety
///
/// `dst..dst + src.len()` is device memory no one else reads or writes until the copy
/// is done on `stream`. `src` stays valid until then if it is page-locked or
/// registered memory (then the copy is fully asynchronous); from pageable memory the
/// driver stages the bytes before returning, as its reference documents.
pub unsafe fn copy_to_device(ordinal: i32, dst: u64, src: &[u8], stream: Stream) -> Result<(), CudaError> {
    let ctx = Context::retain(ordinal)?;
    ctx.run(|| {
        // SAFETY: src is valid for src.len() bytes; the device range is the caller's
        // (this function's contract);
        // the stream is the caller's (Stream's contract).
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), src.len(), stream.as_raw().cast())
        })
    })
}

/// Enqueues a copy of `len` bytes at host address `src` to device address `dst`
/// (device `ordinal`) on `stream`: [`copy_to_device`] for host memory that may hold
/// bytes no one wrote (a strided tensor's gaps), which Rust may not view as a slice.
///
/// # Safety
///
/// As [`copy_to_device`], with `src..src + len` readable host memory in place of the
/// slice.
pub unsafe fn copy_host_ptr_to_device(
    ordinal: i32,
    dst: u64,
    src: *const u8,
    len: usize,
    stream: Stream,
) -> Result<(), CudaError> {
    let ctx = Context::retain(ordinal)?;
    ctx.run(|| {
        // SAFETY: the caller's ranges (this function's contract); the stream is theirs.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, stream.as_raw().cast())
        })
    })
}

/// Copies `dst.len()` bytes from device address `src` (device `ordinal`) to `dst`:
/// enqueued on `stream` (after the work there, e.g. a sample's `wait_on`), then
/// waited for on the host.
///
/// # Safety
///
/// `src..src + dst.len()` is device memory readable while the copy runs (e.g. a
/// sample held until this returns).
pub unsafe fn copy_to_host(ordinal: i32, src: u64, dst: &mut [u8], stream: Stream) -> Result<(), CudaError> {
    let ctx = Context::retain(ordinal)?;
    ctx.run(|| {
        // SAFETY: dst is valid for dst.len() bytes; the device range is the caller's.
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
///
/// # Safety
///
/// Both ranges are device memory, `src` readable and `dst` writable by nobody else,
/// until the copy is done on `stream`.
pub unsafe fn copy_device_to_device(
    ordinal: i32,
    dst: u64,
    src: u64,
    len: usize,
    stream: Stream,
) -> Result<(), CudaError> {
    let ctx = Context::retain(ordinal)?;
    ctx.run(|| {
        // SAFETY: the caller's ranges (this function's contract); the stream is theirs.
        check("cuMemcpyDtoDAsync", unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream.as_raw().cast())
        })
    })
}
