//! The ping-pong on the typed path most users take (`pingpong`'s `iox typed u64` and
//! `iceoryx2 typed u64` rows, 8 B only): a `u64` service each way with one publisher,
//! one subscriber and a buffer of 4, each message `loan_uninit()` -> `write_payload` ->
//! `send()`, received by a busy `receive()` that reads the value. The tags travel in
//! the value's two low bytes. In the `pingpong` binary, not the library, as
//! `header_transport` is.

use std::time::{Duration, Instant};

use iceoryx2::node::Node;
use iceoryx2::port::publisher::Publisher as Iceoryx2Publisher;
use iceoryx2::port::subscriber::Subscriber as Iceoryx2Subscriber;
use iceoryx2::prelude::*;
use iox_service::{PubSubService, Publisher, Service, Subscriber};

use iox_benches::endpoint::Endpoint;

/// The payload size the typed rows run at.
pub const TYPED_LEN: usize = 8;

fn tag(first: u8, last: u8) -> u64 {
    u64::from(first) | u64::from(last) << 8
}

fn untag(v: u64) -> (u8, u8) {
    (v as u8, (v >> 8) as u8)
}

/// The iox side: typed loans of a `u64` service.
pub struct IoxTypedEndpoint {
    tx: Publisher<u64>,
    rx: Subscriber<u64>,
    _services: (PubSubService<u64>, PubSubService<u64>),
}

impl IoxTypedEndpoint {
    /// Connects side `leader` of the ping-pong `id`, waiting (bounded) for the other.
    pub fn connect(id: &str, leader: bool) -> Self {
        let open = |name: String| {
            Service::named(&name)
                .expect("valid name")
                .publish_subscribe::<u64>()
                .max_publishers(1)
                .max_subscribers(1)
                .subscriber_buffer(4)
                .open_or_create()
                .expect("open iox service")
        };
        let ping = open(format!("bench/{id}/ping"));
        let pong = open(format!("bench/{id}/pong"));
        let (out, inp) = if leader { (&ping, &pong) } else { (&pong, &ping) };
        let tx = out.publisher_builder().create().expect("publisher");
        let rx = inp.subscriber_builder().create().expect("subscriber");
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

impl Endpoint for IoxTypedEndpoint {
    fn send(&mut self, _len: usize, first: u8, last: u8) {
        self.tx
            .loan_uninit()
            .expect("loan")
            .write_payload(tag(first, last))
            .send()
            .expect("send");
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        let s = self.rx.receive().expect("receive")?;
        Some(untag(*s))
    }
}

/// The iceoryx2 side: the same with its typed `u64` loans.
pub struct Iceoryx2TypedEndpoint {
    tx: Iceoryx2Publisher<ipc::Service, u64, ()>,
    rx: Iceoryx2Subscriber<ipc::Service, u64, ()>,
    _node: Node<ipc::Service>,
}

impl Iceoryx2TypedEndpoint {
    /// As [`IoxTypedEndpoint::connect`].
    pub fn connect(id: &str, leader: bool) -> Self {
        set_log_level(LogLevel::Error);
        let node = iox_benches::iceoryx2_files::node_builder()
            .create::<ipc::Service>()
            .expect("iceoryx2 node");
        let open = |name: String| {
            node.service_builder(&name.as_str().try_into().expect("service name"))
                .publish_subscribe::<u64>()
                .max_publishers(1)
                .max_subscribers(1)
                .subscriber_max_buffer_size(4)
                .history_size(0)
                .open_or_create()
                .expect("iceoryx2 service")
        };
        let ping = open(format!("iox-bench/{id}/ping"));
        let pong = open(format!("iox-bench/{id}/pong"));
        let (out, inp) = if leader { (&ping, &pong) } else { (&pong, &ping) };
        let tx = out.publisher_builder().create().expect("iceoryx2 publisher");
        let rx = inp.subscriber_builder().create().expect("iceoryx2 subscriber");
        let start = Instant::now();
        while out.dynamic_config().number_of_subscribers() == 0
            || inp.dynamic_config().number_of_publishers() == 0
        {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the other side never connected"
            );
            std::thread::yield_now();
        }
        Self { tx, rx, _node: node }
    }
}

impl Endpoint for Iceoryx2TypedEndpoint {
    fn send(&mut self, _len: usize, first: u8, last: u8) {
        self.tx
            .loan_uninit()
            .expect("iceoryx2 loan")
            .write_payload(tag(first, last))
            .send()
            .expect("iceoryx2 send");
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        let s = self.rx.receive().expect("iceoryx2 receive")?;
        Some(untag(*s.payload()))
    }
}
