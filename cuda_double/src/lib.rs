//! # iox_cuda_double: a test double of the CUDA driver
//!
//! **Test-only. Never installed, never shipped, not a default member of the
//! workspace.** It is built as a `cdylib` and put under the names cudarc loads the
//! driver by (`libcuda.so`, `libcuda.so.1`) in a directory on `LD_LIBRARY_PATH` of a
//! test's child processes, so that iox's GPU paths (register, map, unregister, device
//! pointers, copies, device memory shared between processes, streams and events) run
//! on machines without a GPU. `iox_testkit::cuda_double` sets that up and reads the
//! call log.
//!
//! ## What it keeps of the real driver
//!
//! The documented semantics of the entry points iox uses, per process (like the real
//! driver, whose state dies with the process):
//! - `cuInit` first (anything else before it is `CUDA_ERROR_NOT_INITIALIZED`), device
//!   count, handles, attributes (reporting support for VMM, POSIX-descriptor handles
//!   and IPC events) and name;
//! - primary contexts retained and released with a count (a released one is unusable),
//!   created contexts, and a **per-thread** stack of current contexts
//!   (`cuCtxSetCurrent` replaces its top, push/pop stack on it);
//! - `cuMemHostRegister` with a table of registered ranges: a current context is
//!   required; an overlap with a registered range is
//!   `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` (712); a range not fully mapped, or
//!   mapped read-only without `CU_MEMHOSTREGISTER_READ_ONLY`, is
//!   `CUDA_ERROR_INVALID_VALUE` (the real driver does not document which code; it
//!   refuses); `READ_ONLY` on a device without
//!   `CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED` is
//!   `CUDA_ERROR_NOT_SUPPORTED`, as documented;
//! - `cuMemHostUnregister` of the base of a registration (anything else is
//!   `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED`, 713), whose range must still be mapped;
//! - `cuMemHostGetDevicePointer` and `cuPointerGetAttribute` (context, memory type,
//!   device and host pointer, device ordinal) for registered and allocated memory;
//! - device memory (`cuMemAlloc`, `cuMemFree`) as host allocations it owns, and
//!   synchronous copies host<->device, device addresses being the registrations'
//!   mapped ranges and those allocations;
//! - `cuGetErrorName` and `cuGetErrorString` for every code it returns;
//! - device UUIDs (`cuDeviceGetUuid`, `cuDeviceGetUuid_v2`);
//! - virtual memory management: `cuMemGetAllocationGranularity`, `cuMemCreate`,
//!   `cuMemExportToShareableHandle` / `cuMemImportFromShareableHandle` (POSIX file
//!   descriptors only), `cuMemRelease`, `cuMemAddressReserve`, `cuMemAddressFree`,
//!   `cuMemMap`, `cuMemUnmap`, `cuMemSetAccess`. An allocation is a memfd; its export
//!   is a new descriptor of it (the caller's), so a process that imports it and maps
//!   it sees the same bytes; a mapping is an `mmap(MAP_SHARED)` of the memfd, behind a
//!   made-up device range, accessible only once `cuMemSetAccess` gave the copying
//!   context's device access (see `vmm`);
//! - copies host<->device and device<->device, and byte fills (`cuMemcpy*_v2`, their
//!   `Async` forms, `cuMemsetD8_v2`, `cuMemsetD8Async`);
//! - streams (`cuStreamCreate`, `cuStreamDestroy_v2`, `cuStreamSynchronize`,
//!   `cuStreamQuery`, `cuStreamWaitEvent`; the default streams 0, legacy and
//!   per-thread need no creating) and events (`cuEventCreate`, `cuEventDestroy_v2`,
//!   `cuEventRecord`, `cuEventQuery`, `cuEventSynchronize`), with IPC event handles
//!   (`cuIpcGetEventHandle`, `cuIpcOpenEventHandle`) that carry the creator's pid and
//!   the event's id, which every log line about an event shows (`event=PID:ID`).
//!
//! Device addresses are made up, above the user half of the x86-64 address space, so
//! they never equal the host address of the same bytes: code that confuses the two
//! fails its checks here.
//!
//! ## Control (environment of the process that loads it)
//!
//! - `IOX_CUDA_DOUBLE_LOG`: a file every call is appended to, one line per call,
//!   `pid=.. tid=.. call=NAME arg=value ... result=CODE [out=value ...]` (one
//!   `write` with `O_APPEND`, so processes can share one log);
//! - `IOX_CUDA_DOUBLE_DEVICES`: how many devices (default 1);
//! - `IOX_CUDA_DOUBLE_UUIDS`: comma-separated UUIDs, 32 hex digits each (dashes and a
//!   `GPU-` prefix allowed): ordinal `i` gets entry `i`, so ordinal 0 of two processes
//!   can be different GPUs, as with `CUDA_VISIBLE_DEVICES`; an ordinal without a
//!   (valid) entry gets the default, the bytes `ioxdbl`, its ordinal as 4
//!   little-endian bytes, and zeros;
//! - `IOX_CUDA_DOUBLE_READ_ONLY_REGISTER`: `0` makes the devices report no support
//!   for read-only registration (default `1`);
//! - `IOX_CUDA_DOUBLE_FAIL`: `CALL:CODE[:TIMES],...` fails the first `TIMES` (default:
//!   every) calls of `CALL` with `CODE`, without any effect (e.g.
//!   `cuMemHostRegister_v2:2` is out of memory on every registration).
//!
//! ## Decisions
//!
//! - cudarc resolves each driver symbol lazily, on its first call, so the double
//!   exports what iox calls plus a few neighbours as logged stubs returning
//!   `CUDA_ERROR_NOT_SUPPORTED`; a symbol that is missing makes cudarc panic naming it.
//! - One global lock over the whole state: the double is for correctness, not speed.
//! - Pointers handed in are checked against `/proc/self/maps` before it touches them,
//!   so a wrong address is an error code, as with the driver, not a crash of the test.
//! - Everything completes synchronously: a copy or fill on a stream is done before the
//!   call returns, a stream is always idle, an event always complete (also one never
//!   recorded, as the reference says), a wait never waits. Tests check the order of
//!   work in the log instead.
//! - Allocation granularity is 2 MiB, minimum and recommended alike (what GPUs report
//!   for pinned device memory). Sizes and offsets of allocations and mappings must be
//!   multiples of it; reservations, as the reference says, of the page size.
//! - A copy touching a VMM range without access for the current context's device is
//!   `CUDA_ERROR_INVALID_VALUE` where the real driver faults
//!   (`CUDA_ERROR_ILLEGAL_ADDRESS`, which poisons the context); a copy must lie within
//!   one mapping (the real driver allows spanning adjacent ones).
//! - `cuMemAddressFree` of a range with something still mapped in it is
//!   `CUDA_ERROR_INVALID_VALUE`: the reference requires unmapping first.
//! - An import checks the descriptor is one of the double's allocation memfds (by its
//!   name in `/proc/self/fd`) of a granularity-multiple size; anything else, or a
//!   closed descriptor, is `CUDA_ERROR_INVALID_VALUE`.
//! - Opening an IPC event handle made in the same process is
//!   `CUDA_ERROR_INVALID_CONTEXT`, one without the double's magic
//!   `CUDA_ERROR_INVALID_VALUE`.

mod config;
mod events;
mod exports;
mod log;
mod maps;
mod result;
mod state;
mod vmm;
