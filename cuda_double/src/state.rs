//! The driver's state in this process: initialisation, contexts, the table of
//! registered host ranges, device allocations, each thread's current contexts, and
//! (in their own modules) VMM and stream/event state.
//!
//! Invariants:
//! - Registered ranges never overlap (a register that would overlap is refused).
//! - Every registration and allocation owns a distinct device address range, above
//!   [`DEVICE_SPACE`], that never overlaps another's (nor VMM reservations, which
//!   start at `crate::vmm::RESERVED_SPACE`, 16 TiB higher).
//! - A context handle is a made-up non-null address, never dereferenced by anyone:
//!   primary context of device `d` is `PRIMARY + d * 16`, created contexts follow
//!   [`CREATED`].

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use crate::result::{CuResult, INVALID_CONTEXT, NOT_INITIALIZED};

/// Start of the made-up device address space (above every user-space host address).
pub(crate) const DEVICE_SPACE: u64 = 0xd000_0000_0000;
const PRIMARY: usize = 0x1000;
const CREATED: usize = 0x8000;

/// Whether `ctx` is a primary context's handle.
pub(crate) fn is_primary(ctx: usize) -> bool {
    (PRIMARY..CREATED).contains(&ctx)
}

/// A host range registered with `cuMemHostRegister`.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) len: usize,
    pub(crate) flags: u32,
    /// The context current when it was registered.
    pub(crate) ctx: usize,
    /// Its device address.
    pub(crate) device: u64,
}

/// A context.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    pub(crate) device: i32,
    /// False once destroyed (created) or released to a count of 0 (primary).
    pub(crate) alive: bool,
}

/// The whole state, behind one lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) initialised: bool,
    /// Retain count of each device's primary context.
    pub(crate) primary_retains: HashMap<i32, u64>,
    pub(crate) contexts: HashMap<usize, Context>,
    next_created: usize,
    /// Host base address -> registration.
    pub(crate) registrations: BTreeMap<usize, Registration>,
    /// Device base address -> the host storage of a device allocation.
    pub(crate) allocations: BTreeMap<u64, Box<[u8]>>,
    next_device: u64,
    /// Virtual memory management (see `crate::vmm`).
    pub(crate) vmm: crate::vmm::Vmm,
    /// Streams and events (see `crate::events`).
    pub(crate) events: crate::events::Events,
}

impl State {
    /// `NOT_INITIALIZED` until `cuInit` succeeded.
    pub(crate) fn check_init(&self) -> Result<(), CuResult> {
        if self.initialised {
            Ok(())
        } else {
            Err(NOT_INITIALIZED)
        }
    }

    /// The handle of device `device`'s primary context (made on first use).
    pub(crate) fn primary(&mut self, device: i32) -> usize {
        let handle = PRIMARY + device as usize * 16;
        self.contexts
            .entry(handle)
            .or_insert(Context { device, alive: false });
        handle
    }

    /// A new created context of `device`.
    pub(crate) fn create(&mut self, device: i32) -> usize {
        self.next_created += 1;
        let handle = CREATED + self.next_created * 16;
        self.contexts.insert(handle, Context { device, alive: true });
        handle
    }

    /// The live context `ctx`, or `INVALID_CONTEXT`.
    pub(crate) fn live(&self, ctx: usize) -> Result<Context, CuResult> {
        match self.contexts.get(&ctx) {
            Some(c) if c.alive => Ok(*c),
            _ => Err(INVALID_CONTEXT),
        }
    }

    /// The calling thread's current context, which must be live.
    pub(crate) fn current(&self) -> Result<(usize, Context), CuResult> {
        let ctx = current().ok_or(INVALID_CONTEXT)?;
        Ok((ctx, self.live(ctx)?))
    }

    /// A fresh device address range of `len` bytes.
    pub(crate) fn device_range(&mut self, len: usize) -> u64 {
        const ALIGN: u64 = 2 << 20;
        let at = DEVICE_SPACE + self.next_device;
        self.next_device += (len as u64).div_ceil(ALIGN) * ALIGN + ALIGN;
        at
    }

    /// The registration containing host address `addr`: (base, registration).
    pub(crate) fn registration_at(&self, addr: usize) -> Option<(usize, &Registration)> {
        let (base, r) = self.registrations.range(..=addr).next_back()?;
        (addr < base + r.len).then_some((*base, r))
    }

    /// The host bytes behind device range `dev..dev + len`, and whether the device may
    /// write them: inside one registration (its host range), one allocation, or one
    /// VMM mapping the current context's device was given access to (read access to
    /// read, read-write to write; see `crate::vmm`). `None`: no such bytes, which the
    /// callers report as `CUDA_ERROR_INVALID_VALUE` (where the real driver faults on
    /// a VMM range without access, `CUDA_ERROR_ILLEGAL_ADDRESS`, the double refuses).
    pub(crate) fn resolve_device(&mut self, dev: u64, len: usize) -> Option<(*mut u8, bool)> {
        let device = self.current().ok().map(|(_, c)| c.device);
        if let Some(found) = self.vmm.resolve(dev, len, device) {
            return found;
        }
        let end = dev.checked_add(len as u64)?;
        for (base, r) in &self.registrations {
            if r.device <= dev && end <= r.device + r.len as u64 {
                let host = base + (dev - r.device) as usize;
                return Some((host as *mut u8, r.flags & READ_ONLY == 0));
            }
        }
        let (base, storage) = self.allocations.range_mut(..=dev).next_back()?;
        let offset = (dev - base) as usize;
        (offset.checked_add(len)? <= storage.len()).then(|| (storage[offset..].as_mut_ptr(), true))
    }
}

/// `CU_MEMHOSTREGISTER_*` flags.
pub(crate) const PORTABLE: u32 = 1;
pub(crate) const DEVICEMAP: u32 = 2;
pub(crate) const IOMEMORY: u32 = 4;
pub(crate) const READ_ONLY: u32 = 8;

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// Runs `f` on the state, under its lock.
pub(crate) fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    let mut guard: MutexGuard<'_, Option<State>> = STATE.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(State::default))
}

thread_local! {
    /// This thread's context stack; its top is the current context.
    static STACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// This thread's current context.
pub(crate) fn current() -> Option<usize> {
    STACK.with(|s| s.borrow().last().copied())
}

/// Runs `f` on this thread's context stack.
pub(crate) fn stack<T>(f: impl FnOnce(&mut Vec<usize>) -> T) -> T {
    STACK.with(|s| f(&mut s.borrow_mut()))
}
