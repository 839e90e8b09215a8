//! Tensor ports of host-memory services: each sample's element type, shape and strides
//! travel with it, as on a `CudaDevice` service (see `crate::device`), so a program
//! moves tensors the same way with or without a GPU.
//!
//! A host tensor service is a slice of numbers created with
//! [`tensors(true)`](crate::PubSubBuilder::tensors): every chunk has a tensor record in
//! the dynamic segment (`iox_core::shm::tensor_record`). A [`TensorPublisher`] (a
//! publisher of the service whose every loan writes the chunk's record) is the only
//! kind of publisher such a service takes: a plain one is refused
//! (`PortCreateError::TensorService`), so no sample is ever sent with another sample's
//! record. Subscribers may be plain (they read the bytes) or [`TensorSubscriber`]s,
//! whose samples read the record back, checked against the service's element type and
//! the sample's bytes ([`TensorSample::tensor`]).
//!
//! The bytes are moved as a raw-payload service's are (`crate::RawLoan`,
//! `crate::RawSample`): by address, since a strided tensor's span may hold bytes no
//! writer wrote, which Rust may not read as initialised.

use thiserror::Error;

use crate::port::{LoanError, PortCreateError, WaitForPortsError};
use crate::publisher::{Publisher, PublisherBuilder, SendError};
use crate::subscriber::{ReceiveError, Subscriber, SubscriberBuilder};
use crate::tensor::{DType, TensorError, TensorLayout};
use crate::{RawLoan, RawSample};
use iox_core::shm::dynamic::Dynamic;
use iox_core::shm::regions::pubsub::chunk_index;
use iox_core::shm::tensor_record::TensorRecord;

/// Builds a [`TensorPublisher`] of a host tensor service.
#[derive(Debug)]
pub struct TensorPublisherBuilder {
    service: crate::port::Shared,
}

/// Builds a [`TensorSubscriber`] of a host tensor service.
#[derive(Debug)]
pub struct TensorSubscriberBuilder {
    service: crate::port::Shared,
}

/// The service's element type, or the refusal of a tensor port of a service that is
/// no host tensor service.
fn element_of(service: &iox_core::shared::ServiceShared) -> Result<DType, PortCreateError> {
    crate::port::check_host_port(service)?;
    crate::port::check_tensor_service(service)?;
    service
        .config
        .tensor_element()
        .ok_or_else(|| PortCreateError::NotATensorService {
            service: service.name.to_string(),
        })
}

/// Writes `layout` as chunk `chunk`'s tensor record (by the chunk's loan holder,
/// before the send), for host and device tensor ports alike.
pub(crate) fn store_record(d: Dynamic<'_>, chunk: usize, layout: &TensorLayout) {
    record(d, chunk).store(layout);
}

/// Reads chunk `chunk`'s tensor record (by a holder of a sample of it), checked against
/// the service's element type and the sample's `len` bytes: a damaged record is the
/// error, never a view outside the sample.
pub(crate) fn read_record(
    d: Dynamic<'_>,
    chunk: usize,
    element: DType,
    len: usize,
) -> Result<TensorLayout, TensorError> {
    let layout = record(d, chunk).load()?;
    layout.check(element, len)?;
    Ok(layout)
}

fn record(d: Dynamic<'_>, chunk: usize) -> TensorRecord<'_> {
    d.tensor_record(chunk)
        .expect("a tensor service has a record per chunk (its dynamic segment is laid out with them)")
}

impl TensorPublisherBuilder {
    /// Claims a publisher slot.
    pub fn create(self) -> Result<TensorPublisher, PortCreateError> {
        let element = element_of(&self.service)?;
        Ok(TensorPublisher {
            element,
            inner: PublisherBuilder::new(self.service).build()?,
        })
    }
}

impl TensorSubscriberBuilder {
    /// Claims a subscriber slot.
    pub fn create(self) -> Result<TensorSubscriber, PortCreateError> {
        let element = element_of(&self.service)?;
        Ok(TensorSubscriber {
            element,
            inner: SubscriberBuilder::new(self.service).create()?,
        })
    }
}

/// Sends tensors of a host tensor service. Not `Send`, like [`Publisher`].
#[derive(Debug)]
pub struct TensorPublisher {
    element: DType,
    inner: Publisher<[u8]>,
}

/// Why [`TensorPublisher::loan_tensor`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TensorLoanError {
    /// No chunk (see [`LoanError`]).
    #[error(transparent)]
    Loan(#[from] LoanError),
    /// The layout does not fit the service; nothing was loaned.
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// Why [`TensorLoan::send_bytes`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TensorSendError {
    /// The send itself (see [`SendError`]).
    #[error(transparent)]
    Send(#[from] SendError),
    /// Bytes of another length than the loan's: nothing was sent.
    #[error("{given} bytes given for a tensor of {loaned} bytes; nothing was sent")]
    Length {
        /// Bytes given.
        given: usize,
        /// The loan's bytes.
        loaned: usize,
    },
}

impl TensorPublisher {
    /// Loans a chunk for a tensor of `layout` (its span, see
    /// [`TensorLayout::span_bytes`]) and records the layout with it. A layout of
    /// another element type, or one larger than the service's largest sample, is
    /// refused naming the sizes.
    pub fn loan_tensor(&self, layout: &TensorLayout) -> Result<TensorLoan, TensorLoanError> {
        layout.check(self.element, self.max_bytes())?;
        let bytes = layout.span_bytes().ok_or(TensorError::Overflow)? as usize;
        let loan = self.inner.loan_raw(bytes)?;
        let (service, _, _) = self.inner.port_identity();
        let chunk = chunk_index(service.pool.layout(), loan.chunk_handle());
        store_record(service.dynamic(), chunk, layout);
        Ok(TensorLoan {
            loan,
            tensor: *layout,
        })
    }

    /// The service's element type.
    pub fn element_type(&self) -> DType {
        self.element
    }

    /// The largest tensor in bytes (the pool's largest chunk).
    pub fn max_bytes(&self) -> usize {
        self.inner.max_slice_len()
    }

    /// Waits up to `timeout` until `n` subscribers are connected; returns how many
    /// are.
    pub fn wait_for_subscribers(
        &self,
        n: usize,
        timeout: std::time::Duration,
    ) -> Result<usize, WaitForPortsError> {
        self.inner.wait_for_subscribers(n, timeout)
    }
}

/// A loaned chunk for a tensor: write its bytes, then send. Dropped unsent, it goes
/// back to the publisher.
#[derive(Debug)]
pub struct TensorLoan {
    loan: RawLoan,
    tensor: TensorLayout,
}

impl TensorLoan {
    /// The tensor's first byte.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.loan.as_mut_ptr()
    }

    /// Bytes loaned (the tensor's span).
    pub fn len(&self) -> usize {
        self.loan.len_bytes()
    }

    /// Whether the tensor spans no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tensor the sample carries.
    pub fn tensor(&self) -> &TensorLayout {
        &self.tensor
    }

    /// Keeps the pool mapped while it lives (see [`crate::PoolKeepAlive`]).
    pub fn pool_keep_alive(&self) -> crate::PoolKeepAlive {
        self.loan.pool_keep_alive()
    }

    /// Copies `bytes` (exactly [`len`](Self::len) of them) into the chunk and sends it;
    /// returns how many subscribers got it. Any bytes: for a `bool` tensor, bytes other
    /// than 0 and 1 reach tensor and byte readers as they are, and a typed `[bool]`
    /// subscriber refuses the sample (`ReceiveError::InvalidValue`).
    pub fn send_bytes(mut self, bytes: &[u8]) -> Result<usize, TensorSendError> {
        if bytes.len() != self.len() {
            return Err(TensorSendError::Length {
                given: bytes.len(),
                loaned: self.len(),
            });
        }
        // SAFETY: the loan's chunk holds `len` bytes and is ours until sent; `bytes` is
        // another allocation of that length.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.as_mut_ptr(), bytes.len()) };
        // SAFETY: every byte was written just now, from initialised bytes; the element
        // is a number or `bool` (the service's schema); a typed reader of a `bool`
        // tensor checks each byte before it reads one (`zero_copy`), so no byte here
        // can give it an invalid value.
        Ok(unsafe { self.send() }?)
    }

    /// Sends the chunk; returns how many subscribers got it.
    ///
    /// # Safety
    /// All [`len`](Self::len) bytes were written (initialised memory; typed readers of
    /// a `bool` tensor check the values themselves).
    pub unsafe fn send(self) -> Result<usize, SendError> {
        // SAFETY: the caller's contract.
        unsafe { self.loan.send() }
    }
}

/// Receives tensors of a host tensor service.
#[derive(Debug)]
pub struct TensorSubscriber {
    element: DType,
    inner: Subscriber<[u8]>,
}

impl TensorSubscriber {
    /// The next tensor, if one is queued.
    pub fn receive(&self) -> Result<Option<TensorSample>, ReceiveError> {
        Ok(self.inner.receive_raw()?.map(|s| self.wrap(s)))
    }

    /// The next tensor, waiting up to `timeout` for one (without spinning).
    pub fn receive_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Option<TensorSample>, ReceiveError> {
        Ok(self.inner.receive_timeout_raw(timeout)?.map(|s| self.wrap(s)))
    }

    fn wrap(&self, sample: RawSample) -> TensorSample {
        let (service, _, _) = self.inner.port_identity();
        let chunk = chunk_index(service.pool.layout(), sample.origin().0);
        let tensor = read_record(service.dynamic(), chunk, self.element, sample.len_bytes());
        TensorSample { sample, tensor }
    }

    /// Waits up to `timeout` until `n` publishers are connected; returns how many are.
    pub fn wait_for_publishers(
        &self,
        n: usize,
        timeout: std::time::Duration,
    ) -> Result<usize, WaitForPortsError> {
        self.inner.wait_for_publishers(n, timeout)
    }
}

/// A received tensor in host memory. It owns its chunk (it may outlive its subscriber
/// and move to another thread).
#[derive(Debug)]
pub struct TensorSample {
    sample: RawSample,
    /// Its record, read at the receive (a damaged one is the error).
    tensor: Result<TensorLayout, TensorError>,
}

impl TensorSample {
    /// The element type, shape and strides the publisher recorded, checked against the
    /// service's element type and the sample's bytes: a record that does not describe
    /// the sample (a damaged one) is an error, never a view outside it.
    pub fn tensor(&self) -> Result<TensorLayout, TensorError> {
        self.tensor.clone()
    }

    /// The tensor's first byte (read-only).
    pub fn as_ptr(&self) -> *const u8 {
        self.sample.as_ptr()
    }

    /// Bytes sent (the tensor's span).
    pub fn len(&self) -> usize {
        self.sample.len_bytes()
    }

    /// Whether the tensor spans no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: crate::ZeroCopySafe> crate::PubSubService<[T]> {
    /// A builder for a tensor publisher of a host tensor service (created with
    /// [`tensors(true)`](crate::PubSubBuilder::tensors)); see [`TensorPublisher`]. A
    /// `CudaDevice` service's are its device publishers.
    pub fn tensor_publisher_builder(&self) -> TensorPublisherBuilder {
        TensorPublisherBuilder {
            service: self.shared.clone(),
        }
    }

    /// A builder for a tensor subscriber of a host tensor service; see
    /// [`TensorSubscriber`].
    pub fn tensor_subscriber_builder(&self) -> TensorSubscriberBuilder {
        TensorSubscriberBuilder {
            service: self.shared.clone(),
        }
    }
}

/// The readiness descriptor (as [`Subscriber`]'s).
impl std::os::fd::AsFd for TensorSubscriber {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}
