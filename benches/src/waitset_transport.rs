//! Blocking ping-pong endpoints: each side sleeps in a WaitSet until the other's sample
//! arrives (no busy-polling), so a round trip measures two wake-ups across processes.
//!
//! - iox: the subscriber itself is attached to an iox [`WaitSet`]; receive until
//!   `None` (which re-arms its descriptor), then wait. Optionally `quiet` more
//!   subscribers, on services no one publishes to, are attached too (the scale case).
//! - iceoryx2: its own pattern for this (as in its examples): a pub-sub service for the
//!   payload plus an event service; the sender notifies after it sends, the receiver's
//!   iceoryx2 WaitSet is attached to its Listener, and on wake it drains the listener
//!   and receives.
//!
//! The WaitSets' guards borrow the ports, so each endpoint exists inside a scope
//! (`with_*` runs the measurement loop in it) and everything is attached once, before
//! the loop: the loop pays for waits, not for attaching. Both reuse
//! [`crate::endpoint`]'s loops; only `recv` differs from the busy-polling endpoints
//! (it sleeps instead of spinning).

use std::time::{Duration, Instant};

use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher as Ix2Publisher;
use iceoryx2::port::subscriber::Subscriber as Ix2Subscriber;
use iceoryx2::prelude::{
    CallbackProgression as Ix2Progression, LogLevel, PortFactory, WaitSetBuilder, ipc, set_log_level,
};
use iceoryx2::waitset::{WaitSet as Ix2WaitSet, WaitSetGuard as Ix2Guard};
use iox_service::{CallbackProgression, MemoryType, Service, WaitSet, WaitSetGuard};

use crate::endpoint::Endpoint;
use crate::iox_transport::IoxEndpoint;

/// Subscribers per quiet service (publishers + subscribers <= 47 per service).
const QUIET_PER_SERVICE: usize = 40;

/// An iox endpoint whose `recv` sleeps in a WaitSet.
struct IoxWait<'a> {
    inner: &'a IoxEndpoint,
    waitset: &'a WaitSet,
    _guards: Vec<WaitSetGuard<'a, 'a>>,
}

impl Endpoint for IoxWait<'_> {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        self.inner.send_tagged(len, first, last)
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        self.inner.try_recv_tagged()
    }

    fn recv(&mut self) -> (u8, u8) {
        loop {
            // Receive until None (which re-arms the descriptor), then sleep.
            if let Some(got) = self.inner.try_recv_tagged() {
                return got;
            }
            self.waitset
                .wait_and_process_once(|_| CallbackProgression::Continue)
                .expect("wait");
        }
    }
}

/// Runs `f` with side `leader` of the iox blocking ping-pong `id` (`len`-byte
/// payloads), its WaitSet holding the live subscriber and `quiet` idle ones (on
/// services of their own, 40 subscribers each, that no one publishes to).
pub fn with_iox<R>(
    id: &str,
    leader: bool,
    len: usize,
    quiet: usize,
    f: impl FnOnce(&mut dyn Endpoint) -> R,
) -> R {
    let inner = IoxEndpoint::connect(id, leader, len, MemoryType::Cpu, false);
    let side = if leader { "lead" } else { "follow" };
    let services: Vec<_> = (0..quiet.div_ceil(QUIET_PER_SERVICE))
        .map(|k| {
            Service::named(&format!("bench/{id}/quiet/{side}/{k}"))
                .expect("valid name")
                .publish_subscribe::<u64>()
                .max_publishers(1)
                .max_subscribers(QUIET_PER_SERVICE as u32)
                .subscriber_buffer(1)
                .open_or_create()
                .expect("quiet service")
        })
        .collect();
    let quiet_subs: Vec<_> = (0..quiet)
        .map(|i| {
            services[i / QUIET_PER_SERVICE]
                .subscriber_builder()
                .create()
                .expect("quiet subscriber")
        })
        .collect();
    let waitset = WaitSet::new().expect("WaitSet");
    let mut guards: Vec<_> = quiet_subs
        .iter()
        .map(|s| waitset.attach_notification(s).expect("attach quiet"))
        .collect();
    guards.push(waitset.attach_notification(inner.subscriber()).expect("attach"));
    let mut e = IoxWait {
        inner: &inner,
        waitset: &waitset,
        _guards: guards,
    };
    f(&mut e)
}

/// An iceoryx2 endpoint: pub-sub for the payload, an event to wake the receiver.
struct Ix2Wait<'a> {
    tx: Ix2Publisher<ipc::Service, [u8], ()>,
    rx: Ix2Subscriber<ipc::Service, [u8], ()>,
    notifier: Notifier<ipc::Service>,
    listener: &'a Listener<ipc::Service>,
    waitset: &'a Ix2WaitSet<ipc::Service>,
    guard: Ix2Guard<'a, 'a, ipc::Service>,
}

impl Endpoint for Ix2Wait<'_> {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        let mut sample = self.tx.loan_slice_uninit(len).expect("iceoryx2 loan");
        let p = sample.payload_mut();
        p[0].write(first);
        p[len - 1].write(last);
        // SAFETY: as in `iceoryx2_transport`: only the first and last byte are read.
        unsafe { sample.assume_init() }.send().expect("iceoryx2 send");
        self.notifier.notify().expect("iceoryx2 notify");
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        let s = self.rx.receive().expect("iceoryx2 receive")?;
        let p = s.payload();
        Some((p[0], p[p.len() - 1]))
    }

    fn recv(&mut self) -> (u8, u8) {
        loop {
            if let Some(got) = self.try_recv() {
                return got;
            }
            let (listener, guard) = (self.listener, &self.guard);
            self.waitset
                .wait_and_process_once(|id| {
                    if id.has_event_from(guard) {
                        listener.try_wait(|_| {}).expect("iceoryx2 listener");
                    }
                    Ix2Progression::Continue
                })
                .expect("iceoryx2 wait");
        }
    }
}

/// Runs `f` with side `leader` of the iceoryx2 blocking ping-pong `id`.
pub fn with_iceoryx2<R>(id: &str, leader: bool, len: usize, f: impl FnOnce(&mut dyn Endpoint) -> R) -> R {
    set_log_level(LogLevel::Error);
    let node = crate::iceoryx2_files::node_builder()
        .create::<ipc::Service>()
        .expect("iceoryx2 node");
    let pubsub = |name: String| {
        node.service_builder(&name.as_str().try_into().expect("service name"))
            .publish_subscribe::<[u8]>()
            .max_publishers(1)
            .max_subscribers(1)
            .subscriber_max_buffer_size(2)
            .history_size(0)
            .open_or_create()
            .expect("iceoryx2 service")
    };
    let event = |name: String| {
        node.service_builder(&name.as_str().try_into().expect("service name"))
            .event()
            .open_or_create()
            .expect("iceoryx2 event service")
    };
    let (ping, pong) = (
        pubsub(format!("iox-wake/{id}/ping")),
        pubsub(format!("iox-wake/{id}/pong")),
    );
    let (ping_ev, pong_ev) = (
        event(format!("iox-wake/{id}/ping-ev")),
        event(format!("iox-wake/{id}/pong-ev")),
    );
    let (out, inp, out_ev, inp_ev) = if leader {
        (&ping, &pong, &ping_ev, &pong_ev)
    } else {
        (&pong, &ping, &pong_ev, &ping_ev)
    };
    let tx = out
        .publisher_builder()
        .initial_max_slice_len(len.max(1))
        .create()
        .expect("iceoryx2 publisher");
    let rx = inp.subscriber_builder().create().expect("iceoryx2 subscriber");
    let notifier = out_ev.notifier_builder().create().expect("iceoryx2 notifier");
    let listener = inp_ev.listener_builder().create().expect("iceoryx2 listener");
    let start = Instant::now();
    while out.dynamic_config().number_of_subscribers() == 0
        || inp.dynamic_config().number_of_publishers() == 0
        || out_ev.dynamic_config().number_of_listeners() == 0
        || inp_ev.dynamic_config().number_of_notifiers() == 0
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the other side never connected"
        );
        std::thread::yield_now();
    }
    let waitset = WaitSetBuilder::new()
        .create::<ipc::Service>()
        .expect("iceoryx2 WaitSet");
    let guard = waitset.attach_notification(&listener).expect("iceoryx2 attach");
    let mut e = Ix2Wait {
        tx,
        rx,
        notifier,
        listener: &listener,
        waitset: &waitset,
        guard,
    };
    f(&mut e)
}
