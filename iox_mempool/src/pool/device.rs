//! A pool's payload: a host mapping ([`Segment`]) or memory of a device that the
//! host never touches ([`DevicePayload`]).
//!
//! A device payload is made, mapped into this process's device address space and
//! unmapped by its owner (`iox_cuda` for `CudaDevice` pools); this crate only keeps it
//! alive for as long as the pool and computes chunk addresses from its base. Those
//! addresses are device addresses: nothing in this crate dereferences a chunk's
//! address, and the service layer hands device chunks out as numbers only.
//!
//! Invariants: a device payload is always writable (access to device memory is given
//! to the whole mapping when it is made) and never pinned; its length is at least
//! the layout's payload length (checked when the pool is assembled).

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use crate::segment::{Access, MakeWritableError, Segment};

/// Device memory holding a pool's payload, mapped into this process's device
/// address space by its owner (e.g. iox_cuda). Never dereferenced on the host.
pub trait DevicePayload: Send + Sync + std::fmt::Debug {
    /// The device address of the payload's first byte.
    fn device_base(&self) -> u64;
    /// Bytes usable from `device_base` (at least the pool's payload length).
    fn len(&self) -> usize;
    /// Whether it has no bytes (never, for a pool's payload).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The descriptor other processes import it from.
    fn export_fd(&self) -> BorrowedFd<'_>;
}

/// Where a pool's chunks are.
#[derive(Debug)]
pub(super) enum Payload {
    /// Mapped into this process.
    Host(Segment),
    /// In a device's memory, at device addresses.
    Device(Arc<dyn DevicePayload>),
}

impl Payload {
    /// The first chunk's address: a host address, or a device address as a pointer
    /// that is never dereferenced.
    pub(super) fn base(&self) -> *mut u8 {
        match self {
            Payload::Host(s) => s.as_ptr(),
            Payload::Device(d) => d.device_base() as usize as *mut u8,
        }
    }

    /// How the payload can be used now (a device payload: read-write).
    #[inline]
    pub(super) fn access(&self) -> Access {
        match self {
            Payload::Host(s) => s.access(),
            Payload::Device(_) => Access::ReadWrite,
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Payload::Host(s) => s.len(),
            Payload::Device(d) => d.len(),
        }
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Payload::Host(s) => s.file().as_fd(),
            Payload::Device(d) => d.export_fd(),
        }
    }

    pub(super) fn make_writable(&self) -> Result<(), MakeWritableError> {
        match self {
            Payload::Host(s) => s.make_writable(),
            Payload::Device(_) => Ok(()),
        }
    }

    /// Whether the payload's file is open read-write (a device payload: always).
    pub(super) fn can_write(&self) -> bool {
        match self {
            Payload::Host(s) => s.can_write(),
            Payload::Device(_) => true,
        }
    }

    pub(super) fn make_read_only(&mut self) -> Result<(), MakeWritableError> {
        match self {
            Payload::Host(s) => s.make_read_only(),
            Payload::Device(_) => Ok(()),
        }
    }
}
