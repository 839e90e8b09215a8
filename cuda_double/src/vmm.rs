//! The double's state for virtual memory management (`cuMemCreate` and friends), per
//! process like the real driver's: allocations, address reservations, mappings and the
//! access each device has to them.
//!
//! Invariants:
//! - An allocation is a memfd named [`MEMFD_NAME`], sized to a non-zero multiple of
//!   [`GRANULARITY`]; its handle is a made-up number, distinct from every other handle
//!   this process was given. Releasing the handle forgets it; the memfd stays open as
//!   long as a mapping of it is left (each mapping holds the descriptor too).
//! - Reservations never overlap each other and lie in the made-up device space from
//!   [`RESERVED_SPACE`] on, above the ranges of registrations and `cuMemAlloc`
//!   (`crate::state::DEVICE_SPACE`), so a device address is never a host address.
//! - A mapping lies inside one reservation and never overlaps another mapping; it is
//!   an `mmap(MAP_SHARED)` of its allocation's memfd that the double owns, unmapped
//!   exactly once, by `cuMemUnmap`.
//! - A mapping starts with no access for any device; only `cuMemSetAccess` grants it,
//!   and copies check the access of the current context's device.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Allocation granularity, the same for `CU_MEM_ALLOC_GRANULARITY_MINIMUM` and
/// `_RECOMMENDED`: 2 MiB, what current GPUs report for pinned device memory.
pub(crate) const GRANULARITY: usize = 2 << 20;
/// The name of every allocation's memfd; an import checks a descriptor carries it.
pub(crate) const MEMFD_NAME: &str = "iox-cuda-double-vmm";
/// Start of the reservations' made-up device space (16 TiB above `DEVICE_SPACE`).
pub(crate) const RESERVED_SPACE: u64 = 0xe000_0000_0000;
/// First allocation handle (made up, so it is no small number a bug could pass).
const FIRST_HANDLE: u64 = 0x5100_0000;

/// `CU_MEM_ACCESS_FLAGS_PROT_READ`.
pub(crate) const PROT_READ: u32 = 1;
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`.
pub(crate) const PROT_READWRITE: u32 = 3;

/// One allocation handle of this process (made here or imported).
#[derive(Debug)]
pub(crate) struct Allocation {
    /// The backing memfd, shared with the mappings of it.
    pub(crate) fd: Arc<OwnedFd>,
    pub(crate) len: usize,
    /// Whether it may be exported as a POSIX file descriptor (made with that handle
    /// type requested, or imported from one).
    pub(crate) exportable: bool,
}

/// One mapping of (part of) an allocation into a reservation.
#[derive(Debug)]
pub(crate) struct Mapping {
    pub(crate) len: usize,
    /// Where the double mapped the bytes in this process.
    pub(crate) host: *mut u8,
    /// Keeps the memfd open while mapped (the handle may be released first).
    pub(crate) _fd: Arc<OwnedFd>,
    /// Device ordinal -> `PROT_READ` or `PROT_READWRITE` (absent: no access).
    pub(crate) access: BTreeMap<i32, u32>,
}

// SAFETY: `host` is a shared mapping the double made and owns; it is only read or
// written under the state's lock, from whichever thread holds it.
unsafe impl Send for Mapping {}

/// VMM state.
#[derive(Debug, Default)]
pub(crate) struct Vmm {
    next_handle: u64,
    /// Handle -> allocation.
    pub(crate) allocations: HashMap<u64, Allocation>,
    /// Base -> length.
    pub(crate) reservations: BTreeMap<u64, usize>,
    next_reserved: u64,
    /// Device base -> mapping.
    pub(crate) mappings: BTreeMap<u64, Mapping>,
}

impl Vmm {
    /// Adds an allocation; returns its new handle.
    pub(crate) fn add(&mut self, allocation: Allocation) -> u64 {
        self.next_handle += 1;
        let handle = FIRST_HANDLE + self.next_handle;
        self.allocations.insert(handle, allocation);
        handle
    }

    /// Reserves `len` bytes at a multiple of `align` (a power of two), past every
    /// earlier reservation, with a gap of one granule after it.
    pub(crate) fn reserve(&mut self, len: usize, align: u64) -> Option<u64> {
        let at = (RESERVED_SPACE + self.next_reserved).checked_next_multiple_of(align)?;
        let end = at.checked_add(len as u64)?.checked_add(GRANULARITY as u64)?;
        self.next_reserved = end - RESERVED_SPACE;
        self.reservations.insert(at, len);
        Some(at)
    }

    /// Whether `ptr..ptr + len` lies inside one reservation.
    pub(crate) fn reserved(&self, ptr: u64, len: usize) -> bool {
        let Some(end) = ptr.checked_add(len as u64) else {
            return false;
        };
        self.reservations
            .range(..=ptr)
            .next_back()
            .is_some_and(|(base, rlen)| end <= base + *rlen as u64)
    }

    /// Whether `ptr..ptr + len` overlaps a mapping.
    pub(crate) fn overlaps_mapping(&self, ptr: u64, len: usize) -> bool {
        let end = ptr.saturating_add(len as u64);
        self.mappings
            .range(..end)
            .next_back()
            .is_some_and(|(base, m)| ptr < base + m.len as u64)
    }

    /// The bases of the mappings that tile `ptr..ptr + len` exactly (whole mappings,
    /// one after the other, no gap), or `None`.
    pub(crate) fn tiling(&self, ptr: u64, len: usize) -> Option<Vec<u64>> {
        let end = ptr.checked_add(len as u64)?;
        let (mut at, mut bases) = (ptr, Vec::new());
        while at < end {
            let m = self.mappings.get(&at)?;
            bases.push(at);
            at += m.len as u64;
        }
        (at == end && !bases.is_empty()).then_some(bases)
    }

    /// The mapping containing device address `dev`: (base, mapping).
    pub(crate) fn mapping_at(&self, dev: u64) -> Option<(u64, &Mapping)> {
        let (base, m) = self.mappings.range(..=dev).next_back()?;
        (dev < base + m.len as u64).then_some((*base, m))
    }

    /// For a device range in a mapping: `Some` of the host bytes behind
    /// `dev..dev + len` and whether `device` may write them, or `Some(None)` if the
    /// range leaves the mapping or `device` has no access (the real driver faults).
    /// `None`: `dev` is in no mapping.
    pub(crate) fn resolve(
        &self,
        dev: u64,
        len: usize,
        device: Option<i32>,
    ) -> Option<Option<(*mut u8, bool)>> {
        let (base, m) = self.mapping_at(dev)?;
        let inside = dev
            .checked_add(len as u64)
            .is_some_and(|end| end <= base + m.len as u64);
        let access = device.and_then(|d| m.access.get(&d).copied()).unwrap_or(0);
        if !inside || access & PROT_READ == 0 {
            return Some(None);
        }
        // SAFETY: `dev - base < m.len`, so the result stays inside the mapping.
        let host = unsafe { m.host.add((dev - base) as usize) };
        Some(Some((host, access == PROT_READWRITE)))
    }
}
