//! The chunk pool of one service: payload in one segment, bookkeeping in another.
//!
//! Files, for a pool whose stem is `S`:
//! - `S.pool`: the payload, chunks only, class after class as the [`PoolLayout`] says,
//!   page-aligned and page-sized, so pinning it pins exactly the payload. It may be
//!   mapped read-only (a process that only reads samples: a stray write through a
//!   sample's address then faults in that process instead of corrupting what other
//!   readers see). An opener maps it as asked but always opens the file read-write,
//!   so a read-only mapping can be upgraded in place, once, when the process starts
//!   publishing ([`Pool::make_payload_writable`]). The creator maps it read-write:
//!   it has just made the file, so a read-only mapping would protect nothing yet,
//!   and a service's creator typically publishes.
//! - `S.chunks`: the bookkeeping every participant maps read-write: a 64-byte header
//!   (magic, version, layout hash, payload length, memory type; all atomics), one
//!   loan cursor per class on its own cache line, then per class one 16-byte
//!   `ChunkMeta` per chunk (ownership word, see [`crate::owners`], and one user word).
//!
//! Creation: the payload is made first (`S.pool` created exclusively, or a sealed
//! memfd the caller made, see [`crate::memfd`]), then `S.chunks` exclusively; every
//! chunk word is 0 (free) in a fresh file; the header is filled in and its magic
//! stored last with Release ordering. An opener that reads the magic with Acquire
//! therefore sees a fully built pool; a zero magic means "still being created"
//! ([`OpenPoolError::NotReady`]). [`Bookkeeping`] is `S.chunks` alone: what recovery
//! needs, without mapping the payload.
//!
//! Opening trusts nothing in the files: sizes come from the caller's expected layout
//! and are checked against `fstat` before mapping; the header must match that layout's
//! hash, the payload length and the memory type; every index read later is
//! bounds-checked.
//!
//! Hot path: [`Pool::loan`] is a class lookup (hint first, then binary search) plus a
//! CAS `0 -> owner bit` on the first free chunk word from the class's cursor (usually
//! the first one looked at). [`Bookkeeping::release`] is one `fetch_and`. No lock, no
//! syscall, no zero-fill. Finding that a class is exhausted scans the whole class.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use thiserror::Error;

use crate::owners::{ChunkMeta, ClassCursor, Owner, WordError};
use crate::pin::{self, PinError, PinGuard, Region};
use crate::segment::{self, Access, CreateSegmentError, MakeWritableError, OpenSegmentError, Segment};
use crate::{MemoryType, PoolLayout};

/// Magic of a chunk bookkeeping segment.
pub const CHUNKS_MAGIC: u64 = u64::from_le_bytes(*b"IOXCHNK\x01");
/// Version of the bookkeeping format.
pub const CHUNKS_VERSION: u32 = 2;
const HEADER_LEN: usize = 64;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    layout_hash: AtomicU64,
    payload_len: AtomicU64,
    version: AtomicU32,
    class_count: AtomicU32,
    memory_type: AtomicU32,
    tag: AtomicU64,
}
const _: () = assert!(size_of::<Header>() <= HEADER_LEN);
const _: () = assert!(size_of::<ClassCursor>() == 64);
const _: () = assert!(size_of::<ChunkMeta>() == 16);

/// A chunk: its size class and its index in that class. Converts to an address in
/// each process with [`Pool::chunk`]; stored in shared memory (queue entries) as
/// [`Self::to_raw`], the one encoding of a chunk iox has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkHandle {
    class: u8,
    index: u32,
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
    /// both in their bits). [`Bookkeeping::handle_from_raw`] is the way back, with a
    /// bounds check against the pool.
    ///
    /// ```
    /// # use iox_mempool::{MemoryType, Owner, Pool, PoolLayout};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let layout = PoolLayout::new(&[(64, 2), (256, 2)]).unwrap();
    /// let pool = Pool::create(dir.path(), "raw", &layout, MemoryType::Cpu, 0o600).unwrap();
    /// let h = pool.loan(100, &mut 0, Owner::new(0).unwrap()).unwrap();
    /// assert_eq!(h.to_raw(), 1 << 24);
    /// assert_eq!(pool.handle_from_raw(h.to_raw()), Some(h));
    /// ```
    pub const fn to_raw(self) -> u32 {
        ((self.class as u32) << RAW_CLASS_SHIFT) | self.index
    }
}

/// Where the class starts in [`ChunkHandle::to_raw`].
const RAW_CLASS_SHIFT: u32 = 24;
const _: () = assert!(crate::layout::MAX_CHUNKS_PER_CLASS <= 1 << RAW_CLASS_SHIFT);
const _: () = assert!(crate::layout::MAX_CLASSES <= 1 << (32 - RAW_CLASS_SHIFT));

/// Sizes and occupancy of one class, as reported by [`Pool::info`].
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

/// Why [`Pool::create`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CreatePoolError {
    /// A segment could not be created.
    #[error(transparent)]
    Segment(#[from] CreateSegmentError),
    /// The payload handed in is not as long as the layout needs.
    #[error("the payload is {len} bytes long, the layout needs exactly {expected}")]
    PayloadLength {
        /// Its length.
        len: usize,
        /// The layout's payload length.
        expected: usize,
    },
}

/// Why [`Pool::open`] failed. Each names the file and what is wrong with it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OpenPoolError {
    /// A segment could not be opened, or is too short.
    #[error(transparent)]
    Segment(#[from] OpenSegmentError),
    /// The bookkeeping has no magic yet: its creator is still building it (or died).
    #[error("{path} is not initialised yet (its creator is still building it, or died while doing so)")]
    NotReady {
        /// The file.
        path: String,
    },
    /// The file is another kind of iox file.
    #[error("{path} has magic {found:#018x}, which belongs to another kind of iox file, not a chunk pool")]
    WrongMagic {
        /// The file.
        path: String,
        /// The magic found.
        found: u64,
    },
    /// The file is not an iox file at all.
    #[error("{path} is not an iox file (magic {found:#018x})")]
    Foreign {
        /// The file.
        path: String,
        /// The first eight bytes found.
        found: u64,
    },
    /// The pool belongs to another incarnation than the caller expects (it was removed
    /// and created again meanwhile).
    #[error("{path} has tag {found:#018x}, expected {expected:#018x}: it belongs to another incarnation")]
    TagMismatch {
        /// The file.
        path: String,
        /// The tag expected.
        expected: u64,
        /// The tag found.
        found: u64,
    },
    /// Written by an incompatible version of iox.
    #[error("{path} has bookkeeping version {found}; this iox reads version {CHUNKS_VERSION}")]
    UnsupportedVersion {
        /// The file.
        path: String,
        /// The version found.
        found: u32,
    },
    /// The pool was laid out differently from what the caller expects.
    #[error(
        "{path} has layout hash {found:#018x}, expected {expected:#018x}: the pool's size classes differ"
    )]
    LayoutMismatch {
        /// The file.
        path: String,
        /// Hash of the caller's layout.
        expected: u64,
        /// Hash in the file.
        found: u64,
    },
    /// The header's payload length or class count disagrees with the layout.
    #[error("{path} claims {what} {found}, but the layout gives {expected}")]
    HeaderMismatch {
        /// The file.
        path: String,
        /// Which field.
        what: &'static str,
        /// What the layout says.
        expected: u64,
        /// What the file says.
        found: u64,
    },
    /// The pool was created with another memory type.
    #[error("{path} holds a {found} pool, expected {expected}")]
    MemoryTypeMismatch {
        /// The file.
        path: String,
        /// The type expected.
        expected: MemoryType,
        /// The code found.
        found: String,
    },
}

/// Why [`Pool::loan`] failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LoanError {
    /// No class holds this many bytes.
    #[error("{size} bytes requested; the largest chunk of this pool holds {max}")]
    TooLarge {
        /// Bytes requested.
        size: usize,
        /// Largest chunk size.
        max: usize,
    },
    /// Every chunk of the fitting class is in use.
    #[error(
        "all {count} chunks of {chunk_size} bytes are in use (pool exhausted): release samples or enlarge the pool"
    )]
    Exhausted {
        /// The class's chunk size.
        chunk_size: usize,
        /// The class's chunk count.
        count: u32,
    },
    /// The payload is mapped read-only in this process.
    #[error("the pool's payload is mapped read-only in this process; it cannot loan chunks")]
    ReadOnly,
}

/// Why an ownership operation on a chunk failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// The handle does not name a chunk of this pool.
    #[error("chunk handle class {class} index {index} is outside the pool")]
    InvalidHandle {
        /// The class.
        class: usize,
        /// The index.
        index: u32,
    },
    /// The owner does not hold the chunk: a double release, or a stale handle.
    #[error("chunk class {class} index {index} is not held by owner {owner} (double release?)")]
    NotOwned {
        /// The class.
        class: usize,
        /// The index.
        index: u32,
        /// The owner number.
        owner: u32,
    },
    /// The owner already holds the chunk it tried to take from a queue: the queue
    /// entry is a duplicate (corrupt shared memory). Nothing was changed.
    #[error("chunk class {class} index {index} is already held by owner {owner} (duplicate queue entry)")]
    AlreadyOwned {
        /// The class.
        class: usize,
        /// The index.
        index: u32,
        /// The owner number.
        owner: u32,
    },
}

/// A mapped pool. Cheap to share behind an [`Arc`]; all methods take `&self` and are
/// safe to call from any number of threads and processes at once.
///
/// ```
/// use iox_mempool::{Owner, Pool, PoolLayout, MemoryType, segment::Access};
/// let dir = tempfile::tempdir().unwrap();
/// let layout = PoolLayout::new(&[(64, 8), (4096, 2)]).unwrap();
/// let pool = Pool::create(dir.path(), "demo", &layout, MemoryType::Cpu, 0o600).unwrap();
/// let me = Owner::new(0).unwrap();
/// let mut hint = 0;
/// let chunk = pool.loan(100, &mut hint, me).unwrap();
/// assert_eq!(chunk.class(), 1);
/// let other = Pool::open(dir.path(), "demo", &layout, Some(MemoryType::Cpu), Access::ReadWrite).unwrap();
/// assert_eq!(other.info().classes[1].free, 1);
/// assert!(pool.release(chunk, me).unwrap());
/// assert_eq!(other.info().free_chunks(), 10);
/// ```
#[derive(Debug)]
pub struct Pool {
    book: Bookkeeping,
    payload: Segment,
}

/// A pool's bookkeeping alone (`S.chunks`): chunk ownership and user words, without
/// the payload mapped. What recovery and tools need; a [`Pool`] derefs to it.
#[derive(Debug)]
pub struct Bookkeeping {
    layout: PoolLayout,
    memory_type: MemoryType,
    chunks: Segment,
    /// Byte offset of each class's chunk table in the bookkeeping segment.
    tables: Vec<usize>,
}

// SAFETY: the raw mappings inside the segments are only ever accessed through atomics
// (bookkeeping) or handed out as raw pointers whose use is the caller's responsibility;
// nothing in `Pool` is tied to the thread that made it.
unsafe impl Send for Pool {}
// SAFETY: as above; every `&self` method is a sequence of atomic operations.
unsafe impl Sync for Pool {}
// SAFETY: as for Pool: the mapping is only accessed through atomics.
unsafe impl Send for Bookkeeping {}
// SAFETY: as above.
unsafe impl Sync for Bookkeeping {}

impl std::ops::Deref for Pool {
    type Target = Bookkeeping;
    fn deref(&self) -> &Bookkeeping {
        &self.book
    }
}

fn chunks_name(stem: &str) -> String {
    format!("{stem}.chunks")
}

fn payload_name(stem: &str) -> String {
    format!("{stem}.pool")
}

/// Size of the bookkeeping segment for `layout`, and each class's table offset.
fn chunks_layout(layout: &PoolLayout) -> (usize, Vec<usize>) {
    let mut offset = HEADER_LEN + size_of::<ClassCursor>() * layout.classes().len();
    let mut tables = Vec::with_capacity(layout.classes().len());
    for class in layout.classes() {
        tables.push(offset);
        offset += size_of::<ChunkMeta>() * class.count as usize;
    }
    (offset, tables)
}

impl Pool {
    /// Creates the pool `dir/stem.{chunks,pool}` exclusively with `mode` permissions.
    pub fn create(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: MemoryType,
        mode: u32,
    ) -> Result<Self, CreatePoolError> {
        Self::create_tagged(dir, stem, layout, memory_type, mode, 0)
    }

    /// [`Pool::create`], recording `tag` (e.g. an id of the service incarnation that
    /// owns the pool), which [`Pool::open_tagged`] then requires.
    pub fn create_tagged(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: MemoryType,
        mode: u32,
        tag: u64,
    ) -> Result<Self, CreatePoolError> {
        let payload = Segment::create(dir, &payload_name(stem), layout.payload_len(), mode)?;
        Self::create_with_payload(dir, stem, layout, memory_type, mode, tag, payload).inspect_err(|_| {
            let _ = segment::remove(dir, &payload_name(stem));
        })
    }

    /// [`Pool::create_tagged`] around a payload the caller made (e.g. a sealed memfd
    /// from [`crate::memfd::create_memfd`], exactly `layout.payload_len()` bytes): only
    /// the bookkeeping file `dir/stem.chunks` is created.
    pub fn create_with_payload(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: MemoryType,
        mode: u32,
        tag: u64,
        payload: Segment,
    ) -> Result<Self, CreatePoolError> {
        if payload.len() != layout.payload_len() {
            return Err(CreatePoolError::PayloadLength {
                len: payload.len(),
                expected: layout.payload_len(),
            });
        }
        let (chunks_len, tables) = chunks_layout(layout);
        let chunks = Segment::create(dir, &chunks_name(stem), chunks_len, mode)?;
        let pool = Self {
            book: Bookkeeping {
                layout: layout.clone(),
                memory_type,
                chunks,
                tables,
            },
            payload,
        };
        // A fresh file is all zeroes: every chunk word says "free", every cursor 0.
        let h = pool.header();
        h.layout_hash.store(layout.hash(), Ordering::Relaxed);
        h.payload_len
            .store(layout.payload_len() as u64, Ordering::Relaxed);
        h.version.store(CHUNKS_VERSION, Ordering::Relaxed);
        h.class_count
            .store(layout.classes().len() as u32, Ordering::Relaxed);
        h.memory_type
            .store(u32::from(memory_type.code()), Ordering::Relaxed);
        h.tag.store(tag, Ordering::Relaxed);
        h.magic.store(CHUNKS_MAGIC, Ordering::Release);
        Ok(pool)
    }

    /// [`Pool::open_tagged`] around a payload the caller obtained and checked (e.g.
    /// with [`crate::memfd::open_memfd`]); only the bookkeeping is opened by name. A
    /// payload mapped read-only can be made writable later if its file is open
    /// read-write.
    pub fn open_with_payload(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: Option<MemoryType>,
        tag: u64,
        payload: Segment,
    ) -> Result<Self, OpenPoolError> {
        Self::assemble(Bookkeeping::open(dir, stem, layout, memory_type, tag)?, payload)
    }

    /// A pool from validated bookkeeping and a payload of exactly its length.
    fn assemble(book: Bookkeeping, payload: Segment) -> Result<Self, OpenPoolError> {
        payload.expect_len(book.layout.payload_len())?;
        Ok(Self { book, payload })
    }

    /// Opens the pool `dir/stem` that must have `layout` (and `memory_type`, if given).
    /// The payload is mapped with `payload_access` (its file is opened read-write
    /// either way, so [`Pool::make_payload_writable`] can upgrade a read-only
    /// mapping); bookkeeping is always read-write.
    pub fn open(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: Option<MemoryType>,
        payload_access: Access,
    ) -> Result<Self, OpenPoolError> {
        Self::open_tagged(dir, stem, layout, memory_type, payload_access, 0)
    }

    /// [`Pool::open`] of a pool that must carry `tag` (see [`Pool::create_tagged`]).
    pub fn open_tagged(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: Option<MemoryType>,
        payload_access: Access,
        tag: u64,
    ) -> Result<Self, OpenPoolError> {
        // The bookkeeping first: its header says whether the layout is the expected one.
        let book = Bookkeeping::open(dir, stem, layout, memory_type, tag)?;
        let payload = Segment::open_upgradable(
            dir,
            &payload_name(stem),
            payload_access,
            layout.payload_len() as u64,
        )?;
        Self::assemble(book, payload)
    }

    /// How many chunks of each class are in use, read from the bookkeeping alone
    /// (mapped read-only; the payload is not touched), for tools. Validates the file
    /// as [`Pool::open_tagged`] does.
    pub fn usage(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        tag: u64,
    ) -> Result<Vec<ClassInfo>, OpenPoolError> {
        Ok(Bookkeeping::open_with(dir, stem, layout, None, Access::ReadOnly, tag)?.class_usage())
    }

    /// Unlinks both files of the pool `dir/stem`. Returns whether anything existed.
    pub fn remove(dir: &Path, stem: &str) -> std::io::Result<bool> {
        let a = segment::remove(dir, &payload_name(stem))?;
        let b = segment::remove(dir, &chunks_name(stem))?;
        Ok(a || b)
    }

    /// The names of the files a pool with this stem consists of.
    pub fn file_names(stem: &str) -> [String; 2] {
        [chunks_name(stem), payload_name(stem)]
    }

    /// Takes a free chunk of at least `size` bytes from the smallest fitting class for
    /// `owner`. `hint` is a class index to try first (e.g. the one used last time); it
    /// is updated to the class used.
    #[inline]
    pub fn loan(&self, size: usize, hint: &mut usize, owner: Owner) -> Result<ChunkHandle, LoanError> {
        if self.payload.access() == Access::ReadOnly {
            return Err(LoanError::ReadOnly);
        }
        let class = self.layout.class_for(size, *hint).ok_or(LoanError::TooLarge {
            size,
            max: self.layout.max_chunk_size(),
        })?;
        *hint = class;
        let (cursor, chunks) = self.class_table(class);
        let count = chunks.len();
        let start = cursor.next.load(Ordering::Relaxed) as usize % count.max(1);
        for k in 0..count {
            let i = if start + k < count {
                start + k
            } else {
                start + k - count
            };
            if chunks[i].owners.try_loan(owner) {
                cursor.next.store((i + 1) as u32, Ordering::Relaxed);
                return Ok(ChunkHandle {
                    class: class as u8,
                    index: i as u32,
                });
            }
        }
        let c = self.layout.classes()[class];
        Err(LoanError::Exhausted {
            chunk_size: c.chunk_size,
            count: c.count,
        })
    }

    /// Like [`Pool::loan`], for a chunk of `near`'s class, trying first the chunks whose
    /// ownership words share a cache line with `near`'s: a publisher that loans its next
    /// chunk while sending `near` then touches one line of bookkeeping, not two.
    #[inline]
    pub fn loan_near(&self, near: ChunkHandle, owner: Owner) -> Result<ChunkHandle, LoanError> {
        if self.payload.access() == Access::ReadOnly {
            return Err(LoanError::ReadOnly);
        }
        let class = near.class();
        let Some(c) = self.layout.classes().get(class) else {
            return Err(LoanError::TooLarge {
                size: usize::MAX,
                max: self.layout.max_chunk_size(),
            });
        };
        let (_, chunks) = self.class_table(class);
        const PER_LINE: usize = 64 / size_of::<ChunkMeta>();
        let first = near.index as usize & !(PER_LINE - 1);
        let line = chunks.iter().enumerate().skip(first).take(PER_LINE);
        for (i, meta) in line {
            if i != near.index as usize && meta.owners.try_loan(owner) {
                return Ok(ChunkHandle {
                    class: class as u8,
                    index: i as u32,
                });
            }
        }
        let mut hint = class;
        self.loan(c.chunk_size, &mut hint, owner)
    }

    /// The address of a chunk in this process, and its size. `handle` must come from
    /// this pool (a foreign handle is clamped by the bounds check in `handle_from_raw`
    /// / `loan`; a handle of another pool with a larger layout would be out of range,
    /// so this checks and returns `None` then).
    #[inline]
    pub fn chunk(&self, handle: ChunkHandle) -> Option<(*mut u8, usize)> {
        let c = self.layout.classes().get(handle.class())?;
        if handle.index >= c.count {
            return None;
        }
        let offset = self.layout.chunk_offset(handle.class(), handle.index);
        // SAFETY: offset + chunk_size <= payload_len == mapped length (checked at
        // create/open), so the pointer stays inside the mapping.
        Some((unsafe { self.payload.as_ptr().add(offset) }, c.chunk_size))
    }

    /// The payload mapping as a region, e.g. to pin it; read-only if the payload is
    /// mapped read-only at the time of the call.
    pub fn payload_region(&self) -> Region<'_> {
        Region::of(&self.payload)
    }

    /// How the payload is mapped in this process now.
    pub fn payload_access(&self) -> Access {
        self.payload.access()
    }

    /// Makes a read-only payload mapping writable (one `mprotect` over the whole
    /// payload), so this process can loan chunks and write them; nothing to do if it
    /// is writable already. Idempotent and safe from any number of threads at once.
    /// Fails if the payload's file is open read-only (a payload handed to
    /// [`Pool::open_with_payload`] that way). A pin taken while the mapping was
    /// read-only stays a read-only registration (see [`crate::pin`]).
    ///
    /// ```
    /// use iox_mempool::{MemoryType, Owner, Pool, PoolLayout, segment::Access};
    /// let dir = tempfile::tempdir().unwrap();
    /// let layout = PoolLayout::new(&[(64, 4)]).unwrap();
    /// let _creator = Pool::create(dir.path(), "w", &layout, MemoryType::Cpu, 0o600).unwrap();
    /// let pool = Pool::open(dir.path(), "w", &layout, None, Access::ReadOnly).unwrap();
    /// let me = Owner::new(0).unwrap();
    /// assert!(pool.loan(8, &mut 0, me).is_err());
    /// assert!(pool.payload_region().read_only());
    /// pool.make_payload_writable().unwrap();
    /// assert!(!pool.payload_region().read_only());
    /// let chunk = pool.loan(8, &mut 0, me).unwrap();
    /// let (ptr, _) = pool.chunk(chunk).unwrap();
    /// // SAFETY: the chunk is loaned to us and writable now.
    /// unsafe { ptr.write(1) };
    /// ```
    pub fn make_payload_writable(&self) -> Result<(), MakeWritableError> {
        self.payload.make_writable()
    }

    /// Makes the payload mapping read-only (see [`Segment::make_read_only`]): what a
    /// creator does so that it holds the pool like any other reader until it publishes.
    pub fn make_payload_read_only(&mut self) -> Result<(), MakeWritableError> {
        self.payload.make_read_only()
    }

    /// Sizes, offsets, occupancy and address of the pool in this process.
    pub fn info(&self) -> PoolInfo {
        PoolInfo {
            base: self.payload.as_ptr() as usize,
            len: self.payload.len(),
            memory_type: self.memory_type,
            classes: self.class_usage(),
        }
    }

    /// The payload's open file (e.g. a memfd to share with other processes).
    pub fn payload_file(&self) -> &std::fs::File {
        self.payload.file()
    }

    /// Pins the payload through the process's pin registry (see [`crate::pin`]). The
    /// returned guard keeps the pool mapped, so the region is unpinned before it is
    /// unmapped.
    pub fn pin(self: &Arc<Self>) -> Result<PoolPin, PinError> {
        // SAFETY: the PoolPin holds the pool, so the payload stays mapped, until after
        // the guard is dropped (field order); leaking the PoolPin leaks the pool too.
        let guard = unsafe { pin::acquire(self.payload_region(), self.memory_type) }?;
        Ok(PoolPin {
            guard,
            _pool: Arc::clone(self),
        })
    }
}

impl Bookkeeping {
    /// Opens and validates the bookkeeping segment `dir/stem.chunks` alone (as
    /// [`Pool::open_tagged`] does), read-write, e.g. to recover chunks of dead owners
    /// without mapping the payload.
    pub fn open(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: Option<MemoryType>,
        tag: u64,
    ) -> Result<Self, OpenPoolError> {
        Self::open_with(dir, stem, layout, memory_type, Access::ReadWrite, tag)
    }

    /// [`Bookkeeping::open`] with a choice of access. Read-only only for callers in
    /// this crate that never call a mutating method (they would fault).
    fn open_with(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: Option<MemoryType>,
        access: Access,
        tag: u64,
    ) -> Result<Self, OpenPoolError> {
        let (chunks_len, tables) = chunks_layout(layout);
        let chunks = Segment::open(dir, &chunks_name(stem), access, HEADER_LEN as u64)?;
        let path = chunks.path().display().to_string();
        // SAFETY: the segment is at least HEADER_LEN bytes (checked by open) and
        // page-aligned; Header is all atomics, valid for any bit pattern.
        let h = unsafe { &*chunks.as_ptr().cast::<Header>() };
        let magic = h.magic.load(Ordering::Acquire);
        if magic == 0 {
            return Err(OpenPoolError::NotReady { path });
        }
        if magic != CHUNKS_MAGIC {
            return Err(if magic.to_le_bytes().starts_with(b"IOX") {
                OpenPoolError::WrongMagic { path, found: magic }
            } else {
                OpenPoolError::Foreign { path, found: magic }
            });
        }
        let found_tag = h.tag.load(Ordering::Relaxed);
        if found_tag != tag {
            return Err(OpenPoolError::TagMismatch {
                path,
                expected: tag,
                found: found_tag,
            });
        }
        let version = h.version.load(Ordering::Relaxed);
        if version != CHUNKS_VERSION {
            return Err(OpenPoolError::UnsupportedVersion { path, found: version });
        }
        let found = h.layout_hash.load(Ordering::Relaxed);
        if found != layout.hash() {
            return Err(OpenPoolError::LayoutMismatch {
                path,
                expected: layout.hash(),
                found,
            });
        }
        let checks = [
            (
                "class count",
                layout.classes().len() as u64,
                u64::from(h.class_count.load(Ordering::Relaxed)),
            ),
            (
                "payload length",
                layout.payload_len() as u64,
                h.payload_len.load(Ordering::Relaxed),
            ),
        ];
        for (what, expected, found) in checks {
            if expected != found {
                return Err(OpenPoolError::HeaderMismatch {
                    path,
                    what,
                    expected,
                    found,
                });
            }
        }
        let code = h.memory_type.load(Ordering::Relaxed);
        let stored = u16::try_from(code)
            .ok()
            .and_then(|c| MemoryType::from_code(c).ok());
        let memory_type = match (stored, memory_type) {
            (Some(s), None) => s,
            (Some(s), Some(e)) if s == e => s,
            (_, expected) => {
                return Err(OpenPoolError::MemoryTypeMismatch {
                    path,
                    expected: expected.unwrap_or_default(),
                    found: stored.map_or_else(|| format!("unknown code {code:#x}"), |s| s.to_string()),
                });
            }
        };
        // The header agrees with the layout; now the file must be exactly as long.
        chunks.expect_len(chunks_len)?;
        Ok(Self {
            layout: layout.clone(),
            memory_type,
            chunks,
            tables,
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: the bookkeeping segment is at least HEADER_LEN bytes and page-aligned;
        // Header is all atomics, so any bytes are a valid value and sharing is fine.
        unsafe { &*self.chunks.as_ptr().cast::<Header>() }
    }

    /// The loan cursor and the chunk table of `class` (which must be in range).
    fn class_table(&self, class: usize) -> (&ClassCursor, &[ChunkMeta]) {
        let count = self.layout.classes()[class].count as usize;
        let base = self.chunks.as_ptr();
        // SAFETY: create/open checked that the segment holds HEADER_LEN, one
        // ClassCursor per class and every class's table (chunks_layout); offsets are
        // 64- and 8-aligned on a page-aligned mapping; the types are atomics only.
        unsafe {
            let cursor = &*base.add(HEADER_LEN).cast::<ClassCursor>().add(class);
            let chunks = std::slice::from_raw_parts(base.add(self.tables[class]).cast::<ChunkMeta>(), count);
            (cursor, chunks)
        }
    }

    fn meta(&self, handle: ChunkHandle) -> Result<&ChunkMeta, ChunkError> {
        let class = handle.class();
        let invalid = ChunkError::InvalidHandle {
            class,
            index: handle.index,
        };
        let count = self.layout.classes().get(class).ok_or(invalid)?.count;
        if handle.index >= count {
            return Err(invalid);
        }
        // SAFETY: class and index are in range, so the entry lies inside the table
        // checked at create/open; ChunkMeta is atomics only.
        Ok(unsafe {
            &*self
                .chunks
                .as_ptr()
                .add(self.tables[class])
                .cast::<ChunkMeta>()
                .add(handle.index as usize)
        })
    }

    /// The pool's layout.
    pub fn layout(&self) -> &PoolLayout {
        &self.layout
    }

    /// The pool's memory type.
    pub fn memory_type(&self) -> MemoryType {
        self.memory_type
    }

    fn word_error(handle: ChunkHandle, owner: Owner, e: WordError) -> ChunkError {
        let (class, index, owner) = (handle.class(), handle.index, owner.number());
        match e {
            WordError::NotHeld => ChunkError::NotOwned { class, index, owner },
            WordError::AlreadyHeld => ChunkError::AlreadyOwned { class, index, owner },
        }
    }

    /// Gives up `owner`'s hold on a chunk; the chunk is free once no owner and no queue
    /// entry holds it. Returns whether that happened now. Idempotent in effect: a
    /// second release changes nothing and reports [`ChunkError::NotOwned`].
    #[inline]
    pub fn release(&self, handle: ChunkHandle, owner: Owner) -> Result<bool, ChunkError> {
        self.meta(handle)?
            .owners
            .release(owner)
            .map_err(|e| Self::word_error(handle, owner, e))
    }

    /// Hands a chunk held by `owner` to `queued` queue entries, giving up the owner's
    /// hold in the same atomic step. Returns whether the chunk became free (no entries
    /// and no other owner).
    #[inline]
    pub fn hand_off(&self, handle: ChunkHandle, owner: Owner, queued: u32) -> Result<bool, ChunkError> {
        self.meta(handle)?
            .owners
            .hand_off(owner, queued)
            .map_err(|e| Self::word_error(handle, owner, e))
    }

    /// Moves one queue entry's hold on a chunk to `owner` (the taker of the entry),
    /// in one atomic step. A duplicate entry (the owner holds the chunk already) is
    /// [`ChunkError::AlreadyOwned`] and changes nothing.
    #[inline]
    pub fn take_queued(&self, handle: ChunkHandle, owner: Owner) -> Result<(), ChunkError> {
        self.meta(handle)?
            .owners
            .take_queued(owner)
            .map_err(|e| Self::word_error(handle, owner, e))
    }

    /// The chunk's ownership word (see [`crate::owners`]). A snapshot.
    pub fn owners(&self, handle: ChunkHandle) -> Result<u64, ChunkError> {
        Ok(self.meta(handle)?.owners.load())
    }

    /// Clears `owner`'s bit on every chunk: what recovering a dead owner needs, safe to
    /// repeat. Returns how many chunks it held and how many of them became free.
    pub fn release_all(&self, owner: Owner) -> (u64, u64) {
        let (mut held, mut freed) = (0, 0);
        for class in 0..self.layout.classes().len() {
            for meta in self.class_table(class).1 {
                if let Some(free) = meta.owners.release_if_held(owner) {
                    held += 1;
                    freed += u64::from(free);
                }
            }
        }
        (held, freed)
    }

    /// Every chunk whose word has `owner`'s bit set right now (a snapshot).
    pub fn held_by(&self, owner: Owner) -> Vec<ChunkHandle> {
        let mut out = Vec::new();
        for class in 0..self.layout.classes().len() {
            for (i, meta) in self.class_table(class).1.iter().enumerate() {
                if meta.owners.is_held_by(owner) {
                    out.push(ChunkHandle {
                        class: class as u8,
                        index: i as u32,
                    });
                }
            }
        }
        out
    }

    /// Stores the chunk's user word (e.g. the length of the payload written). Readers
    /// see it if it is published before the handle is (e.g. through a Release store).
    #[inline]
    pub fn set_user_word(&self, handle: ChunkHandle, value: u64) -> Result<(), ChunkError> {
        self.meta(handle)?.user.store(value, Ordering::Relaxed);
        Ok(())
    }

    /// The chunk's user word.
    #[inline]
    pub fn user_word(&self, handle: ChunkHandle) -> Result<u64, ChunkError> {
        Ok(self.meta(handle)?.user.load(Ordering::Relaxed))
    }

    /// The handle `raw` ([`ChunkHandle::to_raw`]) stands for, if it names a chunk of
    /// this pool.
    #[inline]
    pub fn handle_from_raw(&self, raw: u32) -> Option<ChunkHandle> {
        let class = (raw >> RAW_CLASS_SHIFT) as u8;
        let index = raw & ((1 << RAW_CLASS_SHIFT) - 1);
        let c = self.layout.classes().get(usize::from(class))?;
        (index < c.count).then_some(ChunkHandle { class, index })
    }

    /// Occupancy of each class (a snapshot).
    pub fn class_usage(&self) -> Vec<ClassInfo> {
        self.layout
            .classes()
            .iter()
            .enumerate()
            .map(|(i, c)| ClassInfo {
                chunk_size: c.chunk_size,
                count: c.count,
                free: self
                    .class_table(i)
                    .1
                    .iter()
                    .filter(|m| m.owners.is_free())
                    .count() as u32,
                offset: self.layout.class_offset(i),
            })
            .collect()
    }
}

/// A pinned pool: unpins (if it was the last pin of the region) and then lets the pool
/// unmap, in that order, when dropped.
#[derive(Debug)]
pub struct PoolPin {
    // Field order matters: the guard drops (unpins) before the pool can unmap.
    guard: PinGuard,
    _pool: Arc<Pool>,
}

impl PoolPin {
    /// Whether anything was pinned (false for `Cpu` pools).
    pub fn is_pinned(&self) -> bool {
        self.guard.is_pinned()
    }
}
