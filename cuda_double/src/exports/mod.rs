//! The exported driver entry points, `extern "C"` under the driver's symbol names
//! (cudarc resolves the versioned ones, e.g. `cuMemHostRegister_v2`).
//!
//! Every entry point goes through [`run`]: it logs the call with the calling thread's
//! current context (`cur=`), returns an injected failure before doing anything if one
//! was asked for, and otherwise runs the call's body, whose `Err(code)` is the result.
//! Out-pointers are written through [`put`], which refuses null ones as the driver
//! does (`CUDA_ERROR_INVALID_VALUE`).

#![allow(non_snake_case)]

mod context;
mod copies;
mod device;
mod errors;
mod events;
mod host;
mod mapping;
mod memory;
mod streams;
mod stubs;
mod vmm;

use crate::config;
use crate::log::{Call, hex};
use crate::result::{CuResult, INVALID_VALUE, SUCCESS};
use crate::state;

/// What a call hands back, for its log line.
pub(crate) type Outs = Vec<(&'static str, String)>;

/// Logs and runs one call (see the module docs).
pub(crate) fn run(mut call: Call, body: impl FnOnce(&mut Outs) -> Result<(), CuResult>) -> CuResult {
    call.arg("cur", hex(state::current().unwrap_or(0) as u64));
    if let Some(code) = config::get().injected(call.name()) {
        return call.finish(code, &[("injected", "yes".into())]);
    }
    let mut outs = Outs::new();
    let code = body(&mut outs).err().unwrap_or(SUCCESS);
    call.finish(code, &outs)
}

/// Writes `value` through the caller's out-pointer `out`.
///
/// # Safety
///
/// `out` is null or valid for a write of a `T` (the driver's contract with its caller).
pub(crate) unsafe fn put<T>(out: *mut T, value: T) -> Result<(), CuResult> {
    if out.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null, and valid for writes by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}
