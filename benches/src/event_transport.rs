//! Event wake-up transports for the `eventpingpong` benchmark: each side notifies the
//! other and sleeps until it is notified back (no busy-polling), so what a round
//! trip costs is two wake-ups of a sleeping process.
//!
//! - [`IoxEvent`]: two iox event services (`ping`, `pong`); each side notifies on one
//!   and blocks on a listener of the other (`blocking_wait_one`).
//! - [`Iceoryx2Event`]: the same with iceoryx2's event services (`blocking_wait`).
//! - [`FutexFloor`]: the floor: two processes bouncing a shared word with a futex
//!   wake and a futex wait on it, the least a blocking wake-up between processes costs
//!   on this machine (any event transport pays at least this, plus its bookkeeping).
//!
//! Event ids: [`PING`] for a round, [`STOP`] to end the follower (echoed back).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use iceoryx2::node::Node;
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::prelude::*;
use memmap2::{MmapOptions, MmapRaw};

/// The id of a round.
pub const PING: u32 = 1;
/// The id that ends the follower.
pub const STOP: u32 = 2;

/// One side of an event ping-pong.
pub trait Wake {
    /// Notifies the other side of `id`.
    fn notify(&mut self, id: u32);
    /// Sleeps until the other side notified; returns the id.
    fn wait(&mut self) -> u32;
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::yield_now();
    }
}

/// iox event services.
pub struct IoxEvent {
    notifier: iox_service::Notifier,
    listener: iox_service::Listener,
    _services: (iox_service::EventService, iox_service::EventService),
}

impl IoxEvent {
    /// Connects side `leader` of the ping-pong `id`.
    pub fn connect(id: &str, leader: bool) -> Self {
        let open = |dir: &str| {
            iox_service::Service::named(&format!("iox-bench/{id}/{dir}"))
                .expect("service name")
                .event()
                .max_notifiers(1)
                .max_listeners(1)
                .event_id_max(7)
                .open_or_create()
                .expect("iox event service")
        };
        let (ping, pong) = (open("ping"), open("pong"));
        let (out, inp) = if leader { (&ping, &pong) } else { (&pong, &ping) };
        let listener = inp.listener_builder().create().expect("iox listener");
        let notifier = out.notifier_builder().create().expect("iox notifier");
        wait_for("the other side never connected", || {
            out.port_counts().1 == 1 && inp.port_counts().0 == 1
        });
        Self {
            notifier,
            listener,
            _services: (ping, pong),
        }
    }
}

impl Wake for IoxEvent {
    fn notify(&mut self, id: u32) {
        self.notifier
            .notify_with_custom_event_id(iox_service::EventId::new(id))
            .expect("iox notify");
    }

    fn wait(&mut self) -> u32 {
        loop {
            if let Some(id) = self.listener.blocking_wait_one().expect("iox wait") {
                return id.as_value();
            }
        }
    }
}

/// iceoryx2 event services.
pub struct Iceoryx2Event {
    notifier: Notifier<ipc::Service>,
    listener: Listener<ipc::Service>,
    got: Vec<u32>,
    _node: Node<ipc::Service>,
}

impl Iceoryx2Event {
    /// Connects side `leader` of the ping-pong `id`.
    pub fn connect(id: &str, leader: bool) -> Self {
        set_log_level(LogLevel::Error);
        let node = crate::iceoryx2_files::node_builder()
            .create::<ipc::Service>()
            .expect("iceoryx2 node");
        let open = |dir: &str| {
            let name = format!("iox-bench/{id}/{dir}");
            node.service_builder(&name.as_str().try_into().expect("service name"))
                .event()
                .max_notifiers(1)
                .max_listeners(1)
                .event_id_max_value(7)
                .open_or_create()
                .expect("iceoryx2 event service")
        };
        let (ping, pong) = (open("ping"), open("pong"));
        let (out, inp) = if leader { (&ping, &pong) } else { (&pong, &ping) };
        let listener = inp.listener_builder().create().expect("iceoryx2 listener");
        let notifier = out.notifier_builder().create().expect("iceoryx2 notifier");
        wait_for("the other side never connected", || {
            out.dynamic_config().number_of_listeners() == 1 && inp.dynamic_config().number_of_notifiers() == 1
        });
        Self {
            notifier,
            listener,
            got: Vec::new(),
            _node: node,
        }
    }
}

impl Wake for Iceoryx2Event {
    fn notify(&mut self, id: u32) {
        self.notifier
            .notify_with_custom_event_id(EventId::new(id as usize))
            .expect("iceoryx2 notify");
    }

    fn wait(&mut self) -> u32 {
        loop {
            if let Some(id) = self.got.pop() {
                return id;
            }
            let got = &mut self.got;
            self.listener
                .blocking_wait(|a| got.push(a.id.as_value() as u32))
                .expect("iceoryx2 wait");
        }
    }
}

/// Bytes between the two words (two cache lines).
const STRIDE: usize = 128;

/// The floor: a shared word per direction, futex wake / futex wait.
pub struct FutexFloor {
    map: MmapRaw,
    out: usize,
    sent: u32,
    seen: u32,
    owned: Option<std::path::PathBuf>,
}

impl FutexFloor {
    /// Connects side `leader` of the ping-pong `id` (the leader makes the file).
    pub fn connect(id: &str, leader: bool) -> Self {
        let path = std::env::temp_dir().join(format!("iox-bench-futex-{id}"));
        let file = if leader {
            let tmp = path.with_extension("tmp");
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .expect("create floor file");
            f.set_len(2 * STRIDE as u64).expect("size floor file");
            std::fs::rename(&tmp, &path).expect("publish floor file");
            f
        } else {
            let mut f = None;
            wait_for("the leader never made the floor file", || {
                f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .ok();
                f.is_some()
            });
            f.expect("opened")
        };
        let map = MmapOptions::new()
            .len(2 * STRIDE)
            .map_raw(&file)
            .expect("map floor file");
        Self {
            map,
            out: if leader { 0 } else { 1 },
            sent: 0,
            seen: 0,
            owned: leader.then_some(path),
        }
    }

    fn word(&self, i: usize) -> &AtomicU32 {
        debug_assert!(i < 2);
        // SAFETY: `i * STRIDE + 4 <= 2 * STRIDE`, inside the page-aligned mapping that
        // lives as long as `self`; the file is sized before it is renamed into place
        // and never truncated. Both processes access these bytes only atomically.
        unsafe { &*self.map.as_ptr().add(i * STRIDE).cast::<AtomicU32>() }
    }
}

impl Wake for FutexFloor {
    fn notify(&mut self, id: u32) {
        // The word holds a sequence number (high bits) and the id (low 2 bits).
        self.sent += 1;
        let w = self.word(self.out);
        w.store(self.sent << 2 | id, Ordering::Release);
        let _ = rustix::thread::futex::wake(w, rustix::thread::futex::Flags::empty(), 1);
    }

    fn wait(&mut self) -> u32 {
        let w = self.word(1 - self.out);
        loop {
            let v = w.load(Ordering::Acquire);
            if v >> 2 != self.seen {
                self.seen = v >> 2;
                return v & 3;
            }
            let _ = rustix::thread::futex::wait(w, rustix::thread::futex::Flags::empty(), v, None);
        }
    }
}

impl Drop for FutexFloor {
    fn drop(&mut self) {
        if let Some(path) = &self.owned {
            let _ = std::fs::remove_file(path);
        }
    }
}
