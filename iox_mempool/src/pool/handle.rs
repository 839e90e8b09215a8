//! A chunk's handle, and the occupancy reports of a pool.

use crate::MemoryType;

/// A chunk: its size class and its index in that class. Converts to an address in
/// each process with [`Pool::chunk_ref`](crate::Pool::chunk_ref); stored in shared memory (queue entries) as
/// [`Self::to_raw`], the one encoding of a chunk iox has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkHandle {
    pub(super) class: u8,
    pub(super) index: u32,
}

impl ChunkHandle {
    /// The size class.
    pub fn class(self) -> usize {
        usize::from(self.class)
    }

    /// The index within the class.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The 32-bit encoding stored in shared memory: `class << 24 | index`
    /// ([`crate::layout::MAX_CLASSES`] and [`crate::layout::MAX_CHUNKS_PER_CLASS`] keep
    /// both in their bits). [`Bookkeeping::handle_from_raw`](crate::Bookkeeping::handle_from_raw) is the way back, with a
    /// bounds check against the pool.
    ///
    /// ```
    /// # use iox_mempool::{MemoryType, Owner, Pool, PoolLayout};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let layout = PoolLayout::new(&[(64, 2), (256, 2)]).unwrap();
    /// let pool = Pool::create(dir.path(), "raw", &layout, MemoryType::Cpu, 0o600).unwrap();
    /// let h = pool.loan(100, &mut 0, Owner::new(0).unwrap()).unwrap();
    /// assert_eq!(h.to_raw(), 1 << 24);
    /// assert_eq!(pool.book().handle_from_raw(h.to_raw()), Some(h));
    /// ```
    pub const fn to_raw(self) -> u32 {
        ((self.class as u32) << RAW_CLASS_SHIFT) | self.index
    }

    /// The handle `raw` encodes, not checked against any pool: the one decoding, for
    /// callers that check the result next ([`Bookkeeping::handle_from_raw`],
    /// [`Pool::chunk_ref_from_raw`]) or that encoded a checked handle themselves.
    #[inline]
    pub(crate) const fn from_raw_unchecked(raw: u32) -> Self {
        Self {
            class: (raw >> RAW_CLASS_SHIFT) as u8,
            index: raw & ((1 << RAW_CLASS_SHIFT) - 1),
        }
    }
}

/// Where the class starts in [`ChunkHandle::to_raw`].
pub(super) const RAW_CLASS_SHIFT: u32 = 24;
const _: () = assert!(crate::layout::MAX_CHUNKS_PER_CLASS <= 1 << RAW_CLASS_SHIFT);
const _: () = assert!(crate::layout::MAX_CLASSES <= 1 << (32 - RAW_CLASS_SHIFT));

/// Sizes and occupancy of one class, as reported by [`Pool::info`](crate::Pool::info).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassInfo {
    /// Bytes per chunk.
    pub chunk_size: usize,
    /// Number of chunks.
    pub count: u32,
    /// Chunks not in use right now (a snapshot).
    pub free: u32,
    /// Offset of the class's first chunk from the pool's base.
    pub offset: usize,
}

/// Where a pool's payload lives in this process and how it is divided, for users who
/// register it themselves (RDMA, Vulkan, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInfo {
    /// Address of the payload mapping in this process.
    pub base: usize,
    /// Length of the payload mapping in bytes (page-aligned).
    pub len: usize,
    /// The pool's memory type.
    pub memory_type: MemoryType,
    /// The pages the payload lives on (a registration may use them: an RDMA memory
    /// region on huge pages needs fewer translation entries).
    pub page_size: crate::PageSize,
    /// The size classes, smallest first.
    pub classes: Vec<ClassInfo>,
}

impl PoolInfo {
    /// Chunks not in use, over all classes.
    pub fn free_chunks(&self) -> u64 {
        self.classes.iter().map(|c| u64::from(c.free)).sum()
    }

    /// Chunks over all classes.
    pub fn total_chunks(&self) -> u64 {
        self.classes.iter().map(|c| u64::from(c.count)).sum()
    }
}
