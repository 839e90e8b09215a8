//! The `CUresult` codes the double returns, with the driver's names and descriptions.
//!
//! Only codes listed here are ever returned (cudarc reads results as a Rust enum, so
//! an unknown value would be undefined behaviour on its side); a failure asked for
//! with an unknown code is reported as `CUDA_ERROR_UNKNOWN`. Some codes are listed
//! only so that a failure can be asked for with them (`CUDA_ERROR_NOT_READY`,
//! `CUDA_ERROR_ILLEGAL_ADDRESS`): the double itself never returns them, as its work is
//! done when a call returns and it refuses a copy the real driver would fault on.

pub(crate) type CuResult = u32;

pub(crate) const SUCCESS: CuResult = 0;
pub(crate) const INVALID_VALUE: CuResult = 1;
pub(crate) const OUT_OF_MEMORY: CuResult = 2;
pub(crate) const NOT_INITIALIZED: CuResult = 3;
pub(crate) const INVALID_DEVICE: CuResult = 101;
pub(crate) const INVALID_CONTEXT: CuResult = 201;
pub(crate) const INVALID_HANDLE: CuResult = 400;
pub(crate) const HOST_MEMORY_ALREADY_REGISTERED: CuResult = 712;
pub(crate) const HOST_MEMORY_NOT_REGISTERED: CuResult = 713;
pub(crate) const NOT_SUPPORTED: CuResult = 801;
pub(crate) const UNKNOWN: CuResult = 999;

/// (code, name, description), NUL-terminated for handing out as C strings.
const TABLE: &[(CuResult, &str, &str)] = &[
    (SUCCESS, "CUDA_SUCCESS\0", "no error\0"),
    (INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE\0", "invalid argument\0"),
    (OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY\0", "out of memory\0"),
    (
        NOT_INITIALIZED,
        "CUDA_ERROR_NOT_INITIALIZED\0",
        "initialization error\0",
    ),
    (
        100,
        "CUDA_ERROR_NO_DEVICE\0",
        "no CUDA-capable device is detected\0",
    ),
    (
        INVALID_DEVICE,
        "CUDA_ERROR_INVALID_DEVICE\0",
        "invalid device ordinal\0",
    ),
    (
        INVALID_CONTEXT,
        "CUDA_ERROR_INVALID_CONTEXT\0",
        "invalid device context\0",
    ),
    (
        304,
        "CUDA_ERROR_OPERATING_SYSTEM\0",
        "OS call failed or operation not supported on this OS\0",
    ),
    (
        HOST_MEMORY_ALREADY_REGISTERED,
        "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED\0",
        "part or all of the requested memory range is already mapped\0",
    ),
    (
        HOST_MEMORY_NOT_REGISTERED,
        "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED\0",
        "pointer does not correspond to a registered memory region\0",
    ),
    (
        INVALID_HANDLE,
        "CUDA_ERROR_INVALID_HANDLE\0",
        "invalid resource handle\0",
    ),
    (600, "CUDA_ERROR_NOT_READY\0", "device not ready\0"),
    (
        700,
        "CUDA_ERROR_ILLEGAL_ADDRESS\0",
        "an illegal memory access was encountered\0",
    ),
    (800, "CUDA_ERROR_NOT_PERMITTED\0", "operation not permitted\0"),
    (
        NOT_SUPPORTED,
        "CUDA_ERROR_NOT_SUPPORTED\0",
        "operation not supported\0",
    ),
    (UNKNOWN, "CUDA_ERROR_UNKNOWN\0", "unknown error\0"),
];

/// The driver's name and description of `code`, NUL-terminated.
pub(crate) fn describe(code: CuResult) -> Option<(&'static str, &'static str)> {
    TABLE.iter().find(|e| e.0 == code).map(|e| (e.1, e.2))
}

/// `code` if the double may return it, else `CUDA_ERROR_UNKNOWN`.
pub(crate) fn known(code: CuResult) -> CuResult {
    if describe(code).is_some() { code } else { UNKNOWN }
}

/// The name without its NUL, for the log.
pub(crate) fn name(code: CuResult) -> &'static str {
    describe(code).map_or("?", |(n, _)| n.trim_end_matches('\0'))
}
