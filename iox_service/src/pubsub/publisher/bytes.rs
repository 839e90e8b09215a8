//! Sending a payload given as bytes, whatever the service's payload type: for programs
//! that move samples without knowing their type (a bridge re-publishing what arrived
//! from the network into a service opened with
//! [`carry_payload_type`](crate::PubSubBuilder::carry_payload_type)).
//!
//! Only payloads valid for every bit pattern are sent this way
//! ([`crate::PayloadType::any_bit_pattern`]): bytes from anywhere (the network) are
//! then always a value of the recorded type, so a typed subscriber of the same service
//! never sees an invalid one (a `bool` holding 2). `carry_payload_type` refuses other
//! types when the service is opened or created (no `[u8]` port of them exists, loans
//! included); a service opened with the `unsafe` `raw_payload_type` is refused here
//! with [`SendBytesError::NotEveryBitPattern`]. Since validity is part of the
//! payload's identity, a typed program whose type is not valid for every bit pattern
//! never opens a service recorded as carrying one that is.
//!
//! The bytes are copied into a loaned chunk (one copy) and sent; the length recorded
//! for subscribers is counted in the recorded type's elements (1 for a typed payload),
//! so typed subscribers of the same service read a well-formed sample. The ordinary
//! loan path is untouched.

use thiserror::Error;

use super::{LoanError, Publisher, SendError};
use crate::sample::SampleMutUninit;

/// Why [`Publisher::send_payload_bytes`] sent nothing (or not to everyone).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SendBytesError {
    /// The byte count is not a whole payload of the recorded type.
    #[error(
        "{len} bytes are not a payload of {payload}: a typed payload needs exactly its size, a slice a multiple of the element size"
    )]
    Length {
        /// Bytes given.
        len: usize,
        /// The payload type recorded in the static config.
        payload: String,
    },
    /// The recorded payload type has padding or bit patterns that are no value (a
    /// `bool`): bytes from elsewhere could be an invalid value of it.
    #[error(
        "cannot send bytes as {payload}: not every byte string is a value of it (padding, or a bool); only payloads valid for every bit pattern travel as bytes"
    )]
    NotEveryBitPattern {
        /// The payload type recorded in the static config.
        payload: String,
    },
    /// The header bytes given are not the service's user header (the service has none,
    /// or one of another size, or a header type that not every byte string is a value
    /// of).
    #[error(
        "{len} header bytes do not make the service's user header ({expected}); give exactly its bytes (none for a service without a header)"
    )]
    Header {
        /// Header bytes given.
        len: usize,
        /// What the service records.
        expected: String,
    },
    /// Larger than the service's largest chunk.
    #[error("{len} bytes do not fit the service's largest chunk ({max} bytes)")]
    TooLarge {
        /// Bytes given.
        len: usize,
        /// The largest chunk.
        max: usize,
    },
    /// The loan failed.
    #[error(transparent)]
    Loan(#[from] LoanError),
    /// The send did not reach everyone.
    #[error(transparent)]
    Send(#[from] SendError),
}

impl<P: ?Sized + crate::Payload, H: crate::UserHeader> Publisher<P, H> {
    /// The slot this publisher occupies: what [`crate::Sample::publisher_slot`] reports
    /// for the samples it sends, as long as it lives.
    pub fn publisher_slot(&self) -> usize {
        self.port.slot
    }
}

impl Publisher<[u8]> {
    /// Bytes of the user header [`send_sample_bytes`](Self::send_sample_bytes) takes:
    /// the recorded header's size (0 for a service without one).
    pub fn header_len(&self) -> usize {
        self.recorded_header().map_or(0, crate::HeaderType::size)
    }

    /// Copies the payload, the concatenation of `parts` (e.g. the fragments of a
    /// network buffer), into a loaned chunk and sends it; returns how many subscribers
    /// got it. The payload must be a whole payload of the type recorded in the static
    /// config (see [`carry_payload_type`](crate::PubSubBuilder::carry_payload_type)):
    /// its size for a typed payload, a multiple of the element size for a slice; and
    /// the recorded type must be valid for every bit pattern
    /// ([`SendBytesError::NotEveryBitPattern`] otherwise, see the module docs).
    pub fn send_payload_bytes(&self, parts: &[&[u8]]) -> Result<usize, SendBytesError> {
        self.send_sample_bytes(&[], parts)
    }

    /// [`send_payload_bytes`](Self::send_payload_bytes) with the user header's bytes
    /// in front: `header` must be the recorded header's size exactly (empty for a
    /// service without one, [`SendBytesError::Header`] otherwise), and its type valid
    /// for every bit pattern too. The header is copied to the chunk's start and the
    /// payload to its offset (see [`crate::user_header`]).
    pub fn send_sample_bytes(&self, header: &[u8], parts: &[&[u8]]) -> Result<usize, SendBytesError> {
        let recorded_header = self.recorded_header();
        let header_fits = match recorded_header {
            None => header.is_empty(),
            Some(h) => h.identity.any_bit_pattern() && header.len() == h.size(),
        };
        if !header_fits {
            return Err(SendBytesError::Header {
                len: header.len(),
                expected: recorded_header
                    .map_or("none".into(), |h| format!("{}, {} bytes", h.identity, h.size())),
            });
        }
        let offset = self.payload_offset();
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let recorded = &self.port.service.config.payload;
        if !recorded.any_bit_pattern() {
            return Err(SendBytesError::NotEveryBitPattern {
                payload: recorded.to_string(),
            });
        }
        let element = recorded.element_size();
        let elements = match recorded {
            crate::PayloadType::Typed { .. } => (len == element).then_some(1),
            crate::PayloadType::Slice { .. } if element == 0 => (len == 0).then_some(0),
            crate::PayloadType::Slice { .. } => len.is_multiple_of(element).then(|| len / element),
        };
        let Some(elements) = elements else {
            return Err(SendBytesError::Length {
                len,
                payload: recorded.to_string(),
            });
        };
        let max = self.port.service.pool.layout().max_chunk_size() - offset;
        if len > max {
            return Err(SendBytesError::TooLarge { len, max });
        }
        let (port, chunk) = self.loan_bytes(offset + len)?;
        let ptr = chunk.addr();
        // SAFETY: the chunk is loaned to this publisher alone and holds `offset + len`
        // bytes; the header is `header.len() <= offset` bytes at its start, from this
        // process's own memory.
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), ptr, header.len()) };
        let mut at = offset;
        for part in parts {
            // SAFETY: `ptr` starts a chunk loaned to this publisher alone that holds at
            // least `offset + len` bytes (the pool gave a class that fits them), and the
            // parts add up to `len`; the parts are this process's own memory, never the chunk.
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), ptr.add(at), part.len()) };
            at += part.len();
        }
        let sample = SampleMutUninit::<[u8]>::new(port, chunk, elements);
        // SAFETY: the header and the payload's `elements x element` bytes (= `len`)
        // were just written; the sample is only sent, never read through its `[u8]`
        // view.
        Ok(unsafe { sample.assume_init() }.send()?)
    }
}
