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
//!   is released; a publisher that loans `c` makes its stream wait on every subscriber
//!   slot's event of `c` (the chunk's release and loan order the record before the
//!   wait). Waiting on an event never recorded is no wait, as the driver documents.
//! - Nothing here synchronises the host: records and waits are enqueued on streams.
//!   A port that goes away unpublishes its table, then waits (on the host, once) for
//!   its recorded events to complete before destroying them, so a peer that finds the
//!   slot empty or taken over knows that work is done.
//!
//! Reading a table: generation (Acquire), handle words (Relaxed), an Acquire fence,
//! the generation again: equal and non-zero means the words are that port's.
//!
//! Limits (the driver's, not hidden here): a peer that opened a port's events and
//! uses them after that port's *process died* (before recovery freed the slot) uses
//! events the reference calls undefined to use once their exporter freed them; a
//! dead writer's unfinished work on a chunk is whatever the driver's teardown of its
//! context left.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use iox_cuda::{CudaError, EventHandle, IpcEvent, OpenedEvent, Stream};
use iox_mempool::{ChunkHandle, PoolLayout};

use crate::dynamic::Dynamic;
use crate::pattern::Side;

/// The index of `chunk` among all chunks of `layout` (classes in order).
pub(crate) fn chunk_index(layout: &PoolLayout, chunk: ChunkHandle) -> usize {
    let before: usize = layout.classes()[..chunk.class()]
        .iter()
        .map(|c| c.count as usize)
        .sum();
    before + chunk.index() as usize
}

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
/// other side's ports it opened. Shared by the port and its samples (a sample
/// records the port's event at its release), so it is `Sync`: the peers' table is
/// behind a mutex no two threads of one port contend for on the hot path (a
/// subscriber's samples released on other threads only record).
pub(crate) struct PortEvents {
    ordinal: i32,
    side: Side,
    slot: usize,
    own: Vec<IpcEvent>,
    /// Whether each own event was recorded (and so must be waited for at retiring).
    recorded: Vec<AtomicBool>,
    peers: Mutex<Vec<Option<Peer>>>,
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
        for (c, event) in own.iter().enumerate() {
            for (i, w) in event.handle().to_words().into_iter().enumerate() {
                handles[c * 8 + i].store(w, Ordering::Relaxed);
            }
        }
        word.store(published(generation), Ordering::Release);
        let peer_slots = match side {
            Side::Sending => d.layout().receiving,
            Side::Receiving => d.layout().sending,
        };
        Ok(Self {
            ordinal,
            side,
            slot,
            recorded: (0..own.len()).map(|_| AtomicBool::new(false)).collect(),
            own,
            peers: Mutex::new((0..peer_slots).map(|_| None).collect()),
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

    /// Makes `stream` wait on the event of `chunk` of the port now in the other
    /// side's slot `peer`, if it published events; whether it waited.
    pub(crate) fn wait_peer(
        &self,
        d: Dynamic<'_>,
        peer: usize,
        chunk: usize,
        stream: Stream,
    ) -> Result<bool, CudaError> {
        let other = match self.side {
            Side::Sending => Side::Receiving,
            Side::Receiving => Side::Sending,
        };
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = peers.get_mut(peer) else {
            return Ok(false);
        };
        let Some(table) = d.device_events(other, peer) else {
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
            // A handle the driver cannot open is of a process that died after it
            // published (recovery unpublishes it): its work ended with its context.
            match OpenedEvent::open(self.ordinal, &handle) {
                Ok(event) => *opened = Some(event),
                Err(_) => return Ok(false),
            }
        }
        opened.as_ref().expect("opened above").wait(stream)?;
        Ok(true)
    }

    /// Makes `stream` wait on every peer port's event of `chunk`; how many waited.
    pub(crate) fn wait_all_peers(
        &self,
        d: Dynamic<'_>,
        chunk: usize,
        stream: Stream,
    ) -> Result<usize, CudaError> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner()).len();
        let mut waited = 0;
        for peer in 0..peers {
            waited += usize::from(self.wait_peer(d, peer, chunk, stream)?);
        }
        Ok(waited)
    }

    /// Unpublishes the table (if it is still this port's), then waits for this port's
    /// recorded events; the events are destroyed when `self` drops.
    fn retire(&self, d: Dynamic<'_>, generation: u64) {
        if let Some((word, _)) = d.device_events(self.side, self.slot) {
            let _ = word.compare_exchange(published(generation), 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        for (event, recorded) in self.own.iter().zip(&self.recorded) {
            if recorded.load(Ordering::Relaxed) {
                let _ = event.synchronize();
            }
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
        self.events.retire(self.service.dynamic(), self.generation);
    }
}
