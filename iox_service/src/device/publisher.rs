//! Device publishers: loan a chunk of GPU memory in stream order, write it with the
//! GPU, send it in stream order.
//!
//! A [`DevicePublisher`] is a publisher of the service (the same slot claim, loan and
//! send as every publisher, see `crate::publisher`) that hands out device addresses
//! only, plus the port's events (see `super::events`). [`DevicePublisher::loan_on`]
//! makes the given stream wait until the chunk's last reads (every subscriber's) and
//! last write (every publisher's) are done; [`DeviceLoan::send_on`] records the
//! write-done event on the stream the writing work was enqueued on, then sends.
//! Neither waits on the host. [`DevicePublisher::loan_tensor_on`] loans for a tensor
//! layout (element type, shape, strides), checked against the service's element type
//! and largest sample before anything is loaned; a plain loan records a 1-D tensor of
//! its length. The publisher underneath is not handed out: its own
//! loans would be host addresses of GPU memory.

use iox_cuda::{CudaError, Stream};
use thiserror::Error;

use std::sync::Arc;

use super::events::{self, EventsOwner, chunk_index};
use crate::RawLoan;
use crate::port::Side;
use crate::port::{LoanError, PortCreateError, WaitForPortsError};
use crate::publisher::{Publisher, PublisherBuilder, SendError};
use crate::tensor::{DType, TensorError, TensorLayout};

/// Builds a [`DevicePublisher`] of a `CudaDevice` service.
#[derive(Debug)]
pub struct DevicePublisherBuilder {
    pub(crate) inner: PublisherBuilder<[u8]>,
}

impl DevicePublisherBuilder {
    /// Claims a publisher slot and publishes the port's events.
    pub fn create(self) -> Result<DevicePublisher, PortCreateError> {
        let inner = self.inner.build()?;
        let (service, slot, generation) = inner.port_identity();
        let events = events::for_port(service, Side::Sending, slot, generation)?;
        let element = service.config.tensor_element();
        Ok(DevicePublisher {
            events,
            element,
            inner,
        })
    }
}

/// Sends chunks of a `CudaDevice` service's GPU memory to every subscriber. Not
/// `Send`, like [`Publisher`].
#[derive(Debug)]
pub struct DevicePublisher {
    // Field order: the events retire (wait for this port's work) before the port goes.
    events: Arc<EventsOwner>,
    /// The service's element type (`None`: not a tensor service).
    element: Option<DType>,
    inner: Publisher<[u8]>,
}

/// Why [`DevicePublisher::loan_on`] or [`DevicePublisher::loan_tensor_on`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DeviceLoanError {
    /// No chunk (see [`LoanError`]).
    #[error(transparent)]
    Loan(#[from] LoanError),
    /// The driver refused to make the stream wait for the chunk's readers; the chunk
    /// went back to the pool.
    #[error("cannot order the loan after the chunk's last reads: {0}")]
    Driver(CudaError),
    /// The tensor layout does not fit the service (its element type, its largest
    /// sample); nothing was loaned.
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// Why [`DeviceLoan::send_on`] failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DeviceSendError {
    /// The send itself (see [`SendError`]).
    #[error(transparent)]
    Send(#[from] SendError),
    /// The driver refused to record the write-done event: nothing was sent, and the
    /// chunk went back to the pool.
    #[error("cannot record the end of the write on the stream, nothing was sent: {0}")]
    Driver(CudaError),
}

impl DevicePublisher {
    /// Loans a chunk for `bytes` bytes and makes `stream` wait until every
    /// subscriber's last use of that chunk is done: work enqueued on `stream` after
    /// this may write it.
    pub fn loan_on(&self, stream: Stream, bytes: usize) -> Result<DeviceLoan, DeviceLoanError> {
        let tensor = match self.element {
            Some(dtype) => Some(TensorLayout::contiguous(dtype, &[bytes / dtype.size()])?),
            None => None,
        };
        self.loan_with(stream, bytes, tensor)
    }

    /// Loans a chunk for a tensor of `layout` (its bytes from the first element to the
    /// last, see [`TensorLayout::span_bytes`]) and records the layout with it; orders
    /// `stream` as [`loan_on`](Self::loan_on) does. A layout of another element type,
    /// or one larger than the service's largest sample, is refused naming the sizes.
    pub fn loan_tensor_on(
        &self,
        stream: Stream,
        layout: &TensorLayout,
    ) -> Result<DeviceLoan, DeviceLoanError> {
        let element = match self.element {
            Some(e) => e,
            None => super::tensor_element(self.inner.port_identity().0)?,
        };
        layout.check(element, self.max_bytes())?;
        let bytes = layout.span_bytes().ok_or(TensorError::Overflow)? as usize;
        self.loan_with(stream, bytes, Some(*layout))
    }

    /// The service's tensor element type (`None`: its payload is not a slice of
    /// numbers, and its samples are bytes).
    pub fn element_type(&self) -> Option<DType> {
        self.element
    }

    /// This process's ordinal of the GPU the service's memory is on.
    pub fn device_ordinal(&self) -> i32 {
        self.events.events.ordinal()
    }

    /// The largest sample in bytes (the pool's largest chunk).
    pub fn max_bytes(&self) -> usize {
        self.inner.max_slice_len()
    }

    fn loan_with(
        &self,
        stream: Stream,
        bytes: usize,
        tensor: Option<TensorLayout>,
    ) -> Result<DeviceLoan, DeviceLoanError> {
        let loan = self.inner.loan_raw(bytes)?;
        let chunk = chunk_index(self.inner.port_identity().0.pool.layout(), loan.chunk_handle());
        let d = self.inner.port_identity().0.dynamic();
        self.events
            .events
            .wait_all(d, chunk, stream)
            .map_err(DeviceLoanError::Driver)?;
        if let Some(t) = &tensor {
            crate::pubsub::tensor::store_record(d, chunk, t);
        }
        Ok(DeviceLoan {
            chunk,
            tensor,
            events: Arc::clone(&self.events),
            loan,
        })
    }

    /// Waits up to `timeout` until `n` subscribers are connected; returns how many
    /// are (see [`Publisher::wait_for_subscribers`]).
    pub fn wait_for_subscribers(
        &self,
        n: usize,
        timeout: std::time::Duration,
    ) -> Result<usize, WaitForPortsError> {
        self.inner.wait_for_subscribers(n, timeout)
    }

    /// The publisher slot this port holds (see [`Publisher::publisher_slot`]).
    pub fn publisher_slot(&self) -> usize {
        self.inner.publisher_slot()
    }

    /// Whether the service was removed after this port's handle opened it.
    pub fn is_service_removed(&self) -> bool {
        self.inner.is_service_removed()
    }
}

/// A loaned chunk of GPU memory: write it with work on a stream, then
/// [`send_on`](Self::send_on) that stream. Dropped unsent, it goes back to the pool
/// (any work still writing it must be finished or ordered before the next loan by
/// the user).
#[derive(Debug)]
pub struct DeviceLoan {
    chunk: usize,
    tensor: Option<TensorLayout>,
    /// The publisher's events: a loan may outlive its publisher (as a host loan does,
    /// keeping the port's slot). Before `loan` (fields drop in order): the last holder
    /// retires the events before the chunk and the slot are let go.
    events: Arc<EventsOwner>,
    loan: RawLoan,
}

impl DeviceLoan {
    /// The chunk's device address (valid in this process's CUDA context of the
    /// service's GPU).
    pub fn device_ptr(&mut self) -> u64 {
        self.loan.as_mut_ptr() as u64
    }

    /// Bytes loaned.
    pub fn len(&self) -> usize {
        self.loan.len_bytes()
    }

    /// Whether no bytes were loaned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the pool's device memory mapped in this process while it lives (see
    /// [`crate::PoolKeepAlive`]).
    pub fn pool_keep_alive(&self) -> crate::PoolKeepAlive {
        self.loan.pool_keep_alive()
    }

    /// The tensor layout the sample will carry (`None` on a service that is not a
    /// tensor service).
    pub fn tensor(&self) -> Option<&TensorLayout> {
        self.tensor.as_ref()
    }

    /// Records the write-done event on `stream` (after the work that writes the chunk
    /// was enqueued there) and sends the chunk; returns how many subscribers got it.
    pub fn send_on(self, stream: Stream) -> Result<usize, DeviceSendError> {
        let Self {
            chunk, events, loan, ..
        } = self;
        // The port stays until the events are retired (below), even if the publisher
        // was dropped before this loan and the send would free its slot: a port that
        // takes the slot next must not publish a table while ours may be waited on.
        let port = loan.port();
        let recorded = events.events.record(chunk, stream);
        let sent = match recorded {
            Ok(()) => {
                crate::testing::stall_point(crate::testing::Stall::DeviceRecordedBeforeSend);
                // SAFETY: the payload is `[u8]` in device memory, which this process
                // never reads: any bytes the GPU wrote (or did not) are valid `u8`s to a
                // reader that reads them on a device.
                unsafe { loan.send() }.map_err(DeviceSendError::Send)
            }
            Err(e) => {
                drop(loan);
                Err(DeviceSendError::Driver(e))
            }
        };
        crate::testing::stall_point(crate::testing::Stall::DeviceSentBeforeRetire);
        drop(events);
        drop(port);
        sent
    }
}
