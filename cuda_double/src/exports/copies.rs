//! Copies and fills: `cuMemcpyHtoD_v2`, `cuMemcpyDtoH_v2`, `cuMemcpyDtoD_v2`, their
//! `Async` forms, `cuMemsetD8_v2` and `cuMemsetD8Async`.
//!
//! Every one is a `memcpy`/`memset` done before the call returns, also the `Async`
//! ones (the double has no device to run work later): their stream is only checked
//! (a default stream, or one made here) and logged. So copy speeds measured against
//! the double are memory bandwidth, the same for pinned and pageable memory.
//!
//! A device range resolves through `State::resolve_device`: a registration, a
//! `cuMemAlloc` allocation, or a VMM mapping the current context's device has access
//! to (read access to read it, read-write to write it). A range it does not resolve,
//! or a host side that is not mapped (writable, to write it), is
//! `CUDA_ERROR_INVALID_VALUE`, checked before any byte moves. A current context is
//! required.

use std::ffi::{c_uchar, c_void};

use super::run;
use super::streams::check_stream;
use crate::log::{Call, hex};
use crate::maps::{self, Mapped};
use crate::result::{CuResult, INVALID_VALUE};
use crate::state::{self, State};

/// One side of a copy.
#[derive(Clone, Copy)]
enum Side {
    Host(usize),
    Device(u64),
}

impl Side {
    fn addr(self) -> u64 {
        match self {
            Side::Host(a) => a as u64,
            Side::Device(a) => a,
        }
    }

    /// The bytes of this side, checked for `len` bytes of reading or writing.
    fn bytes(self, s: &mut State, len: usize, write: bool) -> Result<*mut u8, CuResult> {
        match self {
            Side::Host(a) => {
                let ok = match maps::mapped(a, len) {
                    Mapped::No => false,
                    Mapped::ReadOnly => !write,
                    Mapped::ReadWrite => true,
                };
                ok.then_some(a as *mut u8).ok_or(INVALID_VALUE)
            }
            Side::Device(d) => match s.resolve_device(d, len) {
                Some((p, writable)) if writable || !write => Ok(p),
                _ => Err(INVALID_VALUE),
            },
        }
    }
}

/// Runs one copy of `len` bytes from `src` to `dst`, on `stream` if it has one.
fn copy(name: &'static str, dst: Side, src: Side, len: usize, stream: Option<usize>) -> CuResult {
    let mut call = Call::new(name);
    call.arg("dst", hex(dst.addr()))
        .arg("src", hex(src.addr()))
        .arg("bytesize", len);
    if let Some(st) = stream {
        call.arg("stream", hex(st as u64));
    }
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.current()?;
            if let Some(st) = stream {
                check_stream(s, st)?;
            }
            if len == 0 {
                return Ok(());
            }
            let from = src.bytes(s, len, false)?;
            let to = dst.bytes(s, len, true)?;
            // SAFETY: `from` is readable and `to` writable for `len` bytes (checked
            // just now, under the state's lock, so no mapping of the double's goes
            // away meanwhile); `copy` allows the two to overlap.
            unsafe { std::ptr::copy(from.cast_const(), to, len) };
            Ok(())
        })
    })
}

/// Runs one fill of `n` bytes at device `dst` with `value`.
fn fill(name: &'static str, dst: u64, value: c_uchar, n: usize, stream: Option<usize>) -> CuResult {
    let mut call = Call::new(name);
    call.arg("dst", hex(dst)).arg("value", value).arg("n", n);
    if let Some(st) = stream {
        call.arg("stream", hex(st as u64));
    }
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.current()?;
            if let Some(st) = stream {
                check_stream(s, st)?;
            }
            if n == 0 {
                return Ok(());
            }
            let to = Side::Device(dst).bytes(s, n, true)?;
            // SAFETY: `to` is writable for `n` bytes (checked just now, under the lock).
            unsafe { std::ptr::write_bytes(to, value, n) };
            Ok(())
        })
    })
}

/// `cuMemcpyHtoD_v2`: `len` bytes from host `src` to device `dst`.
///
/// # Safety
///
/// None beyond the driver's: both sides are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, len: usize) -> CuResult {
    copy(
        "cuMemcpyHtoD_v2",
        Side::Device(dst),
        Side::Host(src as usize),
        len,
        None,
    )
}

/// `cuMemcpyDtoH_v2`: `len` bytes from device `src` to host `dst`.
///
/// # Safety
///
/// None beyond the driver's: both sides are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, len: usize) -> CuResult {
    copy(
        "cuMemcpyDtoH_v2",
        Side::Host(dst as usize),
        Side::Device(src),
        len,
        None,
    )
}

/// `cuMemcpyDtoD_v2`: `len` bytes from device `src` to device `dst`.
///
/// # Safety
///
/// None beyond the driver's: both sides are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(dst: u64, src: u64, len: usize) -> CuResult {
    copy("cuMemcpyDtoD_v2", Side::Device(dst), Side::Device(src), len, None)
}

/// `cuMemcpyHtoDAsync_v2`: as `cuMemcpyHtoD_v2`, done before it returns.
///
/// # Safety
///
/// None beyond the driver's: both sides are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: u64,
    src: *const c_void,
    len: usize,
    stream: usize,
) -> CuResult {
    copy(
        "cuMemcpyHtoDAsync_v2",
        Side::Device(dst),
        Side::Host(src as usize),
        len,
        Some(stream),
    )
}

/// `cuMemcpyDtoHAsync_v2`: as `cuMemcpyDtoH_v2`, done before it returns.
///
/// # Safety
///
/// None beyond the driver's: both sides are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: u64,
    len: usize,
    stream: usize,
) -> CuResult {
    copy(
        "cuMemcpyDtoHAsync_v2",
        Side::Host(dst as usize),
        Side::Device(src),
        len,
        Some(stream),
    )
}

/// `cuMemcpyDtoDAsync_v2`: as `cuMemcpyDtoD_v2`, done before it returns.
///
/// # Safety
///
/// None beyond the driver's: both sides are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(dst: u64, src: u64, len: usize, stream: usize) -> CuResult {
    copy(
        "cuMemcpyDtoDAsync_v2",
        Side::Device(dst),
        Side::Device(src),
        len,
        Some(stream),
    )
}

/// `cuMemsetD8_v2`: `n` bytes at device `dst` set to `value`.
///
/// # Safety
///
/// None beyond the driver's: the range is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: u64, value: c_uchar, n: usize) -> CuResult {
    fill("cuMemsetD8_v2", dst, value, n, None)
}

/// `cuMemsetD8Async`: as `cuMemsetD8_v2`, done before it returns.
///
/// # Safety
///
/// None beyond the driver's: the range is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8Async(dst: u64, value: c_uchar, n: usize, stream: usize) -> CuResult {
    fill("cuMemsetD8Async", dst, value, n, Some(stream))
}
