//! Inter-process CUDA events: made by one process ([`IpcEvent`]), opened by others
//! from their 64-byte handle ([`OpenedEvent`]), recorded on and waited for by streams.
//! Nothing here waits on the host except [`IpcEvent::synchronize`], which says so.
//!
//! The driver does not open a process's own IPC handles, so events made here are
//! kept in a process-local table by handle (weakly): opening one of them shares the
//! event itself, with no driver call.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use iox_mempool::fork::{ForkLock, Rank};

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::{CudaError, check};
use crate::stream::Stream;

/// The handle of an inter-process event (`CUipcEventHandle`, 64 bytes), as another
/// process opens it.
///
/// ```
/// let h = iox_cuda::EventHandle([7; 64]);
/// assert_eq!(iox_cuda::EventHandle::from_words(h.to_words()), h);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventHandle(pub [u8; 64]);

impl EventHandle {
    /// The handle as 8 little-endian words (to store in shared memory as atomics).
    pub fn to_words(&self) -> [u64; 8] {
        std::array::from_fn(|i| u64::from_le_bytes(self.0[i * 8..i * 8 + 8].try_into().expect("8 bytes")))
    }

    /// The handle from [`to_words`](Self::to_words)' words.
    pub fn from_words(words: [u64; 8]) -> Self {
        let mut bytes = [0u8; 64];
        for (i, w) in words.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        Self(bytes)
    }
}

/// A live event and its context; destroyed when the last holder goes.
#[derive(Debug)]
struct Event {
    raw: sys::CUevent,
    ctx: Arc<Context>,
}
// SAFETY: an event handle may be used from any thread; the driver is thread-safe for
// record, wait, synchronize and destroy.
unsafe impl Send for Event {}
// SAFETY: as above; the handle is only passed to the driver.
unsafe impl Sync for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.run(|| {
            // SAFETY: destroys a live event once (its last holder's drop).
            check("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(self.raw) })
        });
    }
}

/// Events made in this process, by handle.
static OWN: ForkLock<Option<HashMap<[u8; 64], Weak<Event>>>> = ForkLock::new(Rank::CudaEvents, None);

/// An inter-process event this process made (`CU_EVENT_INTERPROCESS |
/// CU_EVENT_DISABLE_TIMING`), destroyed when dropped.
///
/// ```
/// match iox_cuda::IpcEvent::new(0) {
///     Ok(e) => println!("handle starts {:?}", &e.handle().0[..4]),
///     Err(e) => println!("no CUDA device here: {e}"),
/// }
/// ```
#[derive(Debug)]
pub struct IpcEvent {
    event: Arc<Event>,
    handle: EventHandle,
}

impl IpcEvent {
    /// A new inter-process event on device `ordinal`, with its handle.
    pub fn new(ordinal: i32) -> Result<Self, CudaError> {
        let ctx = Context::retain(ordinal)?;
        let flags = sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32
            | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        let mut raw = std::ptr::null_mut();
        ctx.run(|| {
            // SAFETY: a context is current; valid out-pointer.
            check("cuEventCreate", unsafe { sys::cuEventCreate(&mut raw, flags) })
        })?;
        let event = Arc::new(Event { raw, ctx });
        let mut handle = sys::CUipcEventHandle { reserved: [0; 64] };
        event.ctx.run(|| {
            // SAFETY: the event is alive and interprocess; valid out-pointer.
            check("cuIpcGetEventHandle", unsafe {
                sys::cuIpcGetEventHandle(&mut handle, event.raw)
            })
        })?;
        let handle = EventHandle(handle.reserved.map(|b| b as u8));
        let mut own = OWN.lock();
        let own = own.get_or_insert_with(HashMap::new);
        own.retain(|_, e| e.strong_count() > 0);
        own.insert(handle.0, Arc::downgrade(&event));
        Ok(Self { event, handle })
    }

    /// Its handle, for other processes.
    pub fn handle(&self) -> EventHandle {
        self.handle
    }

    /// Records it on `stream`: it completes when the work enqueued there so far does.
    pub fn record(&self, stream: Stream) -> Result<(), CudaError> {
        record(&self.event, stream)
    }

    /// Makes `stream` wait for its last record.
    pub fn wait(&self, stream: Stream) -> Result<(), CudaError> {
        wait(&self.event, stream)
    }

    /// Waits **on the host** until its last record completed (for a port that goes
    /// away, once; never per sample).
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.event.ctx.run(|| {
            // SAFETY: the event is alive.
            check("cuEventSynchronize", unsafe {
                sys::cuEventSynchronize(self.event.raw)
            })
        })
    }
}

/// Another process's inter-process event, opened here (closed when dropped), or one
/// of this process's own, shared.
#[derive(Debug)]
pub struct OpenedEvent {
    event: Arc<Event>,
}

impl OpenedEvent {
    /// Opens `handle` on device `ordinal` (an event of this process: shared, with no
    /// driver call).
    pub fn open(ordinal: i32, handle: &EventHandle) -> Result<Self, CudaError> {
        let own = OWN.lock();
        if let Some(event) = own
            .as_ref()
            .and_then(|m| m.get(&handle.0))
            .and_then(Weak::upgrade)
        {
            return Ok(Self { event });
        }
        drop(own);
        let ctx = Context::retain(ordinal)?;
        let raw_handle = sys::CUipcEventHandle {
            reserved: handle.0.map(|b| b as std::ffi::c_char),
        };
        let mut raw = std::ptr::null_mut();
        ctx.run(|| {
            // SAFETY: a context is current; valid out-pointer; the handle is data.
            check("cuIpcOpenEventHandle", unsafe {
                sys::cuIpcOpenEventHandle(&mut raw, raw_handle)
            })
        })?;
        Ok(Self {
            event: Arc::new(Event { raw, ctx }),
        })
    }

    /// Makes `stream` wait for the event's last record.
    pub fn wait(&self, stream: Stream) -> Result<(), CudaError> {
        wait(&self.event, stream)
    }

    /// Records it on `stream`.
    pub fn record(&self, stream: Stream) -> Result<(), CudaError> {
        record(&self.event, stream)
    }
}

fn record(event: &Event, stream: Stream) -> Result<(), CudaError> {
    event.ctx.run(|| {
        // SAFETY: the event is alive; the stream is the caller's (Stream's contract).
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(event.raw, stream.as_raw().cast())
        })
    })
}

fn wait(event: &Event, stream: Stream) -> Result<(), CudaError> {
    event.ctx.run(|| {
        // SAFETY: as for `record`; flags 0.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(stream.as_raw().cast(), event.raw, 0)
        })
    })
}
