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
        iox_testkit::skip(
            "without_a_driver_every_entry_point_is_a_typed_error",
            iox_testkit::REQUIRE_NO_GPU,
            "a CUDA driver is present; this test covers machines without one",
        );
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
    pool.book()
        .release(h, iox_mempool::Owner::new(0).unwrap())
        .unwrap();
}

#[test]
fn with_a_gpu_a_pool_is_registered_once_and_mapped_for_the_device() {
    if let Err(e) = CudaPinner::new(0) {
        iox_testkit::skip(
            "with_a_gpu_a_pool_is_registered_once_and_mapped_for_the_device",
            iox_testkit::REQUIRE_GPU,
            format!("no usable CUDA device: {e}"),
        );
        return;
    }
    iox_cuda::register(0).unwrap();
    assert!(matches!(
        iox_cuda::register(1),
        Err(CudaError::OtherDeviceRegistered { .. })
    ));
    // On tmpfs: Linux refuses device pins of shared pages of files on disk
    // filesystems (iox says so: `PinError::NotShmem`).
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
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
    // A whole-chunk copy from the registered pool reaches the device intact. How fast
    // is not asserted (a speed ratio depends on the machine and its load): the
    // gpu_pinned example prints the pinned copy rate; a pinned-vs-pageable comparison
    // belongs in benches/.
    let mut device = iox_cuda::DeviceBuffer::new(0, len).unwrap();
    device.copy_from_host(chunk).unwrap();
    let mut tail = [0u8; 16];
    device
        .copy_device_to_host(device.device_ptr() + (len - 16) as u64, &mut tail)
        .unwrap();
    assert_eq!(tail, [0x5A; 16]);
    pool.book()
        .release(h, iox_mempool::Owner::new(0).unwrap())
        .unwrap();
    drop((a, b));
    assert!(
        iox_cuda::device_pointer(base).is_err(),
        "unregistered after the last guard"
    );
}
