//! Initialisation and devices: `cuInit`, `cuDriverGetVersion`, count, handles,
//! attributes, name.

use std::ffi::{c_char, c_int, c_uint};

use super::{Outs, put, run};
use crate::config;
use crate::log::Call;
use crate::result::{CuResult, INVALID_DEVICE, INVALID_VALUE};
use crate::state;

/// `CU_DEVICE_ATTRIBUTE_*` values the double reports; every other valid attribute is 0.
const MULTIPROCESSOR_COUNT: c_int = 16;
const CAN_MAP_HOST_MEMORY: c_int = 19;
const UNIFIED_ADDRESSING: c_int = 41;
const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const HOST_REGISTER_SUPPORTED: c_int = 99;
const VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: c_int = 102;
const HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: c_int = 103;
const READ_ONLY_HOST_REGISTER_SUPPORTED: c_int = 113;
const IPC_EVENT_SUPPORTED: c_int = 125;
/// Attributes past this are invalid (the last one CUDA 12.8 defines is below it).
const MAX_ATTRIBUTE: c_int = 140;

/// Checks `device` is an ordinal of this double.
fn check_device(device: c_int) -> Result<(), CuResult> {
    if (0..config::get().devices).contains(&device) {
        Ok(())
    } else {
        Err(INVALID_DEVICE)
    }
}

/// `cuInit`: flags must be 0.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CuResult {
    let mut call = Call::new("cuInit");
    call.arg("flags", flags);
    run(call, |_| {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        state::with(|s| s.initialised = true);
        Ok(())
    })
}

/// `cuDriverGetVersion`: 12080 (the API version iox builds cudarc for).
///
/// # Safety
///
/// `version` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CuResult {
    run(Call::new("cuDriverGetVersion"), |outs: &mut Outs| {
        // SAFETY: the caller's out-pointer.
        unsafe { put(version, 12080) }?;
        outs.push(("version", "12080".into()));
        Ok(())
    })
}

/// `cuDeviceGetCount`.
///
/// # Safety
///
/// `count` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CuResult {
    run(Call::new("cuDeviceGetCount"), |outs| {
        state::with(|s| s.check_init())?;
        let n = config::get().devices;
        // SAFETY: the caller's out-pointer.
        unsafe { put(count, n) }?;
        outs.push(("count", n.to_string()));
        Ok(())
    })
}

/// `cuDeviceGet`: the handle of ordinal `ordinal` is the ordinal.
///
/// # Safety
///
/// `device` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CuResult {
    let mut call = Call::new("cuDeviceGet");
    call.arg("ordinal", ordinal);
    run(call, |outs| {
        state::with(|s| s.check_init())?;
        check_device(ordinal)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(device, ordinal) }?;
        outs.push(("device", ordinal.to_string()));
        Ok(())
    })
}

/// `cuDeviceGetAttribute`.
///
/// # Safety
///
/// `value` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    value: *mut c_int,
    attribute: c_int,
    device: c_int,
) -> CuResult {
    let mut call = Call::new("cuDeviceGetAttribute");
    call.arg("attribute", attribute).arg("device", device);
    run(call, |outs| {
        state::with(|s| s.check_init())?;
        check_device(device)?;
        let v = match attribute {
            MULTIPROCESSOR_COUNT => 1,
            CAN_MAP_HOST_MEMORY | UNIFIED_ADDRESSING | HOST_REGISTER_SUPPORTED => 1,
            VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED | HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED => 1,
            IPC_EVENT_SUPPORTED => 1,
            COMPUTE_CAPABILITY_MAJOR => 9,
            READ_ONLY_HOST_REGISTER_SUPPORTED => c_int::from(config::get().read_only_register),
            1..=MAX_ATTRIBUTE => 0,
            _ => return Err(INVALID_VALUE),
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(value, v) }?;
        outs.push(("value", v.to_string()));
        Ok(())
    })
}

/// `cuDeviceGetName`: says it is the double, so no one mistakes a figure for a GPU's.
///
/// # Safety
///
/// `name` is null or valid for `len` bytes of writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, device: c_int) -> CuResult {
    const NAME: &[u8] = b"iox CUDA driver double (no GPU)\0";
    let mut call = Call::new("cuDeviceGetName");
    call.arg("len", len).arg("device", device);
    run(call, |_| {
        state::with(|s| s.check_init())?;
        check_device(device)?;
        if name.is_null() || len <= 0 {
            return Err(INVALID_VALUE);
        }
        let n = NAME.len().min(len as usize);
        // SAFETY: `name` holds `len >= n` bytes (the caller's contract); the last byte
        // written is a NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(NAME.as_ptr(), name.cast::<u8>(), n);
            name.add(n - 1).write(0);
        }
        Ok(())
    })
}
