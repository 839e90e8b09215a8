//! A subscriber of a service whose access policy names readers: each chunk it hands
//! out is locked for reading from its take to its release (`iox_core::chunk_guard`).
//! Such a port receives through `receive_other` and releases through
//! `drop_guarded_sample` (see `plain_generation`), so subscribers of other services
//! never reach this code. The out-of-line calls are `extern "C"`: they cannot unwind
//! into a receive or a sample's drop, which then need no cleanup path and stay inlined.

use iox_mempool::Located;

use super::{ReceiveError, Sample, Subscriber, SubscriberPort};
use crate::Payload;
use crate::user_header::UserHeader;

impl<P: ?Sized + Payload, H: UserHeader> Subscriber<P, H> {
    /// Where `receive` goes when its first test fails: a forked child's receive, or a
    /// guarded port's.
    #[cold]
    #[inline(never)]
    pub(super) fn receive_other(&self) -> Result<Option<Sample<P, H>>, ReceiveError> {
        if !self.port.is_own_process() {
            return Err(ReceiveError::ForkedProcess);
        }
        self.receive_with::<true>()
    }
}

/// `drop_sample` of a guarded port (or of a forked child's copy, which does nothing:
/// the chunk is the parent's): the read lock goes first, so a publisher that finds the
/// word free finds no lock either. `extern "C"`, so it cannot unwind into a sample's
/// drop (which then needs no cleanup path, and stays inlined); nothing in it panics.
#[cold]
#[inline(never)]
pub(super) extern "C" fn drop_guarded_sample(port: &SubscriberPort, chunk: &Located) {
    if !port.is_own_process() {
        return;
    }
    if let Some(guard) = &port.guard {
        guard.end_read(chunk.addr());
    }
    // SAFETY: as in `drop_sample`.
    let _ = unsafe { chunk.release(port.owner) };
}

/// A taken chunk that will not be handed out (it failed a check): its read lock goes
/// (with a guard; the caller releases its hold). `extern "C"`: it cannot unwind into
/// the receive.
#[cold]
#[inline(never)]
pub(super) extern "C" fn end_read(port: &SubscriberPort, chunk: &iox_mempool::ChunkRef<'_>) {
    if let Some(guard) = &port.guard {
        guard.end_read(chunk.addr());
    }
}

/// A guarded port took `chunk`: locks it for reading; false (and the chunk released)
/// if a publisher is writing it. `extern "C"`: it cannot unwind into the receive
/// (nothing in it panics).
#[cold]
#[inline(never)]
pub(super) extern "C" fn read_lock(port: &SubscriberPort, chunk: &iox_mempool::ChunkRef<'_>) -> bool {
    let Some(guard) = &port.guard else {
        return true;
    };
    if guard.begin_read(chunk.addr()) {
        return true;
    }
    let _ = chunk.release(port.owner);
    false
}
