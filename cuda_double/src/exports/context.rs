//! Contexts: primary contexts retained and released with a count, created contexts,
//! and each thread's stack of current contexts.

use std::ffi::{c_int, c_uint, c_void};

use super::{put, run};
use crate::config;
use crate::log::{Call, hex};
use crate::result::{CuResult, INVALID_CONTEXT, INVALID_DEVICE};
use crate::state;

type Ctx = *mut c_void;

fn check_device(device: c_int) -> Result<(), CuResult> {
    if (0..config::get().devices).contains(&device) {
        Ok(())
    } else {
        Err(INVALID_DEVICE)
    }
}

/// `cuDevicePrimaryCtxRetain`: counts one more retain of the device's primary context
/// (making it live) and hands out its handle.
///
/// # Safety
///
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut Ctx, device: c_int) -> CuResult {
    let mut call = Call::new("cuDevicePrimaryCtxRetain");
    call.arg("device", device);
    run(call, |outs| {
        state::with(|s| {
            s.check_init()?;
            check_device(device)?;
            let handle = s.primary(device);
            // SAFETY: the caller's out-pointer.
            unsafe { put(ctx, handle as Ctx) }?;
            let count = s.primary_retains.entry(device).or_default();
            *count += 1;
            outs.push(("ctx", hex(handle as u64)));
            outs.push(("retains", count.to_string()));
            let count = *count;
            if let Some(c) = s.contexts.get_mut(&handle) {
                c.alive = count > 0;
            }
            Ok(())
        })
    })
}

/// `cuDevicePrimaryCtxRelease_v2`: one retain less; at 0 the primary context is
/// destroyed (its handle is invalid until retained again). Releasing a primary
/// context that is not retained is `CUDA_ERROR_INVALID_CONTEXT`.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(device: c_int) -> CuResult {
    let mut call = Call::new("cuDevicePrimaryCtxRelease_v2");
    call.arg("device", device);
    run(call, |outs| {
        state::with(|s| {
            s.check_init()?;
            check_device(device)?;
            let handle = s.primary(device);
            let count = s.primary_retains.entry(device).or_default();
            if *count == 0 {
                return Err(INVALID_CONTEXT);
            }
            *count -= 1;
            outs.push(("retains", count.to_string()));
            let alive = *count > 0;
            if let Some(c) = s.contexts.get_mut(&handle) {
                c.alive = alive;
            }
            Ok(())
        })
    })
}

/// `cuCtxCreate_v2`: a new context of `device`, pushed on this thread's stack.
///
/// # Safety
///
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate_v2(ctx: *mut Ctx, flags: c_uint, device: c_int) -> CuResult {
    let mut call = Call::new("cuCtxCreate_v2");
    call.arg("flags", flags).arg("device", device);
    run(call, |outs| {
        let handle = state::with(|s| -> Result<usize, CuResult> {
            s.check_init()?;
            check_device(device)?;
            Ok(s.create(device))
        })?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(ctx, handle as Ctx) }?;
        state::stack(|st| st.push(handle));
        outs.push(("ctx", hex(handle as u64)));
        Ok(())
    })
}

/// `cuCtxDestroy_v2`: destroys a created context (removed from this thread's stack if
/// it is current here).
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: Ctx) -> CuResult {
    let mut call = Call::new("cuCtxDestroy_v2");
    call.arg("ctx", hex(ctx as u64));
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.live(ctx as usize)?;
            if state::is_primary(ctx as usize) {
                return Err(INVALID_CONTEXT);
            }
            if let Some(c) = s.contexts.get_mut(&(ctx as usize)) {
                c.alive = false;
            }
            Ok(())
        })?;
        state::stack(|st| st.retain(|&c| c != ctx as usize));
        Ok(())
    })
}

/// `cuCtxSetCurrent`: replaces the top of this thread's stack with `ctx` (null pops
/// it), as documented.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: Ctx) -> CuResult {
    let mut call = Call::new("cuCtxSetCurrent");
    call.arg("ctx", hex(ctx as u64));
    run(call, |_| {
        state::with(|s| -> Result<(), CuResult> {
            s.check_init()?;
            if !ctx.is_null() {
                s.live(ctx as usize)?;
            }
            Ok(())
        })?;
        state::stack(|st| {
            st.pop();
            if !ctx.is_null() {
                st.push(ctx as usize);
            }
        });
        Ok(())
    })
}

/// `cuCtxGetCurrent`: the top of this thread's stack, or null.
///
/// # Safety
///
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut Ctx) -> CuResult {
    run(Call::new("cuCtxGetCurrent"), |outs| {
        state::with(|s| s.check_init())?;
        let current = state::current().unwrap_or(0);
        // SAFETY: the caller's out-pointer.
        unsafe { put(ctx, current as Ctx) }?;
        outs.push(("ctx", hex(current as u64)));
        Ok(())
    })
}

/// `cuCtxPushCurrent_v2`: pushes a live context on this thread's stack.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: Ctx) -> CuResult {
    let mut call = Call::new("cuCtxPushCurrent_v2");
    call.arg("ctx", hex(ctx as u64));
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.live(ctx as usize)
        })?;
        state::stack(|st| st.push(ctx as usize));
        Ok(())
    })
}

/// `cuCtxPopCurrent_v2`: pops this thread's current context (an empty stack is
/// `CUDA_ERROR_INVALID_CONTEXT`) and hands it out if `ctx` is not null.
///
/// # Safety
///
/// `ctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(ctx: *mut Ctx) -> CuResult {
    run(Call::new("cuCtxPopCurrent_v2"), |outs| {
        state::with(|s| s.check_init())?;
        let popped = state::stack(|st| st.pop()).ok_or(INVALID_CONTEXT)?;
        if !ctx.is_null() {
            // SAFETY: the caller's out-pointer, non-null.
            unsafe { put(ctx, popped as Ctx) }?;
        }
        outs.push(("ctx", hex(popped as u64)));
        Ok(())
    })
}
