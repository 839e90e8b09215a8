//! Device memory made with the driver's virtual memory management, shareable between
//! processes as a file descriptor: what a `CudaDevice` pool's payload is.
//!
//! Making it ([`DeviceMemory::create`]): granularity (`cuMemGetAllocationGranularity`,
//! recommended), `cuMemCreate` (pinned device memory, POSIX-fd handle type), the
//! export (`cuMemExportToShareableHandle`), an address range (`cuMemAddressReserve`),
//! the mapping (`cuMemMap`) and access for the device (`cuMemSetAccess`), then a
//! 16-byte token written after the payload. Importing it ([`DeviceMemory::import`]):
//! `cuMemImportFromShareableHandle` of a descriptor handed over, the same reserve, map
//! and access, and the token read back and compared.
//!
//! Once per process per allocation: a registry keyed by the token holds every live
//! mapping weakly; an import of an allocation already mapped here returns that mapping
//! (and closes the descriptor it was given) without a driver call.
//!
//! Teardown (drop, or the undo of a failed step), in reverse order of making:
//! `cuMemUnmap`, `cuMemAddressFree`, `cuMemRelease` of the handle, then the
//! descriptor is closed and the context released. The reference frees the memory once
//! the handle is released and no mapping is left; the address range can be freed only
//! once nothing is mapped in it. The handle is kept (not released right after
//! `cuMemMap`, which the reference also allows) so that one undo path serves a failed
//! step and the drop alike, and the allocation is named by a live handle for as long
//! as this process uses it.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Weak};

use iox_mempool::fork::{ForkLock, Rank};

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::{CudaError, check};

/// One device allocation, mapped read-write into this process's device address space.
#[derive(Debug)]
pub struct DeviceMemory {
    base: u64,
    len: usize,
    handle: sys::CUmemGenericAllocationHandle,
    export: OwnedFd,
    token: [u8; 16],
    uuid: [u8; 16],
    ctx: Arc<Context>,
}

static REGISTRY: ForkLock<Option<HashMap<[u8; 16], Weak<DeviceMemory>>>> =
    ForkLock::new(Rank::CudaDeviceMemory, None);
/// Held across a whole import, so two threads importing one allocation at once make
/// one mapping (the second finds the first's in the registry).
static IMPORTING: ForkLock<()> = ForkLock::new(Rank::CudaImport, ());

/// The live mapping of the allocation marked `token` in this process, if any.
fn registered(token: &[u8; 16]) -> Option<Arc<DeviceMemory>> {
    REGISTRY.lock().as_ref()?.get(token)?.upgrade()
}

fn register(memory: &Arc<DeviceMemory>) {
    let mut registry = REGISTRY.lock();
    let map = registry.get_or_insert_with(HashMap::new);
    map.retain(|_, m| m.strong_count() > 0);
    map.insert(memory.token, Arc::downgrade(memory));
}

/// What has been made so far, undone in reverse on drop unless `done`.
struct Steps<'a> {
    ctx: &'a Context,
    handle: Option<sys::CUmemGenericAllocationHandle>,
    reserved: Option<(u64, usize)>,
    mapped: bool,
}

impl<'a> Steps<'a> {
    /// Nothing made yet.
    fn new(ctx: &'a Context) -> Self {
        Self {
            ctx,
            handle: None,
            reserved: None,
            mapped: false,
        }
    }
}

impl Drop for Steps<'_> {
    fn drop(&mut self) {
        let _ = self.ctx.run(|| {
            if let (true, Some((base, len))) = (self.mapped, self.reserved) {
                // SAFETY: unmaps what this process mapped at base, once.
                let _ = check("cuMemUnmap", unsafe { sys::cuMemUnmap(base, len) });
            }
            if let Some((base, len)) = self.reserved {
                // SAFETY: frees the range reserved here, now empty.
                let _ = check("cuMemAddressFree", unsafe { sys::cuMemAddressFree(base, len) });
            }
            if let Some(handle) = self.handle {
                // SAFETY: releases the handle made or imported here, once.
                let _ = check("cuMemRelease", unsafe { sys::cuMemRelease(handle) });
            }
            Ok(())
        });
    }
}

fn prop(device: i32) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct: all-zero is a valid value of every field.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop
}

/// The context's device's allocation granularity (`option`: minimum or recommended),
/// at least 1.
fn granularity(ctx: &Context, option: sys::CUmemAllocationGranularity_flags) -> Result<usize, CudaError> {
    let prop = prop(ctx.ordinal);
    let mut granularity = 0;
    ctx.run(|| {
        // SAFETY: valid out-pointer and property.
        check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(&mut granularity, &prop, option)
        })
    })?;
    Ok(granularity.max(1))
}

/// Reserves `len` bytes of address space and maps `handle` there read-write for the
/// context's device, recording each step in `steps`.
fn map(
    steps: &mut Steps<'_>,
    handle: sys::CUmemGenericAllocationHandle,
    len: usize,
    align: usize,
) -> Result<u64, CudaError> {
    let ordinal = steps.ctx.ordinal;
    steps.ctx.run(|| {
        let mut base = 0;
        // SAFETY: a context is current; valid out-pointer; no fixed address asked.
        check("cuMemAddressReserve", unsafe {
            sys::cuMemAddressReserve(&mut base, len, align, 0, 0)
        })?;
        steps.reserved = Some((base, len));
        // SAFETY: maps the whole allocation into the range just reserved.
        check("cuMemMap", unsafe { sys::cuMemMap(base, len, 0, handle, 0) })?;
        steps.mapped = true;
        let access = sys::CUmemAccessDesc {
            location: prop(ordinal).location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the whole mapped range; one valid descriptor.
        check("cuMemSetAccess", unsafe {
            sys::cuMemSetAccess(base, len, &access, 1)
        })?;
        Ok(base)
    })
}

impl DeviceMemory {
    /// Allocates room for `payload_len` bytes and the 16-byte `token` after them on
    /// device `ordinal` (rounded up to the allocation granularity), exports it, maps
    /// it here and writes the token (one synchronous copy).
    ///
    /// ```
    /// match iox_cuda::DeviceMemory::create(0, 1 << 20, [1; 16]) {
    ///     Ok(m) => assert!(m.len() >= (1 << 20) + 16),
    ///     Err(e) => println!("no device memory here: {e}"),
    /// }
    /// ```
    pub fn create(ordinal: i32, payload_len: usize, token: [u8; 16]) -> Result<Arc<Self>, CudaError> {
        let ctx = Context::retain(ordinal)?;
        let uuid = crate::uuid::device_uuid(ordinal)?;
        let prop = prop(ordinal);
        let granularity = granularity(
            &ctx,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
        )?;
        let len = payload_len
            .checked_add(16)
            .and_then(|l| l.checked_next_multiple_of(granularity))
            .ok_or(CudaError::TooLarge { len: payload_len })?;
        // Declared before `steps`, so that on a failure the descriptor closes after
        // the undo, as in the drop.
        let export: OwnedFd;
        let mut steps = Steps::new(&ctx);
        let mut handle = 0;
        ctx.run(|| {
            // SAFETY: valid out-pointer and property; flags 0.
            check("cuMemCreate", unsafe {
                sys::cuMemCreate(&mut handle, len, &prop, 0)
            })
        })?;
        steps.handle = Some(handle);
        let mut fd: std::ffi::c_int = -1;
        ctx.run(|| {
            // SAFETY: the handle was made with the POSIX-fd type; the out-pointer is an
            // int, as that type's export writes.
            check("cuMemExportToShareableHandle", unsafe {
                sys::cuMemExportToShareableHandle(
                    (&mut fd as *mut std::ffi::c_int).cast(),
                    handle,
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                    0,
                )
            })
        })?;
        if fd < 0 {
            return Err(CudaError::Driver {
                call: "cuMemExportToShareableHandle",
                code: 0,
                name: "no descriptor returned".into(),
            });
        }
        // SAFETY: the driver handed us this new descriptor to own.
        export = unsafe { OwnedFd::from_raw_fd(fd) };
        let base = map(&mut steps, handle, len, granularity)?;
        ctx.run(|| {
            // SAFETY: base + payload_len + 16 <= base + len, inside the mapping just
            // given read-write access; the token is 16 host bytes.
            check("cuMemcpyHtoD", unsafe {
                sys::cuMemcpyHtoD_v2(base + payload_len as u64, token.as_ptr().cast(), 16)
            })
        })?;
        std::mem::forget(steps);
        let memory = Arc::new(Self {
            base,
            len,
            handle,
            export,
            token,
            uuid,
            ctx,
        });
        register(&memory);
        Ok(memory)
    }

    /// Imports the allocation another process exported as `fd` (`alloc_len` bytes),
    /// maps it on device `ordinal` and checks the `token` after `payload_len` bytes:
    /// [`CudaError::WrongAllocation`] if it is not there. If this process has it
    /// mapped already, returns that mapping and closes `fd`.
    pub fn import(
        fd: OwnedFd,
        ordinal: i32,
        alloc_len: usize,
        payload_len: usize,
        token: [u8; 16],
    ) -> Result<Arc<Self>, CudaError> {
        let _importing = IMPORTING.lock();
        if let Some(memory) = registered(&token) {
            return Ok(memory);
        }
        if payload_len.checked_add(16).is_none_or(|end| end > alloc_len) {
            return Err(CudaError::WrongAllocation);
        }
        let ctx = Context::retain(ordinal)?;
        let uuid = crate::uuid::device_uuid(ordinal)?;
        let mut steps = Steps::new(&ctx);
        let mut handle = 0;
        ctx.run(|| {
            // SAFETY: the POSIX-fd type takes the descriptor's number as the pointer
            // value, as the reference documents; the driver does not take it over.
            check("cuMemImportFromShareableHandle", unsafe {
                sys::cuMemImportFromShareableHandle(
                    &mut handle,
                    fd.as_raw_fd() as usize as *mut std::ffi::c_void,
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                )
            })
        })?;
        steps.handle = Some(handle);
        let align = granularity(
            &ctx,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )?;
        let base = map(&mut steps, handle, alloc_len, align)?;
        let mut found = [0u8; 16];
        ctx.run(|| {
            // SAFETY: inside the mapping (payload_len + 16 <= alloc_len, checked);
            // `found` holds 16 bytes.
            check("cuMemcpyDtoH", unsafe {
                sys::cuMemcpyDtoH_v2(found.as_mut_ptr().cast(), base + payload_len as u64, 16)
            })
        })?;
        if found != token {
            return Err(CudaError::WrongAllocation); // `steps` undoes the mapping
        }
        std::mem::forget(steps);
        let memory = Arc::new(Self {
            base,
            len: alloc_len,
            handle,
            export: fd,
            token,
            uuid,
            ctx,
        });
        register(&memory);
        Ok(memory)
    }

    /// The device address of its first byte (in this process).
    pub fn device_base(&self) -> u64 {
        self.base
    }

    /// Bytes of the allocation.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty (a zero-length allocation is refused by the driver).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device ordinal it is mapped for in this process.
    pub fn ordinal(&self) -> i32 {
        self.ctx.ordinal
    }

    /// The exported descriptor (this process's, to hand to others).
    pub fn export_fd(&self) -> BorrowedFd<'_> {
        self.export.as_fd()
    }

    /// The UUID of the device it is mapped for (asked once, when it was mapped here).
    pub fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// Copies `dst.len()` bytes from `offset` to the host, synchronously
    /// (`cuMemcpyDtoH`). A range outside the allocation is [`CudaError::OutOfBounds`].
    ///
    /// ```
    /// if let Ok(m) = iox_cuda::DeviceMemory::create(0, 4096, [2; 16]) {
    ///     let mut mark = [0u8; 16];
    ///     m.copy_to_host(4096, &mut mark).unwrap();
    ///     assert_eq!(mark, [2; 16]);
    ///     assert!(m.copy_to_host(m.len(), &mut mark).is_err());
    /// }
    /// ```
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), CudaError> {
        let at = self.range(offset, dst.len())?;
        self.ctx.run(|| {
            // SAFETY: `dst` is writable for its length; the device range lies inside
            // this allocation (checked), mapped read-write while `self` lives.
            check("cuMemcpyDtoH", unsafe {
                sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), at, dst.len())
            })
        })
    }

    /// Copies `src` to `offset`, synchronously (`cuMemcpyHtoD`). A range outside the
    /// allocation is [`CudaError::OutOfBounds`].
    ///
    /// ```
    /// if let Ok(m) = iox_cuda::DeviceMemory::create(0, 4096, [3; 16]) {
    ///     m.copy_from_host(0, b"hello").unwrap();
    ///     let mut back = [0u8; 5];
    ///     m.copy_to_host(0, &mut back).unwrap();
    ///     assert_eq!(&back, b"hello");
    /// }
    /// ```
    pub fn copy_from_host(&self, offset: usize, src: &[u8]) -> Result<(), CudaError> {
        let at = self.range(offset, src.len())?;
        self.ctx.run(|| {
            // SAFETY: `src` is readable for its length; the device range lies inside
            // this allocation (checked), mapped read-write while `self` lives.
            check("cuMemcpyHtoD", unsafe {
                sys::cuMemcpyHtoD_v2(at, src.as_ptr().cast(), src.len())
            })
        })
    }

    /// The device address of `offset`, if `len` bytes from there lie inside.
    fn range(&self, offset: usize, len: usize) -> Result<u64, CudaError> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(CudaError::OutOfBounds { len: self.len });
        }
        Ok(self.base + offset as u64)
    }
}

impl iox_mempool::DevicePayload for DeviceMemory {
    fn device_base(&self) -> u64 {
        self.base
    }

    fn len(&self) -> usize {
        self.len
    }

    fn export_fd(&self) -> BorrowedFd<'_> {
        self.export.as_fd()
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        drop(Steps {
            ctx: &self.ctx,
            handle: Some(self.handle),
            reserved: Some((self.base, self.len)),
            mapped: true,
        });
        // Then the descriptor closes (field drop), then the context is released.
    }
}
