//! The bookkeeping segment `S.chunks` of a pool (see the parent module): its header,
//! the per-class loan cursors and chunk tables, and every operation on chunk ownership
//! (through [`crate::owners`]). What recovery and tools map without the payload.

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::{ChunkError, ChunkHandle, ClassInfo, OpenPoolError, chunks_name};
use crate::owners::{ChunkMeta, ClassCursor, Owner, WordError};
use crate::segment::{Access, CreateSegmentError, Segment};
use crate::{MemoryType, PoolLayout};

/// Magic of a chunk bookkeeping segment.
pub const CHUNKS_MAGIC: u64 = u64::from_le_bytes(*b"IOXCHNK\x01");
/// Version of the bookkeeping format.
pub const CHUNKS_VERSION: u32 = 2;
pub(super) const HEADER_LEN: usize = 64;

#[repr(C)]
pub(super) struct Header {
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

/// A pool's bookkeeping alone (`S.chunks`): chunk ownership and user words, without
/// the payload mapped. What recovery and tools need; a [`super::Pool`] has one ([`super::Pool::book`]).
#[derive(Debug)]
pub struct Bookkeeping {
    pub(super) layout: PoolLayout,
    pub(super) memory_type: MemoryType,
    pub(super) chunks: Segment,
    /// Where each class's chunk table is in the bookkeeping segment, and its length:
    /// the one bounds check a handle needs.
    pub(super) tables: Vec<ClassTable>,
}

/// A class's chunk table: its byte offset in the bookkeeping segment and its chunks;
/// and where the class's chunks are in the payload, and their size (from the layout,
/// kept here so that a handle's address needs one lookup).
#[derive(Debug, Clone, Copy)]
pub(super) struct ClassTable {
    pub(super) offset: usize,
    pub(super) count: u32,
    pub(super) payload: usize,
    pub(super) chunk_size: usize,
}

// SAFETY: as for Pool: the mapping is only accessed through atomics.
unsafe impl Send for Bookkeeping {}
// SAFETY: as above.
unsafe impl Sync for Bookkeeping {}

/// Size of the bookkeeping segment for `layout`, and each class's table offset.
fn chunks_layout(layout: &PoolLayout) -> (usize, Vec<ClassTable>) {
    let mut offset = HEADER_LEN + size_of::<ClassCursor>() * layout.classes().len();
    let mut tables = Vec::with_capacity(layout.classes().len());
    for (i, class) in layout.classes().iter().enumerate() {
        tables.push(ClassTable {
            offset,
            count: class.count,
            payload: layout.class_offset(i),
            chunk_size: class.chunk_size,
        });
        offset += size_of::<ChunkMeta>() * class.count as usize;
    }
    (offset, tables)
}

impl Bookkeeping {
    /// Creates `dir/stem.chunks` exclusively for `layout`: a fresh file is all zeroes
    /// (every chunk word "free", every cursor 0); the header is filled in and its
    /// magic stored last (Release), so an opener that sees the magic sees the rest.
    pub(super) fn create(
        dir: &Path,
        stem: &str,
        layout: &PoolLayout,
        memory_type: MemoryType,
        mode: u32,
        tag: u64,
    ) -> Result<Self, CreateSegmentError> {
        let (chunks_len, tables) = chunks_layout(layout);
        let chunks = Segment::create(dir, &chunks_name(stem), chunks_len, mode)?;
        let book = Self {
            layout: layout.clone(),
            memory_type,
            chunks,
            tables,
        };
        let h = book.header();
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
        Ok(book)
    }

    /// Opens and validates the bookkeeping segment `dir/stem.chunks` alone (as
    /// [`Pool::open_tagged`](crate::Pool::open_tagged) does), read-write, e.g. to recover chunks of dead owners
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
    pub(super) fn open_with(
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

    pub(super) fn header(&self) -> &Header {
        // SAFETY: the bookkeeping segment is at least HEADER_LEN bytes and page-aligned;
        // Header is all atomics, so any bytes are a valid value and sharing is fine.
        unsafe { &*self.chunks.as_ptr().cast::<Header>() }
    }

    /// The loan cursor and the chunk table of `class` (which must be in range).
    pub(super) fn class_table(&self, class: usize) -> (&ClassCursor, &[ChunkMeta]) {
        let count = self.layout.classes()[class].count as usize;
        let base = self.chunks.as_ptr();
        // SAFETY: create/open checked that the segment holds HEADER_LEN, one
        // ClassCursor per class and every class's table (chunks_layout); offsets are
        // 64- and 8-aligned on a page-aligned mapping; the types are atomics only.
        unsafe {
            let cursor = &*base.add(HEADER_LEN).cast::<ClassCursor>().add(class);
            let chunks =
                std::slice::from_raw_parts(base.add(self.tables[class].offset).cast::<ChunkMeta>(), count);
            (cursor, chunks)
        }
    }

    #[inline]
    pub(super) fn meta(&self, handle: ChunkHandle) -> Result<&ChunkMeta, ChunkError> {
        let class = handle.class();
        let invalid = ChunkError::InvalidHandle {
            class,
            index: handle.index,
        };
        self.meta_at(class, handle.index).ok_or(invalid)
    }

    /// The bookkeeping of chunk `index` of `class`, if both are in range.
    #[inline]
    pub(super) fn meta_at(&self, class: usize, index: u32) -> Option<&ChunkMeta> {
        let table = self.tables.get(class).filter(|t| index < t.count)?;
        // SAFETY: class and index are in range, so the entry lies inside the table
        // checked at create/open; ChunkMeta is atomics only.
        Some(unsafe {
            &*self
                .chunks
                .as_ptr()
                .add(table.offset)
                .cast::<ChunkMeta>()
                .add(index as usize)
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

    pub(super) fn word_error(handle: ChunkHandle, owner: Owner, e: WordError) -> ChunkError {
        let (class, index, owner) = (handle.class(), handle.index, owner.number());
        match e {
            WordError::NotHeld => ChunkError::NotOwned { class, index, owner },
            WordError::AlreadyHeld => ChunkError::AlreadyOwned { class, index, owner },
            WordError::Free => ChunkError::Free { class, index },
        }
    }

    /// Gives up `owner`'s hold on a chunk; the chunk is free once no owner and no queue
    /// entry holds it. Returns whether that happened now. Idempotent in effect: a
    /// second release changes nothing and reports [`ChunkError::NotOwned`].
    #[inline]
    pub fn release(&self, handle: ChunkHandle, owner: Owner) -> Result<bool, ChunkError> {
        self.meta(handle)?.release(handle, owner)
    }

    /// Hands a chunk held by `owner` to `queued` queue entries, giving up the owner's
    /// hold in the same atomic step. Returns whether the chunk became free (no entries
    /// and no other owner).
    #[inline]
    pub fn hand_off(&self, handle: ChunkHandle, owner: Owner, queued: u32) -> Result<bool, ChunkError> {
        self.meta(handle)?.hand_off(handle, owner, queued)
    }

    /// Moves one queue entry's hold on a chunk to `owner` (the taker of the entry),
    /// in one atomic step. A duplicate entry (the owner holds the chunk already) is
    /// [`ChunkError::AlreadyOwned`] and changes nothing.
    #[inline]
    pub fn take_queued(&self, handle: ChunkHandle, owner: Owner) -> Result<(), ChunkError> {
        self.meta(handle)?.take_queued(handle, owner)
    }

    /// Adds `owner`'s hold to a chunk that others keep held (a queue entry the caller
    /// does not take), in one atomic step, so that the owner can hand it to more queue
    /// entries with [`Bookkeeping::hand_off`]: how a publisher re-sends a sample its
    /// history queue keeps. The owner's bit must be clear
    /// ([`ChunkError::AlreadyOwned`]) and the chunk not free ([`ChunkError::Free`]);
    /// nothing changes then. Recovering a dead owner clears this bit like any other.
    ///
    /// ```
    /// # use iox_mempool::{MemoryType, Owner, Pool, PoolLayout};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let layout = PoolLayout::new(&[(64, 4)]).unwrap();
    /// # let pool = Pool::create(dir.path(), "doc", &layout, MemoryType::Cpu, 0o600).unwrap();
    /// let (publisher, reader) = (Owner::new(0).unwrap(), Owner::new(1).unwrap());
    /// let h = pool.loan(64, &mut 0, publisher).unwrap();
    /// pool.book().hand_off(h, publisher, 1).unwrap(); // one entry, kept (a history)
    /// pool.book().hold_queued(h, publisher).unwrap(); // join it again ...
    /// pool.book().hand_off(h, publisher, 1).unwrap(); // ... and send it once more
    /// pool.book().take_queued(h, reader).unwrap(); // the reader takes the new entry
    /// assert_eq!(pool.book().release(h, reader), Ok(false)); // the kept entry still holds it
    /// ```
    #[inline]
    pub fn hold_queued(&self, handle: ChunkHandle, owner: Owner) -> Result<(), ChunkError> {
        self.meta(handle)?.hold_queued(handle, owner)
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
        self.meta(handle)?.set_user_word(value);
        Ok(())
    }

    /// The chunk's user word.
    #[inline]
    pub fn user_word(&self, handle: ChunkHandle) -> Result<u64, ChunkError> {
        Ok(self.meta(handle)?.user_word())
    }

    /// The handle `raw` ([`ChunkHandle::to_raw`]) stands for, if it names a chunk of
    /// this pool.
    #[inline]
    pub fn handle_from_raw(&self, raw: u32) -> Option<ChunkHandle> {
        let handle = ChunkHandle::from_raw_unchecked(raw);
        let t = self.tables.get(handle.class())?;
        (handle.index < t.count).then_some(handle)
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

/// Every operation on one chunk's bookkeeping, written once: what [`Bookkeeping`]'s
/// by-handle methods, [`super::Located`]'s and [`super::ChunkRef`]'s do once they
/// have found the chunk. `handle` names the chunk in errors.
impl ChunkMeta {
    #[inline]
    pub(super) fn release(&self, handle: ChunkHandle, owner: Owner) -> Result<bool, ChunkError> {
        self.owners
            .release(owner)
            .map_err(|e| Bookkeeping::word_error(handle, owner, e))
    }

    #[inline]
    pub(super) fn hand_off(
        &self,
        handle: ChunkHandle,
        owner: Owner,
        queued: u32,
    ) -> Result<bool, ChunkError> {
        self.owners
            .hand_off(owner, queued)
            .map_err(|e| Bookkeeping::word_error(handle, owner, e))
    }

    #[inline]
    pub(super) fn take_queued(&self, handle: ChunkHandle, owner: Owner) -> Result<(), ChunkError> {
        self.owners
            .take_queued(owner)
            .map_err(|e| Bookkeeping::word_error(handle, owner, e))
    }

    #[inline]
    pub(super) fn hold_queued(&self, handle: ChunkHandle, owner: Owner) -> Result<(), ChunkError> {
        self.owners
            .hold_queued(owner)
            .map_err(|e| Bookkeeping::word_error(handle, owner, e))
    }

    #[inline]
    pub(super) fn set_user_word(&self, value: u64) {
        self.user.store(value, Ordering::Relaxed);
    }

    #[inline]
    pub(super) fn user_word(&self) -> u64 {
        self.user.load(Ordering::Relaxed)
    }
}
