//! The ping-pong over iox: two slice services (`ping` leader -> follower, `pong`
//! back), one size class holding the payload, pinned ports when the memory type asks;
//! with an access policy that names a reader when guarded (the ports then lock each
//! chunk they write or read, see `iox_core::chunk_guard`).

use std::time::{Duration, Instant};

use iox_service::{AccessPolicy, MemoryType, PubSubService, Publisher, Service, Subscriber};

use crate::endpoint::Endpoint;

/// One side of an iox ping-pong.
pub struct IoxEndpoint {
    // Ports before services: they drop first.
    tx: Publisher<[u8]>,
    rx: Subscriber<[u8]>,
    _services: (PubSubService<[u8]>, PubSubService<[u8]>),
}

fn open(name: &str, len: usize, memory_type: MemoryType, guarded: bool) -> PubSubService<[u8]> {
    let builder = Service::named(name)
        .expect("valid name")
        .publish_subscribe::<[u8]>()
        .size_classes(&[(len.max(1), 8)])
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(2)
        .memory_type(memory_type);
    // A policy that names a reader: every port then locks the chunks it writes or
    // reads (`iox_core::chunk_guard`), whichever role its own process has.
    let builder = if guarded {
        builder.access(AccessPolicy::new().read_uid(GUARD_READER))
    } else {
        builder
    };
    builder.open_or_create().expect("open iox service")
}

/// The uid the guarded ping-pong's policy names as a reader (nobody: no process of the
/// benchmark runs as it; naming it is what turns the chunk guards on).
const GUARD_READER: u32 = 65534;

impl IoxEndpoint {
    /// Connects side `leader` of the ping-pong `id` with `len`-byte payloads, waiting
    /// (bounded) until the other side's ports exist.
    pub fn connect(id: &str, leader: bool, len: usize, memory_type: MemoryType, pin: bool) -> Self {
        Self::connect_with(id, leader, len, memory_type, pin, false)
    }

    /// [`IoxEndpoint::connect`] for services with an access policy that names a reader
    /// (`guarded`), whose ports lock every chunk they write or read.
    pub fn connect_with(
        id: &str,
        leader: bool,
        len: usize,
        memory_type: MemoryType,
        pin: bool,
        guarded: bool,
    ) -> Self {
        let ping = open(&format!("bench/{id}/ping"), len, memory_type, guarded);
        let pong = open(&format!("bench/{id}/pong"), len, memory_type, guarded);
        let (out, inp) = if leader { (&ping, &pong) } else { (&pong, &ping) };
        let tx = out
            .publisher_builder()
            .pin_memory(pin)
            .create()
            .expect("publisher");
        let rx = inp
            .subscriber_builder()
            .pin_memory(pin)
            .create()
            .expect("subscriber");
        let start = Instant::now();
        while out.port_counts().1 == 0 || inp.port_counts().0 == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the other side never connected"
            );
            std::thread::yield_now();
        }
        Self {
            tx,
            rx,
            _services: (ping, pong),
        }
    }
}

impl IoxEndpoint {
    /// Sends `len` bytes tagged `first`/`last` (shared access: the blocking endpoints
    /// send while a WaitSet guard borrows the subscriber).
    pub fn send_tagged(&self, len: usize, first: u8, last: u8) {
        let mut sample = self.tx.loan_slice_uninit(len).expect("loan");
        let p = sample.payload_mut();
        p[0].write(first);
        p[len - 1].write(last);
        // SAFETY: the chunk lies in a shared file mapping, whose bytes are initialised
        // (stale or zero) as far as the machine goes; only the first and last carry data
        // here, and only those are read.
        unsafe { sample.assume_init() }.send().expect("send");
    }

    /// A payload's first and last byte, if one has arrived.
    pub fn try_recv_tagged(&self) -> Option<(u8, u8)> {
        let s = self.rx.receive().expect("receive")?;
        Some((s[0], s[s.len() - 1]))
    }

    /// The receiving port (to attach it to a WaitSet).
    pub fn subscriber(&self) -> &Subscriber<[u8]> {
        &self.rx
    }
}

impl Endpoint for IoxEndpoint {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        self.send_tagged(len, first, last)
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        self.try_recv_tagged()
    }
}
