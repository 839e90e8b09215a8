//! Entry points next to the ones iox uses, exported so that a program reaching for
//! them gets a logged `CUDA_ERROR_NOT_SUPPORTED` (a limit of the double) instead of
//! cudarc's panic over a missing symbol. Their arguments are not looked at.

use super::run;
use crate::log::Call;
use crate::result::{CuResult, NOT_SUPPORTED};

macro_rules! not_supported {
    ($($name:ident),* $(,)?) => {$(
        /// Not supported by the double: logs the call, returns `CUDA_ERROR_NOT_SUPPORTED`.
        ///
        /// # Safety
        ///
        /// None: the arguments are ignored.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() -> CuResult {
            run(Call::new(stringify!($name)), |_| Err(NOT_SUPPORTED))
        }
    )*};
}

not_supported!(
    cuMemHostAlloc,
    cuMemHostGetFlags,
    cuMemAllocHost_v2,
    cuMemFreeHost,
    cuDevicePrimaryCtxGetState,
    cuDevicePrimaryCtxReset_v2,
    cuDevicePrimaryCtxSetFlags_v2,
    cuCtxSynchronize,
    cuModuleLoadData,
    cuLaunchKernel,
    cuDeviceTotalMem_v2,
    cuMemGetInfo_v2,
);
