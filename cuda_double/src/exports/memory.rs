//! Device memory and copies: `cuMemAlloc_v2`, `cuMemFree_v2`, `cuMemcpyHtoD_v2`,
//! `cuMemcpyDtoH_v2`.
//!
//! Device memory is a host allocation the double owns, at a made-up device address;
//! a registration's device range stands for its host bytes. Copies are synchronous
//! `memcpy`s (so copy speeds measured against the double are memory bandwidth, the
//! same for pinned and pageable sources). The host side of a copy is checked against
//! the process's mappings first.

use std::ffi::c_void;

use super::{put, run};
use crate::log::{Call, hex};
use crate::maps::{self, Mapped};
use crate::result::{CuResult, INVALID_VALUE};
use crate::state;

/// `cuMemAlloc_v2`: `bytesize` bytes of "device" memory (0 is invalid).
///
/// # Safety
///
/// `dptr` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut u64, bytesize: usize) -> CuResult {
    let mut call = Call::new("cuMemAlloc_v2");
    call.arg("bytesize", bytesize);
    run(call, |outs| {
        let device = state::with(|s| {
            s.check_init()?;
            s.current()?;
            if bytesize == 0 {
                return Err(INVALID_VALUE);
            }
            let device = s.device_range(bytesize);
            s.allocations
                .insert(device, vec![0u8; bytesize].into_boxed_slice());
            Ok(device)
        })?;
        // SAFETY: the caller's out-pointer.
        if let Err(e) = unsafe { put(dptr, device) } {
            state::with(|s| s.allocations.remove(&device));
            return Err(e);
        }
        outs.push(("dptr", hex(device)));
        Ok(())
    })
}

/// `cuMemFree_v2`: `dptr` must be the base of an allocation.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFree_v2(dptr: u64) -> CuResult {
    let mut call = Call::new("cuMemFree_v2");
    call.arg("dptr", hex(dptr));
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.current()?;
            s.allocations.remove(&dptr).map(drop).ok_or(INVALID_VALUE)
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
    let mut call = Call::new("cuMemcpyHtoD_v2");
    call.arg("dst", hex(dst))
        .arg("src", hex(src as u64))
        .arg("bytesize", len);
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.current()?;
            if len == 0 {
                return Ok(());
            }
            let (to, writable) = s.resolve_device(dst, len).ok_or(INVALID_VALUE)?;
            if !writable || maps::mapped(src as usize, len) == Mapped::No {
                return Err(INVALID_VALUE);
            }
            // SAFETY: `src` is mapped readable for `len` bytes (checked just now); `to`
            // is `len` bytes of an allocation we own or of a registered range mapped
            // writable; `copy` allows the two to overlap.
            unsafe { std::ptr::copy(src.cast::<u8>(), to, len) };
            Ok(())
        })
    })
}

/// `cuMemcpyDtoH_v2`: `len` bytes from device `src` to host `dst`.
///
/// # Safety
///
/// None beyond the driver's: both sides are checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, len: usize) -> CuResult {
    let mut call = Call::new("cuMemcpyDtoH_v2");
    call.arg("dst", hex(dst as u64))
        .arg("src", hex(src))
        .arg("bytesize", len);
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.current()?;
            if len == 0 {
                return Ok(());
            }
            let (from, _) = s.resolve_device(src, len).ok_or(INVALID_VALUE)?;
            if maps::mapped(dst as usize, len) != Mapped::ReadWrite {
                return Err(INVALID_VALUE);
            }
            // SAFETY: `from` is `len` readable bytes (an allocation, or a registered
            // range, which is mapped); `dst` is mapped writable for `len` bytes
            // (checked just now).
            unsafe { std::ptr::copy(from, dst.cast::<u8>(), len) };
            Ok(())
        })
    })
}
