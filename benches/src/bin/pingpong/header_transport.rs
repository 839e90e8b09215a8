//! The ping-pong with a 64-byte user header (`[u64; 8]`) in every sample, over iox
//! and over iceoryx2 (`pingpong --header`): the same two slice services as
//! `iox_transport` and `iceoryx2_transport`, the header written in each loan and read
//! from each sample. In the `pingpong` binary, not the library, so that the library's loops compile as
//! before (their instruction counts compare with builds that had no header case).

use std::time::{Duration, Instant};

/// A byte service whose samples carry the 64-byte header.
type Frames = PubSubService<[u8], [u64; 8]>;

use iceoryx2::node::Node;
use iceoryx2::port::publisher::Publisher as Iceoryx2Publisher;
use iceoryx2::port::subscriber::Subscriber as Iceoryx2Subscriber;
use iceoryx2::prelude::*;
use iox_service::{PubSubService, Publisher, Service, Subscriber};

use iox_benches::endpoint::Endpoint;

/// The iox ping-pong with a 64-byte user header (`[u64; 8]`) in every sample: written
/// in the loan (the first tag in it), read from the sample.
pub struct IoxHeaderEndpoint {
    tx: Publisher<[u8], [u64; 8]>,
    rx: Subscriber<[u8], [u64; 8]>,
    _services: (Frames, Frames),
}

impl IoxHeaderEndpoint {
    /// As [`IoxEndpoint::connect`](iox_benches::iox_transport::IoxEndpoint::connect), on services with the header.
    pub fn connect(id: &str, leader: bool, len: usize) -> Self {
        let open = |name: String| {
            Service::named(&name)
                .expect("valid name")
                .publish_subscribe::<[u8]>()
                .user_header::<[u64; 8]>()
                .max_slice_len(len.max(1))
                .max_publishers(1)
                .max_subscribers(1)
                .subscriber_buffer(2)
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

impl Endpoint for IoxHeaderEndpoint {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        let mut sample = self
            .tx
            .loan_slice_uninit(len)
            .expect("loan")
            .write_header([u64::from(first); 8]);
        let p = sample.payload_mut();
        p[0].write(first);
        p[len - 1].write(last);
        // SAFETY: as for `IoxEndpoint::send_tagged`; the header was written in full.
        unsafe { sample.assume_init() }.send().expect("send");
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        let s = self.rx.receive().expect("receive")?;
        Some((s.user_header()[7] as u8, s[s.len() - 1]))
    }
}

/// The iceoryx2 ping-pong with a 64-byte user header (`[u64; 8]`) in every sample:
/// written in the loan (the first tag in it), read from the sample.
pub struct Iceoryx2HeaderEndpoint {
    tx: Iceoryx2Publisher<ipc::Service, [u8], [u64; 8]>,
    rx: Iceoryx2Subscriber<ipc::Service, [u8], [u64; 8]>,
    _node: Node<ipc::Service>,
}

impl Iceoryx2HeaderEndpoint {
    /// As [`Iceoryx2Endpoint::connect`](iox_benches::iceoryx2_transport::Iceoryx2Endpoint::connect), on services with the header.
    pub fn connect(id: &str, leader: bool, len: usize) -> Self {
        set_log_level(LogLevel::Error);
        let node = iox_benches::iceoryx2_files::node_builder()
            .create::<ipc::Service>()
            .expect("iceoryx2 node");
        let open = |name: String| {
            node.service_builder(&name.as_str().try_into().expect("service name"))
                .publish_subscribe::<[u8]>()
                .user_header::<[u64; 8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .subscriber_max_buffer_size(2)
                .history_size(0)
                .open_or_create()
                .expect("iceoryx2 service")
        };
        let ping = open(format!("iox-bench/{id}/hping"));
        let pong = open(format!("iox-bench/{id}/hpong"));
        let (out, inp) = if leader { (&ping, &pong) } else { (&pong, &ping) };
        let tx = out
            .publisher_builder()
            .initial_max_slice_len(len.max(1))
            .create()
            .expect("iceoryx2 publisher");
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

impl Endpoint for Iceoryx2HeaderEndpoint {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        let mut sample = self.tx.loan_slice_uninit(len).expect("iceoryx2 loan");
        *sample.user_header_mut() = [u64::from(first); 8];
        let p = sample.payload_mut();
        p[0].write(first);
        p[len - 1].write(last);
        // SAFETY: as for `Iceoryx2Endpoint::send`.
        unsafe { sample.assume_init() }.send().expect("iceoryx2 send");
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        let s = self.rx.receive().expect("iceoryx2 receive")?;
        let p = s.payload();
        Some((s.user_header()[7] as u8, p[p.len() - 1]))
    }
}
