//! Pinning: the `Pinner` trait and the process-local, reference-counted pin registry.
//!
//! Pinning makes a mapped region fit for direct device access: page-locked (`mlock`),
//! registered with the CUDA driver, registered with an RDMA NIC. It is slow, so iox
//! does it once per process per mapped pool, when a port that opted in is built.
//!
//! Invariants:
//! - The registry is keyed by the mapped region (address, length). Any number of
//!   [`acquire`] calls for one region cause exactly one [`Pinner::pin`]; the last
//!   [`PinGuard`] dropped causes exactly one [`Pinner::unpin`], with the same pinner
//!   that pinned it (even if another pinner was registered meanwhile).
//! - The registry holds its lock while it calls a pinner, so concurrent acquirers of a
//!   region wait for the one registration instead of racing it. The lock is a
//!   [`crate::fork::ForkLock`]: a `fork` waits for a pinner at work and never copies
//!   it held.
//! - A [`Region`] borrows the mapping it describes ([`Region::of`] a [`Segment`],
//!   [`crate::Pool::payload_region`]), so a pinner is only ever handed mapped memory.
//! - A guard never outlives its mapping: [`crate::Pool::pin`] keeps the pool mapped
//!   until the guard is gone, and [`acquire`] is `unsafe` with exactly that duty for
//!   its caller; this is what keeps the registry from ever holding a registration for
//!   unmapped memory.
//! - A region is pinned as it is mapped when it is first pinned: a read-only mapping
//!   is registered read-only (e.g. CUDA's `READ_ONLY` flag). A registration is made
//!   once and never swapped while a guard lives (device work may be in flight through
//!   an earlier guard's device address): a writable pin of a region registered
//!   read-only is refused ([`PinError::RegisteredReadOnly`]), never re-registered.
//!   [`crate::Pool::pin`] keeps that from happening to ports: a process that may write
//!   a pool maps it writable before it registers it, whichever port comes first.
//! - A pinner may give a region a device address ([`Pinner::device_address`], e.g.
//!   the CUDA pinner's `cuMemHostGetDevicePointer` of the base, asked once while it
//!   registers); the registry asks once, right after the pin, and every guard of the
//!   region keeps a copy ([`PinGuard::device_base`]), so a sample's device address is
//!   the base plus the chunk's offset, with no call into the pinner per sample.
//! - A forked child inherits the registry's entries but none of the pins (`mlock` is
//!   not inherited; a driver's registration is the parent's): its guards copied from
//!   the parent do nothing when dropped, and its own `acquire` of a region the parent
//!   had pinned pins it afresh.
//! - `Cpu` pools need no pinning: acquiring them succeeds and pins nothing. `Locked`
//!   has a built-in pinner (`mlock`/`munlock`). `CudaPinned` and `User(code)` need a
//!   pinner registered with [`register_pinner`]; without one, [`acquire`] fails with
//!   [`PinError::NoPinner`].

use std::collections::BTreeMap;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use thiserror::Error;

use crate::MemoryType;
use crate::fork::{ForkLock, ForkLockGuard, Rank};
use crate::segment::{Access, Segment};

/// A mapped range of this process's address space: the whole mapping of a segment,
/// which it borrows, so it is mapped for as long as the `Region` exists. Safe code can
/// only get one from a live mapping ([`Region::of`], [`crate::Pool::payload_region`]).
///
/// ```
/// use iox_mempool::{Region, segment::{self, Segment}};
/// let dir = tempfile::tempdir().unwrap();
/// let seg = Segment::create(dir.path(), "r", 4096, segment::DEFAULT_MODE).unwrap();
/// let region = Region::of(&seg);
/// assert_eq!((region.addr(), region.len(), region.read_only()), (seg.as_ptr(), 4096, false));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Region<'a> {
    addr: usize,
    len: usize,
    read_only: bool,
    _mapping: PhantomData<&'a Segment>,
}

impl<'a> Region<'a> {
    /// The whole mapping of `segment`, read-only if it is mapped read-only now.
    pub fn of(segment: &'a Segment) -> Self {
        Self {
            addr: segment.as_ptr() as usize,
            len: segment.len(),
            read_only: segment.access() == Access::ReadOnly,
            _mapping: PhantomData,
        }
    }

    /// A region of `len` bytes at `addr`; `read_only` says how it is mapped.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be mapped in this process (with at least read access,
    /// and write access unless `read_only`) for as long as the region, or anything
    /// that holds its address for unpinning, is used.
    unsafe fn from_raw(addr: usize, len: usize, read_only: bool) -> Self {
        Self {
            addr,
            len,
            read_only,
            _mapping: PhantomData,
        }
    }

    /// Start address.
    pub fn addr(&self) -> *mut u8 {
        self.addr as *mut u8
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the mapping is read-only (a pinner may register it read-only).
    pub fn read_only(&self) -> bool {
        self.read_only
    }
}

/// Why pinning or unpinning failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PinError {
    /// No pinner is registered for this memory type.
    #[error("no pinner is registered for memory type {memory_type}: {hint}")]
    NoPinner {
        /// The type that needed one.
        memory_type: MemoryType,
        /// What to do about it.
        hint: &'static str,
    },
    /// The region is pinned already as another memory type.
    #[error("the region is already pinned as {existing}, cannot pin it as {requested}")]
    Conflict {
        /// The type it is pinned as.
        existing: MemoryType,
        /// The type asked for.
        requested: MemoryType,
    },
    /// A writable pin of a region this process registered read-only: a registration is
    /// never swapped while a guard lives.
    #[error(
        "the region is registered read-only in this process (pinned while it was mapped read-only) and a writable pin was asked for; registrations are never swapped while pinned: make the mapping writable before the first pin (Pool::pin does so wherever the pool can be written)"
    )]
    RegisteredReadOnly,
    /// `mlock` refused because the region would take this process past its
    /// `RLIMIT_MEMLOCK` (and the process may not exceed it: no `CAP_IPC_LOCK`).
    #[error(
        "locking {len} bytes in memory would exceed this process's RLIMIT_MEMLOCK of {} ({locked} bytes locked already); raise the limit (`ulimit -l unlimited` in the shell that starts it, `LimitMEMLOCK=infinity` in a systemd unit, a `memlock` line in /etc/security/limits.conf, or grant CAP_IPC_LOCK), or build the port with .pin_memory(false)",
        limit.map_or("unlimited".to_string(), |l| format!("{l} bytes"))
    )]
    MemlockLimit {
        /// Bytes asked to lock (the pool's payload).
        len: usize,
        /// The soft limit in bytes (`None`: unlimited).
        limit: Option<u64>,
        /// Bytes this process had locked already (`VmLck`).
        locked: u64,
    },
    /// A system call failed.
    #[error("{op} failed: {source}")]
    Os {
        /// The call.
        op: &'static str,
        /// Its error.
        source: io::Error,
    },
    /// A pinner (e.g. a GPU driver) refused, with its own message.
    #[error("{0}")]
    Pinner(String),
    /// A pinner refused a pool whose memory is a file outside tmpfs, hugetlbfs and ramfs:
    /// Linux refuses long-term device pins of shared pages of such files (writable
    /// ones since 6.5), and a driver reports that as a bare invalid argument.
    #[error(
        "{source} (the pool's memory is a file on a filesystem with magic {magic:#x}, not tmpfs, hugetlbfs or ramfs, and Linux does not pin shared pages of such files for a device; create the pool under /dev/shm or in a memfd)"
    )]
    NotShmem {
        /// The filesystem's `f_type` (`statfs`).
        magic: u64,
        /// The pinner's refusal.
        source: Box<PinError>,
    },
}

/// `err`, a pinner's refusal of a mapping of `file`, said as [`PinError::NotShmem`]
/// when the file is outside tmpfs, hugetlbfs and ramfs (`mlock` pins any file: `Locked`
/// refusals are left as they are).
pub(crate) fn explain_refusal(err: PinError, file: &std::fs::File, memory_type: MemoryType) -> PinError {
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const HUGETLBFS_MAGIC: u64 = 0x9584_58f6;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    if !matches!(err, PinError::Pinner(_)) || memory_type == MemoryType::Locked {
        return err;
    }
    match rustix::fs::fstatfs(file) {
        // `f_type` is signed on some targets; the magic numbers are 32-bit.
        Ok(st)
            if ![TMPFS_MAGIC, HUGETLBFS_MAGIC, RAMFS_MAGIC].contains(&(st.f_type as u64 & 0xffff_ffff)) =>
        {
            PinError::NotShmem {
                magic: st.f_type as u64 & 0xffff_ffff,
                source: Box::new(err),
            }
        }
        _ => err,
    }
}

/// Pins and unpins regions for one memory type. Users implement it for their own
/// kinds (an RDMA registration, a Vulkan import) and [`register_pinner`] it.
///
/// Both methods are safe to implement and to call: the [`Region`] they get is mapped
/// for the whole call (it borrows its mapping, and only the registry, under the
/// contract of [`acquire`], makes one otherwise), which is all an implementation may
/// rely on when it hands the range to `mlock`, a driver or a NIC. The registry calls
/// `pin` once per region per process and the matching `unpin` before the region is
/// unmapped. Someone who calls `pin` directly, outside the registry, is responsible
/// for calling `unpin` while the region is still mapped; forgetting to is a leaked
/// registration (resource state of the pinner), not a memory-safety matter for Rust
/// code, so the methods need not be `unsafe`.
pub trait Pinner: Send + Sync {
    /// Pins `region`. Called once per region per process by the registry.
    fn pin(&self, region: &Region<'_>) -> Result<(), PinError>;
    /// Unpins `region`, which this pinner pinned. Called while it is still mapped.
    fn unpin(&self, region: &Region<'_>) -> Result<(), PinError>;
    /// The address a device uses for the first byte of `region`, which this pinner
    /// has just pinned, if it has one (`None` by default: `mlock` gives none). The
    /// registry asks once per pin and hands it to every guard of the region.
    fn device_address(&self, region: &Region<'_>) -> Option<u64> {
        let _ = region;
        None
    }
}

/// The built-in pinner of [`MemoryType::Locked`]: `mlock` and `munlock`.
#[derive(Debug, Default, Clone, Copy)]
pub struct MlockPinner;

impl Pinner for MlockPinner {
    fn pin(&self, region: &Region<'_>) -> Result<(), PinError> {
        // SAFETY: the region is mapped (see Region); mlock only changes residency of
        // the pages in it.
        match unsafe { rustix::mm::mlock(region.addr().cast(), region.len()) } {
            Ok(()) => Ok(()),
            // ENOMEM (over the limit) or EPERM (a limit of 0): say which limit and how
            // to raise it, not just "Cannot allocate memory".
            Err(rustix::io::Errno::NOMEM | rustix::io::Errno::PERM) => Err(PinError::MemlockLimit {
                len: region.len(),
                limit: memlock_limit(),
                locked: locked_bytes(),
            }),
            Err(e) => Err(PinError::Os {
                op: "mlock",
                source: e.into(),
            }),
        }
    }

    fn unpin(&self, region: &Region<'_>) -> Result<(), PinError> {
        // SAFETY: as for mlock; munlock only changes residency.
        unsafe { rustix::mm::munlock(region.addr().cast(), region.len()) }.map_err(|e| PinError::Os {
            op: "munlock",
            source: e.into(),
        })
    }
}

/// This process's soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited).
fn memlock_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Memlock).current
}

/// Bytes this process has locked now (`VmLck` of /proc/self/status), 0 if unknown.
fn locked_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let kib = s.lines().find_map(|l| l.strip_prefix("VmLck:"))?;
            kib.split_whitespace().next()?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Why [`register_pinner`] refused.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RegisterPinnerError {
    /// `Cpu` memory is never pinned.
    #[error("Cpu memory is never pinned; register pinners for Locked, CudaPinned or User codes")]
    CpuNotPinnable,
    /// `CudaDevice` memory is the device's own: there is nothing to pin.
    #[error("CudaDevice memory is GPU memory already and is never pinned")]
    DeviceNotPinnable,
}

struct Entry {
    count: usize,
    /// The pinner's device address of the region's base, asked once right after the
    /// pin (0 = none), copied into each of the region's guards.
    device_base: u64,
    /// How the region was mapped when it was pinned: what the pinner registered.
    read_only: bool,
    memory_type: MemoryType,
    pinner: Arc<dyn Pinner>,
    /// The fork generation that pinned it (a forked child holds none of its pins).
    fork_generation: u64,
}

/// The pinners by memory type (few: a list) and the pins by region.
struct Registry {
    pinners: Vec<(MemoryType, Arc<dyn Pinner>)>,
    pins: BTreeMap<(usize, usize), Entry>,
}

impl Registry {
    fn pinner(&self, memory_type: MemoryType) -> Option<&Arc<dyn Pinner>> {
        self.pinners
            .iter()
            .find(|(t, _)| *t == memory_type)
            .map(|(_, p)| p)
    }
}

static REGISTRY: ForkLock<Registry> = ForkLock::new(
    Rank::PinRegistry,
    Registry {
        pinners: Vec::new(),
        pins: BTreeMap::new(),
    },
);
static UNPIN_FAILURES: AtomicUsize = AtomicUsize::new(0);

/// The registry, locked. A pinner that panicked leaves the maps consistent (we mutate
/// them only after it returns), so a poisoned lock is safe to keep using.
fn registry() -> ForkLockGuard<Registry> {
    REGISTRY.lock()
}

/// Registers `pinner` for `memory_type` in this process, replacing (and returning) any
/// earlier one. Regions pinned already stay with the pinner that pinned them.
///
/// ```
/// use iox_mempool::{register_pinner, MemoryType, MlockPinner};
/// use std::sync::Arc;
/// register_pinner(MemoryType::user(0x0100).unwrap(), Arc::new(MlockPinner)).unwrap();
/// assert!(register_pinner(MemoryType::Cpu, Arc::new(MlockPinner)).is_err());
/// ```
pub fn register_pinner(
    memory_type: MemoryType,
    pinner: Arc<dyn Pinner>,
) -> Result<Option<Arc<dyn Pinner>>, RegisterPinnerError> {
    match memory_type {
        MemoryType::Cpu => return Err(RegisterPinnerError::CpuNotPinnable),
        MemoryType::CudaDevice => return Err(RegisterPinnerError::DeviceNotPinnable),
        _ => {}
    }
    let mut reg = registry();
    let old = match reg.pinners.iter_mut().find(|(t, _)| *t == memory_type) {
        Some((_, there)) => Some(std::mem::replace(there, pinner)),
        None => {
            reg.pinners.push((memory_type, pinner));
            None
        }
    };
    Ok(old)
}

/// Whether a pinner is available for `memory_type` (registered, or built in).
pub fn has_pinner(memory_type: MemoryType) -> bool {
    matches!(memory_type, MemoryType::Cpu | MemoryType::Locked) || registry().pinner(memory_type).is_some()
}

/// Pins `region` as `memory_type` unless this process has it pinned already, and
/// returns a guard that keeps it pinned. [`crate::Pool::pin`] is the safe way to pin
/// a pool.
///
/// # Safety
///
/// The mapping `region` describes must stay mapped until the returned guard has been
/// dropped (a guard that is leaked keeps that duty for the rest of the process): the
/// pinner registered for the type keeps the range registered, and the guard hands
/// the same range to [`Pinner::unpin`] when dropped.
pub unsafe fn acquire(region: Region<'_>, memory_type: MemoryType) -> Result<PinGuard, PinError> {
    if memory_type == MemoryType::Cpu {
        return Ok(PinGuard {
            key: None,
            device_base: 0,
            fork_generation: 0,
        });
    }
    let generation = crate::fork::generation();
    let key = (region.addr, region.len);
    let mut reg = registry();
    // Entries a forked child inherited are its parent's pins, not its own.
    reg.pins.retain(|_, e| e.fork_generation == generation);
    if let Some(entry) = reg.pins.get_mut(&key) {
        if entry.memory_type != memory_type {
            return Err(PinError::Conflict {
                existing: entry.memory_type,
                requested: memory_type,
            });
        }
        if entry.read_only && !region.read_only && memory_type != MemoryType::Locked {
            return Err(PinError::RegisteredReadOnly);
        }
        entry.count += 1;
        return Ok(PinGuard {
            key: Some(key),
            device_base: entry.device_base,
            fork_generation: generation,
        });
    }
    let pinner: Arc<dyn Pinner> = match (reg.pinner(memory_type), memory_type) {
        (Some(p), _) => p.clone(),
        (None, MemoryType::Locked) => Arc::new(MlockPinner),
        (None, MemoryType::CudaPinned) => {
            return Err(PinError::NoPinner {
                memory_type,
                hint: "CudaPinned pools are pinned by iox_cuda; build iox_service with the `cuda` feature on a machine with a CUDA driver, or register a pinner",
            });
        }
        (None, MemoryType::CudaDevice) => {
            return Err(PinError::NoPinner {
                memory_type,
                hint: "CudaDevice pools are GPU memory already: there is nothing to pin",
            });
        }
        (None, _) => {
            return Err(PinError::NoPinner {
                memory_type,
                hint: "register one with register_pinner before building a pinned port",
            });
        }
    };
    pinner.pin(&region)?;
    let device_base = pinner.device_address(&region).unwrap_or(0);
    reg.pins.insert(
        key,
        Entry {
            count: 1,
            device_base,
            read_only: region.read_only,
            memory_type,
            pinner,
            fork_generation: generation,
        },
    );
    Ok(PinGuard {
        key: Some(key),
        device_base,
        fork_generation: generation,
    })
}

/// How many guards this process holds for the region at `addr` of `len` bytes
/// (0 if it is not pinned).
pub fn pin_count(addr: *const u8, len: usize) -> usize {
    let generation = crate::fork::generation();
    registry()
        .pins
        .get(&(addr as usize, len))
        .filter(|e| e.fork_generation == generation)
        .map_or(0, |e| e.count)
}

/// What this process has pinned of one memory type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedUsage {
    /// The memory type.
    pub memory_type: MemoryType,
    /// Regions pinned (one per pinned pool mapping, however many ports pinned it).
    pub regions: usize,
    /// Their bytes.
    pub bytes: usize,
}

/// What this process has pinned now, per memory type (types with nothing pinned are
/// left out), ordered by the types' codes.
///
/// ```
/// use std::sync::Arc;
/// use iox_mempool::{MemoryType, Pool, PoolLayout, pin};
/// let dir = tempfile::tempdir().unwrap();
/// let layout = PoolLayout::new(&[(64, 4)]).unwrap();
/// let pool = Arc::new(Pool::create(dir.path(), "p", &layout, MemoryType::Locked, 0o600).unwrap());
/// let before: usize = pin::pinned_usage().iter().map(|u| u.bytes).sum();
/// if let Ok(guard) = pool.pin() {
///     let locked = pin::pinned_usage().into_iter().find(|u| u.memory_type == MemoryType::Locked).unwrap();
///     assert!(locked.bytes >= pool.payload_region().len());
///     drop(guard);
/// }
/// # let _ = before;
/// ```
pub fn pinned_usage() -> Vec<PinnedUsage> {
    let generation = crate::fork::generation();
    let reg = registry();
    let mut usage: Vec<PinnedUsage> = Vec::new();
    for (&(_, len), entry) in reg.pins.iter().filter(|(_, e)| e.fork_generation == generation) {
        match usage.iter_mut().find(|u| u.memory_type == entry.memory_type) {
            Some(u) => {
                u.regions += 1;
                u.bytes += len;
            }
            None => usage.push(PinnedUsage {
                memory_type: entry.memory_type,
                regions: 1,
                bytes: len,
            }),
        }
    }
    usage.sort_by_key(|u| u.memory_type.code());
    usage
}

/// How many unpins failed in this process so far (a guard cannot report errors from
/// `drop`, so they are counted here).
pub fn unpin_failures() -> usize {
    UNPIN_FAILURES.load(Ordering::Relaxed)
}

/// Keeps a region pinned; the last guard of a region unpins it when dropped.
#[derive(Debug)]
#[must_use = "dropping the guard unpins the region again"]
pub struct PinGuard {
    /// (address, length) of the region; mapped while the guard lives (the contract
    /// of [`acquire`]).
    key: Option<(usize, usize)>,
    /// The device address of the region's base (0 = none), as its registration
    /// learned it.
    device_base: u64,
    /// The fork generation that acquired it: a forked child's copy does nothing.
    fork_generation: u64,
}

impl PinGuard {
    /// Whether this guard actually holds a pin (false for `Cpu`).
    pub fn is_pinned(&self) -> bool {
        self.key.is_some()
    }

    /// The device address of the region's first byte, learned once when the region
    /// was pinned (see [`Pinner::device_address`]); `None` if its pinner gives none.
    pub fn device_base(&self) -> Option<u64> {
        (self.device_base != 0).then_some(self.device_base)
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        if !crate::fork::is_same_process(self.fork_generation) {
            return; // the parent's pin: not ours to release
        }
        let mut reg = registry();
        let last = match reg.pins.get_mut(&key) {
            Some(entry) => {
                entry.count -= 1;
                entry.count == 0
            }
            None => false,
        };
        if let Some(entry) = last.then(|| reg.pins.remove(&key)).flatten() {
            // SAFETY: the caller of `acquire` keeps the range mapped until this guard
            // is dropped, which is now; it is unpinned as it was pinned.
            let region = unsafe { Region::from_raw(key.0, key.1, entry.read_only) };
            if entry.pinner.unpin(&region).is_err() {
                UNPIN_FAILURES.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
