//! The stream-order protocol of a device-memory service: per chunk, inter-process
//! CUDA events that say when a writer's work on it is done and when a reader's is.
//!
//! Every device port creates one event per chunk of the pool
//! (`CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`) and publishes their handles in
//! its slot's event table in the dynamic segment (`Dynamic::device_events`): the
//! handle words first, then the table's generation word (Release), which names the
//! port (0: no events published). Other processes open the handles they need, once
//! per (port, chunk), and keep them while that generation stands.
//!
//! - A publisher records chunk `c`'s event on its stream **before** it sends `c`; a
//!   subscriber that took `c` from publisher slot `p` makes its stream wait on `p`'s
//!   event of `c` (the queue's Release/Acquire orders the record before the wait).
//! - A subscriber records its event of `c` on its stream **before** its sample of `c`
//!   is released; a publisher that loans `c` makes its stream wait on every port's
//!   event of `c`: every subscriber slot's (the last reads) and every publisher slot's,
//!   its own included (the last write, which no reader may have waited for: a sample
//!   nobody took, or one dropped unread). The chunk's release and loan order each
//!   record before the wait. Waiting on an event never recorded is no wait, as the
//!   driver documents.
//! - Nothing here synchronises the host: records and waits are enqueued on streams.
//!   A port that goes away first waits (on the host, once) for its recorded events
//!   to complete, then unpublishes its table, then destroys them, so a peer that
//!   finds the slot empty or taken over knows that work is done. A sample keeps its
//!   port's events alive; the last one to go retires them before its chunk and its
//!   slot are let go.
//! - A handle a peer cannot open is skipped only when the port that published it is
//!   gone (its table changed, or its process is dead: its work ended with its
//!   context); any other refusal is an error of the loan or wait.
//!
//! Writing a table: the generation word is 0 (a port that leaves, or recovery, sets
//! it so), a Release fence, the handle words (Relaxed), then the generation (Release).
//! Reading one: generation (Acquire), handle words (Relaxed), an Acquire fence, the
//! generation again: equal and non-zero means the words are that port's.
//!
//! Limits (the driver's, not hidden here): a peer reads the table before each wait,
//! but between that read and its `cuStreamWaitEvent` the exporting port may retire
//! and destroy the event (its work is complete by then), or its process may die; the
//! reference calls the use of an imported event undefined once its exporter freed it.
//! A dead writer's unfinished work on a chunk is whatever the driver's teardown of its
//! context left.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use iox_cuda::{CudaError, EventHandle, IpcEvent, OpenedEvent, Stream};

use crate::dynamic::Dynamic;
use crate::port::Side;

pub(crate) use iox_core::shm::regions::pubsub::chunk_index;

/// The generation word a port publishes: non-zero, and different for each port that
/// takes the slot (its claim generation).
fn published(generation: u64) -> u64 {
    generation.wrapping_shl(1) | 1
}

/// Reads the handle of `chunk` from a table if `generation` is what it holds.
fn read_handle(table: (&AtomicU64, &[AtomicU64]), chunk: usize) -> Option<(u64, EventHandle)> {
    let (word, handles) = table;
    let g = word.load(Ordering::Acquire);
    if g == 0 {
        return None;
    }
    let words: [u64; 8] = std::array::from_fn(|i| handles[chunk * 8 + i].load(Ordering::Relaxed));
    fence(Ordering::Acquire);
    (word.load(Ordering::Relaxed) == g).then(|| (g, EventHandle::from_words(words)))
}

/// A peer port's events, opened as needed while its generation stands.
struct Peer {
    generation: u64,
    opened: Vec<Option<OpenedEvent>>,
}

/// One device port's events: its own (published in its table) and those of the
/// ports it opened (publisher slots, then subscriber slots). Shared by the port and
/// its samples (a sample records the port's event at its release), so it is `Sync`:
/// the opened events are behind a mutex no two threads of one port contend for on
/// the hot path (a subscriber's samples released on other threads only record).
pub(crate) struct PortEvents {
    ordinal: i32,
    side: Side,
    slot: usize,
    own: Vec<IpcEvent>,
    /// Whether each own event was recorded (and so must be waited for at retiring).
    recorded: Vec<AtomicBool>,
    /// Opened events per slot: `[sending, receiving]`.
    peers: Mutex<[Vec<Option<Peer>>; 2]>,
}

fn side_index(side: Side) -> usize {
    match side {
        Side::Sending => 0,
        Side::Receiving => 1,
    }
}

impl std::fmt::Debug for PortEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortEvents")
            .field("ordinal", &self.ordinal)
            .field("slot", &self.slot)
            .field("events", &self.own.len())
            .finish()
    }
}

impl PortEvents {
    /// Creates the port's events on device `ordinal` and publishes them in its table.
    pub(crate) fn publish(
        d: Dynamic<'_>,
        side: Side,
        slot: usize,
        generation: u64,
        ordinal: i32,
    ) -> Result<Self, CudaError> {
        let (word, handles) = d
            .device_events(side, slot)
            .expect("a device service has event tables");
        let chunks = handles.len() / 8;
        let own = (0..chunks)
            .map(|_| IpcEvent::new(ordinal))
            .collect::<Result<Vec<_>, _>>()?;
        // The previous port of the slot unpublished already (or recovery did); make
        // sure, then order that before the words change.
        word.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        for (c, event) in own.iter().enumerate() {
            for (i, w) in event.handle().to_words().into_iter().enumerate() {
                handles[c * 8 + i].store(w, Ordering::Relaxed);
            }
        }
        word.store(published(generation), Ordering::Release);
        let none = |n: usize| (0..n).map(|_| None).collect::<Vec<_>>();
        Ok(Self {
            ordinal,
            side,
            slot,
            recorded: (0..own.len()).map(|_| AtomicBool::new(false)).collect(),
            own,
            peers: Mutex::new([none(d.layout().sending), none(d.layout().receiving)]),
        })
    }

    /// The device ordinal its events are on (in this process).
    pub(crate) fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// Records this port's event of `chunk` on `stream` (the work enqueued on it so
    /// far is this port's work on the chunk).
    pub(crate) fn record(&self, chunk: usize, stream: Stream) -> Result<(), CudaError> {
        self.own[chunk].record(stream)?;
        self.recorded[chunk].store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Makes `stream` wait on the event of `chunk` of the port now in slot `peer` of
    /// `side`, if it published events; whether it waited.
    pub(crate) fn wait_peer(
        &self,
        d: Dynamic<'_>,
        side: Side,
        peer: usize,
        chunk: usize,
        stream: Stream,
    ) -> Result<bool, CudaError> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = peers[side_index(side)].get_mut(peer) else {
            return Ok(false);
        };
        let Some(table) = d.device_events(side, peer) else {
            return Ok(false);
        };
        let Some((generation, handle)) = read_handle(table, chunk) else {
            *entry = None; // the port left: its work is done (see the module docs)
            return Ok(false);
        };
        if entry.as_ref().is_none_or(|p| p.generation != generation) {
            *entry = Some(Peer {
                generation,
                opened: (0..self.own.len()).map(|_| None).collect(),
            });
        }
        let opened = &mut entry.as_mut().expect("set above").opened[chunk];
        if opened.is_none() {
            match OpenedEvent::open(self.ordinal, &handle) {
                Ok(event) => *opened = Some(event),
                Err(e) if gone(d, side, peer, table.0, generation) => {
                    let _ = e; // its port left or its process died meanwhile
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        opened.as_ref().expect("opened above").wait(stream)?;
        Ok(true)
    }

    /// Makes `stream` wait on every port's event of `chunk` (every publisher slot's,
    /// this port's own included, and every subscriber slot's): what a loan of the
    /// chunk must follow. How many waited.
    pub(crate) fn wait_all(&self, d: Dynamic<'_>, chunk: usize, stream: Stream) -> Result<usize, CudaError> {
        let mut waited = 0;
        for side in [Side::Sending, Side::Receiving] {
            let slots = self.peers.lock().unwrap_or_else(|e| e.into_inner())[side_index(side)].len();
            for peer in 0..slots {
                waited += usize::from(self.wait_peer(d, side, peer, chunk, stream)?);
            }
        }
        Ok(waited)
    }

    /// Waits (on the host) for this port's recorded events, then unpublishes its
    /// table if it is still this port's; the events are destroyed when `self` drops.
    fn retire(&self, d: Dynamic<'_>, generation: u64) {
        for (event, recorded) in self.own.iter().zip(&self.recorded) {
            if recorded.load(Ordering::Relaxed) {
                let _ = event.synchronize();
            }
        }
        if let Some((word, _)) = d.device_events(self.side, self.slot) {
            let _ = word.compare_exchange(published(generation), 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

/// A port's events with what retiring them needs: shared by the port and its samples,
/// retired (unpublished, then waited for on the host) when the last of them goes, so
/// a sample released after its subscriber was dropped still orders the chunk's next
/// loan after its reads.
pub(crate) struct EventsOwner {
    pub(crate) events: PortEvents,
    pub(crate) service: crate::port::Shared,
    pub(crate) generation: u64,
}

impl std::fmt::Debug for EventsOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.events.fmt(f)
    }
}

impl Drop for EventsOwner {
    fn drop(&mut self) {
        // A forked child's copy retires nothing: the table and the work are the
        // parent's.
        if self.service.is_own_process() {
            self.events.retire(self.service.dynamic(), self.generation);
        }
    }
}

/// Whether the port that published `generation` in slot `peer` of `side` is gone:
/// its table changed, or its process is dead.
fn gone(d: Dynamic<'_>, side: Side, peer: usize, word: &AtomicU64, generation: u64) -> bool {
    if word.load(Ordering::Acquire) != generation {
        return true;
    }
    let header = match side {
        Side::Sending => d.sender(peer),
        Side::Receiving => d.receiver(peer),
    };
    let node = header.node.load(Ordering::Acquire);
    node == 0 || !crate::node::is_alive_anywhere(node)
}

/// Makes and publishes the events of the device port just built in `slot` of `side`
/// (generation `generation`) of `service`.
pub(crate) fn for_port(
    service: &crate::port::Shared,
    side: Side,
    slot: usize,
    generation: u64,
) -> Result<std::sync::Arc<EventsOwner>, crate::port::PortCreateError> {
    let failed = |reason: String| crate::port::PortCreateError::DeviceEvents {
        service: service.name.to_string(),
        reason,
    };
    let ordinal = super::service_ordinal(service).map_err(failed)?;
    let events = PortEvents::publish(service.dynamic(), side, slot, generation, ordinal)
        .map_err(|e| failed(e.to_string()))?;
    Ok(std::sync::Arc::new(EventsOwner {
        events,
        service: service.clone(),
        generation,
    }))
}
