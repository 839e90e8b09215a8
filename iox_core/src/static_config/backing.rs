//! Where a service's pool payload lives, as its static config records it: a named
//! file, a sealed memfd (its size and inode, so an opener knows the descriptor it is
//! handed is this service's), or GPU memory (the device's UUID and an identity mark
//! after the payload).

use serde::{Deserialize, Serialize};

/// Where a service's pool payload lives, as recorded in its static config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PayloadBacking {
    /// The named file `iox_<H>.pool` under the root.
    File,
    /// A sealed memfd of this size and inode, handed over by a participant process
    /// (see the `handover` module).
    Memfd(iox_mempool::MemfdIdentity),
    /// Memory of one GPU (the `CudaDevice` memory type), exported by the driver as a
    /// descriptor and handed over by a participant process like a memfd.
    CudaDevice(DeviceIdentity),
}

/// Which device memory a `CudaDevice` service's pool is: recorded by its creator.
///
/// The GPU is named by its UUID, not an ordinal: ordinals differ between processes
/// with different `CUDA_VISIBLE_DEVICES`. The allocation is `len` bytes (the payload
/// rounded up to the driver's granularity, with room for the token); `token` is
/// written by the creator right after the payload, and an importer reads it back to
/// know that the descriptor it was handed is this service's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceIdentity {
    /// The GPU's UUID (the 16 bytes `cuDeviceGetUuid` reports).
    pub uuid: [u8; 16],
    /// Bytes of the allocation.
    pub len: u64,
    /// The identity mark after the payload.
    pub token: [u8; 16],
}

impl DeviceIdentity {
    /// The UUID as `nvidia-smi -L` prints it (`GPU-xxxxxxxx-xxxx-...`).
    pub fn uuid_text(&self) -> String {
        let h: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "GPU-{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )
    }
}

impl PayloadBacking {
    /// The kind of backing.
    pub fn kind(&self) -> iox_mempool::Backing {
        match self {
            Self::File => iox_mempool::Backing::File,
            Self::Memfd(_) | Self::CudaDevice(_) => iox_mempool::Backing::Memfd,
        }
    }
}
