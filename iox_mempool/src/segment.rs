//! Named shared-memory segments: one regular file directly under a root directory,
//! mapped shared into the process with memmap2.
//!
//! Invariants:
//! - A segment name is a single path component of `[A-Za-z0-9._-]`, 1..=200 bytes, not
//!   starting with `.`: it can never escape the root or name a hidden temp file.
//! - Creation is exclusive (`O_CREAT | O_EXCL`), never follows symlinks, and sets the
//!   requested permissions explicitly with `fchmod`, so the umask cannot widen or narrow
//!   them. A segment that failed half-way through creation is unlinked again.
//! - Opening never follows symlinks, refuses anything that is not a regular file, and
//!   checks the file's size with `fstat` before mapping: a file shorter than the caller
//!   needs is an error here, never a SIGBUS later. (A file truncated by a hostile or
//!   buggy process *after* it was mapped can still fault; sealed memfd backing is the
//!   cure for that and lives elsewhere.)
//! - Mappings up to [`POPULATE_LIMIT`] are populated at map time (`MAP_POPULATE`).
//! - A read-only mapping of a file opened read-write can be made writable later
//!   ([`Segment::make_writable`], one `mprotect`); it never goes back. A read-only
//!   mapping is `PROT_READ`: a write through it faults (SIGSEGV) instead of changing
//!   the file.
//! - The mapping is a [`memmap2::MmapRaw`]: iox never forms `&`/`&mut` references to
//!   bytes other processes may change; all shared state is accessed through atomics or
//!   raw pointers at documented spots.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::MmapRaw;
use rustix::fs::{FileType, Mode, OFlags};
use thiserror::Error;

/// Longest segment name accepted, in bytes.
pub const MAX_SEGMENT_NAME_LEN: usize = 200;

/// Permissions a segment is created with unless the caller asks otherwise.
pub const DEFAULT_MODE: u32 = 0o600;

/// Why a segment name was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SegmentNameError {
    /// The name is empty.
    #[error("segment name is empty")]
    Empty,
    /// The name is longer than [`MAX_SEGMENT_NAME_LEN`].
    #[error("segment name is {len} bytes long; at most {MAX_SEGMENT_NAME_LEN} are allowed")]
    TooLong {
        /// The length given.
        len: usize,
    },
    /// The name holds a byte outside `[A-Za-z0-9._-]` (e.g. `/` or NUL).
    #[error("segment name {name:?} contains {byte:#04x}; only A-Z a-z 0-9 . _ - are allowed")]
    BadByte {
        /// The name given.
        name: String,
        /// The first offending byte.
        byte: u8,
    },
    /// The name starts with a dot (hidden and temporary files are reserved).
    #[error("segment name {0:?} starts with '.', which is reserved for temporary files")]
    LeadingDot(String),
}

/// Checks that `name` is a valid segment name (see the module docs).
pub fn validate_name(name: &str) -> Result<(), SegmentNameError> {
    if name.is_empty() {
        return Err(SegmentNameError::Empty);
    }
    if name.len() > MAX_SEGMENT_NAME_LEN {
        return Err(SegmentNameError::TooLong { len: name.len() });
    }
    if let Some(&byte) = name
        .as_bytes()
        .iter()
        .find(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')))
    {
        return Err(SegmentNameError::BadByte {
            name: name.to_owned(),
            byte,
        });
    }
    if name.starts_with('.') {
        return Err(SegmentNameError::LeadingDot(name.to_owned()));
    }
    Ok(())
}

/// How a segment is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Shared, readable and writable.
    ReadWrite,
    /// Shared, read-only: writes through the mapping fault.
    ReadOnly,
}

/// Why [`Segment::create`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CreateSegmentError {
    /// The name is not a valid segment name.
    #[error(transparent)]
    InvalidName(#[from] SegmentNameError),
    /// The permissions are not a subset of 0o777 including owner read and write.
    #[error("permissions {mode:#o} are invalid: use bits of 0o777 and include 0o600 (owner read/write)")]
    InvalidMode {
        /// The mode given.
        mode: u32,
    },
    /// A segment cannot be empty.
    #[error("segment size must be at least one byte")]
    ZeroSize,
    /// The file system has no room for the segment.
    #[error("no space for {len} bytes at {} (the file system or memory is full or too small)", path.display())]
    NoSpace {
        /// The file.
        path: PathBuf,
        /// Bytes requested.
        len: usize,
    },
    /// Not enough huge pages are reserved (or this kernel has none of that size).
    #[error("no room for {} on {pages}: {advice}", path.display())]
    HugePagesShort {
        /// The file.
        path: PathBuf,
        /// The page size asked for.
        pages: crate::pages::PageSize,
        /// How many pages are needed and how to reserve them.
        advice: String,
    },
    /// A file of that name already exists (someone else created it first).
    #[error("{} already exists", path.display())]
    AlreadyExists {
        /// The file.
        path: PathBuf,
    },
    /// The operating system refused an operation.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error reported.
        source: io::Error,
    },
}

/// Why [`Segment::open`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OpenSegmentError {
    /// The name is not a valid segment name.
    #[error(transparent)]
    InvalidName(#[from] SegmentNameError),
    /// No such file.
    #[error("{} does not exist", path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// The path names a symlink, directory, device or anything but a regular file.
    #[error("{} is not a regular file (symlinks are never followed)", path.display())]
    NotRegularFile {
        /// The file.
        path: PathBuf,
    },
    /// The file exists but this process may not open it.
    #[error("permission denied opening {} (it belongs to another user or lacks group access)", path.display())]
    PermissionDenied {
        /// The file.
        path: PathBuf,
    },
    /// The file is shorter than the caller needs.
    #[error("{} is {len} bytes long but at least {need} are needed (truncated or foreign file)", path.display())]
    TooShort {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The size needed.
        need: u64,
    },
    /// The file is not exactly as long as its format says.
    #[error("{} is {len} bytes long, but its format says exactly {expected} (truncated, grown or foreign file)", path.display())]
    WrongLength {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The size expected.
        expected: u64,
    },
    /// The operating system refused an operation.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The error reported.
        source: io::Error,
    },
}

/// Why [`Segment::make_writable`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MakeWritableError {
    /// The file was opened read-only, so no mapping of it can be made writable.
    #[error("{} was opened read-only; its mapping cannot be made writable", path.display())]
    FileReadOnly {
        /// The file.
        path: PathBuf,
    },
    /// `mprotect` refused.
    #[error("cannot make the mapping of {} writable: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error reported.
        source: io::Error,
    },
}

/// Mappings up to this size are populated (page tables filled) when mapped, so the
/// first message does not pay page faults on bookkeeping or small pools; larger ones
/// are faulted in on use, or populated by pinning.
pub const POPULATE_LIMIT: usize = 64 << 20;

/// Allocates the file's pages now, so a full file system (a small /dev/shm, say) is
/// a clean error at creation instead of SIGBUS for whoever touches the page later.
/// File systems without `fallocate` keep the old behaviour.
pub(crate) fn reserve(file: &File, len: usize) -> Result<(), rustix::io::Errno> {
    // In steps: an interrupted fallocate on tmpfs/memfd gives back what it allocated,
    // so retrying one huge call under frequent signals might never finish.
    const STEP: u64 = 64 << 20;
    let len = len as u64;
    let mut at = 0;
    while at < len {
        let n = STEP.min(len - at);
        let mut tries = 0;
        loop {
            match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), at, n) {
                Ok(()) => break,
                Err(rustix::io::Errno::INTR) if tries < 1000 => tries += 1,
                Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        at += n;
    }
    Ok(())
}

/// Options that map `len` bytes, populated at map time if `populate` and `len` is at
/// most [`POPULATE_LIMIT`].
pub(crate) fn map_options(len: usize, populate: bool) -> memmap2::MmapOptions {
    let mut options = memmap2::MmapOptions::new();
    options.len(len);
    if populate && len <= POPULATE_LIMIT {
        options.populate();
    }
    options
}

/// What [`Segment::advise`] may tell the kernel: only advice that keeps the contents
/// (not `MADV_DONTNEED` or `MADV_REMOVE`, which would drop pages other processes see).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Advice {
    /// Back the mapping with transparent huge pages where the kernel allows.
    HugePages,
    /// Map every page now, for reading.
    PopulateRead,
    /// Allocate and map every page now, for writing (the mapping must be writable).
    PopulateWrite,
}

/// A mapped shared-memory segment. Dropping it unmaps it; the file stays until
/// [`remove`] is called.
#[derive(Debug)]
pub struct Segment {
    path: PathBuf,
    file: File,
    map: MmapRaw,
    /// Whether the mapping is writable now (false -> true once, never back).
    writable: AtomicBool,
    /// Whether the file was opened for writing, i.e. the mapping can be made writable.
    file_writable: bool,
}

impl Segment {
    /// Creates `dir/name` exclusively with `len` bytes (zero-filled by the kernel) and
    /// `mode` permissions, and maps it read-write.
    ///
    /// ```
    /// use iox_mempool::segment::{self, Segment};
    /// let dir = tempfile::tempdir().unwrap();
    /// let seg = Segment::create(dir.path(), "demo.seg", 4096, segment::DEFAULT_MODE).unwrap();
    /// assert_eq!(seg.len(), 4096);
    /// assert!(Segment::create(dir.path(), "demo.seg", 4096, 0o600).is_err());
    /// ```
    pub fn create(dir: &Path, name: &str, len: usize, mode: u32) -> Result<Self, CreateSegmentError> {
        validate_name(name)?;
        if mode & !0o777 != 0 || mode & 0o600 != 0o600 {
            return Err(CreateSegmentError::InvalidMode { mode });
        }
        if len == 0 {
            return Err(CreateSegmentError::ZeroSize);
        }
        let path = dir.join(name);
        let io_err = |op, source: rustix::io::Errno| CreateSegmentError::Io {
            op,
            path: path.clone(),
            source: source.into(),
        };
        let fd = rustix::fs::open(
            &path,
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(|e| match e {
            rustix::io::Errno::EXIST => CreateSegmentError::AlreadyExists { path: path.clone() },
            e => io_err("create", e),
        })?;
        let file = File::from(fd);
        let finish = || -> Result<MmapRaw, CreateSegmentError> {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|e| io_err("chmod", e))?;
            rustix::fs::ftruncate(&file, len as u64).map_err(|e| io_err("size", e))?;
            reserve(&file, len).map_err(|e| match e {
                rustix::io::Errno::NOSPC => CreateSegmentError::NoSpace {
                    path: path.clone(),
                    len,
                },
                e => io_err("reserve space for", e),
            })?;
            map_options(len, true)
                .map_raw(&file)
                .map_err(|source| CreateSegmentError::Io {
                    op: "map",
                    path: path.clone(),
                    source,
                })
        };
        match finish() {
            Ok(map) => Ok(Self {
                path,
                file,
                map,
                writable: AtomicBool::new(true),
                file_writable: true,
            }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Opens and maps an existing `dir/name`, refusing it unless it is a regular file
    /// at least `min_len` bytes long (`min_len` is raised to 1). The file is opened
    /// with the same access as the mapping, so a `ReadOnly` segment opened here can
    /// never be made writable (see [`Segment::open_upgradable`]).
    pub fn open(dir: &Path, name: &str, access: Access, min_len: u64) -> Result<Self, OpenSegmentError> {
        let (file, path) = open_file(dir, name, access)?;
        Self::from_file(file, path, access, min_len)
    }

    /// [`Segment::open`] with the file opened read-write whatever `access` is, so a
    /// read-only mapping can be made writable later with [`Segment::make_writable`].
    pub fn open_upgradable(
        dir: &Path,
        name: &str,
        access: Access,
        min_len: u64,
    ) -> Result<Self, OpenSegmentError> {
        let (file, path) = open_file(dir, name, Access::ReadWrite)?;
        Self::from_file(file, path, access, min_len)
    }

    /// Maps an open file the caller obtained some other way (e.g. a memfd received
    /// from another process), with the same checks as [`Segment::open`]: a regular
    /// file at least `min_len` bytes long, mapped at exactly the length checked.
    /// `label` names it in errors. A read-only mapping can be made writable later if
    /// `file` is open read-write.
    pub fn from_file(
        file: File,
        label: PathBuf,
        access: Access,
        min_len: u64,
    ) -> Result<Self, OpenSegmentError> {
        Self::from_file_with(file, label, access, min_len, true)
    }

    /// [`Segment::from_file`], populated at map time only if `populate` (and it is at
    /// most [`POPULATE_LIMIT`] long): a caller that advises the mapping first (huge
    /// pages) populates it after.
    pub(crate) fn from_file_with(
        file: File,
        label: PathBuf,
        access: Access,
        min_len: u64,
        populate: bool,
    ) -> Result<Self, OpenSegmentError> {
        let path = label;
        let stat = rustix::fs::fstat(&file).map_err(|e| OpenSegmentError::Io {
            op: "stat",
            path: path.clone(),
            source: e.into(),
        })?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(OpenSegmentError::NotRegularFile { path });
        }
        let len = stat.st_size as u64;
        let need = min_len.max(1);
        if len < need {
            return Err(OpenSegmentError::TooShort { path, len, need });
        }
        if usize::try_from(len).is_err() {
            return Err(OpenSegmentError::Io {
                op: "map",
                path,
                source: io::Error::other("file larger than the address space"),
            });
        }
        // Map exactly the length checked above: memmap2 would otherwise stat again,
        // and a file truncated in between would be mapped shorter than we checked.
        let options = map_options(len as usize, populate);
        let map = match access {
            Access::ReadWrite => options.map_raw(&file),
            Access::ReadOnly => options.map_raw_read_only(&file),
        }
        .map_err(|source| OpenSegmentError::Io {
            op: "map",
            path: path.clone(),
            source,
        })?;
        let file_writable =
            rustix::fs::fcntl_getfl(&file).is_ok_and(|flags| flags & OFlags::RWMODE == OFlags::RDWR);
        Ok(Self {
            path,
            file,
            map,
            writable: AtomicBool::new(access == Access::ReadWrite),
            file_writable,
        })
    }

    /// Checks that the segment is exactly `expected` bytes long (what its format says).
    pub fn expect_len(&self, expected: usize) -> Result<(), OpenSegmentError> {
        if self.len() == expected {
            return Ok(());
        }
        Err(OpenSegmentError::WrongLength {
            path: self.path.clone(),
            len: self.len() as u64,
            expected: expected as u64,
        })
    }

    /// Start of the mapping in this process. Page-aligned.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Length of the mapping in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Always false: empty segments cannot exist.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// The file behind the mapping.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file (for `fstat`, `flock`, passing on).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// How the segment is mapped now.
    #[inline]
    pub fn access(&self) -> Access {
        // Acquire: a thread that sees the mapping writable also sees the mprotect
        // that made it so (it happened before the Release store).
        if self.writable.load(Ordering::Acquire) {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        }
    }

    /// Whether the mapping can be made writable ([`Segment::make_writable`]): the file
    /// is open read-write, whatever the mapping is now.
    pub fn can_write(&self) -> bool {
        self.file_writable
    }

    /// Makes a read-only mapping writable (`mprotect` to read-write over the whole
    /// mapping); nothing to do if it is writable already. Idempotent and safe to call
    /// from any number of threads at once (each either sees it done or does the same
    /// `mprotect`). Needs the file open read-write ([`Segment::open_upgradable`], or
    /// a read-write file given to [`Segment::from_file`]).
    ///
    /// ```
    /// use iox_mempool::segment::{self, Access, Segment};
    /// let dir = tempfile::tempdir().unwrap();
    /// drop(Segment::create(dir.path(), "s", 4096, segment::DEFAULT_MODE).unwrap());
    /// let ro = Segment::open_upgradable(dir.path(), "s", Access::ReadOnly, 1).unwrap();
    /// assert_eq!(ro.access(), Access::ReadOnly);
    /// ro.make_writable().unwrap();
    /// assert_eq!(ro.access(), Access::ReadWrite);
    /// let fixed = Segment::open(dir.path(), "s", Access::ReadOnly, 1).unwrap();
    /// assert!(fixed.make_writable().is_err());
    /// ```
    pub fn make_writable(&self) -> Result<(), MakeWritableError> {
        if self.writable.load(Ordering::Acquire) {
            return Ok(());
        }
        if !self.file_writable {
            return Err(MakeWritableError::FileReadOnly {
                path: self.path.clone(),
            });
        }
        let flags = rustix::mm::MprotectFlags::READ | rustix::mm::MprotectFlags::WRITE;
        // SAFETY: the range is exactly our own live mapping (page-aligned start, its
        // length), a shared mapping of a file open read-write. Adding write
        // permission invalidates no reference or pointer anyone holds into it.
        unsafe { rustix::mm::mprotect(self.map.as_mut_ptr().cast(), self.map.len(), flags) }.map_err(
            |e| MakeWritableError::Io {
                path: self.path.clone(),
                source: e.into(),
            },
        )?;
        self.writable.store(true, Ordering::Release);
        Ok(())
    }

    /// Gives the kernel `advice` about the whole mapping (`madvise`).
    pub(crate) fn advise(&self, advice: Advice) -> Result<(), rustix::io::Errno> {
        let advice = match advice {
            Advice::HugePages => rustix::mm::Advice::LinuxHugepage,
            Advice::PopulateRead => rustix::mm::Advice::LinuxPopulateRead,
            Advice::PopulateWrite => rustix::mm::Advice::LinuxPopulateWrite,
        };
        // SAFETY: the range is exactly our own live mapping, and the advice is one of
        // `Advice`'s: each changes how the kernel backs the pages (huge pages, pages
        // allocated now), never their contents or protection, so no pointer into the
        // mapping is invalidated.
        unsafe { rustix::mm::madvise(self.map.as_mut_ptr().cast(), self.map.len(), advice) }
    }

    /// Makes the mapping read-only (`mprotect` to read over the whole mapping), e.g.
    /// for a creator that wants to hold its new segment the way a reader that opened it
    /// would; [`Segment::make_writable`] undoes it. `&mut self`: no other user of this
    /// segment can be writing through it while its protection changes.
    pub fn make_read_only(&mut self) -> Result<(), MakeWritableError> {
        if !self.writable.load(Ordering::Acquire) {
            return Ok(());
        }
        // SAFETY: the range is exactly our own live mapping (page-aligned start, its
        // length). Removing write permission invalidates no Rust reference (we hold the
        // segment exclusively); a later write through a raw pointer faults, which is
        // the point.
        unsafe {
            rustix::mm::mprotect(
                self.map.as_mut_ptr().cast(),
                self.map.len(),
                rustix::mm::MprotectFlags::READ,
            )
        }
        .map_err(|e| MakeWritableError::Io {
            path: self.path.clone(),
            source: e.into(),
        })?;
        self.writable.store(false, Ordering::Release);
        Ok(())
    }
}

/// Opens `dir/name` (a valid segment name) without following symlinks, read-write or
/// read-only as `access` says.
fn open_file(dir: &Path, name: &str, access: Access) -> Result<(File, PathBuf), OpenSegmentError> {
    validate_name(name)?;
    let path = dir.join(name);
    let rw = match access {
        Access::ReadWrite => OFlags::RDWR,
        Access::ReadOnly => OFlags::RDONLY,
    };
    let fd = rustix::fs::open(&path, rw | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()).map_err(
        |e| match e {
            rustix::io::Errno::NOENT => OpenSegmentError::NotFound { path: path.clone() },
            rustix::io::Errno::LOOP => OpenSegmentError::NotRegularFile { path: path.clone() },
            rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => {
                OpenSegmentError::PermissionDenied { path: path.clone() }
            }
            e => OpenSegmentError::Io {
                op: "open",
                path: path.clone(),
                source: e.into(),
            },
        },
    )?;
    Ok((File::from(fd), path))
}

/// Unlinks `dir/name`. Returns `Ok(false)` if it did not exist. Existing mappings stay
/// valid until they are dropped.
pub fn remove(dir: &Path, name: &str) -> io::Result<bool> {
    validate_name(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    match std::fs::remove_file(dir.join(name)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}
