//! The ping-pong over iceoryx2 (the published crate, version pinned in Cargo.lock):
//! the same two slice services, busy-polling, as close to its own benchmark's setup as
//! its API allows.

use std::time::{Duration, Instant};

use iceoryx2::node::Node;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;

use crate::endpoint::Endpoint;

/// One side of an iceoryx2 ping-pong.
pub struct Iceoryx2Endpoint {
    tx: Publisher<ipc::Service, [u8], ()>,
    rx: Subscriber<ipc::Service, [u8], ()>,
    _node: Node<ipc::Service>,
}

impl Iceoryx2Endpoint {
    /// Connects side `leader` of the ping-pong `id` with `len`-byte payloads.
    pub fn connect(id: &str, leader: bool, len: usize) -> Self {
        set_log_level(LogLevel::Error);
        let node = crate::iceoryx2_files::node_builder()
            .create::<ipc::Service>()
            .expect("iceoryx2 node");
        let open = |name: String| {
            node.service_builder(&name.as_str().try_into().expect("service name"))
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .subscriber_max_buffer_size(2)
                .history_size(0)
                .open_or_create()
                .expect("iceoryx2 service")
        };
        let ping = open(format!("iox-bench/{id}/ping"));
        let pong = open(format!("iox-bench/{id}/pong"));
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

impl Endpoint for Iceoryx2Endpoint {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        let mut sample = self.tx.loan_slice_uninit(len).expect("iceoryx2 loan");
        let p = sample.payload_mut();
        p[0].write(first);
        p[len - 1].write(last);
        // SAFETY: as for iox: shared memory is initialised at the machine level; only
        // the first and last byte are read.
        unsafe { sample.assume_init() }.send().expect("iceoryx2 send");
    }

    fn try_recv(&mut self) -> Option<(u8, u8)> {
        let s = self.rx.receive().expect("iceoryx2 receive")?;
        let p = s.payload();
        Some((p[0], p[p.len() - 1]))
    }
}
