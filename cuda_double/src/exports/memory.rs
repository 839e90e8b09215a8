//! Device memory: `cuMemAlloc_v2`, `cuMemFree_v2` (copies are in `copies`).
//!
//! Device memory is a zeroed host allocation the double owns, at a made-up device
//! address (see `State::device_range`); a current context is required.

use super::{put, run};
use crate::log::{Call, hex};
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
