//! Sealed memfd payloads: pool memory that has no name under the root, cannot be
//! truncated or grown, and goes away with the last process that holds it.
//!
//! The creator makes the payload with `memfd_create` (close-on-exec, sealing
//! allowed, a random nonce in its name), sizes it, allocates its pages and adds
//! `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`: from then on no process can change
//! its size, so no reader of the payload can be hit by SIGBUS through a truncation,
//! and nobody can remove the seals. (The seals do not stop a process that holds the
//! memfd writable from writing it, or from punching holes: on base pages they read
//! back as zeroes, on hugetlb pages the next touch needs a free huge page or faults,
//! which is why hugetlb pools are held writable by one uid only; and the bookkeeping
//! files beside it are still named files.) Its size, inode and nonce
//! ([`MemfdIdentity`]) are recorded by the user of the pool (iox_service puts them in
//! the static config). Another process obtains the file some other way (iox_service
//! opens `/proc/<pid>/fd/<n>` of a live participant) and hands it to [`open_memfd`],
//! which checks it is a memfd with that nonce, sealed as above, of the recorded size
//! and inode, on the recorded page size, before mapping it.
//!
//! Page sizes ([`PageSize`]): a payload on hugetlb pages is made with `MFD_HUGETLB` and
//! the size's flag, its pages allocated in full when it is finished (a shortage is
//! [`CreateSegmentError::HugePagesShort`], saying how many pages are needed and how to
//! reserve them); one on transparent huge pages is ordinary shared memory, mapped with
//! `MADV_HUGEPAGE` and its pages allocated through that mapping
//! (`MADV_POPULATE_WRITE`), so the kernel may give huge ones where its settings allow.
//! [`open_memfd`] refuses a memfd on another page size than expected (`fstatfs`: a
//! hugetlbfs of that block size, or shared memory): no opener falls back silently.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use memfd::{FileSeal, Memfd, MemfdOptions};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::pages::PageSize;
use crate::segment::{self, Access, Advice, CreateSegmentError, Segment};

/// Where a pool's payload lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Backing {
    /// A named file under the root (`S.pool`): other users can open it with group
    /// permissions.
    File,
    /// A sealed memfd, reached through a participant process: same user only.
    Memfd,
}

/// Size, inode and name nonce of a memfd payload, as recorded by its creator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemfdIdentity {
    /// Length in bytes.
    pub len: u64,
    /// Device of the inode.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// A random number in the memfd's name (`iox:<name>:<nonce>`): inode numbers of
    /// memfds can repeat (older kernels count them in 32 bits), names with the nonce
    /// do not in practice.
    pub nonce: u64,
}

impl MemfdIdentity {
    /// The end of the name the kernel shows for this memfd in `/proc/<pid>/fd`
    /// (`/memfd:iox:<name>:<nonce> (deleted)`).
    pub fn link_suffix(&self) -> String {
        format!(":{:016x} (deleted)", self.nonce)
    }
}

/// Why a file was refused as a pool's memfd. Each names the file.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MemfdError {
    /// Not a memfd (a named file, a pipe, a terminal, ...).
    #[error("{} is not a memfd", path.display())]
    NotMemfd {
        /// The file.
        path: PathBuf,
    },
    /// A memfd without the seals a pool needs.
    #[error("{} lacks seals: it has {found}, a pool needs shrink, grow and seal", path.display())]
    MissingSeals {
        /// The file.
        path: PathBuf,
        /// The seals it has.
        found: String,
    },
    /// Another size than recorded.
    #[error("{} is {len} bytes long, the static config records {expected}", path.display())]
    WrongSize {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The size recorded.
        expected: u64,
    },
    /// A memfd on other pages than recorded (a hugetlb memfd where base pages are
    /// recorded, or the other way round, or another huge page size).
    #[error("{} lives on {found}, the static config records {expected}", path.display())]
    WrongPageSize {
        /// The file.
        path: PathBuf,
        /// What it lives on.
        found: String,
        /// What was recorded.
        expected: PageSize,
    },
    /// Another memfd than the one recorded.
    #[error("{} is {found}, the static config records {expected}", path.display())]
    WrongIdentity {
        /// The file.
        path: PathBuf,
        /// What it is (name or inode).
        found: String,
        /// What was recorded.
        expected: String,
    },
    /// A system call failed, or it cannot be mapped.
    #[error("{} cannot be used: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

const SEALS: [FileSeal; 3] = [FileSeal::SealShrink, FileSeal::SealGrow, FileSeal::SealSeal];

/// A memfd being created: sized and named, its identity known, but its pages not yet
/// allocated, not sealed and not mapped. Cheap, so a creator can make one before it
/// knows it wins the race to create a service, and [`Unsealed::finish`] it after.
#[derive(Debug)]
pub struct Unsealed {
    memfd: Memfd,
    identity: MemfdIdentity,
    label: PathBuf,
    pages: PageSize,
}

impl Unsealed {
    /// Creates the memfd `iox:<name>:<nonce>` of `len` bytes (close-on-exec, sealing
    /// allowed) on `pages` (`len` a multiple of [`PageSize::bytes`]).
    pub fn new(name: &str, len: usize, pages: PageSize) -> Result<Self, CreateSegmentError> {
        if len == 0 {
            return Err(CreateSegmentError::ZeroSize);
        }
        if !len.is_multiple_of(pages.bytes()) {
            return Err(CreateSegmentError::Io {
                op: "size",
                path: PathBuf::from(format!("memfd:iox:{name}")),
                source: std::io::Error::other(format!(
                    "{len} bytes is not a multiple of the page size ({pages})"
                )),
            });
        }
        let nonce = crate::random::random_u64();
        let full = format!("iox:{name}:{nonce:016x}");
        let label = PathBuf::from(format!("memfd:{full}"));
        let io = |op, source: std::io::Error| CreateSegmentError::Io {
            op,
            path: label.clone(),
            source,
        };
        let hugetlb = match pages {
            PageSize::Huge2MiB => Some(memfd::HugetlbSize::Huge2MB),
            PageSize::Huge1GiB => Some(memfd::HugetlbSize::Huge1GB),
            PageSize::Base | PageSize::Transparent => None,
        };
        let memfd = MemfdOptions::new()
            .allow_sealing(true)
            .close_on_exec(true)
            .hugetlb(hugetlb)
            .create(&full)
            .map_err(|e| match e {
                // No hugetlbfs of that size in this kernel (EINVAL); anything else
                // (no descriptors left, ...) is said as it is.
                memfd::Error::Create(e) if hugetlb.is_some() && e.raw_os_error() == Some(libc::EINVAL) => {
                    CreateSegmentError::HugePagesShort {
                        path: label.clone(),
                        pages,
                        advice: format!(
                            "the kernel refused a memfd on them ({e}); {}",
                            crate::pages::how_to_reserve(pages, (len / pages.bytes()) as u64, None)
                        ),
                    }
                }
                e => io("create", std::io::Error::other(e)),
            })?;
        memfd.as_file().set_len(len as u64).map_err(|e| io("size", e))?;
        let stat = rustix::fs::fstat(memfd.as_file()).map_err(|e| io("stat", e.into()))?;
        let identity = MemfdIdentity {
            len: len as u64,
            dev: stat.st_dev,
            ino: stat.st_ino,
            nonce,
        };
        Ok(Self {
            memfd,
            identity,
            label,
            pages,
        })
    }

    /// Its identity, to record.
    pub fn identity(&self) -> MemfdIdentity {
        self.identity
    }

    /// Its file descriptor in this process.
    pub fn raw_fd(&self) -> i32 {
        self.memfd.as_file().as_raw_fd()
    }

    /// Allocates its pages (a clean error if memory or reserved huge pages are
    /// short), seals it against shrinking, growing and further sealing, and maps it
    /// read-write. Pages for transparent huge pages are allocated through the mapping
    /// after `MADV_HUGEPAGE` (after sealing, which fixes the size, not the contents).
    pub fn finish(self) -> Result<Segment, CreateSegmentError> {
        let Self {
            memfd,
            identity,
            label,
            pages,
        } = self;
        let io = |op, source: std::io::Error| CreateSegmentError::Io {
            op,
            path: label.clone(),
            source,
        };
        let len = identity.len as usize;
        let transparent = pages == PageSize::Transparent;
        // Read before allocating: the advice counts what was free before this payload.
        let before = pages.reserve();
        let short = |e| match e {
            rustix::io::Errno::NOSPC | rustix::io::Errno::NOMEM if pages.is_hugetlb() => {
                CreateSegmentError::HugePagesShort {
                    path: label.clone(),
                    pages,
                    advice: crate::pages::how_to_reserve(pages, (len / pages.bytes()) as u64, before),
                }
            }
            rustix::io::Errno::NOSPC | rustix::io::Errno::NOMEM => CreateSegmentError::NoSpace {
                path: label.clone(),
                len,
            },
            e => io("reserve memory for", e.into()),
        };
        if !transparent {
            segment::reserve(memfd.as_file(), len).map_err(short)?;
        }
        memfd
            .add_seals(&SEALS)
            .map_err(|e| io("seal", std::io::Error::other(e)))?;
        let segment = Segment::from_file_with(
            memfd.into_file(),
            label.clone(),
            Access::ReadWrite,
            len as u64,
            !transparent,
        )
        .map_err(|e| io("map", std::io::Error::other(e)))?;
        if transparent {
            // Best effort: a kernel without transparent huge pages for shared memory
            // says EINVAL and gives base pages.
            let _ = segment.advise(Advice::HugePages);
            match segment.advise(Advice::PopulateWrite) {
                Ok(()) => {}
                // Kernels before 5.14 know no populate: allocate as for base pages.
                Err(rustix::io::Errno::INVAL) => segment::reserve(segment.file(), len).map_err(short)?,
                Err(e) => return Err(short(e)),
            }
        }
        Ok(segment)
    }
}

/// Creates a sealed memfd payload of `len` bytes named `iox:<name>:<nonce>` (the
/// name only shows in `/proc/<pid>/fd`), mapped read-write: [`Unsealed::new`] then
/// [`Unsealed::finish`].
pub fn create_memfd(
    name: &str,
    len: usize,
    pages: PageSize,
) -> Result<(Segment, MemfdIdentity), CreateSegmentError> {
    let unsealed = Unsealed::new(name, len, pages)?;
    let identity = unsealed.identity();
    Ok((unsealed.finish()?, identity))
}

/// Checks that `file` (named `path` in errors) is the sealed memfd `expected`
/// describes, on `pages`, and maps it with `access`. A read-only mapping can be made
/// writable later ([`Segment::make_writable`], [`crate::Pool::make_payload_writable`])
/// if `file` is open read-write.
pub fn open_memfd(
    file: File,
    path: PathBuf,
    access: Access,
    (expected, pages): (MemfdIdentity, PageSize),
) -> Result<Segment, MemfdError> {
    // The kernel names memfds "/memfd:<name> (deleted)" in /proc; only they look so.
    let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(|source| {
        MemfdError::Io {
            path: path.clone(),
            source,
        }
    })?;
    let link = link.to_string_lossy();
    if !link.starts_with("/memfd:") {
        return Err(MemfdError::NotMemfd { path });
    }
    if !link.ends_with(&expected.link_suffix()) {
        return Err(MemfdError::WrongIdentity {
            path,
            found: format!("memfd {link:?}"),
            expected: format!("a memfd named ...{}", expected.link_suffix()),
        });
    }
    let memfd = Memfd::try_from_file(file).map_err(|_| MemfdError::NotMemfd { path: path.clone() })?;
    let seals = memfd.seals().map_err(|e| MemfdError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    if !SEALS.iter().all(|s| seals.contains(s)) {
        let mut found: Vec<String> = seals.iter().map(|s| format!("{s:?}")).collect();
        found.sort();
        return Err(MemfdError::MissingSeals {
            path,
            found: if found.is_empty() {
                "none".into()
            } else {
                found.join(", ")
            },
        });
    }
    let stat = rustix::fs::fstat(memfd.as_file()).map_err(|e| MemfdError::Io {
        path: path.clone(),
        source: e.into(),
    })?;
    if stat.st_size as u64 != expected.len {
        return Err(MemfdError::WrongSize {
            path,
            len: stat.st_size as u64,
            expected: expected.len,
        });
    }
    if (stat.st_dev, stat.st_ino) != (expected.dev, expected.ino) {
        return Err(MemfdError::WrongIdentity {
            path,
            found: format!("inode {}:{}", stat.st_dev, stat.st_ino),
            expected: format!("inode {}:{}", expected.dev, expected.ino),
        });
    }
    check_pages(memfd.as_file(), &path, pages)?;
    let transparent = pages == PageSize::Transparent;
    let segment = Segment::from_file_with(
        memfd.into_file(),
        path.clone(),
        access,
        expected.len,
        !transparent,
    )
    .map_err(|e| MemfdError::Io {
        path,
        source: std::io::Error::other(e),
    })?;
    if transparent {
        // Advised before any page is mapped, so the creator's huge pages are mapped as
        // such; best effort, like the creator's.
        let _ = segment.advise(Advice::HugePages);
        if segment.len() <= segment::POPULATE_LIMIT {
            let _ = segment.advise(Advice::PopulateRead);
        }
    }
    Ok(segment)
}

/// `statfs` magic of hugetlbfs.
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// Checks that `file` lives on `pages`: a hugetlbfs of that block size for hugetlb
/// pages, anything else (shared memory) for base and transparent huge pages.
fn check_pages(file: &File, path: &std::path::Path, pages: PageSize) -> Result<(), MemfdError> {
    let fs = rustix::fs::fstatfs(file).map_err(|e| MemfdError::Io {
        path: path.to_owned(),
        source: e.into(),
    })?;
    #[allow(clippy::unnecessary_cast)] // the field's type differs between targets
    let (magic, block) = (fs.f_type as i64, fs.f_bsize as u64);
    let hugetlb = magic == HUGETLBFS_MAGIC;
    let fits = if pages.is_hugetlb() {
        hugetlb && block == pages.bytes() as u64
    } else {
        !hugetlb
    };
    if fits {
        return Ok(());
    }
    Err(MemfdError::WrongPageSize {
        path: path.to_owned(),
        found: if hugetlb {
            format!("{} hugetlb pages", crate::pages::human(block))
        } else {
            "base pages (shared memory)".into()
        },
        expected: pages,
    })
}
