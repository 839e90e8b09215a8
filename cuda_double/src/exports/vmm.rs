//! Device UUIDs and VMM allocation handles: `cuDeviceGetUuid`, `cuDeviceGetUuid_v2`,
//! `cuMemGetAllocationGranularity`, `cuMemCreate`, `cuMemExportToShareableHandle`,
//! `cuMemImportFromShareableHandle`, `cuMemRelease` (address ranges and mappings are in
//! `mapping`).
//!
//! An allocation is a memfd (see `crate::vmm`); its export is a new descriptor of that
//! memfd, so another process that imports it maps the same bytes, as with the driver.
//! None of these need a current context, only `cuInit` (the reference names the
//! device in the properties, not through a context).
//!
//! Refused, as the reference documents: properties other than pinned memory on a
//! valid device (`CUDA_ERROR_INVALID_VALUE`, `CUDA_ERROR_INVALID_DEVICE` for the
//! ordinal); a size that is not a non-zero multiple of the granularity; non-zero
//! flags; an export of an allocation made without `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`
//! requested (`CUDA_ERROR_INVALID_VALUE`); handle types other than the POSIX
//! descriptor (`CUDA_ERROR_NOT_SUPPORTED`: the double has no Win32 or fabric
//! handles); an import of a descriptor that is not open or not an export of the
//! double's (`CUDA_ERROR_INVALID_VALUE`, checked, never a crash).

use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use super::{put, run};
use crate::config;
use crate::log::{Call, hex};
use crate::result::{CuResult, INVALID_DEVICE, INVALID_VALUE, NOT_SUPPORTED, OUT_OF_MEMORY};
use crate::state;
use crate::vmm::{Allocation, GRANULARITY, MEMFD_NAME};

/// `CUmemLocation` (CUDA 12.8: type, id).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Location {
    pub(super) kind: c_uint,
    pub(super) id: c_int,
}

/// `CUmemAllocationProp` (CUDA 12.8 layout: type, requested handle types, location,
/// Win32 metadata pointer, 8 bytes of allocation flags).
#[repr(C)]
pub struct AllocationProp {
    kind: c_uint,
    handle_types: c_uint,
    location: Location,
    win32: *mut c_void,
    alloc_flags: [u8; 8],
}

/// `CUmemAccessDesc`: a location and its `CUmemAccess_flags`.
#[repr(C)]
pub struct AccessDesc {
    pub(super) location: Location,
    pub(super) flags: c_uint,
}

/// `CU_MEM_ALLOCATION_TYPE_PINNED`.
const PINNED: c_uint = 1;
/// `CU_MEM_LOCATION_TYPE_DEVICE`.
const LOCATION_DEVICE: c_uint = 1;
/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`.
const POSIX_FD: c_uint = 1;

/// A device location of one of the double's devices: its ordinal.
pub(super) fn device_of(l: Location) -> Result<i32, CuResult> {
    if l.kind != LOCATION_DEVICE {
        return Err(INVALID_VALUE);
    }
    if !(0..config::get().devices).contains(&l.id) {
        return Err(INVALID_DEVICE);
    }
    Ok(l.id)
}

/// Checks an allocation property: pinned, on a device, at most the POSIX-descriptor
/// handle type requested. Returns whether that type was requested.
///
/// # Safety
///
/// `prop` is null or valid for a read.
unsafe fn check_prop(prop: *const AllocationProp) -> Result<bool, CuResult> {
    // SAFETY: null or valid for a read, by the caller's contract.
    let p = unsafe { prop.as_ref() }.ok_or(INVALID_VALUE)?;
    if p.kind != PINNED {
        return Err(INVALID_VALUE);
    }
    device_of(p.location)?;
    if p.handle_types & !POSIX_FD != 0 {
        return Err(NOT_SUPPORTED);
    }
    Ok(p.handle_types & POSIX_FD != 0)
}

/// Logs what `prop` asks for (before the result), if it can be read.
///
/// # Safety
///
/// `prop` is null or valid for a read.
unsafe fn log_prop(call: &mut Call, prop: *const AllocationProp) {
    // SAFETY: null or valid for a read, by the caller's contract.
    if let Some(p) = unsafe { prop.as_ref() } {
        call.arg("type", p.kind)
            .arg("location", format!("{}:{}", p.location.kind, p.location.id))
            .arg("handle_types", p.handle_types);
    }
}

fn uuid(name: &'static str, out: *mut [u8; 16], device: c_int) -> CuResult {
    let mut call = Call::new(name);
    call.arg("device", device);
    run(call, |outs| {
        state::with(|s| s.check_init())?;
        if !(0..config::get().devices).contains(&device) {
            return Err(INVALID_DEVICE);
        }
        let u = config::get().uuid(device);
        // SAFETY: null or valid for 16 bytes, by the caller's contract.
        unsafe { put(out, u) }?;
        outs.push(("uuid", u.iter().map(|b| format!("{b:02x}")).collect()));
        Ok(())
    })
}

/// `cuDeviceGetUuid`: the device's 16-byte UUID (see the crate docs).
///
/// # Safety
///
/// `out` is null or valid for a write of 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid(out: *mut [u8; 16], device: c_int) -> CuResult {
    uuid("cuDeviceGetUuid", out, device)
}

/// `cuDeviceGetUuid_v2`: the same UUID as `cuDeviceGetUuid`.
///
/// # Safety
///
/// `out` is null or valid for a write of 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(out: *mut [u8; 16], device: c_int) -> CuResult {
    uuid("cuDeviceGetUuid_v2", out, device)
}

/// `cuMemGetAllocationGranularity`: 2 MiB for both `CU_MEM_ALLOC_GRANULARITY_MINIMUM`
/// (0) and `_RECOMMENDED` (1).
///
/// # Safety
///
/// `out` is null or valid for a write; `prop` is null or valid for a read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAllocationGranularity(
    out: *mut usize,
    prop: *const AllocationProp,
    option: c_uint,
) -> CuResult {
    let mut call = Call::new("cuMemGetAllocationGranularity");
    // SAFETY: the caller's contract.
    unsafe { log_prop(&mut call, prop) };
    call.arg("option", option);
    run(call, |outs| {
        state::with(|s| s.check_init())?;
        // SAFETY: the caller's contract.
        unsafe { check_prop(prop) }?;
        if option > 1 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: null or valid for a write, by the caller's contract.
        unsafe { put(out, GRANULARITY) }?;
        outs.push(("granularity", GRANULARITY.to_string()));
        Ok(())
    })
}

/// `cuMemCreate`: a memfd of `size` bytes (a non-zero multiple of the granularity).
///
/// # Safety
///
/// `handle` is null or valid for a write; `prop` is null or valid for a read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut u64,
    size: usize,
    prop: *const AllocationProp,
    flags: u64,
) -> CuResult {
    let mut call = Call::new("cuMemCreate");
    call.arg("size", size);
    // SAFETY: the caller's contract.
    unsafe { log_prop(&mut call, prop) };
    call.arg("flags", flags);
    run(call, |outs| {
        state::with(|s| s.check_init())?;
        // SAFETY: the caller's contract.
        let exportable = unsafe { check_prop(prop) }?;
        if size == 0 || !size.is_multiple_of(GRANULARITY) || flags != 0 || handle.is_null() {
            return Err(INVALID_VALUE);
        }
        let fd = memfd(size)?;
        let h = state::with(|s| {
            s.vmm.add(Allocation {
                fd: Arc::new(fd),
                len: size,
                exportable,
            })
        });
        // SAFETY: non-null (checked), valid for a write by the caller's contract.
        unsafe { put(handle, h) }?;
        outs.push(("handle", hex(h)));
        Ok(())
    })
}

/// A new memfd named [`MEMFD_NAME`] of `size` bytes (`CUDA_ERROR_OUT_OF_MEMORY` if
/// the kernel refuses).
fn memfd(size: usize) -> Result<OwnedFd, CuResult> {
    let name = std::ffi::CString::new(MEMFD_NAME).map_err(|_| INVALID_VALUE)?;
    // SAFETY: a NUL-terminated name and valid flags.
    let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(OUT_OF_MEMORY);
    }
    // SAFETY: a descriptor just made, owned by no one else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let len = libc::off_t::try_from(size).map_err(|_| OUT_OF_MEMORY)?;
    // SAFETY: our open descriptor and a length.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(OUT_OF_MEMORY);
    }
    Ok(fd)
}

/// `cuMemExportToShareableHandle`: for `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`, an
/// `int`: a new descriptor (close-on-exec) of the allocation's memfd, which the
/// caller owns from then on.
///
/// # Safety
///
/// `out` is null or valid for a write of an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemExportToShareableHandle(
    out: *mut c_void,
    handle: u64,
    kind: c_uint,
    flags: u64,
) -> CuResult {
    let mut call = Call::new("cuMemExportToShareableHandle");
    call.arg("handle", hex(handle))
        .arg("type", kind)
        .arg("flags", flags);
    run(call, |outs| {
        let fd = state::with(|s| {
            s.check_init()?;
            let a = s.vmm.allocations.get(&handle).ok_or(INVALID_VALUE)?;
            match kind {
                POSIX_FD if flags == 0 && a.exportable && !out.is_null() => {}
                0 | POSIX_FD => return Err(INVALID_VALUE),
                _ => return Err(NOT_SUPPORTED),
            }
            a.fd.try_clone().map_err(|_| OUT_OF_MEMORY)
        })?;
        let raw = fd.into_raw_fd();
        // SAFETY: non-null (checked), valid for an `int` by the caller's contract.
        unsafe { put(out.cast::<c_int>(), raw) }?;
        outs.push(("fd", raw.to_string()));
        Ok(())
    })
}

/// If `fd` is an open descriptor of one of the double's allocation memfds, its size.
fn allocation_size(fd: c_int) -> Option<usize> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    let link = link.to_str()?;
    let rest = link.strip_prefix("/memfd:")?.strip_prefix(MEMFD_NAME)?;
    if !(rest.is_empty() || rest == " (deleted)") {
        return None;
    }
    // SAFETY: all-zero is a valid `stat` (plain integers).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor number (fstat fails cleanly on a closed one) and a valid
    // out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    usize::try_from(st.st_size).ok()
}

/// `cuMemImportFromShareableHandle`: for `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`,
/// `os` is the descriptor's number cast to a pointer (`(void *)(uintptr_t)fd`); the
/// new handle holds a descriptor of its own (the caller keeps, and may close, theirs).
///
/// # Safety
///
/// `handle` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemImportFromShareableHandle(
    handle: *mut u64,
    os: *mut c_void,
    kind: c_uint,
) -> CuResult {
    let fd = c_int::try_from(os as usize).unwrap_or(-1);
    let mut call = Call::new("cuMemImportFromShareableHandle");
    call.arg("fd", fd).arg("type", kind);
    run(call, |outs| {
        state::with(|s| s.check_init())?;
        match kind {
            POSIX_FD if !handle.is_null() => {}
            0 | POSIX_FD => return Err(INVALID_VALUE),
            _ => return Err(NOT_SUPPORTED),
        }
        let len = (fd >= 0)
            .then(|| allocation_size(fd))
            .flatten()
            .filter(|l| *l > 0 && l.is_multiple_of(GRANULARITY))
            .ok_or(INVALID_VALUE)?;
        // SAFETY: `fd` is open (checked just now); it is duplicated, not taken.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the duplicate was just made and is ours alone.
        let own = unsafe { OwnedFd::from_raw_fd(dup) };
        let h = state::with(|s| {
            s.vmm.add(Allocation {
                fd: Arc::new(own),
                len,
                exportable: true,
            })
        });
        // SAFETY: non-null (checked), valid for a write by the caller's contract.
        unsafe { put(handle, h) }?;
        outs.push(("handle", hex(h)));
        outs.push(("size", len.to_string()));
        Ok(())
    })
}

/// `cuMemRelease`: the handle is invalid from now on; the memory lives on while a
/// mapping of it is left (the mappings hold the memfd).
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemRelease(handle: u64) -> CuResult {
    let mut call = Call::new("cuMemRelease");
    call.arg("handle", hex(handle));
    run(call, |outs| {
        let a = state::with(|s| {
            s.check_init()?;
            s.vmm.allocations.remove(&handle).ok_or(INVALID_VALUE)
        })?;
        outs.push(("mapped", (Arc::strong_count(&a.fd) > 1).to_string()));
        Ok(())
    })
}
