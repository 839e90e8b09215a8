//! What every port kind shares once it has a slot: what a port that holds chunks keeps
//! of it ([`PortSlot`]) and the steps it leaves it by, owner bits, the journaled
//! send, draining, pinning the pool, waking receivers, and the error of port creation.
//! Taking the slot is [`SlotClaim`](crate::slot_claim::SlotClaim)'s (one guard for
//! every port kind), above recovery, which it runs first.
//!
//! A slot is claimed with a CAS of its `node` word from 0 to the claimer's node id;
//! the claimer bumps the generation in the state word (`CLAIMING`), fills in its pid,
//! prepares the slot and stores `ACTIVE`. Release goes through `CLOSING` (teardown)
//! to `FREE`, and the node word is cleared last. Claiming is lock-free; a slot whose
//! owner died stays taken until recovery ([`crate::recovery`]) frees it, which port
//! creation runs first.
//!
//! Owner bits: publisher slot `p` holds chunks under owner `p`, subscriber slot `s`
//! under owner `sending + s` (so a service has at most 47 ports).

use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use iox_mempool::{Bookkeeping, ChunkHandle, Located, MemoryType, Owner, PinError, PoolPin};
use thiserror::Error;

use crate::doorbell::{self, Ringer};
pub use crate::dynamic::active_count;
use crate::dynamic::{self, Dynamic, PortHeader};
use crate::queue::{self, Popped, Queue};
use crate::shared::ServiceShared;
pub use crate::shm::regions::Side;

/// Why a loan (of a sample, a request or a response) failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LoanError {
    /// This port holds its maximum of unsent loans.
    #[error("this port already holds its maximum of {max} loans; send or drop one first")]
    TooManyLoans {
        /// The most loans a port may hold (a publisher: the service's `max_loans`).
        max: usize,
    },
    /// The slice is longer than the largest chunk holds.
    #[error("a slice of {len} elements does not fit; the largest chunk holds {max}")]
    SliceTooLong {
        /// Elements requested.
        len: usize,
        /// Most elements a chunk holds.
        max: usize,
    },
    /// A loan of bytes (bindings' raw loans) that are not a whole payload: not a whole
    /// number of a slice's elements, or not one value of a typed payload.
    #[error(
        "a loan of {bytes} bytes is not {}",
        if *slice { format!("a whole number of the payload's {element}-byte elements") } else { format!("one value of the payload ({element} bytes)") }
    )]
    NotWholePayload {
        /// Bytes asked for.
        bytes: usize,
        /// The payload's element size (the value's, for a typed payload).
        element: usize,
        /// Whether the payload is a slice.
        slice: bool,
    },
    /// A loan of more bytes than the largest chunk holds.
    #[error("a loan of {bytes} bytes does not fit; the largest chunk holds {max} bytes of payload")]
    TooManyBytes {
        /// Bytes asked for.
        bytes: usize,
        /// Most payload bytes a chunk holds.
        max: usize,
    },
    /// Every free chunk that fits is locked by another port (see
    /// [`crate::chunk_guard`]): a reader holds locks on chunks its ownership words do not
    /// say it holds (a hostile or broken reader), or other publishers are writing them.
    #[error(
        "every free chunk of the size asked for is locked by another port of the service (a reader holding chunks it was not given, or publishers writing them); this ends when that process does"
    )]
    HeldByReaders,
    /// The pool refused (exhausted, or corrupt).
    #[error(transparent)]
    Pool(#[from] iox_mempool::LoanError),
    /// This process is a fork of the one that made the port.
    #[error(
        "this port belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
}

/// The loans of a client or a server (a publisher has its own, with a spare chunk
/// loaned ahead): at most `max` at once, each chunk located once, at the loan.
#[derive(Debug)]
pub struct Loans {
    max: usize,
    out: std::cell::Cell<usize>,
    /// Where the pool's search for a free chunk starts next.
    hint: std::cell::Cell<usize>,
}

impl Loans {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            out: std::cell::Cell::new(0),
            hint: std::cell::Cell::new(0),
        }
    }

    /// Loans a chunk of at least `bytes` bytes from `pool` to `owner` (the caller
    /// checked the port is its process's).
    pub fn loan(&self, pool: &iox_mempool::Pool, owner: Owner, bytes: usize) -> Result<Located, LoanError> {
        if self.out.get() >= self.max {
            return Err(LoanError::TooManyLoans { max: self.max });
        }
        let mut hint = self.hint.get();
        let handle = pool.loan(bytes, &mut hint, owner)?;
        self.hint.set(hint);
        let chunk = pool.locate(handle).expect("a handle just loaned is in range");
        self.out.set(self.out.get() + 1);
        Ok(chunk)
    }

    /// A loan left the port (sent, or dropped: the caller releases its chunk).
    pub fn end(&self) {
        self.out.set(self.out.get() - 1);
    }
}

/// Why creating a port (a publisher, subscriber, notifier, listener, client, server,
/// writer or reader) failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PortCreateError {
    /// The service was removed (e.g. `iox remove --force`) after this handle opened
    /// it: drop the handle and open the service again.
    #[error(
        "service {service:?} was removed after this handle opened it; drop the handle and open the service again"
    )]
    ServiceRemoved {
        /// The service.
        service: String,
    },
    /// Every slot of that kind is taken.
    #[error(
        "service {service:?} already has its maximum of {max} {kind}s; the limit is fixed by the service's creator (`.max_{kind}s(n)` on the builder that creates it, in Rust and Python; `max_{kind}s` in the C and C++ options): create the service with a larger one, or drop a {kind} first"
    )]
    TooManyPorts {
        /// The service.
        service: String,
        /// The port kind ("publisher", "listener", "client", ...).
        kind: &'static str,
        /// The limit.
        max: usize,
    },
    /// The service handle was made by the process this one was forked from.
    #[error(
        "the service handle of {service:?} belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess {
        /// The service.
        service: String,
    },
    /// The payload could not be mapped writable for a publisher.
    #[error("cannot map the payload of service {service:?} writable for a publisher: {source}")]
    MapWritable {
        /// The service.
        service: String,
        /// Why.
        source: iox_mempool::MakeWritableError,
    },
    /// The service's access policy lets this process read but not publish, or no
    /// holder that may write the pool was alive when it opened the service
    /// (`crate::access`).
    #[error("service {service:?}: this process may not publish: {why}")]
    NotAPublisher {
        /// The service.
        service: String,
        /// Its role and the policy, or why its descriptor is read-only.
        why: String,
    },
    /// The port's own read-only descriptor of the pool, for its chunk guard
    /// ([`crate::chunk_guard`]), could not be opened.
    #[error("cannot open the pool of service {service:?} for the chunk locks of a port: {source}")]
    Guard {
        /// The service.
        service: String,
        /// Why.
        source: std::io::Error,
    },
    /// The port's readiness socket could not be made under the root.
    #[error("cannot make the readiness socket of a port of service {service:?} under the root: {source}")]
    Doorbell {
        /// The service.
        service: String,
        /// Why.
        source: std::io::Error,
    },
    /// Pinning the pool failed.
    #[error("cannot pin the pool of service {service:?} ({memory_type}): {source}")]
    Pin {
        /// The service.
        service: String,
        /// Its memory type.
        memory_type: MemoryType,
        /// Why.
        source: PinError,
    },
    /// The service is `CudaPinned` but this process cannot pin CUDA memory.
    #[error(
        "cannot pin the pool of service {service:?}: it is CudaPinned and no CUDA pinner is available ({reason}); build the port with .pin_memory(false) to use it from the CPU only"
    )]
    CudaUnavailable {
        /// The service.
        service: String,
        /// Why no CUDA pinner is available (feature off, no driver, no device).
        reason: String,
    },
    /// The service's samples are in GPU memory (`CudaDevice`), which the host cannot
    /// read or write: its ports are device ports.
    #[error(
        "service {service:?} keeps its samples in GPU memory (CudaDevice): build a device port (device_publisher_builder / device_subscriber_builder, with the `cuda` feature), whose samples are device pointers"
    )]
    DeviceMemory {
        /// The service.
        service: String,
    },
    /// The service carries tensors (a record of each sample's shape beside it), which
    /// only tensor publishers write.
    #[error(
        "service {service:?} carries tensors (each sample's element type, shape and strides beside it): publish with a tensor publisher (tensor_publisher_builder; Python: svc.tensor_publisher(); C: iox_tensor_publisher_create, or iox_device_publisher_create on a device service; C++: tensor_publisher()), which records them; plain subscribers may still read it"
    )]
    TensorService {
        /// The service.
        service: String,
    },
    /// The service records no tensors: tensor ports need a service created with
    /// `tensors(true)` (or a `CudaDevice` one).
    #[error(
        "service {service:?} records no tensor layouts: create it with .tensors(true) (Python: .tensors()) to send tensors with their shapes"
    )]
    NotATensorService {
        /// The service.
        service: String,
    },
    /// A device port's inter-process events could not be made or published.
    #[error("cannot make the CUDA events of a device port of service {service:?}: {reason}")]
    DeviceEvents {
        /// The service.
        service: String,
        /// The driver's refusal.
        reason: String,
    },
}

/// Refuses a host port (one that hands out host addresses) of a device-memory
/// service, whose chunk addresses are device addresses.
pub fn check_host_port(service: &ServiceShared) -> Result<(), PortCreateError> {
    if service.pool.is_device() {
        Err(PortCreateError::DeviceMemory {
            service: service.name.to_string(),
        })
    } else {
        Ok(())
    }
}

/// Refuses a plain publisher (one that records no tensor layouts) of a tensor service.
pub fn check_plain_publisher(service: &ServiceShared) -> Result<(), PortCreateError> {
    match service.config.publish_subscribe() {
        Some(p) if p.tensors => Err(PortCreateError::TensorService {
            service: service.name.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Refuses a tensor port of a service without tensor records.
pub fn check_tensor_service(service: &ServiceShared) -> Result<(), PortCreateError> {
    match service.config.publish_subscribe() {
        Some(p) if p.tensors || service.pool.is_device() => Ok(()),
        _ => Err(PortCreateError::NotATensorService {
            service: service.name.to_string(),
        }),
    }
}

/// Refuses to build a port from a service handle this process inherited by `fork`.
pub fn check_own_process(service: &ServiceShared) -> Result<(), PortCreateError> {
    if service.is_own_process() {
        Ok(())
    } else {
        Err(PortCreateError::ForkedProcess {
            service: service.name.to_string(),
        })
    }
}

/// Marks a slot as closing: publishers stop delivering to it.
pub fn close(header: &PortHeader, generation: u64) {
    header.state.store(
        dynamic::state_word(generation, dynamic::CLOSING),
        Ordering::SeqCst,
    );
    // Pairs with the publisher's fence after its push: either it sees us closing and
    // drains its queue, or our drain after this sees its entry.
    fence(Ordering::SeqCst);
}

/// Frees a slot whose owner holds nothing any more. The node word goes last, so the
/// next claimer finds the rest reset.
pub fn free(header: &PortHeader, generation: u64) {
    header.pid.store(0, Ordering::Relaxed);
    header.journal.store(0, Ordering::Relaxed);
    doorbell::reset_arming(&header.waiting);
    header
        .state
        .store(dynamic::state_word(generation, dynamic::FREE), Ordering::Relaxed);
    header.node.store(0, Ordering::Release);
}

/// The owner bit of publisher slot `p`.
pub fn publisher_owner(p: usize) -> Owner {
    Owner::new(p as u32).expect("sending + receiving slots <= MAX_OWNERS (checked config)")
}

/// The owner bit of subscriber slot `s` in a service with `sending` sending slots.
pub fn subscriber_owner(sending: usize, s: usize) -> Owner {
    Owner::new((sending + s) as u32).expect("sending + receiving slots <= MAX_OWNERS (checked config)")
}

/// Moves the hold of queue entry `entry` on its chunk to `owner` (a consumer taking
/// it, a producer dropping or draining it, recovery acting for either); the chunk if
/// the entry names one and the move succeeded (a corrupt or duplicate entry is dropped
/// without touching anyone's hold).
#[inline]
pub fn take_entry(pool: &Bookkeeping, entry: u64, owner: Owner) -> Option<ChunkHandle> {
    let h = pool.handle_from_raw(queue::entry_chunk(entry))?;
    pool.take_queued(h, owner).ok().map(|()| h)
}

/// Releases everything queued for receiver slot `slot` (a subscriber's samples, a
/// server's requests) from every sender slot, as its `owner`; entries someone else
/// is taking right now stay for them. What a new receiver does before it activates
/// (a previous owner's leftovers are not for it) and a closing one after.
pub fn drain_receiver_queues(d: Dynamic<'_>, pool: &Bookkeeping, slot: usize, owner: Owner) {
    for p in 0..d.layout().sending {
        drain_queue(&d.queue(p, slot), queue::BY_CONSUMER, pool, owner);
    }
}

/// Takes every entry of `q` as `claim_as` into `owner` and releases it at once;
/// returns how many chunks became free. Entries someone else is taking right now stay
/// for them.
#[inline(always)]
pub fn drain_queue(q: &Queue<'_>, claim_as: u64, pool: &Bookkeeping, owner: Owner) -> u64 {
    let mut freed = 0;
    let mut taken = None;
    while let Popped::Took(_) = q.pop(claim_as, |e| taken = take_entry(pool, e, owner)) {
        if let Some(h) = taken.take()
            && pool.release(h, owner) == Ok(true)
        {
            freed += 1;
        }
    }
    freed
}

/// The journaled hand-off of one chunk into one queue: a request, a response, a
/// history sample re-sent to one late subscriber. `entry` (naming `chunk`, held by
/// `owner`) is journaled in the sender's slot, pushed into `q` (never dropping an
/// entry: the oldest could name the very chunk), and if it went in, one hand-off
/// gives the queue its hold and drops `owner`'s; the journal is cleared. Returns
/// whether it was pushed; if not, the chunk is still `owner`'s. A sender killed
/// anywhere in here is finished by `recovery::finish_journaled_send`: the queue whose
/// last entry is the journaled one got it, and the hand-off happens only while the
/// sender's bit is set. (A send to many queues, pub-sub's, journals once for all.)
///
/// # Safety
/// The pool `chunk` was located in is still mapped (the sender holds it).
#[inline]
pub unsafe fn send_one(
    journal: &std::sync::atomic::AtomicU64,
    q: &Queue<'_>,
    read_cache: &std::cell::Cell<u64>,
    chunk: Located,
    owner: Owner,
    entry: u64,
) -> bool {
    journal.store(entry, Ordering::Relaxed);
    let mut cached = read_cache.get();
    let pushed = matches!(q.push(entry, false, &mut cached, |_| {}), queue::Pushed::Stored);
    read_cache.set(cached);
    if pushed {
        crate::testing::stall_point(crate::testing::Stall::SendOneBeforeHandOff);
        // SAFETY: the caller's contract.
        let _ = unsafe { chunk.hand_off(owner, 1) };
    }
    journal.store(0, Ordering::Relaxed);
    pushed
}

/// Wakes receiver slot `slot` (`header`), whose `waiting` word the sender read as
/// `seen` (non-zero) after its push and fence: threads sleeping in `receive_timeout`
/// (it bumps the futex word, so a sleeper that has not slept yet sees it changed, and
/// wakes all), and the readiness descriptor if the receiver armed it (see
/// [`crate::doorbell`]).
#[inline(never)]
pub fn wake(header: &PortHeader, seen: u32, ringer: &Ringer, slot: usize) {
    if seen & doorbell::SLEEPERS != 0 {
        header.wake.fetch_add(1, Ordering::Release);
        let _ = rustix::thread::futex::wake(
            &header.wake,
            rustix::thread::futex::Flags::empty(),
            i32::MAX as u32,
        );
    }
    doorbell::ring_armed(&header.waiting, seen, || {
        crate::testing::stall_point(crate::testing::Stall::WakeBeforeRing);
        // Acquire: the socket's random part was stored before the port became active.
        let (generation, _) = dynamic::split_state(header.state.load(Ordering::Acquire));
        let (node, nonce) = (
            header.node.load(Ordering::Relaxed),
            header.doorbell.load(Ordering::Relaxed),
        );
        let served = ringer.ring(slot, node, generation, nonce);
        crate::testing::stall_point(crate::testing::Stall::WakeAfterRing);
        served
    });
}

/// Sleeps on the shared futex `word` while it holds `seen`, at most `timeout` (`None`:
/// no limit). A wake, a changed word or the timeout all return `Ok`; an interrupting
/// signal returns `Err(INTR)` (callers decide whether that ends their wait).
pub fn futex_sleep(
    word: &std::sync::atomic::AtomicU32,
    seen: u32,
    timeout: Option<std::time::Duration>,
) -> rustix::io::Result<()> {
    let ts = timeout.map(|t| rustix::fs::Timespec {
        tv_sec: t.as_secs() as _,
        tv_nsec: t.subsec_nanos() as _,
    });
    // Shared (no PRIVATE flag): sleepers and wakers are in different processes.
    match rustix::thread::futex::wait(word, rustix::thread::futex::Flags::empty(), seen, ts.as_ref()) {
        Ok(()) | Err(rustix::io::Errno::AGAIN | rustix::io::Errno::TIMEDOUT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Tells whoever waits for ports (`wait_for_subscribers`, `wait_for_publishers`)
/// that a port became active, closed or was freed.
pub fn announce(d: Dynamic<'_>) {
    let word = &d.header().ports_changed;
    word.fetch_add(1, Ordering::Release);
    let _ = rustix::thread::futex::wake(word, rustix::thread::futex::Flags::empty(), i32::MAX as u32);
}

/// Why waiting for ports failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum WaitForPortsError {
    /// This process is a fork of the one that made the port.
    #[error(
        "this port belongs to the process this one was forked from; open the service again in this process"
    )]
    ForkedProcess,
    /// Sleeping on the service's ports-changed word failed.
    #[error("waiting for ports failed: {0}")]
    Wait(std::io::Error),
}

/// Waits until `count(d)` (ports of the kind waited for that are active) is at least
/// `n`, at most `timeout`; returns the last count (below `n` on timeout). Sleeps on the
/// service's ports-changed word between looks.
pub fn wait_for_ports(
    service: &ServiceShared,
    n: usize,
    timeout: std::time::Duration,
    count: impl Fn(Dynamic<'_>) -> usize,
) -> Result<usize, WaitForPortsError> {
    if !service.is_own_process() {
        return Err(WaitForPortsError::ForkedProcess);
    }
    let deadline = std::time::Instant::now().checked_add(timeout);
    let d = service.dynamic();
    let word = &d.header().ports_changed;
    loop {
        let seen = word.load(Ordering::Acquire);
        let found = count(d);
        let left = deadline.map(|t| t.saturating_duration_since(std::time::Instant::now()));
        if found >= n || left == Some(std::time::Duration::ZERO) {
            return Ok(found);
        }
        match futex_sleep(word, seen, left) {
            Ok(()) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(WaitForPortsError::Wait(e.into())),
        }
    }
}

/// Pins the service's pool if asked to.
pub fn pin(service: &ServiceShared, requested: bool) -> Result<Option<PoolPin>, PortCreateError> {
    if !requested {
        return Ok(None);
    }
    let memory_type = service.pool.memory_type();
    if memory_type == MemoryType::CudaPinned
        && !iox_mempool::pin::has_pinner(memory_type)
        && let Err(reason) = register_cuda_pinner()
    {
        return Err(PortCreateError::CudaUnavailable {
            service: service.name.to_string(),
            reason,
        });
    }
    match iox_mempool::Pool::pin(&service.pool) {
        Ok(p) => Ok(Some(p)),
        Err(source) => Err(PortCreateError::Pin {
            service: service.name.to_string(),
            memory_type,
            source,
        }),
    }
}

/// Registers the CUDA pinner of device 0 (the `cuda` feature), or says why it cannot.
#[cfg(feature = "cuda")]
fn register_cuda_pinner() -> Result<(), String> {
    iox_cuda::register(0).map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn register_cuda_pinner() -> Result<(), String> {
    Err("iox_service was built without its `cuda` feature".into())
}

/// Keeps the service alive for as long as a port lives.
pub type Shared = Arc<ServiceShared>;

/// What every port that holds chunks (publishers, subscribers, clients, servers) holds
/// of its slot, and the steps it leaves it by. The port kinds keep it as their first
/// field and reach its fields through `Deref`.
#[derive(Debug)]
pub struct PortSlot {
    // Field order: the pin guard drops before the service (and its mapping).
    /// The pool's pin, if the port asked for one.
    pub pin: Option<PoolPin>,
    /// The service the port belongs to.
    pub service: Shared,
    /// Its slot on its side.
    pub slot: usize,
    /// The slot's generation when the port took it.
    pub generation: u64,
    /// Its owner bit in the chunks' ownership words.
    pub owner: Owner,
    /// The fork generation of the process that made it (see `iox_process::fork`), kept
    /// beside the other hot fields.
    pub fork_generation: u64,
    /// The service's pool (the same as `service.pool`, one pointer closer).
    pub pool: Arc<iox_mempool::Pool>,
}

impl PortSlot {
    /// The slot `slot` (of `generation`, owner bit `owner`) that a port of `service`
    /// took, with the pin it made.
    pub fn new(service: Shared, pin: Option<PoolPin>, slot: usize, generation: u64, owner: Owner) -> Self {
        Self {
            pin,
            fork_generation: service.fork_generation,
            pool: Arc::clone(&service.pool),
            service,
            slot,
            generation,
            owner,
        }
    }

    /// Whether this runs in the process that made the port (not a forked child).
    #[inline]
    pub fn is_own_process(&self) -> bool {
        crate::fork::is_same_process(self.fork_generation)
    }

    /// The header of this port's slot on `side`.
    #[inline]
    pub fn slot_header(&self, side: Side) -> &PortHeader {
        let d = self.service.dynamic();
        match side {
            Side::Sending => d.sender(self.slot),
            Side::Receiving => d.receiver(self.slot),
        }
    }

    /// Releases every chunk the port still owns (loaned, held, or taken), the first
    /// of the steps its drop leaves by, once what it has queued or in flight is settled.
    #[inline]
    pub fn release_chunks(&self) {
        self.pool.book().release_all(self.owner);
    }

    /// The last steps of a port's drop: its slot freed on `side`, then `then` (a server
    /// lets go of the requests it had taken there), then the change announced to those
    /// waiting for ports.
    pub fn free_slot(&self, side: Side, then: impl FnOnce()) {
        free(self.slot_header(side), self.generation);
        then();
        announce(self.service.dynamic());
    }
}
