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
//!
//! Files of this module: `mod.rs` ([`Pool`]: creating, opening, loaning, the payload
//! mapping and pinning), `bookkeeping.rs` ([`Bookkeeping`]: the `S.chunks` segment and
//! every operation on chunk ownership), `handle.rs` ([`ChunkHandle`] and the reports
//! [`ClassInfo`], [`PoolInfo`]), `errors.rs`.

mod bookkeeping;
mod chunk_ref;
mod device;
mod errors;
mod handle;
mod located;

use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::owners::{ChunkMeta, Owner};
use crate::pin::{self, PinError, PinGuard, Region};
use crate::segment::{self, Access, MakeWritableError, Segment};
use crate::{MemoryType, PoolLayout};

pub use bookkeeping::{Bookkeeping, CHUNKS_MAGIC, CHUNKS_VERSION};
pub use chunk_ref::ChunkRef;
pub use device::DevicePayload;
use device::Payload;
pub use errors::{ChunkError, CreatePoolError, LoanError, OpenPoolError};
pub use handle::{ChunkHandle, ClassInfo, PoolInfo};
use located::ClassSpan;
pub use located::Located;

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
/// assert!(pool.book().release(chunk, me).unwrap());
/// assert_eq!(other.info().free_chunks(), 10);
/// ```
#[derive(Debug)]
pub struct Pool {
    book: Bookkeeping,
    payload: Payload,
    /// Whether the payload is writable in this process now: the payload's own state,
    /// mirrored here (set after the `mprotect` that made it so, Release; read with
    /// Acquire) so that a loan tests one word whatever the payload is.
    writable: AtomicBool,
    /// Each class's ownership words and chunks in this process (see `located`).
    spans: Box<[ClassSpan]>,
}

// SAFETY: the raw mappings inside the segments are only ever accessed through atomics
// (bookkeeping) or handed out as raw pointers whose use is the caller's responsibility;
// nothing in `Pool` is tied to the thread that made it.
unsafe impl Send for Pool {}
// SAFETY: as above; every `&self` method is a sequence of atomic operations.
unsafe impl Sync for Pool {}

impl Pool {
    /// The pool's bookkeeping: chunk ownership and user words (what recovery and
    /// tools use without the payload).
    #[inline]
    pub fn book(&self) -> &Bookkeeping {
        &self.book
    }

    /// The pool's size classes.
    #[inline]
    pub fn layout(&self) -> &PoolLayout {
        &self.book.layout
    }

    /// The memory type its payload was created with.
    pub fn memory_type(&self) -> MemoryType {
        self.book.memory_type
    }
}

pub(super) fn chunks_name(stem: &str) -> String {
    format!("{stem}.chunks")
}

fn payload_name(stem: &str) -> String {
    format!("{stem}.pool")
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
        let book = Bookkeeping::create(dir, stem, layout, memory_type, mode, tag)?;
        Ok(Self::with_spans(book, Payload::Host(payload)))
    }

    /// [`Pool::create_tagged`] around device memory the caller made and mapped (see
    /// [`DevicePayload`]), of at least `layout.payload_len()` bytes, for a pool of
    /// [`MemoryType::CudaDevice`]: only the bookkeeping file `dir/stem.chunks` is
    /// created. Chunk addresses of such a pool are device addresses.
    pub fn create_with_device(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        mode: u32,
        tag: u64,
        payload: Arc<dyn DevicePayload>,
    ) -> Result<Self, CreatePoolError> {
        if payload.len() < layout.payload_len() {
            return Err(CreatePoolError::PayloadLength {
                len: payload.len(),
                expected: layout.payload_len(),
            });
        }
        let book = Bookkeeping::create(dir, stem, layout, MemoryType::CudaDevice, mode, tag)?;
        Ok(Self::with_spans(book, Payload::Device(payload)))
    }

    /// [`Pool::open_with_payload`] for a [`MemoryType::CudaDevice`] pool whose device
    /// memory the caller imported and mapped.
    pub fn open_with_device(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        tag: u64,
        payload: Arc<dyn DevicePayload>,
    ) -> Result<Self, OpenPoolError> {
        let book = Bookkeeping::open(dir, stem, layout, Some(MemoryType::CudaDevice), tag)?;
        if payload.len() < layout.payload_len() {
            return Err(OpenPoolError::DevicePayloadLength {
                len: payload.len(),
                expected: layout.payload_len(),
            });
        }
        Ok(Self::with_spans(book, Payload::Device(payload)))
    }

    /// Whether the payload is device memory (chunk addresses are device addresses).
    #[inline]
    pub fn is_device(&self) -> bool {
        matches!(self.payload, Payload::Device(_))
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
        Ok(Self::with_spans(book, Payload::Host(payload)))
    }

    /// The pool of `book` and a payload of exactly its layout's length, with its class
    /// spans worked out.
    fn with_spans(book: Bookkeeping, payload: Payload) -> Self {
        debug_assert!(payload.len() >= book.layout.payload_len());
        let metas = book.chunks.as_ptr();
        let spans = book
            .tables
            .iter()
            .map(|t| ClassSpan {
                // SAFETY: the table offsets come from the layout the bookkeeping
                // segment was created or checked with (every class's table lies inside
                // it), and the class offsets from the layout whose payload length the
                // payload mapping has (checked by the callers): both stay inside their
                // mappings. Mappings are never null.
                metas: unsafe { NonNull::new_unchecked(metas.add(t.offset).cast()) },
                // Address arithmetic only (`wrapping_add`: a device payload's base is
                // a device address, not an allocation of this process); non-null as
                // a mapping's (or a device mapping's) base plus an offset inside it is.
                payload: NonNull::new(payload.base().wrapping_add(t.payload))
                    .expect("a payload mapping does not end at address 0"),
                count: t.count,
                chunk_size: t.chunk_size,
            })
            .collect();
        let writable = AtomicBool::new(payload.access() == Access::ReadWrite);
        Self {
            book,
            payload,
            writable,
            spans,
        }
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
        if !self.writable.load(Ordering::Acquire) {
            return Err(LoanError::ReadOnly);
        }
        let Some(class) = self.book.layout.class_for(size, *hint) else {
            return Err(LoanError::TooLarge {
                size,
                max: self.book.layout.max_chunk_size(),
            });
        };
        *hint = class;
        let (cursor, chunks) = self.book.class_table(class);
        let count = chunks.len();
        // The cursor is a hint (any value a corrupt file holds only costs a longer
        // scan): start there, or at 0 when it is out of range. No division.
        let mut i = cursor.next.load(Ordering::Relaxed) as usize;
        if i >= count {
            i = 0;
        }
        for _ in 0..count {
            if chunks[i].owners.try_loan(owner) {
                cursor.next.store((i + 1) as u32, Ordering::Relaxed);
                return Ok(ChunkHandle {
                    class: class as u8,
                    index: i as u32,
                });
            }
            i += 1;
            if i == count {
                i = 0;
            }
        }
        let c = self.book.layout.classes()[class];
        Err(LoanError::Exhausted {
            chunk_size: c.chunk_size,
            count: c.count,
        })
    }

    /// Like [`Pool::loan`], for a chunk of `near`'s class, trying first the chunks whose
    /// ownership words share a cache line with `near`'s: a publisher that loans its next
    /// chunk while sending `near` then touches one line of bookkeeping, not two. The
    /// chunk comes located (see [`Located`]).
    ///
    /// The line's three other chunks are tried first, each checked against the class's
    /// count, as that is the common case of every send; the whole-class scan of
    /// [`Pool::loan`] is the fallback, out of line.
    #[inline]
    pub fn loan_near(&self, near: ChunkHandle, owner: Owner) -> Result<Located, LoanError> {
        if !self.writable.load(Ordering::Acquire) {
            return Err(LoanError::ReadOnly);
        }
        const PER_LINE: u32 = (64 / size_of::<ChunkMeta>()) as u32;
        let Some(span) = self.spans.get(near.class()) else {
            return self.loan_near_slow(near, owner);
        };
        // The index with its low bits flipped: the other chunks of the group of four
        // `near` is in, which is one cache line where the class's table starts on a
        // line (the first class's always does; a later one when the counts before it
        // are multiples of four). A heuristic only: any free chunk of the class would
        // do. `locate` checks each index against the class's count.
        for flip in 1..PER_LINE {
            if let Some(chunk) = span.locate(near.class, near.index ^ flip)
                // SAFETY: located just now in this pool, which `&self` keeps mapped.
                // One CAS, no load first: the line is `near`'s, which the send writes next.
                && unsafe { chunk.meta_ref() }.owners.try_loan_exclusive(owner)
            {
                return Ok(chunk);
            }
        }
        self.loan_near_slow(near, owner)
    }

    /// [`Pool::loan_near`] when `near`'s line has no free chunk: a loan of its class.
    #[cold]
    #[inline(never)]
    fn loan_near_slow(&self, near: ChunkHandle, owner: Owner) -> Result<Located, LoanError> {
        let Some(c) = self.book.layout.classes().get(near.class()) else {
            return Err(LoanError::TooLarge {
                size: usize::MAX,
                max: self.book.layout.max_chunk_size(),
            });
        };
        let mut hint = near.class();
        let handle = self.loan(c.chunk_size, &mut hint, owner)?;
        Ok(self
            .locate(handle)
            .expect("a chunk just loaned from this pool is in range"))
    }

    /// The address of a chunk in this process, and its size. `handle` must come from
    /// this pool (a foreign handle is clamped by the bounds check in `handle_from_raw`
    /// / `loan`; a handle of another pool with a larger layout would be out of range,
    /// so this checks and returns `None` then).
    #[inline]
    pub fn chunk(&self, handle: ChunkHandle) -> Option<(*mut u8, usize)> {
        let span = self.spans.get(handle.class())?;
        Some((span.locate(handle.class, handle.index)?.addr(), span.chunk_size))
    }

    /// The payload mapping as a region, e.g. to pin it; read-only if the payload is
    /// mapped read-only at the time of the call.
    ///
    /// # Panics
    ///
    /// On a device pool ([`Pool::is_device`]): its memory is not mapped into this
    /// process; use [`Pool::payload_base`] for its address.
    pub fn payload_region(&self) -> Region<'_> {
        match &self.payload {
            Payload::Host(s) => Region::of(s),
            Payload::Device(_) => panic!("a device pool's payload is not a host mapping"),
        }
    }

    /// The address of the payload's first byte in this process: a host address, or
    /// for a device pool a device address.
    #[inline]
    pub fn payload_base(&self) -> usize {
        self.payload.base() as usize
    }

    /// How the payload is mapped in this process now.
    pub fn payload_access(&self) -> Access {
        if self.writable.load(Ordering::Acquire) {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        }
    }

    /// Makes a read-only payload mapping writable (one `mprotect` over the whole
    /// payload), so this process can loan chunks and write them; nothing to do if it
    /// is writable already. Idempotent and safe from any number of threads at once.
    /// Fails if the payload's file is open read-only (a payload handed to
    /// [`Pool::open_with_payload`] that way). A pin of such a pool is read-only and
    /// stays so; [`Pool::pin`] makes a pool that can be written writable before it
    /// registers it.
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
        self.payload.make_writable()?;
        self.writable.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the payload's file is open read-write, so that
    /// [`Pool::make_payload_writable`] can succeed (a payload handed over read-only to
    /// a reader cannot be written, however it is mapped).
    pub fn payload_writable_file(&self) -> bool {
        self.payload.can_write()
    }

    /// Makes the payload mapping read-only (see [`Segment::make_read_only`]): what a
    /// creator does so that it holds the pool like any other reader until it publishes.
    pub fn make_payload_read_only(&mut self) -> Result<(), MakeWritableError> {
        self.payload.make_read_only()?;
        *self.writable.get_mut() = self.payload.access() == Access::ReadWrite;
        Ok(())
    }

    /// Sizes, offsets, occupancy and address of the pool in this process.
    pub fn info(&self) -> PoolInfo {
        PoolInfo {
            base: self.payload.base() as usize,
            len: self.payload.len(),
            memory_type: self.book.memory_type,
            page_size: self.book.layout.page_size(),
            classes: self.book().class_usage(),
        }
    }

    /// The payload's descriptor to share with other processes: its open file (e.g. a
    /// memfd), or a device payload's export.
    pub fn payload_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.payload.fd()
    }

    /// Pins the payload through the process's pin registry (see [`crate::pin`]). The
    /// returned guard keeps the pool mapped, so the region is unpinned before it is
    /// unmapped.
    ///
    /// Registered once, as this process may use it: a process that may write the pool
    /// (its payload's file is open read-write) makes its mapping writable first, unless
    /// the memory type's pinning does not care (`Locked`: `mlock` pins either), so the
    /// one registration serves a publisher built later without being swapped; a
    /// process holding a read-only descriptor pins its read-only mapping.
    pub fn pin(self: &Arc<Self>) -> Result<PoolPin, PinError> {
        let Payload::Host(segment) = &self.payload else {
            return Err(PinError::NoPinner {
                memory_type: self.book.memory_type,
                hint: "a device pool is GPU memory already: there is nothing to pin",
            });
        };
        let registration_reads_access =
            !matches!(self.book.memory_type, MemoryType::Cpu | MemoryType::Locked);
        if registration_reads_access && segment.can_write() {
            self.make_payload_writable().map_err(|e| PinError::Os {
                op: "mprotect (to register the payload writable)",
                source: std::io::Error::other(e),
            })?;
        }
        // SAFETY: the PoolPin holds the pool, so the payload stays mapped, until after
        // the guard is dropped (field order); leaking the PoolPin leaks the pool too.
        let guard = unsafe { pin::acquire(Region::of(segment), self.book.memory_type) }
            .map_err(|e| pin::explain_refusal(e, segment.file(), self.book.memory_type))?;
        Ok(PoolPin {
            guard,
            _pool: Arc::clone(self),
        })
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

    /// The device address of the payload's first byte, if the pool's pinner gives one
    /// (the CUDA pinner does): a chunk's device address is this plus its offset.
    pub fn device_base(&self) -> Option<u64> {
        self.guard.device_base()
    }
}
