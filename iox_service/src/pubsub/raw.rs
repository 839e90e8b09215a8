//! Payloads as bytes, for language bindings (the Python package): a service whose
//! static config records a type known only at run time (a numpy dtype and shape), with
//! ports that move it as bytes.
//!
//! Such a service is built with the `unsafe`
//! [`PubSubBuilder::<[u8]>::raw_payload_type`](crate::PubSubBuilder::raw_payload_type):
//! it records the given [`PayloadType`](crate::PayloadType) (so a Rust program opening the service with
//! that type meets it, and a mismatch is `OpenError::IncompatiblePayload` on either
//! side). Its ports are `Publisher<[u8]>` / `Subscriber<[u8]>`, used only through
//! [`Publisher::loan_raw`] and [`Subscriber::receive_raw`] here.
//!
//! Invariant: the chunk's user word keeps the meaning the recorded type gives it
//! (1 for a typed payload, the element count for a slice), so Rust ports of the real
//! type read what these ports write and the other way round. A [`RawLoan`] and a
//! [`RawSample`] know their length in bytes and hand out addresses only: the bytes may
//! include another writer's padding, which Rust may not read as initialised `u8`s.
//! The inner loan/sample is typed `[u8]` with the user word as its length, which is
//! never more than the bytes (so its own accessors stay in bounds), but is not used.

use crate::PayloadType;
use crate::port::LoanError;
use crate::publisher::{Publisher, SendError};
use crate::sample::{DevicePtrError, Sample, SampleMutUninit};
use crate::subscriber::{ReceiveError, Subscriber};

/// A loaned chunk of a raw-payload service, written through its address: the user
/// header (if the service records one, see [`crate::user_header`]) at the chunk's start,
/// the payload at its offset.
#[derive(Debug)]
pub struct RawLoan {
    loan: SampleMutUninit<[u8]>,
    ptr: *mut u8,
    bytes: usize,
}

impl RawLoan {
    /// The user header's first byte (aligned for the recorded header type); its
    /// [`header_len`](Self::header_len) bytes are to be written before `send`.
    #[inline]
    pub fn header_ptr(&mut self) -> *mut u8 {
        self.loan.chunk_ptr()
    }

    /// The user header's length in bytes (0 for a service without one).
    #[inline]
    pub fn header_len(&self) -> usize {
        self.loan.recorded_header().map_or(0, crate::HeaderType::size)
    }

    /// The payload's first byte (aligned for the recorded type).
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The payload's length in bytes.
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// The loaned chunk.
    pub(crate) fn chunk_handle(&self) -> iox_mempool::ChunkHandle {
        self.loan
            .chunk_handle()
            .expect("a raw loan is sent only by consuming it")
    }

    /// The loaning port (see `SampleMutUninit::port`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn port(&self) -> std::rc::Rc<crate::publisher::PublisherPort> {
        self.loan.port()
    }

    /// A handle that keeps the service's pool mapped in this process while it lives
    /// (see [`PoolKeepAlive`]).
    pub fn pool_keep_alive(&self) -> PoolKeepAlive {
        PoolKeepAlive(self.loan.port().service.clone())
    }

    /// See [`SampleMutUninit::device_ptr`].
    pub fn device_ptr(&self) -> Result<u64, DevicePtrError> {
        // The loan's own address is the chunk's (a `[u8]` loan knows no header): the
        // payload is `ptr`'s distance from it further.
        let header = self.loan.chunk_ptr();
        Ok(self.loan.device_ptr()? + (self.ptr as usize - header as usize) as u64)
    }

    /// Sends the chunk to every connected subscriber; returns how many got it.
    ///
    /// # Safety
    /// All [`len_bytes`](Self::len_bytes) bytes must have been written, with a valid
    /// value of the recorded type, and all [`header_len`](Self::header_len) bytes of
    /// the header, with a valid value of the recorded header type.
    #[inline]
    pub unsafe fn send(self) -> Result<usize, SendError> {
        // SAFETY: the caller wrote the payload (this function's contract).
        unsafe { self.loan.assume_init() }.send()
    }
}

/// Keeps a service's pool mapped in this process (its host mapping, or its device
/// memory's import) while it lives, whatever else is dropped: for views handed to
/// code that outlives the loan they were made of (a DLPack consumer's tensor), so that
/// a use after the loan ends writes to memory that is no longer the loan's but never
/// to memory that is no longer mapped. `Send` and `Sync`.
#[derive(Debug, Clone)]
pub struct PoolKeepAlive(#[allow(dead_code)] crate::port::Shared);

/// A received sample of a raw-payload service, read through its address.
#[derive(Debug)]
pub struct RawSample {
    sample: Sample<[u8]>,
    bytes: usize,
}

impl RawSample {
    /// The received chunk and the slot of the publisher that sent it.
    pub(crate) fn origin(&self) -> (iox_mempool::ChunkHandle, usize) {
        (self.sample.chunk_handle(), self.sample.publisher_slot())
    }

    /// The payload's first byte.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        // SAFETY: the receive checked that the offset plus the payload fit the chunk.
        unsafe { self.sample.chunk_ptr().add(self.sample.payload_offset()) }
    }

    /// The user header's first byte (the chunk's); [`header_len`](Self::header_len)
    /// bytes long.
    #[inline]
    pub fn header_ptr(&self) -> *const u8 {
        self.sample.chunk_ptr()
    }

    /// The user header's length in bytes (0 for a service without one).
    #[inline]
    pub fn header_len(&self) -> usize {
        self.sample.recorded_header().map_or(0, crate::HeaderType::size)
    }

    /// The payload's length in bytes.
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// The payload's length in elements of the recorded type (1 for a typed payload).
    #[inline]
    pub fn len(&self) -> usize {
        self.sample.word()
    }

    /// Whether the payload has no elements (an empty slice).
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// See [`Sample::device_ptr`] (the payload's device address).
    pub fn device_ptr(&self) -> Result<u64, DevicePtrError> {
        Ok(self.sample.device_ptr()? + self.sample.payload_offset() as u64)
    }

    /// See [`Sample::offset`] (the payload's offset).
    pub fn offset(&self) -> usize {
        self.sample.offset() + self.sample.payload_offset()
    }
}

impl Publisher<[u8]> {
    /// Loans a chunk for `bytes` bytes of the recorded payload: its size for a typed
    /// payload, a multiple of the element size for a slice (else
    /// [`LoanError::NotWholePayload`]); more than the largest chunk holds is
    /// [`LoanError::TooManyBytes`].
    #[inline]
    pub fn loan_raw(&self, bytes: usize) -> Result<RawLoan, LoanError> {
        let payload = self.recorded_payload();
        let Some(word) = payload.elements_in(bytes) else {
            return Err(not_whole(payload, bytes));
        };
        let offset = self.payload_offset();
        let Some(in_chunk) = offset.checked_add(bytes) else {
            return Err(LoanError::TooManyBytes {
                bytes,
                max: self.max_slice_len().saturating_sub(offset),
            });
        };
        let (port, chunk) = self.loan_bytes(in_chunk)?;
        // SAFETY: the chunk holds `offset + bytes` bytes.
        let ptr = unsafe { chunk.addr().add(offset) };
        Ok(RawLoan {
            loan: SampleMutUninit::new(port, chunk, word),
            ptr,
            bytes,
        })
    }
}

impl Subscriber<[u8]> {
    /// [`receive`](Subscriber::receive) for a raw-payload service.
    #[inline]
    pub fn receive_raw(&self) -> Result<Option<RawSample>, ReceiveError> {
        match self.receive()? {
            Some(sample) => self.to_raw(sample).map(Some),
            None => Ok(None),
        }
    }

    /// [`receive_timeout`](Subscriber::receive_timeout) for a raw-payload service.
    pub fn receive_timeout_raw(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Option<RawSample>, ReceiveError> {
        self.receive_timeout(timeout)?.map(|s| self.to_raw(s)).transpose()
    }

    /// The sample's length in bytes, from its user word and the recorded type (the
    /// receive checked that they fit its chunk); behind a user header, checked here to
    /// fit the chunk after the header (the receive of a `[u8]` port knows no header).
    #[inline(always)]
    fn to_raw(&self, sample: Sample<[u8]>) -> Result<RawSample, ReceiveError> {
        let bytes = self.recorded_payload().bytes_of(sample.word()).unwrap_or(0);
        let offset = sample.payload_offset();
        if sample.recorded_header().is_some() && !sample.fits_at(offset, bytes) {
            return Err(ReceiveError::Corrupt {
                raw: u64::from(sample.chunk_raw()),
                publisher: sample.publisher_slot(),
                what: "payload length does not fit the chunk behind the user header",
            });
        }
        Ok(RawSample { sample, bytes })
    }
}

/// [`LoanError::NotWholePayload`] of a loan of `bytes` bytes of `payload`.
pub(crate) fn not_whole(payload: &PayloadType, bytes: usize) -> LoanError {
    LoanError::NotWholePayload {
        bytes,
        element: payload.element_size(),
        slice: matches!(payload, PayloadType::Slice { .. }),
    }
}
