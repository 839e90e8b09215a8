//! Device-memory pools (`MemoryType::CudaDevice`) as the core makes and opens them
//! (`memory`: allocating the pool's GPU memory, exporting and importing it). The device
//! ports are above the core (`iox_service`).

pub mod memory;
