//! A publisher of a service whose access policy names readers: each chunk it writes is
//! locked for writing from its loan to its send (`iox_core::chunk_guard`). Such a port
//! keeps no spare loaned ahead and sends through `send_other` (see `send_generation`),
//! so publishers of other services never reach this code.

use iox_core::chunk_guard::ChunkGuard;
use iox_mempool::ChunkHandle;

use super::PublisherPort;
use crate::port::{LoanError, PortCreateError, Shared};

impl PublisherPort {
    /// [`Self::loan_chunk`] with a guard: a chunk whose word was free but which another
    /// port has locked (a reader reading it: its word was cleared under it; or another
    /// publisher writing it) is passed over, each at most once; those passed over are
    /// released after the search, so it never finds them again.
    #[cold]
    pub(super) fn loan_guarded(&self, guard: &ChunkGuard, bytes: usize) -> Result<ChunkHandle, LoanError> {
        let mut passed = Vec::new();
        let found = loop {
            let mut hint = self.hint.get();
            let handle = match self.pool.loan(bytes, &mut hint, self.owner) {
                Ok(h) => h,
                Err(e) if passed.is_empty() => break Err(e.into()),
                Err(_) => break Err(LoanError::HeldByReaders),
            };
            self.hint.set(hint);
            let addr = self
                .pool
                .locate(handle)
                .expect("a handle just loaned is in range")
                .addr();
            if guard.begin_write(addr) {
                break Ok(handle);
            }
            passed.push(handle);
        };
        for h in passed {
            let _ = self.pool.book().release(h, self.owner);
        }
        found
    }

    /// A guarded port is done writing chunk `h` (sent or given back); nothing without
    /// a guard.
    #[inline]
    pub(super) fn end_write(&self, h: ChunkHandle) {
        if let Some(guard) = &self.guard {
            self.end_guarded_write(guard, h);
        }
    }

    #[cold]
    fn end_guarded_write(&self, guard: &ChunkGuard, h: ChunkHandle) {
        if let Some(chunk) = self.pool.locate(h) {
            guard.end_write(chunk.addr());
        }
    }
}

/// A dropped loan that does not become the spare: back to the pool (its write lock
/// first, with a guard). Out of line, so the common drop stays small; `extern "C"`, so
/// it cannot unwind into the drop (which then needs no cleanup path, and stays inlined
/// where loans are dropped). Nothing in it panics.
#[cold]
#[inline(never)]
pub(super) extern "C" fn give_back(port: &PublisherPort, h: &ChunkHandle) {
    port.end_write(*h);
    let _ = port.pool.book().release(*h, port.owner);
}

/// The chunk guard of a port of `service`, if its access policy names readers (see
/// `iox_core::chunk_guard`); a device pool has none (its policy names no readers).
pub(crate) fn chunk_guard(service: &Shared) -> Result<Option<Box<ChunkGuard>>, PortCreateError> {
    let guarded = service.config.access.as_ref().is_some_and(|a| a.has_readers());
    if !guarded || service.pool.is_device() {
        return Ok(None);
    }
    ChunkGuard::new(
        std::os::fd::AsFd::as_fd(service.dynamic.file()),
        service.pool.payload_base(),
    )
    .map(|g| Some(Box::new(g)))
    .map_err(|source| PortCreateError::Guard {
        service: service.name.to_string(),
        source,
    })
}
