//! Events and IPC event handles: `cuEventCreate`, `cuEventDestroy_v2`,
//! `cuEventRecord`, `cuEventQuery`, `cuEventSynchronize`, `cuStreamWaitEvent`,
//! `cuIpcGetEventHandle`, `cuIpcOpenEventHandle`.
//!
//! Work is done when it is queued (see `crate::events`), so an event is complete once
//! recorded, and also before (the reference: `cuEventQuery` of an event never
//! recorded is `CUDA_SUCCESS`); a wait never waits. What tests check is the order of
//! the calls, which the log keeps: every line about an event names it as
//! `event=PID:ID`, the creating process's pid and its id there, also in a process
//! that opened it from an IPC handle, so a wait in one process can be matched with
//! the record it waited for in another; `cuEventRecord` lines add `records=N`, how
//! often this process's handle was recorded.
//!
//! As the reference says: creating an event needs a current context, and
//! `CU_EVENT_INTERPROCESS` only goes with `CU_EVENT_DISABLE_TIMING`; an IPC handle is
//! only given for an event made with both (else `CUDA_ERROR_INVALID_VALUE`). The handle
//! (64 bytes) holds a magic, the creator's pid and the event's id. Opening a handle
//! without the magic is `CUDA_ERROR_INVALID_VALUE`; opening one made by this same
//! process is `CUDA_ERROR_INVALID_CONTEXT` (the reference opens handles "exported from
//! another process"; HIP, which follows CUDA, documents this code for it). An unknown
//! event handle is `CUDA_ERROR_INVALID_HANDLE`.

use std::ffi::c_uint;

use super::streams::check_stream;
use super::{Outs, put, run};
use crate::events::{self, BLOCKING_SYNC, DISABLE_TIMING, Event, INTERPROCESS};
use crate::log::{Call, hex};
use crate::result::{CuResult, INVALID_CONTEXT, INVALID_HANDLE, INVALID_VALUE};
use crate::state;

/// `CU_EVENT_WAIT_EXTERNAL`, the only `cuStreamWaitEvent` flag.
const WAIT_EXTERNAL: c_uint = 1;

/// `CUipcEventHandle`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IpcEventHandle([u8; 64]);

fn name_event(outs: &mut Outs, e: &Event) {
    outs.push(("event", e.name()));
}

/// `cuEventCreate`: flags from `CU_EVENT_BLOCKING_SYNC`, `_DISABLE_TIMING`,
/// `_INTERPROCESS` (only with `_DISABLE_TIMING`); a current context is required.
///
/// # Safety
///
/// `out` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventCreate(out: *mut usize, flags: c_uint) -> CuResult {
    let mut call = Call::new("cuEventCreate");
    call.arg("flags", flags);
    run(call, |outs| {
        let (h, e) = state::with(|s| {
            s.check_init()?;
            s.current()?;
            let unknown = flags & !(BLOCKING_SYNC | DISABLE_TIMING | INTERPROCESS) != 0;
            let ipc_timed = flags & INTERPROCESS != 0 && flags & DISABLE_TIMING == 0;
            if unknown || ipc_timed || out.is_null() {
                return Err(INVALID_VALUE);
            }
            Ok(s.events.new_event(flags))
        })?;
        // SAFETY: non-null (checked), valid for a write by the caller's contract.
        unsafe { put(out, h) }?;
        outs.push(("handle", hex(h as u64)));
        name_event(outs, &e);
        Ok(())
    })
}

/// `cuEventDestroy_v2`: an event made or opened here.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy_v2(event: usize) -> CuResult {
    let mut call = Call::new("cuEventDestroy_v2");
    call.arg("handle", hex(event as u64));
    run(call, |outs| {
        let e = state::with(|s| {
            s.check_init()?;
            s.events.events.remove(&event).ok_or(INVALID_HANDLE)
        })?;
        name_event(outs, &e);
        Ok(())
    })
}

/// `cuEventRecord`: on a valid stream; counts the records of this handle.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecord(event: usize, stream: usize) -> CuResult {
    let mut call = Call::new("cuEventRecord");
    call.arg("handle", hex(event as u64))
        .arg("stream", hex(stream as u64));
    run(call, |outs| {
        let e = state::with(|s| {
            s.check_init()?;
            check_stream(s, stream)?;
            let e = s.events.events.get_mut(&event).ok_or(INVALID_HANDLE)?;
            e.records += 1;
            Ok::<_, CuResult>(*e)
        })?;
        name_event(outs, &e);
        outs.push(("records", e.records.to_string()));
        Ok(())
    })
}

fn event_call(name: &'static str, event: usize) -> CuResult {
    let mut call = Call::new(name);
    call.arg("handle", hex(event as u64));
    run(call, |outs| {
        let e = state::with(|s| {
            s.check_init()?;
            s.events.events.get(&event).copied().ok_or(INVALID_HANDLE)
        })?;
        name_event(outs, &e);
        Ok(())
    })
}

/// `cuEventQuery`: `CUDA_SUCCESS`, recorded or not (see the module docs).
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventQuery(event: usize) -> CuResult {
    event_call("cuEventQuery", event)
}

/// `cuEventSynchronize`: returns at once (see `cuEventQuery`).
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventSynchronize(event: usize) -> CuResult {
    event_call("cuEventSynchronize", event)
}

/// `cuStreamWaitEvent`: flags 0 or `CU_EVENT_WAIT_EXTERNAL`; returns at once, logging
/// the event waited for.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamWaitEvent(stream: usize, event: usize, flags: c_uint) -> CuResult {
    let mut call = Call::new("cuStreamWaitEvent");
    call.arg("stream", hex(stream as u64))
        .arg("handle", hex(event as u64))
        .arg("flags", flags);
    run(call, |outs| {
        let e = state::with(|s| {
            s.check_init()?;
            check_stream(s, stream)?;
            if flags & !WAIT_EXTERNAL != 0 {
                return Err(INVALID_VALUE);
            }
            s.events.events.get(&event).copied().ok_or(INVALID_HANDLE)
        })?;
        name_event(outs, &e);
        Ok(())
    })
}

/// `cuIpcGetEventHandle`: for an event made here with `CU_EVENT_INTERPROCESS |
/// CU_EVENT_DISABLE_TIMING`.
///
/// # Safety
///
/// `out` is null or valid for a write of 64 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcGetEventHandle(out: *mut IpcEventHandle, event: usize) -> CuResult {
    let mut call = Call::new("cuIpcGetEventHandle");
    call.arg("handle", hex(event as u64));
    run(call, |outs| {
        let e = state::with(|s| {
            s.check_init()?;
            let e = *s.events.events.get(&event).ok_or(INVALID_HANDLE)?;
            let ipc = INTERPROCESS | DISABLE_TIMING;
            if e.flags & ipc != ipc || e.origin.0 != std::process::id() {
                return Err(INVALID_VALUE);
            }
            Ok(e)
        })?;
        // SAFETY: null or valid for 64 bytes, by the caller's contract.
        unsafe { put(out, IpcEventHandle(events::encode(e.origin))) }?;
        name_event(outs, &e);
        Ok(())
    })
}

/// `cuIpcOpenEventHandle`: a local event standing for another process's event; a
/// current context is required.
///
/// # Safety
///
/// `out` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcOpenEventHandle(out: *mut usize, handle: IpcEventHandle) -> CuResult {
    let mut call = Call::new("cuIpcOpenEventHandle");
    let origin = events::decode(&handle.0);
    if let Some((pid, id)) = origin {
        call.arg("of", format!("{pid}:{id}"));
    }
    run(call, |outs| {
        let (h, e) = state::with(|s| {
            s.check_init()?;
            s.current()?;
            let origin = origin.ok_or(INVALID_VALUE)?;
            if origin.0 == std::process::id() {
                return Err(INVALID_CONTEXT);
            }
            if out.is_null() {
                return Err(INVALID_VALUE);
            }
            Ok(s.events.open_event(origin))
        })?;
        // SAFETY: non-null (checked), valid for a write by the caller's contract.
        unsafe { put(out, h) }?;
        outs.push(("handle", hex(h as u64)));
        name_event(outs, &e);
        Ok(())
    })
}
