//! The pages a pool's payload lives on: a service's page size ([`PageSize`]), what the
//! machine has reserved of each huge page size ([`Reserve`]), and what the kernel
//! actually gave a mapping ([`MappedPages`], from `/proc/<pid>/smaps`).
//!
//! Invariants:
//! - A payload on huge pages is a multiple of its page size long (the layout rounds
//!   the pool's end up, never a chunk: see the layout module), so it can be mapped,
//!   protected and pinned whole.
//! - [`PageSize::Huge2MiB`] and [`PageSize::Huge1GiB`] are hugetlb pages: reserved by
//!   the administrator beforehand (`nr_hugepages`), allocated in full when the service
//!   is created (a shortage is an error then, naming how many are needed, never a
//!   SIGBUS at a first touch), never swapped, never split. An opener checks that the
//!   descriptor it is handed lives on the recorded page size and never falls back to
//!   another.
//! - A process holding a hugetlb memfd writable can punch a hole into it, and every
//!   other process's next touch of that page then needs a free huge page or faults
//!   (SIGBUS); no seal stops that and still lets later publishers map the pool
//!   writable. So a service on hugetlb pages is held writable by its creator's uid
//!   (and root) only: other users read it through an access policy (the static
//!   config's check refuses anything else, see `iox_core`'s `HUGETLB_WRITERS`).
//! - [`PageSize::Transparent`] is best effort: ordinary shared memory, 2 MiB-rounded,
//!   mapped with `MADV_HUGEPAGE`, which the kernel honours only where
//!   `/sys/kernel/mm/transparent_hugepage/shmem_enabled` allows it (`advise`,
//!   `within_size`, `always`, `force`). What it gave is read back from `smaps`
//!   ([`MappedPages`]), never assumed.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The system's base page size.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// 2 MiB.
const MIB2: usize = 2 << 20;
/// 1 GiB.
const GIB1: usize = 1 << 30;

/// The pages a service's pool payload lives on, recorded in its static config (in
/// its pool layout).
///
/// ```
/// use iox_mempool::PageSize;
/// let huge: PageSize = "2m".parse().unwrap();
/// assert_eq!(huge, PageSize::Huge2MiB);
/// assert_eq!(huge.bytes(), 2 << 20);
/// assert!(huge.is_hugetlb());
/// assert_eq!(huge.to_string(), "2 MiB (hugetlb)");
/// assert!("3m".parse::<PageSize>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum PageSize {
    /// The system's base page size (4 KiB on x86-64): the default.
    #[default]
    Base,
    /// Reserved 2 MiB hugetlb pages (`MFD_HUGETLB | MFD_HUGE_2MB`).
    Huge2MiB,
    /// Reserved 1 GiB hugetlb pages (`MFD_HUGETLB | MFD_HUGE_1GB`).
    Huge1GiB,
    /// Ordinary shared memory, 2 MiB-rounded and advised (`MADV_HUGEPAGE`) for
    /// transparent huge pages: best effort, what the kernel gave is reported.
    Transparent,
}

impl PageSize {
    /// Every page size, smallest first.
    pub const ALL: [PageSize; 4] = [Self::Base, Self::Transparent, Self::Huge2MiB, Self::Huge1GiB];

    /// The unit a payload on these pages is rounded up to: the base page size, 2 MiB
    /// (also for transparent huge pages, the size of one on x86-64 and arm64 with 4 KiB
    /// pages) or 1 GiB.
    pub fn bytes(self) -> usize {
        match self {
            Self::Base => page_size(),
            Self::Huge2MiB | Self::Transparent => MIB2,
            Self::Huge1GiB => GIB1,
        }
    }

    /// Whether these are reserved hugetlb pages.
    pub fn is_hugetlb(self) -> bool {
        matches!(self, Self::Huge2MiB | Self::Huge1GiB)
    }

    /// Whether this is the default.
    pub fn is_base(&self) -> bool {
        *self == Self::Base
    }

    /// The short form `parse` reads (`4k`, `2m`, `1g`, `thp`).
    pub fn short(self) -> &'static str {
        match self {
            Self::Base => "4k",
            Self::Huge2MiB => "2m",
            Self::Huge1GiB => "1g",
            Self::Transparent => "thp",
        }
    }

    /// The hugetlb size directory under `/sys/kernel/mm/hugepages` (`hugepages-2048kB`).
    pub fn sysfs_dir(self) -> Option<PathBuf> {
        self.is_hugetlb().then(|| {
            PathBuf::from(format!(
                "/sys/kernel/mm/hugepages/hugepages-{}kB",
                self.bytes() / 1024
            ))
        })
    }

    /// How many of these pages the machine has reserved and free now (`None` for
    /// pages that need no reserve, or where the kernel has no such size).
    pub fn reserve(self) -> Option<Reserve> {
        let dir = self.sysfs_dir()?;
        let read =
            |f: &str| -> Option<u64> { std::fs::read_to_string(dir.join(f)).ok()?.trim().parse().ok() };
        Some(Reserve {
            total: read("nr_hugepages")?,
            free: read("free_hugepages")?,
            reserved_for_others: read("resv_hugepages").unwrap_or(0),
            overcommit: read("nr_overcommit_hugepages").unwrap_or(0),
        })
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Base => write!(f, "{} KiB", self.bytes() / 1024),
            Self::Huge2MiB => f.write_str("2 MiB (hugetlb)"),
            Self::Huge1GiB => f.write_str("1 GiB (hugetlb)"),
            Self::Transparent => f.write_str("transparent huge pages (2 MiB, best effort)"),
        }
    }
}

/// A page size that is none of `4k`, `2m`, `1g`, `thp`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "page size {0:?} is unknown: use 4k (the default), 2m or 1g (reserved huge pages) or thp (transparent huge pages)"
)]
pub struct PageSizeError(pub String);

impl FromStr for PageSize {
    type Err = PageSizeError;
    fn from_str(s: &str) -> Result<Self, PageSizeError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "4k" | "4kib" | "base" | "default" => Ok(Self::Base),
            "2m" | "2mib" | "huge2mib" => Ok(Self::Huge2MiB),
            "1g" | "1gib" | "huge1gib" => Ok(Self::Huge1GiB),
            "thp" | "transparent" => Ok(Self::Transparent),
            _ => Err(PageSizeError(s.to_owned())),
        }
    }
}

/// A hugetlb page size's pages on this machine, from `/sys/kernel/mm/hugepages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    /// Pages reserved (`nr_hugepages`).
    pub total: u64,
    /// Of those, not allocated (`free_hugepages`).
    pub free: u64,
    /// Of the free ones, promised to mappings already (`resv_hugepages`).
    pub reserved_for_others: u64,
    /// Pages the kernel may add on demand (`nr_overcommit_hugepages`).
    pub overcommit: u64,
}

impl Reserve {
    /// Pages a new allocation can have now.
    pub fn available(&self) -> u64 {
        self.free.saturating_sub(self.reserved_for_others)
    }
}

/// What to write where so that `needed` pages of `page` can be had, given the machine's
/// `reserve` before the attempt (read now if `None`): the text of the error a creator
/// gets when they cannot. It never proposes a reserve at or below the one there is:
/// where enough pages were free and the kernel still refused, it names what limits this
/// process instead (a hugetlb cgroup limit, a cpuset or NUMA policy).
pub fn how_to_reserve(page: PageSize, needed: u64, reserve: Option<Reserve>) -> String {
    let size = human(page.bytes() as u64);
    let flag = if page == PageSize::Huge1GiB { "1G" } else { "2M" };
    let Some(dir) = page.sysfs_dir() else {
        return format!("{page} pages are not reserved pages");
    };
    let Some(r) = reserve.or_else(|| page.reserve()) else {
        if dir.exists() {
            return format!(
                "it needs {needed} x {size} pages, and {} cannot be read to say how many are free",
                dir.display()
            );
        }
        return format!(
            "this kernel has no {size} huge pages (no {}); boot it with `hugepagesz={flag} hugepages={needed}`",
            dir.display()
        );
    };
    if r.available() >= needed {
        return format!(
            "it needs {needed} x {size} pages and {} of the {} reserved are free, but the kernel gave this process fewer: it may be limited by a hugetlb cgroup (hugetlb.{}.max; containers without a huge-page request get 0), or by a cpuset or NUMA memory policy",
            r.available(),
            r.total,
            if page == PageSize::Huge1GiB { "1GB" } else { "2MB" },
        );
    }
    let want = r.total - r.available() + needed;
    let sysfs = dir.join("nr_hugepages");
    // /proc/sys/vm/nr_hugepages counts pages of the default huge page size only.
    let default = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("Hugepagesize:"))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
    });
    let proc = if default == Some(page.bytes() as u64 / 1024) {
        " (or /proc/sys/vm/nr_hugepages)"
    } else {
        ""
    };
    // A gigabyte is seldom free in one piece once the machine runs.
    let boot_rather = if page == PageSize::Huge1GiB {
        " (at run time the kernel often finds no free gigabyte and keeps the count: read it back; at boot it does not fail)"
    } else {
        ""
    };
    format!(
        "it needs {needed} x {size} pages, {} of the {} reserved are free; reserve {want} with {}{proc}, e.g. `echo {want} | sudo tee {}`, or `hugepagesz={flag} hugepages={want}` on the kernel command line{boot_rather}",
        r.available(),
        r.total,
        sysfs.display(),
        sysfs.display(),
    )
}

/// `n` bytes as `4 KiB`, `2 MiB`, `1 GiB`, `256 MiB` (exact multiples) or bytes.
pub(crate) fn human(n: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if n >= unit && n.is_multiple_of(unit) {
            return format!("{} {name}", n / unit);
        }
    }
    format!("{n} B")
}

/// What the kernel gave one mapping, read from `smaps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MappedPages {
    /// Bytes of the mapping.
    pub size: u64,
    /// The page size the kernel maps it with (`KernelPageSize`): 4 KiB for ordinary
    /// shared memory (even where transparent huge pages back it), the huge page size
    /// for hugetlb.
    pub kernel_page: u64,
    /// Bytes resident (`Rss`, or the hugetlb counts for hugetlb mappings).
    pub resident: u64,
    /// Of those, bytes mapped by huge pages: hugetlb (`Shared_Hugetlb` +
    /// `Private_Hugetlb`) or transparent (`ShmemPmdMapped` + `FilePmdMapped`).
    pub huge: u64,
}

/// Which mappings of an `smaps` text to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping<'a> {
    /// The one starting at this address.
    At(u64),
    /// Every mapping of the memfd with this device (`st_dev`) and inode whose name
    /// ends with `suffix` (its `:<nonce> (deleted)`): a process that opened a service
    /// twice maps its pool twice, and `mprotect`/`mlock` of part of a mapping splits
    /// it; they are added up. A mapping of another file cannot pass for it (the
    /// kernel writes device and inode), only a name could.
    Memfd {
        /// The memfd's device.
        dev: u64,
        /// Its inode.
        ino: u64,
        /// The end of its name.
        suffix: &'a str,
    },
}

/// What the kernel gave the mappings `which` names in an `smaps` text, added up;
/// `None` if there are none. Malformed lines are skipped, numbers that do not parse
/// read as 0; the largest `KernelPageSize` among them is reported.
pub fn parse_smaps(text: &str, which: Mapping<'_>) -> Option<MappedPages> {
    let mut total: Option<MappedPages> = None;
    let mut inside = false;
    for line in text.lines() {
        if let Some((range, fields)) = header(line) {
            inside = match which {
                Mapping::At(start) => range.0 == start,
                Mapping::Memfd { dev, ino, suffix } => {
                    let dev_ok = fields.dev.is_some_and(|(major, minor)| {
                        (major, minor) == (rustix::fs::major(dev), rustix::fs::minor(dev))
                    });
                    dev_ok
                        && fields.inode == Some(ino)
                        && fields.path.starts_with("/memfd:")
                        && fields.path.ends_with(suffix)
                }
            };
            if inside {
                let m = total.get_or_insert_with(MappedPages::default);
                m.size = m.size.saturating_add(range.1.saturating_sub(range.0));
            }
            continue;
        }
        let (true, Some(m)) = (inside, total.as_mut()) else {
            continue;
        };
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let kb = value
            .trim()
            .strip_suffix("kB")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
            .saturating_mul(1024);
        match key {
            "KernelPageSize" => m.kernel_page = m.kernel_page.max(kb),
            "Rss" => m.resident = m.resident.saturating_add(kb),
            "Shared_Hugetlb" | "Private_Hugetlb" => {
                m.huge = m.huge.saturating_add(kb);
                m.resident = m.resident.saturating_add(kb);
            }
            "ShmemPmdMapped" | "FilePmdMapped" => m.huge = m.huge.saturating_add(kb),
            _ => {}
        }
    }
    total
}

/// The fields of a mapping's header line after its range.
struct Header<'a> {
    dev: Option<(u32, u32)>,
    inode: Option<u64>,
    path: &'a str,
}

/// `start-end perms offset major:minor inode [path]`: the range and the rest.
fn header(line: &str) -> Option<((u64, u64), Header<'_>)> {
    let mut words = line.splitn(6, ' ').filter(|w| !w.is_empty());
    let range = words.next()?;
    let (a, b) = range.split_once('-')?;
    if a.is_empty() || b.is_empty() || !a.bytes().chain(b.bytes()).all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let a = u64::from_str_radix(a, 16).ok()?;
    let b = u64::from_str_radix(b, 16).ok()?;
    let (_perms, _offset) = (words.next(), words.next());
    let dev = words.next().and_then(|d| {
        let (major, minor) = d.split_once(':')?;
        Some((
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        ))
    });
    let inode = words.next().and_then(|i| i.parse().ok());
    let path = words.next().unwrap_or("").trim_start();
    Some(((a, b), Header { dev, inode, path }))
}

/// The device number of `major:minor` (as `smaps` writes it), for [`Mapping::Memfd`].
pub fn makedev(major: u32, minor: u32) -> u64 {
    rustix::fs::makedev(major, minor)
}

/// What the kernel gave the mapping at `start` in this process.
pub fn mapped_here(start: usize) -> std::io::Result<Option<MappedPages>> {
    let text = std::fs::read_to_string("/proc/self/smaps")?;
    Ok(parse_smaps(&text, Mapping::At(start as u64)))
}

/// What the kernel gave process `pid`'s mappings of the memfd `which` names.
/// `Ok(None)` if it maps none; an error if its `smaps` cannot be read (another user's
/// process, another PID namespace, gone).
pub fn mapped_by(pid: u32, which: Mapping<'_>) -> std::io::Result<Option<MappedPages>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps"))?;
    Ok(parse_smaps(&text, which))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
7f0000000000-7f0000200000 rw-s 00000000 00:01 42                         /memfd:iox:x:00000000000000ab (deleted)
Size:               2048 kB
KernelPageSize:        4 kB
Rss:                2048 kB
ShmemPmdMapped:     2048 kB
FilePmdMapped:         0 kB
7f0000300000-7f0000400000 r--s 00000000 00:01 7                          /tmp/x:00000000000000ab (deleted)
Rss:                1024 kB
7f0000400000-7f0000800000 rw-s 00000000 00:0f 43                         /memfd:iox:y:00000000000000cd (deleted)
Size:               4096 kB
KernelPageSize:     2048 kB
Rss:                   0 kB
Shared_Hugetlb:     4096 kB
Private_Hugetlb:       0 kB
7f0000a00000-7f0000c00000 r--s 00000000 00:01 42                         /memfd:iox:x:00000000000000ab (deleted)
Size:               2048 kB
KernelPageSize:        4 kB
Rss:                1024 kB
ShmemPmdMapped:        0 kB
";

    #[test]
    fn mappings_are_found_by_device_inode_and_name_or_by_start_and_added_up() {
        let dev = makedev;
        let suffix = ":00000000000000ab (deleted)";
        // Two mappings of inode 42 (the file named alike with inode 7 is not it).
        let thp = parse_smaps(
            SMAPS,
            Mapping::Memfd {
                dev: dev(0, 1),
                ino: 42,
                suffix,
            },
        )
        .unwrap();
        assert_eq!(
            (thp.size, thp.kernel_page, thp.resident, thp.huge),
            (4 << 20, 4096, 3 << 20, 2 << 20)
        );
        let tlb = parse_smaps(SMAPS, Mapping::At(0x7f0000400000)).unwrap();
        assert_eq!(
            (tlb.size, tlb.kernel_page, tlb.resident, tlb.huge),
            (4 << 20, 2 << 20, 4 << 20, 4 << 20)
        );
        assert_eq!(
            parse_smaps(
                SMAPS,
                Mapping::Memfd {
                    dev: dev(0, 2),
                    ino: 42,
                    suffix
                }
            ),
            None
        );
        assert_eq!(
            parse_smaps(
                SMAPS,
                Mapping::Memfd {
                    dev: dev(0, 1),
                    ino: 7,
                    suffix
                }
            ),
            None
        );
        assert_eq!(parse_smaps("garbage\n-\nzz-1 x\n", Mapping::At(0)), None);
    }

    #[test]
    fn page_sizes_parse_and_print_back() {
        for p in PageSize::ALL {
            assert_eq!(p.short().parse::<PageSize>().unwrap(), p);
        }
        assert_eq!(human(256 << 20), "256 MiB");
        assert_eq!(human(3000), "3000 B");
    }

    #[test]
    fn the_reserve_advice_names_the_files_and_the_boot_option() {
        // What this machine has (free pages, none, or a kernel without 2 MiB pages).
        let text = how_to_reserve(PageSize::Huge2MiB, 7, None);
        assert!(text.contains("hugepages") || text.contains("hugetlb"), "{text}");
    }
}
