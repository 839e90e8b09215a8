//! Device-memory services (`MemoryType::CudaDevice`): the pool is memory of one GPU,
//! and samples are device addresses handed between processes in stream order.
//!
//! - [`memory`]: making the pool's device memory and importing it (once per process).
//! - `events` (with the `cuda` feature): the per-chunk inter-process events.
//! - `publisher`, `subscriber` (with the `cuda` feature): the device ports, built from
//!   a `PubSubService<[T]>` with the builders at the end of this file.
//!
//! A device service is a tensor channel: its element type is its payload's (a
//! `PubSubService<[f32]>` carries `float32` tensors, a `[u8]` one bytes), and each
//! sample's shape and strides travel in the chunk's tensor record in host memory
//! (`iox_core::shm::tensor_record`), written at the loan (a 1-D tensor of the loaned
//! length unless the loan names a layout) and read by the subscriber's
//! `DeviceSample::tensor`, checked against the element type and the sample's bytes.
//! A service whose element is not a number (a struct) moves bytes only: its ports
//! loan and receive, and their tensor calls say it is no tensor service.
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

/// The service's tensor element type, or the error that says it carries no tensors
/// (its payload is not a slice of numbers, see `StaticConfig::tensor_element`).
#[cfg(feature = "cuda")]
pub(crate) fn tensor_element(
    service: &iox_core::shared::ServiceShared,
) -> Result<crate::tensor::DType, crate::tensor::TensorError> {
    service
        .config
        .tensor_element()
        .ok_or_else(|| crate::tensor::TensorError::NotATensorService {
            payload: service.config.payload.to_string(),
        })
}

#[cfg(feature = "cuda")]
impl<T: crate::ZeroCopySafe> crate::PubSubService<[T]> {
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
