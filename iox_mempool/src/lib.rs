//! # iox_mempool
//!
//! The memory layer of iox: named shared-memory segments ([`segment`]), pool layouts
//! ([`layout`]), the lock-free chunk pool living in them ([`pool`], with chunk ownership in [`owners`]), memory types
//! ([`memory`]), page sizes and huge pages ([`pages`]), the process-local pin registry ([`pin`]), and the process-global locks
//! that a `fork` never copies held ([`fork`]).
//!
//! It knows nothing of services or ports; `iox_service` builds those on top.
//!
//! ```
//! use iox_mempool::{Pool, PoolLayout, MemoryType};
//! use std::sync::Arc;
//! let dir = tempfile::tempdir().unwrap();
//! let layout = PoolLayout::new(&[(256, 4)]).unwrap();
//! let pool = Arc::new(Pool::create(dir.path(), "example", &layout, MemoryType::Locked, 0o600).unwrap());
//! let pin = pool.pin().unwrap();           // mlock, once per process per pool
//! assert!(pin.is_pinned());
//! let me = iox_mempool::Owner::new(0).unwrap();
//! let mut hint = 0;
//! let chunk = pool.loan(200, &mut hint, me).unwrap();
//! let (ptr, len) = pool.chunk(chunk).unwrap();
//! assert_eq!(len, 256);
//! // SAFETY: the chunk is loaned to us and 256 bytes long.
//! unsafe { ptr.write_bytes(7, len) };
//! pool.book().release(chunk, me).unwrap();
//! ```

pub mod fork;
pub mod hint;
pub mod layout;
pub mod memfd;
pub mod memory;
pub mod owners;
pub mod pages;
pub mod pin;
pub mod pool;
pub mod random;
pub mod root;
pub mod segment;

/// The atomics of the lock-free code ([`owners`]): std's here. The model tests
/// (`tests/loom.rs`) compile that code with a module of this name holding loom's.
mod sync {
    pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
}

pub use layout::{LayoutError, PoolLayout, SizeClass};
pub use memfd::{Backing, MemfdError, MemfdIdentity};
pub use memory::{MemoryType, MemoryTypeError, UserCode};
pub use owners::Owner;
pub use pages::{MappedPages, PageSize, PageSizeError};
pub use pin::{
    MlockPinner, PinError, PinGuard, PinnedUsage, Pinner, Region, RegisterPinnerError, acquire, pinned_usage,
    register_pinner,
};
pub use pool::{
    Bookkeeping, ChunkError, ChunkHandle, ChunkRef, ClassInfo, CreatePoolError, DevicePayload, LoanError,
    Located, OpenPoolError, Pool, PoolInfo, PoolPin,
};
pub use segment::MakeWritableError;
