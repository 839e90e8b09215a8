//! Device-memory services (`MemoryType::CudaDevice`): the pool is memory of one GPU,
//! and samples are device addresses handed between processes in stream order.
//!
//! - [`memory`]: making the pool's device memory and importing it (once per process).
//! - `events` (with the `cuda` feature): the per-chunk inter-process events.
//! - `publisher`, `subscriber` (with the `cuda` feature): the device ports.
//!
//! Host ports of a device service are refused (`PortCreateError::DeviceMemory`), so
//! safe code never reads or writes GPU memory through a host address.

pub(crate) mod memory;

#[cfg(feature = "cuda")]
pub(crate) mod events;
#[cfg(feature = "cuda")]
pub(crate) mod publisher;
#[cfg(feature = "cuda")]
pub(crate) mod subscriber;

/// This process's ordinal of the GPU the service's memory is on.
#[cfg(feature = "cuda")]
pub(crate) fn service_ordinal(service: &crate::service::ServiceShared) -> Result<i32, String> {
    match &service.config.backing {
        crate::static_config::PayloadBacking::CudaDevice(id) => memory::ordinal(id),
        _ => Err("the service's memory is not device memory".into()),
    }
}
