//! Registered host memory: `cuMemHostRegister`, `cuMemHostUnregister`,
//! `cuMemHostGetDevicePointer`, `cuPointerGetAttribute`.
//!
//! A registration is recorded in the state's table with its flags, the context that
//! made it and a device address of its own; the log line of a register shows how the
//! range was mapped (`mapped=rw|ro|no`) and the device address (`dev=`), that of an
//! unregister how the range is mapped at that moment.

use std::ffi::{c_uint, c_void};

use super::{put, run};
use crate::config;
use crate::log::{Call, hex};
use crate::maps::{self, Mapped};
use crate::result::{
    CuResult, HOST_MEMORY_ALREADY_REGISTERED, HOST_MEMORY_NOT_REGISTERED, INVALID_VALUE, NOT_SUPPORTED,
};
use crate::state::{self, DEVICEMAP, IOMEMORY, PORTABLE, READ_ONLY, Registration};

/// `cuMemHostRegister_v2`: see the module docs and the crate docs for the checks.
///
/// # Safety
///
/// None beyond the driver's: the range is checked against the process's mappings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostRegister_v2(p: *mut c_void, bytesize: usize, flags: c_uint) -> CuResult {
    let mut call = Call::new("cuMemHostRegister_v2");
    call.arg("p", hex(p as u64))
        .arg("bytesize", bytesize)
        .arg("flags", hex(flags));
    run(call, |outs| {
        state::with(|s| {
            s.check_init()?;
            let (ctx, _) = s.current()?;
            if p.is_null() || bytesize == 0 || flags & !(PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY) != 0 {
                return Err(INVALID_VALUE);
            }
            if flags & READ_ONLY != 0 && !config::get().read_only_register {
                return Err(NOT_SUPPORTED);
            }
            let addr = p as usize;
            let end = addr.checked_add(bytesize).ok_or(INVALID_VALUE)?;
            let overlaps = s
                .registrations
                .range(..end)
                .next_back()
                .is_some_and(|(base, r)| base + r.len > addr);
            if overlaps {
                return Err(HOST_MEMORY_ALREADY_REGISTERED);
            }
            let mapped = maps::mapped(addr, bytesize);
            outs.push(("mapped", mapped.as_str().into()));
            match mapped {
                Mapped::No => return Err(INVALID_VALUE),
                Mapped::ReadOnly if flags & READ_ONLY == 0 => return Err(INVALID_VALUE),
                _ => {}
            }
            let device = s.device_range(bytesize);
            s.registrations.insert(
                addr,
                Registration {
                    len: bytesize,
                    flags,
                    ctx,
                    device,
                },
            );
            outs.push(("dev", hex(device)));
            Ok(())
        })
    })
}

/// `cuMemHostUnregister`: `p` must be the base of a registration (else
/// `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED`), and its range still mapped.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CuResult {
    let mut call = Call::new("cuMemHostUnregister");
    call.arg("p", hex(p as u64));
    run(call, |outs| {
        state::with(|s| {
            s.check_init()?;
            s.current()?;
            let len = s
                .registrations
                .get(&(p as usize))
                .ok_or(HOST_MEMORY_NOT_REGISTERED)?
                .len;
            let mapped = maps::mapped(p as usize, len);
            outs.push(("bytesize", len.to_string()));
            outs.push(("mapped", mapped.as_str().into()));
            if mapped == Mapped::No {
                return Err(INVALID_VALUE);
            }
            s.registrations.remove(&(p as usize));
            Ok(())
        })
    })
}

/// `cuMemHostGetDevicePointer_v2`: the device address of host address `p` inside a
/// registration made with `DEVICEMAP`, from a context that may use it (the one that
/// registered it, or any if it was registered `PORTABLE`). `flags` must be 0.
///
/// # Safety
///
/// `dptr` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    dptr: *mut u64,
    p: *mut c_void,
    flags: c_uint,
) -> CuResult {
    let mut call = Call::new("cuMemHostGetDevicePointer_v2");
    call.arg("p", hex(p as u64)).arg("flags", flags);
    run(call, |outs| {
        let device = state::with(|s| {
            s.check_init()?;
            let (ctx, _) = s.current()?;
            if flags != 0 {
                return Err(INVALID_VALUE);
            }
            let (base, r) = s.registration_at(p as usize).ok_or(INVALID_VALUE)?;
            if r.flags & DEVICEMAP == 0 || (r.flags & PORTABLE == 0 && r.ctx != ctx) {
                return Err(INVALID_VALUE);
            }
            Ok(r.device + (p as usize - base) as u64)
        })?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(dptr, device) }?;
        outs.push(("dptr", hex(device)));
        Ok(())
    })
}

/// `CU_POINTER_ATTRIBUTE_*` the double answers.
const CONTEXT: c_uint = 1;
const MEMORY_TYPE: c_uint = 2;
const DEVICE_POINTER: c_uint = 3;
const HOST_POINTER: c_uint = 4;
const DEVICE_ORDINAL: c_uint = 9;
/// `CU_MEMORYTYPE_HOST`, `CU_MEMORYTYPE_DEVICE`.
const MEMORYTYPE_HOST: c_uint = 1;
const MEMORYTYPE_DEVICE: c_uint = 2;

/// `cuPointerGetAttribute` for a registered host address or a device address (of a
/// registration, an allocation or a VMM mapping). Other attributes are `CUDA_ERROR_NOT_SUPPORTED`
/// here (a limit of the double); an address the driver does not know is
/// `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
///
/// `data` is null or valid for a write of the attribute's type (`CUcontext`,
/// `unsigned int`, `CUdeviceptr`, `void *`, `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttribute(data: *mut c_void, attribute: c_uint, ptr: u64) -> CuResult {
    let mut call = Call::new("cuPointerGetAttribute");
    call.arg("attribute", attribute).arg("ptr", hex(ptr));
    run(call, |outs| {
        // (memory type, device address, host address, context)
        let found = state::with(|s| {
            s.check_init()?;
            if let Some((base, r)) = s.registration_at(ptr as usize) {
                let offset = ptr - base as u64;
                return Ok((MEMORYTYPE_HOST, r.device + offset, ptr, r.ctx));
            }
            if let Some((base, r)) = s
                .registrations
                .iter()
                .find(|(_, r)| r.device <= ptr && ptr < r.device + r.len as u64)
            {
                return Ok((MEMORYTYPE_HOST, ptr, *base as u64 + (ptr - r.device), r.ctx));
            }
            if s.resolve_device(ptr, 1).is_some() || s.vmm.mapping_at(ptr).is_some() {
                let ctx = s.primary(0);
                return Ok((MEMORYTYPE_DEVICE, ptr, 0, ctx));
            }
            Err(INVALID_VALUE)
        })?;
        let (memory_type, device, host, ctx) = found;
        let ordinal = state::with(|s| s.contexts.get(&ctx).map_or(0, |c| c.device));
        // SAFETY: in each arm, `data` is valid for the attribute's type (the caller's
        // contract), checked for null by `put`.
        unsafe {
            match attribute {
                CONTEXT => put(data.cast::<*mut c_void>(), ctx as *mut c_void)?,
                MEMORY_TYPE => put(data.cast::<c_uint>(), memory_type)?,
                DEVICE_POINTER => put(data.cast::<u64>(), device)?,
                HOST_POINTER if host != 0 => put(data.cast::<*mut c_void>(), host as *mut c_void)?,
                HOST_POINTER => return Err(INVALID_VALUE),
                DEVICE_ORDINAL => put(data.cast::<i32>(), ordinal)?,
                _ => return Err(NOT_SUPPORTED),
            }
        }
        outs.push(("device", hex(device)));
        outs.push(("host", hex(host)));
        Ok(())
    })
}
