//! The CUDA pinner without and with a GPU. Without a driver (CI) every entry point
//! returns a typed error and nothing panics. With one, a pool is registered once,
//! gets a device address, and is unregistered on drop; otherwise that test says why
//! it skips.

use std::sync::Arc;

use iox_cuda::{CudaError, CudaPinner};
use iox_mempool::{MemoryType, Pool, PoolLayout};

fn driver_present() -> bool {
    !matches!(CudaPinner::new(0), Err(CudaError::NoDriver))
}

#[test]
fn without_a_driver_every_entry_point_is_a_typed_error() {
    if driver_present() {
        println!("SKIP: a CUDA driver is present; this test covers machines without one");
        return;
    }
    assert_eq!(CudaPinner::new(0).unwrap_err(), CudaError::NoDriver);
    assert_eq!(iox_cuda::register(0).unwrap_err(), CudaError::NoDriver);
    assert_eq!(
        iox_cuda::device_pointer(std::ptr::null()).unwrap_err(),
        CudaError::NotRegistered
    );
    assert!(CudaError::NoDriver.to_string().contains("libcuda"));
    // The pool still works unpinned, and pinning it reports the missing pinner.
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(4096, 4)]).unwrap();
    let pool = Arc::new(Pool::create(dir.path(), "gpu", &layout, MemoryType::CudaPinned, 0o600).unwrap());
    assert!(pool.pin().is_err());
    let mut hint = 0;
    let h = pool
        .loan(100, &mut hint, iox_mempool::Owner::new(0).unwrap())
        .unwrap();
    pool.release(h, iox_mempool::Owner::new(0).unwrap()).unwrap();
}

#[test]
fn with_a_gpu_a_pool_is_registered_once_and_mapped_for_the_device() {
    if let Err(e) = CudaPinner::new(0) {
        println!("SKIP: no usable CUDA device: {e}");
        return;
    }
    iox_cuda::register(0).unwrap();
    assert!(matches!(
        iox_cuda::register(1),
        Err(CudaError::OtherDeviceRegistered { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(8 << 20, 4)]).unwrap();
    let pool = Arc::new(Pool::create(dir.path(), "gpu", &layout, MemoryType::CudaPinned, 0o600).unwrap());
    let base = pool.payload_region().addr();
    assert!(
        iox_cuda::device_pointer(base).is_err(),
        "not registered before pinning"
    );
    let a = pool.pin().unwrap();
    let b = pool.pin().unwrap();
    assert_eq!(iox_mempool::pin::pin_count(base, pool.payload_region().len()), 2);
    let dptr = iox_cuda::device_pointer(base).unwrap();
    assert_ne!(dptr, 0);
    // The device reads the host bytes in place through that address.
    let mut hint = 0;
    let h = pool
        .loan(8 << 20, &mut hint, iox_mempool::Owner::new(0).unwrap())
        .unwrap();
    let (ptr, len) = pool.chunk(h).unwrap();
    // SAFETY: the chunk is ours, len bytes.
    let chunk = unsafe {
        ptr.write_bytes(0x5A, len);
        std::slice::from_raw_parts(ptr, len)
    };
    let dev = iox_cuda::device_pointer(ptr).unwrap();
    let buf = iox_cuda::DeviceBuffer::new(0, 16).unwrap();
    let mut back = [0u8; 16];
    buf.copy_device_to_host(dev, &mut back).unwrap();
    assert_eq!(back, [0x5A; 16]);
    // Copies from the registered pool are much faster than from pageable memory.
    let mut device = iox_cuda::DeviceBuffer::new(0, len).unwrap();
    let time = |src: &[u8], device: &mut iox_cuda::DeviceBuffer| {
        device.copy_from_host(src).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..20 {
            device.copy_from_host(src).unwrap();
        }
        t.elapsed()
    };
    let pageable = vec![0x5Au8; len];
    let (pinned_t, pageable_t) = (time(chunk, &mut device), time(&pageable, &mut device));
    println!("H2D 8 MiB: pinned pool {pinned_t:?} vs pageable {pageable_t:?} for 20 copies");
    assert!(
        pageable_t >= pinned_t * 2,
        "pinned {pinned_t:?} not 2x faster than pageable {pageable_t:?}"
    );
    pool.release(h, iox_mempool::Owner::new(0).unwrap()).unwrap();
    drop((a, b));
    assert!(
        iox_cuda::device_pointer(base).is_err(),
        "unregistered after the last guard"
    );
}
