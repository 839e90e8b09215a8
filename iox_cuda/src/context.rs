//! A retained primary context of one device, shared (`Arc`) by everything that
//! makes driver calls on that device, and released when the last holder goes. One
//! per device per process at a time: a process-local table keeps each weakly, so the
//! events, streams and memory of one device retain its context once.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use iox_mempool::fork::{ForkLock, Rank};

use cudarc::driver::sys;

use crate::driver::{self, CudaError, check};

/// Device `ordinal`'s primary context, retained for as long as this lives.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) ordinal: i32,
    pub(crate) device: sys::CUdevice,
    ctx: sys::CUcontext,
}

// SAFETY: a context handle may be made current on any thread; the driver is
// thread-safe for the calls made with it, and the handle is only read.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    /// Device `ordinal`'s primary context: the one this process holds already, or
    /// newly retained.
    pub(crate) fn retain(ordinal: i32) -> Result<Arc<Self>, CudaError> {
        static LIVE: ForkLock<Option<HashMap<i32, Weak<Context>>>> = ForkLock::new(Rank::CudaContexts, None);
        let mut live = LIVE.lock();
        let live = live.get_or_insert_with(HashMap::new);
        if let Some(ctx) = live.get(&ordinal).and_then(Weak::upgrade) {
            return Ok(ctx);
        }
        let ctx = Self::retain_new(ordinal)?;
        live.insert(ordinal, Arc::downgrade(&ctx));
        Ok(ctx)
    }

    fn retain_new(ordinal: i32) -> Result<Arc<Self>, CudaError> {
        let device = driver::device(ordinal)?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid device and out-pointer; released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, device)
        })?;
        Ok(Arc::new(Self { ordinal, device, ctx }))
    }

    /// Runs `f` with this context current (pushed, then popped).
    pub(crate) fn run<T>(&self, f: impl FnOnce() -> Result<T, CudaError>) -> Result<T, CudaError> {
        driver::in_context(self.ctx, f)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: balances the retain, after the last use (holders drop before).
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}
