//! Streams: `cuStreamCreate`, `cuStreamDestroy_v2`, `cuStreamSynchronize`,
//! `cuStreamQuery` (`cuStreamWaitEvent` is with the events).
//!
//! Work on a stream is done when the call that queues it returns (see
//! `crate::events`), so synchronizing returns at once and a query is always
//! `CUDA_SUCCESS` (never `CUDA_ERROR_NOT_READY`). A stream argument must be one made
//! here and not destroyed (else `CUDA_ERROR_INVALID_HANDLE`), or a default stream (0,
//! `CU_STREAM_LEGACY` = 1, `CU_STREAM_PER_THREAD` = 2), valid without being made, which
//! like the driver's needs a current context. Making a stream needs one too.

use std::ffi::c_uint;

use super::{put, run};
use crate::log::{Call, hex};
use crate::result::{CuResult, INVALID_HANDLE, INVALID_VALUE};
use crate::state::{self, State};

/// `CU_STREAM_PER_THREAD`, the largest default stream handle.
const PER_THREAD: usize = 2;
/// `CU_STREAM_NON_BLOCKING`, the only stream flag.
const NON_BLOCKING: c_uint = 1;

/// Checks `stream` is usable now (see the module docs).
pub(super) fn check_stream(s: &State, stream: usize) -> Result<(), CuResult> {
    if stream <= PER_THREAD {
        s.current().map(drop)
    } else if s.events.streams.contains(&stream) {
        Ok(())
    } else {
        Err(INVALID_HANDLE)
    }
}

/// `cuStreamCreate`: flags `CU_STREAM_DEFAULT` (0) or `CU_STREAM_NON_BLOCKING` (1).
///
/// # Safety
///
/// `out` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreate(out: *mut usize, flags: c_uint) -> CuResult {
    let mut call = Call::new("cuStreamCreate");
    call.arg("flags", flags);
    run(call, |outs| {
        let h = state::with(|s| {
            s.check_init()?;
            s.current()?;
            if flags & !NON_BLOCKING != 0 || out.is_null() {
                return Err(INVALID_VALUE);
            }
            Ok(s.events.new_stream())
        })?;
        // SAFETY: non-null (checked), valid for a write by the caller's contract.
        unsafe { put(out, h) }?;
        outs.push(("stream", hex(h as u64)));
        Ok(())
    })
}

/// `cuStreamDestroy_v2`: a stream made here (not a default stream).
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamDestroy_v2(stream: usize) -> CuResult {
    let mut call = Call::new("cuStreamDestroy_v2");
    call.arg("stream", hex(stream as u64));
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            s.events
                .streams
                .remove(&stream)
                .then_some(())
                .ok_or(INVALID_HANDLE)
        })
    })
}

fn stream_call(name: &'static str, stream: usize) -> CuResult {
    let mut call = Call::new(name);
    call.arg("stream", hex(stream as u64));
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            check_stream(s, stream)
        })
    })
}

/// `cuStreamSynchronize`: returns at once, nothing is ever pending.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamSynchronize(stream: usize) -> CuResult {
    stream_call("cuStreamSynchronize", stream)
}

/// `cuStreamQuery`: `CUDA_SUCCESS`, all work is done.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamQuery(stream: usize) -> CuResult {
    stream_call("cuStreamQuery", stream)
}
