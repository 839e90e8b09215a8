//! `cuGetErrorName` and `cuGetErrorString`: static, NUL-terminated strings; an unknown
//! code is `CUDA_ERROR_INVALID_VALUE` with a null string, as documented. They work
//! before `cuInit`.

use std::ffi::c_char;

use super::{put, run};
use crate::log::Call;
use crate::result::{self, CuResult, INVALID_VALUE};

fn lookup(
    name: &'static str,
    code: CuResult,
    out: *mut *const c_char,
    pick: fn((&'static str, &'static str)) -> &'static str,
) -> CuResult {
    let mut call = Call::new(name);
    call.arg("error", code);
    run(call, |_| match result::describe(code) {
        // SAFETY: the caller's out-pointer; the string is static and NUL-terminated.
        Some(d) => unsafe { put(out, pick(d).as_ptr().cast()) },
        None => {
            // SAFETY: as above; null for an unknown code.
            unsafe { put(out, std::ptr::null()) }?;
            Err(INVALID_VALUE)
        }
    })
}

/// `cuGetErrorName`.
///
/// # Safety
///
/// `out` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(code: CuResult, out: *mut *const c_char) -> CuResult {
    lookup("cuGetErrorName", code, out, |d| d.0)
}

/// `cuGetErrorString`.
///
/// # Safety
///
/// `out` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(code: CuResult, out: *mut *const c_char) -> CuResult {
    lookup("cuGetErrorString", code, out, |d| d.1)
}
