//! Making, and importing, the device memory of a `CudaDevice` service's pool.
//!
//! The creator allocates it on the GPU the builder named (`cuda_device`, default 0)
//! with the driver's virtual memory management, exportable as a descriptor, and
//! records the GPU's UUID, the allocation's length and a random token in the static
//! config. An opener that got the descriptor handed over (`crate::handover`) finds the
//! GPU with that UUID among its visible devices, imports and maps it, and reads the
//! token back: only then is it this service's memory. `iox_cuda` keeps one import per
//! process per allocation, so every open of the service in one process shares it.
//!
//! Built without the `cuda` feature, both steps are a clear error: such a process
//! cannot use device memory, and nothing is copied to the host instead.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use iox_mempool::DevicePayload;

use crate::static_config::DeviceIdentity;

/// The identity a builder records before creation: the GPU of `ordinal` (its UUID),
/// a fresh token, and the allocation length to be fixed by [`allocate`].
pub fn planned(ordinal: i32, payload_len: usize) -> Result<DeviceIdentity, String> {
    let uuid = uuid_of(ordinal)?;
    let mut token = [0u8; 16];
    token[..8].copy_from_slice(&iox_mempool::random::random_u64().to_le_bytes());
    token[8..].copy_from_slice(&iox_mempool::random::random_u64().to_le_bytes());
    Ok(DeviceIdentity {
        uuid,
        len: payload_len as u64 + 16,
        token,
    })
}

#[cfg(feature = "cuda")]
fn uuid_of(ordinal: i32) -> Result<[u8; 16], String> {
    iox_cuda::device_uuid(ordinal).map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn uuid_of(_ordinal: i32) -> Result<[u8; 16], String> {
    Err(NO_CUDA.into())
}

#[cfg(not(feature = "cuda"))]
const NO_CUDA: &str = "this program was built without iox_service's `cuda` feature";

/// The local ordinal of the GPU `id` names, or why there is none.
#[cfg(feature = "cuda")]
pub fn ordinal(id: &DeviceIdentity) -> Result<i32, String> {
    match iox_cuda::ordinal_of(&id.uuid) {
        Ok(Some(o)) => Ok(o),
        Ok(None) => {
            Err("no visible CUDA device has this UUID (another GPU, or CUDA_VISIBLE_DEVICES hides it)".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The local ordinal of the GPU `id` names, or why there is none.
#[cfg(not(feature = "cuda"))]
pub fn ordinal(_id: &DeviceIdentity) -> Result<i32, String> {
    Err(NO_CUDA.into())
}

/// Allocates the pool's device memory for `planned` (see [`planned`]) and marks it
/// with the token; returns it with the identity to record (its real length).
#[cfg(feature = "cuda")]
pub fn allocate(
    planned: DeviceIdentity,
    payload_len: usize,
) -> Result<(Arc<dyn DevicePayload>, DeviceIdentity), String> {
    let ordinal = ordinal(&planned)?;
    let memory =
        iox_cuda::DeviceMemory::create(ordinal, payload_len, planned.token).map_err(|e| e.to_string())?;
    let id = DeviceIdentity {
        len: memory.len() as u64,
        ..planned
    };
    Ok((memory, id))
}

/// Allocates the pool's device memory (not in this build).
#[cfg(not(feature = "cuda"))]
pub fn allocate(
    _planned: DeviceIdentity,
    _payload_len: usize,
) -> Result<(Arc<dyn DevicePayload>, DeviceIdentity), String> {
    Err(NO_CUDA.into())
}

/// Imports the descriptor a holder handed over as the memory `id` names and checks
/// its token.
#[cfg(feature = "cuda")]
pub fn import(
    fd: OwnedFd,
    id: &DeviceIdentity,
    payload_len: usize,
) -> Result<Arc<dyn DevicePayload>, String> {
    let ordinal = ordinal(id)?;
    let memory = iox_cuda::DeviceMemory::import(fd, ordinal, id.len as usize, payload_len, id.token)
        .map_err(|e| e.to_string())?;
    Ok(memory)
}

/// Imports handed-over device memory (not in this build).
#[cfg(not(feature = "cuda"))]
pub fn import(
    _fd: OwnedFd,
    _id: &DeviceIdentity,
    _payload_len: usize,
) -> Result<Arc<dyn DevicePayload>, String> {
    Err(NO_CUDA.into())
}
