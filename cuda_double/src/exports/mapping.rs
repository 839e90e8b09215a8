//! VMM address ranges and mappings: `cuMemAddressReserve`, `cuMemAddressFree`,
//! `cuMemMap`, `cuMemUnmap`, `cuMemSetAccess`.
//!
//! A reservation is a made-up device range (see `crate::vmm`); a mapping backs part
//! of one with an `mmap(MAP_SHARED)` of an allocation's memfd, so copies to and from
//! the range reach the allocation's bytes, in every process that mapped it. Like the
//! real driver's, a new mapping is not accessible until `cuMemSetAccess`.
//!
//! Refused with `CUDA_ERROR_INVALID_VALUE`, as the reference documents: a reservation
//! whose size is not a multiple of the page size or whose alignment is not a power of
//! two; a free that is not exactly a reservation; a map whose address, size or offset
//! is not a granularity multiple, that leaves the allocation or its reservation, or
//! overlaps a mapping; an unmap or access change of a range that is not exactly
//! covered by whole mappings; an unknown handle. A free of a reservation with
//! something still mapped in it is refused too (the reference requires unmapping
//! first, without naming the code).

use std::ffi::c_uint;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::vmm::{AccessDesc, device_of};
use super::{put, run};
use crate::log::{Call, hex};
use crate::result::{CuResult, INVALID_VALUE, OUT_OF_MEMORY};
use crate::state;
use crate::vmm::{GRANULARITY, Mapping, PROT_READ, PROT_READWRITE};

/// `CU_MEM_ACCESS_FLAGS_PROT_NONE`.
const PROT_NONE: c_uint = 0;

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}

/// `cuMemAddressReserve`: a made-up device range of `size` bytes (a non-zero multiple
/// of the page size), aligned to `align` (a power of two; 0: the granularity, as is
/// anything smaller). `addr` is a hint (as documented) the double does not follow.
///
/// # Safety
///
/// `ptr` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAddressReserve(
    ptr: *mut u64,
    size: usize,
    align: usize,
    addr: u64,
    flags: u64,
) -> CuResult {
    let mut call = Call::new("cuMemAddressReserve");
    call.arg("size", size)
        .arg("align", align)
        .arg("addr", hex(addr))
        .arg("flags", flags);
    run(call, |outs| {
        state::with(|s| s.check_init())?;
        if size == 0 || !size.is_multiple_of(page_size()) || flags != 0 || ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        if align != 0 && !align.is_power_of_two() {
            return Err(INVALID_VALUE);
        }
        let align = align.max(GRANULARITY) as u64;
        let at = state::with(|s| s.vmm.reserve(size, align)).ok_or(INVALID_VALUE)?;
        // SAFETY: non-null (checked), valid for a write by the caller's contract.
        unsafe { put(ptr, at) }?;
        outs.push(("ptr", hex(at)));
        Ok(())
    })
}

/// `cuMemAddressFree`: exactly a reservation (base and size), nothing mapped in it.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAddressFree(ptr: u64, size: usize) -> CuResult {
    let mut call = Call::new("cuMemAddressFree");
    call.arg("ptr", hex(ptr)).arg("size", size);
    run(call, |_| {
        state::with(|s| {
            s.check_init()?;
            if s.vmm.reservations.get(&ptr) != Some(&size) || s.vmm.overlaps_mapping(ptr, size) {
                return Err(INVALID_VALUE);
            }
            s.vmm.reservations.remove(&ptr);
            Ok(())
        })
    })
}

/// `cuMemMap`: `size` bytes of allocation `handle` from `offset`, at `ptr`, inside one
/// reservation and over no mapping; no device has access until `cuMemSetAccess`.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemMap(ptr: u64, size: usize, offset: usize, handle: u64, flags: u64) -> CuResult {
    let mut call = Call::new("cuMemMap");
    call.arg("ptr", hex(ptr))
        .arg("size", size)
        .arg("offset", offset)
        .arg("handle", hex(handle))
        .arg("flags", flags);
    run(call, |outs| {
        state::with(|s| {
            s.check_init()?;
            let a = s.vmm.allocations.get(&handle).ok_or(INVALID_VALUE)?;
            let granules = [ptr as usize, size, offset]
                .iter()
                .all(|v| v.is_multiple_of(GRANULARITY));
            let fits = offset.checked_add(size).is_some_and(|end| end <= a.len);
            if flags != 0 || size == 0 || !granules || !fits {
                return Err(INVALID_VALUE);
            }
            if !s.vmm.reserved(ptr, size) || s.vmm.overlaps_mapping(ptr, size) {
                return Err(INVALID_VALUE);
            }
            let at = libc::off_t::try_from(offset).map_err(|_| INVALID_VALUE)?;
            // SAFETY: a new shared mapping of an open memfd, `size` bytes from `offset`
            // (inside the memfd, checked), at an address the kernel picks; it is
            // unmapped only by cuMemUnmap.
            let host = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    a.fd.as_raw_fd(),
                    at,
                )
            };
            if host == libc::MAP_FAILED {
                return Err(OUT_OF_MEMORY);
            }
            let fd = Arc::clone(&a.fd);
            s.vmm.mappings.insert(
                ptr,
                Mapping {
                    len: size,
                    host: host.cast(),
                    _fd: fd,
                    access: Default::default(),
                },
            );
            outs.push(("host", hex(host as u64)));
            Ok(())
        })
    })
}

/// `cuMemUnmap`: exactly one or more whole mappings, one after the other; the range
/// is a reservation again.
///
/// # Safety
///
/// None beyond the driver's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemUnmap(ptr: u64, size: usize) -> CuResult {
    let mut call = Call::new("cuMemUnmap");
    call.arg("ptr", hex(ptr)).arg("size", size);
    run(call, |outs| {
        state::with(|s| {
            s.check_init()?;
            let bases = s.vmm.tiling(ptr, size).ok_or(INVALID_VALUE)?;
            for base in &bases {
                let m = s.vmm.mappings.remove(base).ok_or(INVALID_VALUE)?;
                // SAFETY: the mapping cuMemMap made, removed from the table just now,
                // so it is unmapped exactly once; nothing else points into it.
                unsafe { libc::munmap(m.host.cast(), m.len) };
            }
            outs.push(("mappings", bases.len().to_string()));
            Ok(())
        })
    })
}

/// `cuMemSetAccess`: for each descriptor (a device and `PROT_NONE`, `PROT_READ` or
/// `PROT_READWRITE`), that device's access to every mapping of the range, which must
/// be exactly covered by whole mappings. `PROT_NONE` takes access away.
///
/// # Safety
///
/// `desc` is null or valid for `count` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemSetAccess(
    ptr: u64,
    size: usize,
    desc: *const AccessDesc,
    count: usize,
) -> CuResult {
    let mut call = Call::new("cuMemSetAccess");
    call.arg("ptr", hex(ptr)).arg("size", size).arg("count", count);
    let descs: &[AccessDesc] = if desc.is_null() || count == 0 {
        &[]
    } else {
        // SAFETY: non-null, valid for `count` reads by the caller's contract; only
        // read during this call.
        unsafe { std::slice::from_raw_parts(desc, count) }
    };
    let asked: Vec<String> = descs
        .iter()
        .map(|d| format!("{}:{}:{}", d.location.kind, d.location.id, d.flags))
        .collect();
    if !asked.is_empty() {
        call.arg("access", asked.join(","));
    }
    run(call, |_| {
        state::with(|s| s.check_init())?;
        if descs.is_empty() {
            return Err(INVALID_VALUE);
        }
        let mut grants = Vec::new();
        for d in descs {
            let device = device_of(d.location)?;
            if !matches!(d.flags, PROT_NONE | PROT_READ | PROT_READWRITE) {
                return Err(INVALID_VALUE);
            }
            grants.push((device, d.flags));
        }
        state::with(|s| {
            let bases = s.vmm.tiling(ptr, size).ok_or(INVALID_VALUE)?;
            for base in bases {
                let m = s.vmm.mappings.get_mut(&base).ok_or(INVALID_VALUE)?;
                for &(device, flags) in &grants {
                    if flags == PROT_NONE {
                        m.access.remove(&device);
                    } else {
                        m.access.insert(device, flags);
                    }
                }
            }
            Ok(())
        })
    })
}
