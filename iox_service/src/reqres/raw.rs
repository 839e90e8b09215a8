//! Request-response payloads as bytes, for language bindings (the C ABI): a service
//! whose static config records request and response types known only at run time,
//! with clients and servers that move them as bytes, as `pubsub::raw` does for
//! publish-subscribe.
//!
//! Such a service is built with the `unsafe`
//! [`RequestResponseBuilder::<[u8], [u8]>::raw_payload_types`]: it records the given
//! types, so a Rust program opening the service with those types meets it (a mismatch
//! is `OpenError::IncompatiblePayload` on either side). Its ports are
//! `Client<[u8], [u8]>` / `Server<[u8], [u8]>`, used only through the methods here.
//!
//! Invariant: a chunk's user word keeps the meaning the recorded type gives it (1 for a
//! typed payload, the element count for a slice), so Rust ports of the real types read
//! what these ports write and the other way round. The raw types hand out addresses
//! and lengths in bytes only: the bytes may include another writer's padding, which
//! Rust may not read as initialised `u8`s.

use std::time::Duration;

use super::active::{ActiveRequest, ResponseMutUninit};
use super::client::{Client, RequestMutUninit, RequestSendError};
use super::pending::{PendingResponse, Response, ResponseReceiveError};
use super::server::{ResponseSendError, Server, ServerReceiveError};
use super::service::RequestResponseBuilder;
use crate::PayloadType;
use crate::port::LoanError;
use crate::static_config::StaticConfig;

/// The request and response types `config` records (a request-response config).
pub(crate) fn recorded(config: &StaticConfig) -> (&PayloadType, &PayloadType) {
    let response = &config
        .request_response()
        .expect("a request-response port's service has a request-response config")
        .response;
    (&config.payload, response)
}

/// The user word for a loan of `bytes` bytes of `payload`, or the error saying why not.
fn word_for(payload: &PayloadType, bytes: usize, max_bytes: usize) -> Result<usize, LoanError> {
    let word = payload
        .elements_in(bytes)
        .ok_or_else(|| crate::pubsub::raw::not_whole(payload, bytes))?;
    if bytes > max_bytes {
        return Err(LoanError::TooManyBytes {
            bytes,
            max: max_bytes,
        });
    }
    Ok(word)
}

impl RequestResponseBuilder<[u8], [u8]> {
    /// Records `request` and `response` in the static config instead of `[u8]` (and
    /// checks an existing service against them): for language bindings, whose payload
    /// types are known only at run time. Slice types take their sizes from
    /// `request_slice_len` / `response_slice_len`, in elements of the recorded types.
    ///
    /// # Safety
    /// The ports of this service must loan only with `loan_raw` and receive only with
    /// `receive_raw` / `receive_timeout_raw` (the other methods read and write lengths
    /// as bytes, not as elements of the recorded types), and must read payloads only
    /// through their addresses, since a payload written as another type may have
    /// padding bytes that are not initialised.
    pub unsafe fn raw_payload_types(self, request: PayloadType, response: PayloadType) -> Self {
        self.with_raw_types(request, response)
    }
}

/// A loaned request of a raw-payload service, written through its address.
#[derive(Debug)]
pub struct RawRequest {
    loan: RequestMutUninit<[u8], [u8]>,
    ptr: *mut u8,
    bytes: usize,
}

impl RawRequest {
    /// The payload's first byte (aligned for the recorded type).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The payload's length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// Sends the request to one server; the pending response receives its stream.
    ///
    /// # Safety
    /// All [`len_bytes`](Self::len_bytes) bytes were written with a valid value of the
    /// recorded request type.
    pub unsafe fn send(self) -> Result<PendingResponse<[u8], [u8]>, RequestSendError> {
        // SAFETY: the caller wrote the payload (this function's contract).
        unsafe { self.loan.assume_init() }.send()
    }
}

impl Client<[u8], [u8]> {
    /// Loans a request of `bytes` bytes of the recorded request type: its size for a
    /// value, a whole number of elements for a slice.
    pub fn loan_raw(&self, bytes: usize) -> Result<RawRequest, LoanError> {
        let max = self
            .pool_info()
            .classes
            .iter()
            .map(|c| c.chunk_size)
            .max()
            .unwrap_or(0);
        let word = word_for(self.recorded_payloads().0, bytes, max)?;
        let loan = self.loan_bytes(bytes, word)?;
        let ptr = loan.addr();
        Ok(RawRequest { loan, ptr, bytes })
    }
}

/// A received response of a raw-payload service, read through its address.
#[derive(Debug)]
pub struct RawResponse {
    response: Response<[u8]>,
    bytes: usize,
}

impl RawResponse {
    /// The payload's first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.response.as_ptr()
    }

    /// The payload's length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// The payload's length in elements of the recorded type (1 for a value).
    pub fn len(&self) -> usize {
        self.response.word()
    }

    /// Whether the payload has no elements.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl PendingResponse<[u8], [u8]> {
    /// [`receive`](PendingResponse::receive) for a raw-payload service.
    pub fn receive_raw(&self) -> Result<Option<RawResponse>, ResponseReceiveError> {
        self.receive()?.map(to_raw_response).transpose()
    }

    /// [`receive_timeout`](PendingResponse::receive_timeout) for a raw-payload service.
    pub fn receive_timeout_raw(
        &self,
        timeout: Duration,
    ) -> Result<Option<RawResponse>, ResponseReceiveError> {
        self.receive_timeout(timeout)?.map(to_raw_response).transpose()
    }
}

fn to_raw_response(response: Response<[u8]>) -> Result<RawResponse, ResponseReceiveError> {
    match response.recorded_payload().bytes_of(response.word()) {
        Some(bytes) if bytes <= response.chunk_size() => Ok(RawResponse { response, bytes }),
        _ => Err(ResponseReceiveError::Corrupt {
            raw: response.word() as u64,
            what: "payload length (in elements of the recorded type) does not fit the chunk",
        }),
    }
}

/// A request being handled by a raw-payload server: read through its address, respond
/// with [`loan_raw`](Self::loan_raw); dropping it ends the stream.
#[derive(Debug)]
pub struct RawActiveRequest {
    request: ActiveRequest<[u8], [u8]>,
    bytes: usize,
}

impl RawActiveRequest {
    /// The request payload's first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.request.as_ptr()
    }

    /// The request payload's length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// Its length in elements of the recorded type (1 for a value).
    pub fn len(&self) -> usize {
        self.request.word()
    }

    /// Whether the request has no elements.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Whether the client still waits for responses (a snapshot).
    pub fn is_connected(&self) -> bool {
        self.request.is_connected()
    }

    /// Loans a response of `bytes` bytes of the recorded response type.
    pub fn loan_raw(&self, bytes: usize) -> Result<RawResponseLoan<'_>, LoanError> {
        let max = self.request.max_chunk_size();
        let word = word_for(self.request.recorded_payloads().1, bytes, max)?;
        let loan = self.request.loan_bytes(bytes, word)?;
        let ptr = loan.addr();
        Ok(RawResponseLoan { loan, ptr, bytes })
    }
}

/// A loaned response of a raw-payload service, written through its address.
#[derive(Debug)]
pub struct RawResponseLoan<'a> {
    loan: ResponseMutUninit<'a, [u8], [u8]>,
    ptr: *mut u8,
    bytes: usize,
}

impl RawResponseLoan<'_> {
    /// The payload's first byte (aligned for the recorded type).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The payload's length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// Sends the response to the client that asked.
    ///
    /// # Safety
    /// All [`len_bytes`](Self::len_bytes) bytes were written with a valid value of the
    /// recorded response type.
    pub unsafe fn send(self) -> Result<(), ResponseSendError> {
        // SAFETY: the caller wrote the payload (this function's contract).
        unsafe { self.loan.assume_init() }.send()
    }

    /// [`send`](Self::send) waiting at most `timeout` for room
    /// ([`ResponseMut::send_timeout`](super::ResponseMut::send_timeout)).
    ///
    /// # Safety
    /// As for [`send`](Self::send).
    pub unsafe fn send_timeout(self, timeout: Duration) -> Result<(), ResponseSendError> {
        // SAFETY: the caller wrote the payload (this function's contract).
        unsafe { self.loan.assume_init() }.send_timeout(timeout)
    }
}

impl Server<[u8], [u8]> {
    /// [`receive`](Server::receive) for a raw-payload service.
    pub fn receive_raw(&self) -> Result<Option<RawActiveRequest>, ServerReceiveError> {
        self.receive()?.map(to_raw_request).transpose()
    }

    /// [`receive_timeout`](Server::receive_timeout) for a raw-payload service.
    pub fn receive_timeout_raw(
        &self,
        timeout: Duration,
    ) -> Result<Option<RawActiveRequest>, ServerReceiveError> {
        self.receive_timeout(timeout)?.map(to_raw_request).transpose()
    }
}

fn to_raw_request(request: ActiveRequest<[u8], [u8]>) -> Result<RawActiveRequest, ServerReceiveError> {
    match request.recorded_payloads().0.bytes_of(request.word()) {
        Some(bytes) if bytes <= request.chunk_size() => Ok(RawActiveRequest { request, bytes }),
        _ => Err(ServerReceiveError::Corrupt {
            raw: request.word() as u64,
            client: request.client_slot(),
            what: "payload length (in elements of the recorded type) does not fit the chunk",
        }),
    }
}
