//! Device subscribers: receive chunks of GPU memory and read them in stream order.
//!
//! A [`DeviceSubscriber`] is a subscriber of the service (the same claim and take as
//! every subscriber, see `crate::subscriber`) that hands out device addresses only,
//! plus the port's events (see `super::events`); the subscriber underneath is not
//! handed out (its receives would read GPU memory on the host). [`DeviceSample::wait_on`] makes a
//! stream wait for the publisher's write; the sample's release records this port's
//! read-done event on the stream it was last waited on (or the one given to
//! [`DeviceSample::release_on`]) before the chunk goes back, so the next loan of it
//! waits for those reads. A sample never waited on and released with no stream
//! records nothing: it was not read on the GPU.

use std::time::Duration;

use iox_cuda::{CudaError, Stream};
use thiserror::Error;

use std::sync::Arc;

use super::events::{self, EventsOwner, chunk_index};
use crate::RawSample;
use crate::port::Side;
use crate::port::{PortCreateError, WaitForPortsError};
use crate::subscriber::{ReceiveError, Subscriber, SubscriberBuilder};
use crate::tensor::{TensorError, TensorLayout};

/// Builds a [`DeviceSubscriber`] of a `CudaDevice` service.
#[derive(Debug)]
pub struct DeviceSubscriberBuilder {
    pub(crate) inner: SubscriberBuilder<[u8]>,
}

impl DeviceSubscriberBuilder {
    /// Claims a subscriber slot and publishes the port's events.
    pub fn create(self) -> Result<DeviceSubscriber, PortCreateError> {
        let inner = self.inner.build()?;
        let (service, slot, generation) = inner.port_identity();
        let events = events::for_port(service, Side::Receiving, slot, generation)?;
        Ok(DeviceSubscriber { events, inner })
    }
}

/// Receives chunks of a `CudaDevice` service's GPU memory.
#[derive(Debug)]
pub struct DeviceSubscriber {
    // Shared with the samples: retired (after this port's reads) when the last goes.
    events: Arc<EventsOwner>,
    inner: Subscriber<[u8]>,
}

/// Why [`DeviceSample::wait_on`] or a release failed: the driver refused.
#[derive(Debug, Error)]
#[error("cannot order the stream after the sample's write: {0}")]
pub struct DeviceWaitError(pub CudaError);

impl DeviceSubscriber {
    /// The next sample, if one is queued.
    pub fn receive(&self) -> Result<Option<DeviceSample>, ReceiveError> {
        Ok(self.inner.receive_raw()?.map(|s| self.wrap(s)))
    }

    /// The next sample, waiting up to `timeout` for one (without spinning).
    pub fn receive_timeout(&self, timeout: Duration) -> Result<Option<DeviceSample>, ReceiveError> {
        Ok(self.inner.receive_timeout_raw(timeout)?.map(|s| self.wrap(s)))
    }

    fn wrap(&self, sample: RawSample) -> DeviceSample {
        let (handle, publisher) = sample.origin();
        let chunk = chunk_index(self.inner.port_identity().0.pool.layout(), handle);
        DeviceSample {
            sample,
            chunk,
            publisher,
            stream: None,
            events: Arc::clone(&self.events),
        }
    }

    /// Waits up to `timeout` until `n` publishers are connected; returns how many are.
    pub fn wait_for_publishers(&self, n: usize, timeout: Duration) -> Result<usize, WaitForPortsError> {
        self.inner.wait_for_publishers(n, timeout)
    }

    /// Samples queued for this subscriber now.
    pub fn pending(&self) -> usize {
        self.inner.pending()
    }
}

/// A received chunk of GPU memory. It owns what it needs (it may outlive its
/// subscriber, move to another thread, back a tensor in Python).
#[derive(Debug)]
pub struct DeviceSample {
    /// The stream its reads were enqueued on (the last one waited on).
    stream: Option<Stream>,
    chunk: usize,
    publisher: usize,
    // Before `sample` (fields drop in order, after `Drop::drop` recorded the reads):
    // the last sample of a dropped subscriber retires the port's events (waits for
    // them, unpublishes the table) before its chunk is released and its slot freed.
    events: Arc<EventsOwner>,
    sample: RawSample,
}

impl DeviceSample {
    /// The chunk's device address (valid in this process's CUDA context of the
    /// service's GPU). Read it only with work enqueued after [`wait_on`](Self::wait_on).
    pub fn device_ptr(&self) -> u64 {
        self.sample.as_ptr() as u64
    }

    /// Bytes sent.
    pub fn len(&self) -> usize {
        self.sample.len_bytes()
    }

    /// Whether no bytes were sent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type, shape and strides the publisher recorded with the sample,
    /// checked against the service's element type and the sample's bytes: a record
    /// that does not describe the sample (a damaged one) is an error, never a view
    /// outside it. A service whose payload is not a slice of numbers has none
    /// ([`TensorError::NotATensorService`]).
    pub fn tensor(&self) -> Result<TensorLayout, TensorError> {
        let service = &self.events.service;
        let element = super::tensor_element(service)?;
        crate::pubsub::tensor::read_record(service.dynamic(), self.chunk, element, self.len())
    }

    /// The slot of the publisher that sent it.
    pub fn publisher_slot(&self) -> usize {
        self.publisher
    }

    /// This process's ordinal of the GPU the sample is on.
    pub fn device_ordinal(&self) -> i32 {
        self.events.events.ordinal()
    }

    /// Makes `stream` wait until the publisher's write of the chunk is done: work
    /// enqueued on `stream` after this may read it. The release records the end of
    /// the reads on `stream`.
    pub fn wait_on(&mut self, stream: Stream) -> Result<(), DeviceWaitError> {
        let d = self.events.service.dynamic();
        self.events
            .events
            .wait_peer(d, Side::Sending, self.publisher, self.chunk, stream)
            .map_err(DeviceWaitError)?;
        self.stream = Some(stream);
        Ok(())
    }

    /// Releases the sample after the reads enqueued on `stream`: the chunk's next
    /// loan waits for them.
    pub fn release_on(mut self, stream: Stream) -> Result<(), DeviceWaitError> {
        let recorded = self.events.events.record(self.chunk, stream);
        self.stream = None; // recorded here (or refused): the drop records nothing
        crate::testing::stall_point(crate::testing::Stall::DeviceRecordedBeforeRelease);
        recorded.map_err(DeviceWaitError)
    }
}

impl Drop for DeviceSample {
    fn drop(&mut self) {
        // Before the chunk's release (the field drops after this).
        if let Some(stream) = self.stream {
            // A refusal cannot be reported from a drop; the chunk is released anyway
            // (its next loan then waits on this port's previous read, if any).
            let _ = self.events.events.record(self.chunk, stream);
            crate::testing::stall_point(crate::testing::Stall::DeviceRecordedBeforeRelease);
        }
    }
}

/// The readiness descriptor (as [`Subscriber`]'s): readable when a sample may be
/// waiting, for epoll, a `WaitSet` or an async runtime.
impl std::os::fd::AsFd for DeviceSubscriber {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.as_fd()
    }
}
