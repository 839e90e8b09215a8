//! Device-memory services (`MemoryType::CudaDevice`): the pool is memory of one GPU,
//! and samples are device addresses handed between processes in stream order.
//!
//! - [`memory`]: making the pool's device memory and importing it (once per process).
//! - `events` (with the `cuda` feature): the per-chunk inter-process events.
//! - `publisher`, `subscriber` (with the `cuda` feature): the device ports, built from
//!   a `PubSubService<[u8]>` with the builders at the end of this file.
//!
//! Host ports of a device service are refused (`PortCreateError::DeviceMemory`), so
//! safe code never reads or writes GPU memory through a host address.

#[cfg(feature = "cuda")]
pub(crate) mod events;
#[cfg(feature = "cuda")]
pub(crate) mod publisher;
#[cfg(feature = "cuda")]
pub(crate) mod subscriber;

/// This process's ordinal of the GPU the service's memory is on.
#[cfg(feature = "cuda")]
pub(crate) fn service_ordinal(service: &iox_core::shared::ServiceShared) -> Result<i32, String> {
    match &service.config.backing {
        crate::static_config::PayloadBacking::CudaDevice(id) => iox_core::device::ordinal(id),
        _ => Err("the service's memory is not device memory".into()),
    }
}

#[cfg(feature = "cuda")]
impl crate::PubSubService<[u8]> {
    /// A builder for a device publisher of a `CudaDevice` service (its samples are
    /// GPU memory; see [`crate::DevicePublisher`]).
    pub fn device_publisher_builder(&self) -> crate::DevicePublisherBuilder {
        crate::DevicePublisherBuilder {
            inner: crate::PublisherBuilder::new(self.shared.clone()),
        }
    }

    /// A builder for a device subscriber of a `CudaDevice` service (see
    /// [`crate::DeviceSubscriber`]).
    pub fn device_subscriber_builder(&self) -> crate::DeviceSubscriberBuilder {
        crate::DeviceSubscriberBuilder {
            inner: crate::SubscriberBuilder::new(self.shared.clone()),
        }
    }
}
