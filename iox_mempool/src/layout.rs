//! Pool layouts: the ordered size classes of a pool and where each chunk lives.
//!
//! A layout is a list of size classes `(chunk_size, count)`, sorted by chunk size,
//! strictly increasing. Chunk sizes are rounded up to the layout's alignment (64 bytes
//! by default, any power of two up to the page size), so every chunk starts aligned.
//! Classes are laid out back to back from offset 0 of the payload segment, and the
//! payload length is rounded up to the layout's page size ([`PageSize`]: the base page
//! by default, 2 MiB or 1 GiB for huge pages), so the payload segment can be mapped and
//! pinned exactly. Only the pool's end is rounded, never a chunk: a huge page holds
//! many small chunks and a large chunk spans several pages; rounding each chunk up to
//! a page would waste up to a page per chunk and save no TLB entry (entries cover
//! pages, not chunks). The layout has a stable hash (xxh3 over a fixed little-endian
//! encoding) that processes compare to confirm they agree; a layout on base pages hashes
//! (and serializes) as it did before page sizes existed.
//!
//! Limits: 1..=[`MAX_CLASSES`] classes, 1..=[`MAX_CHUNKS_PER_CLASS`] chunks per class,
//! at most [`MAX_POOL_BYTES`] in all. Anything else is a [`LayoutError`].

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::pages::PageSize;

/// Chunk alignment used unless the layout asks for another.
pub const DEFAULT_ALIGNMENT: usize = 64;
/// Most size classes one pool may have.
pub const MAX_CLASSES: usize = 32;
/// Most chunks one size class may have.
pub const MAX_CHUNKS_PER_CLASS: u32 = 1 << 24;
/// Largest payload segment a layout may describe (1 TiB).
pub const MAX_POOL_BYTES: u64 = 1 << 40;

pub use crate::pages::page_size;

/// One size class as requested or stored: chunks of `chunk_size` bytes, `count` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeClass {
    /// Bytes per chunk (after rounding, a multiple of the alignment).
    pub chunk_size: usize,
    /// Number of chunks.
    pub count: u32,
}

/// Why a layout is invalid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// No size classes were given.
    #[error("a pool layout needs at least one size class")]
    Empty,
    /// More classes than [`MAX_CLASSES`].
    #[error("{0} size classes given; at most {MAX_CLASSES} are allowed")]
    TooManyClasses(usize),
    /// A class has chunk size 0.
    #[error("size class {index} has chunk size 0")]
    ZeroChunkSize {
        /// Position of the class as given.
        index: usize,
    },
    /// A class has no chunks.
    #[error("size class {index} (chunk size {chunk_size}) has no chunks")]
    ZeroCount {
        /// Position of the class as given.
        index: usize,
        /// Its chunk size.
        chunk_size: usize,
    },
    /// A class has more than [`MAX_CHUNKS_PER_CLASS`] chunks.
    #[error("size class {index} has {count} chunks; at most {MAX_CHUNKS_PER_CLASS} are allowed")]
    TooManyChunks {
        /// Position of the class as given.
        index: usize,
        /// The count given.
        count: u64,
    },
    /// The alignment is not a power of two between 8 and the layout's page size.
    #[error("alignment {0} is invalid: use a power of two from 8 to the page size")]
    BadAlignment(usize),
    /// Two classes round to the same chunk size.
    #[error("two size classes have chunk size {0} after rounding to the alignment; merge them")]
    DuplicateChunkSize(usize),
    /// The pool would be larger than [`MAX_POOL_BYTES`].
    #[error("the pool would need more than {MAX_POOL_BYTES} bytes")]
    TooLarge,
}

/// A validated pool layout.
///
/// ```
/// use iox_mempool::PoolLayout;
/// let layout = PoolLayout::new(&[(1 << 20, 4), (100, 16)]).unwrap();
/// assert_eq!(layout.classes()[0].chunk_size, 128); // sorted, rounded up to 64
/// assert_eq!(layout.class_for(129, 0), Some(1));
/// assert!(PoolLayout::new(&[(64, 0)]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "LayoutSpec", into = "LayoutSpec")]
pub struct PoolLayout {
    alignment: usize,
    classes: Vec<SizeClass>,
    offsets: Vec<usize>,
    payload_len: usize,
    pages: PageSize,
}

/// The serialized form of a layout, validated into a [`PoolLayout`] on the way in.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LayoutSpec {
    alignment: usize,
    classes: Vec<SizeClass>,
    /// Absent (base pages) in the text of layouts on base pages.
    #[serde(default, skip_serializing_if = "PageSize::is_base")]
    page_size: PageSize,
}

impl TryFrom<LayoutSpec> for PoolLayout {
    type Error = LayoutError;
    fn try_from(spec: LayoutSpec) -> Result<Self, LayoutError> {
        let classes: Vec<(usize, u64)> = spec
            .classes
            .iter()
            .map(|c| (c.chunk_size, u64::from(c.count)))
            .collect();
        Self::build(spec.alignment, &classes, spec.page_size)
    }
}

impl From<PoolLayout> for LayoutSpec {
    fn from(layout: PoolLayout) -> Self {
        LayoutSpec {
            alignment: layout.alignment,
            classes: layout.classes,
            page_size: layout.pages,
        }
    }
}

impl PoolLayout {
    /// A layout of `(chunk_size, count)` classes at the default 64-byte alignment.
    pub fn new(classes: &[(usize, usize)]) -> Result<Self, LayoutError> {
        Self::with_alignment(DEFAULT_ALIGNMENT, classes)
    }

    /// A layout of `(chunk_size, count)` classes whose chunks start at multiples of
    /// `alignment` (a power of two from 8 to the page size).
    pub fn with_alignment(alignment: usize, classes: &[(usize, usize)]) -> Result<Self, LayoutError> {
        let classes: Vec<(usize, u64)> = classes.iter().map(|&(s, c)| (s, c as u64)).collect();
        Self::build(alignment, &classes, PageSize::Base)
    }

    /// This layout with its payload on `pages`: the same chunks, the payload's length
    /// rounded up to a multiple of the page size.
    ///
    /// ```
    /// use iox_mempool::{PageSize, PoolLayout};
    /// let frames = PoolLayout::new(&[(3 << 20, 5)]).unwrap(); // 15 MiB of chunks
    /// let huge = frames.clone().on_pages(PageSize::Huge2MiB).unwrap();
    /// assert_eq!(huge.payload_len(), 16 << 20); // 8 pages of 2 MiB
    /// assert_eq!(huge.chunk_offset(0, 1), frames.chunk_offset(0, 1)); // chunks unmoved
    /// assert_ne!(huge.hash(), frames.hash());
    /// ```
    pub fn on_pages(self, pages: PageSize) -> Result<Self, LayoutError> {
        let classes: Vec<(usize, u64)> = self
            .classes
            .iter()
            .map(|c| (c.chunk_size, u64::from(c.count)))
            .collect();
        Self::build(self.alignment, &classes, pages)
    }

    fn build(alignment: usize, given: &[(usize, u64)], pages: PageSize) -> Result<Self, LayoutError> {
        // Above the base page only where every mapping is aligned to the page:
        // hugetlb (a transparent-huge-page mapping is aligned only where the kernel
        // gives huge pages).
        let most = if pages.is_hugetlb() {
            pages.bytes()
        } else {
            page_size()
        };
        if !alignment.is_power_of_two() || !(8..=most).contains(&alignment) {
            return Err(LayoutError::BadAlignment(alignment));
        }
        if given.is_empty() {
            return Err(LayoutError::Empty);
        }
        if given.len() > MAX_CLASSES {
            return Err(LayoutError::TooManyClasses(given.len()));
        }
        let mut classes = Vec::with_capacity(given.len());
        for (index, &(size, count)) in given.iter().enumerate() {
            if size == 0 {
                return Err(LayoutError::ZeroChunkSize { index });
            }
            if count == 0 {
                return Err(LayoutError::ZeroCount {
                    index,
                    chunk_size: size,
                });
            }
            if count > u64::from(MAX_CHUNKS_PER_CLASS) {
                return Err(LayoutError::TooManyChunks { index, count });
            }
            let chunk_size = size
                .checked_next_multiple_of(alignment)
                .filter(|&s| s as u64 <= MAX_POOL_BYTES)
                .ok_or(LayoutError::TooLarge)?;
            classes.push(SizeClass {
                chunk_size,
                count: count as u32,
            });
        }
        classes.sort_by_key(|c| c.chunk_size);
        if let Some(pair) = classes.windows(2).find(|w| w[0].chunk_size == w[1].chunk_size) {
            return Err(LayoutError::DuplicateChunkSize(pair[0].chunk_size));
        }
        let mut offsets = Vec::with_capacity(classes.len());
        let mut total: u64 = 0;
        for class in &classes {
            offsets.push(total as usize);
            total = (class.chunk_size as u64)
                .checked_mul(u64::from(class.count))
                .and_then(|bytes| bytes.checked_add(total))
                .filter(|&t| t <= MAX_POOL_BYTES)
                .ok_or(LayoutError::TooLarge)?;
        }
        let payload_len = total
            .checked_next_multiple_of(pages.bytes() as u64)
            .filter(|&t| t <= MAX_POOL_BYTES)
            .ok_or(LayoutError::TooLarge)? as usize;
        Ok(Self {
            alignment,
            classes,
            offsets,
            payload_len,
            pages,
        })
    }

    /// Chunk alignment in bytes.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The classes, smallest chunk size first.
    pub fn classes(&self) -> &[SizeClass] {
        &self.classes
    }

    /// Byte offset of the first chunk of `class` in the payload segment.
    pub fn class_offset(&self, class: usize) -> usize {
        self.offsets[class]
    }

    /// Byte offset of chunk `index` of `class` in the payload segment.
    pub fn chunk_offset(&self, class: usize, index: u32) -> usize {
        self.offsets[class] + index as usize * self.classes[class].chunk_size
    }

    /// The pages the payload lives on.
    pub fn page_size(&self) -> PageSize {
        self.pages
    }

    /// Length of the payload segment: all chunks, rounded up to the page size.
    pub fn payload_len(&self) -> usize {
        self.payload_len
    }

    /// Total number of chunks over all classes.
    pub fn total_chunks(&self) -> u64 {
        self.classes.iter().map(|c| u64::from(c.count)).sum()
    }

    /// Largest chunk size.
    pub fn max_chunk_size(&self) -> usize {
        self.classes.last().map_or(0, |c| c.chunk_size)
    }

    /// The smallest class whose chunks hold `size` bytes, or `None` if none does.
    /// Checks `hint` (e.g. the class used last time) first, then binary-searches.
    #[inline]
    pub fn class_for(&self, size: usize, hint: usize) -> Option<usize> {
        let fits = |i: usize| self.classes[i].chunk_size >= size;
        if hint < self.classes.len() && fits(hint) && (hint == 0 || !fits(hint - 1)) {
            return Some(hint);
        }
        let i = self.classes.partition_point(|c| c.chunk_size < size);
        (i < self.classes.len()).then_some(i)
    }

    /// Stable hash of the layout: equal layouts hash equal in every process and build.
    pub fn hash(&self) -> u64 {
        let mut bytes = Vec::with_capacity(32 + 16 * self.classes.len());
        bytes.extend_from_slice(b"iox-layout-v1");
        bytes.extend_from_slice(&(self.alignment as u64).to_le_bytes());
        bytes.extend_from_slice(&(self.classes.len() as u64).to_le_bytes());
        for c in &self.classes {
            bytes.extend_from_slice(&(c.chunk_size as u64).to_le_bytes());
            bytes.extend_from_slice(&u64::from(c.count).to_le_bytes());
        }
        if !self.pages.is_base() {
            bytes.extend_from_slice(b"pages");
            bytes.extend_from_slice(self.pages.short().as_bytes());
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }
}
