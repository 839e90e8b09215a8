//! What publishers and subscribers share: claiming a port slot in the dynamic segment,
//! pinning the pool, and the error of port creation.
//!
//! A slot is claimed with a CAS of its state word from `FREE` to `CLAIMING` with the
//! next generation; the claimer fills in its node id and pid, prepares the slot, and
//! stores `ACTIVE` (Release). Release goes through `CLOSING` (teardown) back to
//! `FREE`. Claiming is lock-free; a slot whose owner died stays taken until dead-port
//! recovery frees it.

use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use iox_mempool::{MemoryType, PinError, PoolPin};
use thiserror::Error;

use crate::dynamic::{self, PortHeader};
use crate::service::ServiceShared;

/// Why creating a publisher or subscriber failed.
#[derive(Debug, Error)]
pub enum PortCreateError {
    /// Every slot of that kind is taken.
    #[error("service {service:?} already has its maximum of {max} {kind}s")]
    TooManyPorts {
        /// The service.
        service: String,
        /// "publisher" or "subscriber".
        kind: &'static str,
        /// The limit.
        max: usize,
    },
    /// Pinning the pool failed.
    #[error("cannot pin the pool of service {service:?} ({memory_type}): {source}")]
    Pin {
        /// The service.
        service: String,
        /// Its memory type.
        memory_type: MemoryType,
        /// Why.
        source: PinError,
    },
    /// The service is `CudaPinned` but this process cannot pin CUDA memory.
    #[error(
        "cannot pin the pool of service {service:?}: it is CudaPinned and no CUDA pinner is available ({reason}); build the port with .pin_memory(false) to use it from the CPU only"
    )]
    CudaUnavailable {
        /// The service.
        service: String,
        /// Why no CUDA pinner is available (feature off, no driver, no device).
        reason: String,
    },
}

/// Claims a free slot among `slots`, returning its index and generation.
pub(crate) fn claim<'a>(
    service: &ServiceShared,
    slots: impl Iterator<Item = &'a PortHeader>,
    kind: &'static str,
    max: usize,
) -> Result<(usize, u64), PortCreateError> {
    for (i, header) in slots.enumerate() {
        let word = header.state.load(Ordering::Acquire);
        let (generation, state) = dynamic::split_state(word);
        if state != dynamic::FREE {
            continue;
        }
        let claimed = dynamic::state_word(generation + 1, dynamic::CLAIMING);
        if header
            .state
            .compare_exchange(word, claimed, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            header.node.store(service.node_id(), Ordering::Relaxed);
            header.pid.store(std::process::id(), Ordering::Relaxed);
            header.waiting.store(0, Ordering::Relaxed);
            return Ok((i, generation + 1));
        }
    }
    Err(PortCreateError::TooManyPorts {
        service: service.name.to_string(),
        kind,
        max,
    })
}

/// Marks a claimed slot active; publishers see it from now on.
pub(crate) fn activate(header: &PortHeader, generation: u64) {
    header
        .state
        .store(dynamic::state_word(generation, dynamic::ACTIVE), Ordering::SeqCst);
}

/// Marks a slot as closing: publishers stop delivering to it.
pub(crate) fn close(header: &PortHeader, generation: u64) {
    header.state.store(
        dynamic::state_word(generation, dynamic::CLOSING),
        Ordering::SeqCst,
    );
    // Pairs with the publisher's fence after its push: either it sees us closing and
    // drains its queue, or our drain after this sees its entry.
    fence(Ordering::SeqCst);
}

/// Frees a slot whose tables and queues are empty.
pub(crate) fn free(header: &PortHeader, generation: u64) {
    header.node.store(0, Ordering::Relaxed);
    header.pid.store(0, Ordering::Relaxed);
    header
        .state
        .store(dynamic::state_word(generation, dynamic::FREE), Ordering::Release);
}

/// Pins the service's pool if asked to.
pub(crate) fn pin(service: &ServiceShared, requested: bool) -> Result<Option<PoolPin>, PortCreateError> {
    if !requested {
        return Ok(None);
    }
    let memory_type = service.pool.memory_type();
    if memory_type == MemoryType::CudaPinned
        && !iox_mempool::pin::has_pinner(memory_type)
        && let Err(reason) = register_cuda_pinner()
    {
        return Err(PortCreateError::CudaUnavailable {
            service: service.name.to_string(),
            reason,
        });
    }
    match iox_mempool::Pool::pin(&service.pool) {
        Ok(p) => Ok(Some(p)),
        Err(source) => Err(PortCreateError::Pin {
            service: service.name.to_string(),
            memory_type,
            source,
        }),
    }
}

/// Registers the CUDA pinner of device 0 (the `cuda` feature), or says why it cannot.
#[cfg(feature = "cuda")]
fn register_cuda_pinner() -> Result<(), String> {
    iox_cuda::register(0).map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn register_cuda_pinner() -> Result<(), String> {
    Err("iox_service was built without its `cuda` feature".into())
}

/// Keeps the service alive for as long as a port lives.
pub(crate) type Shared = Arc<ServiceShared>;
