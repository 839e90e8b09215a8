//! Request -> response round trips over iox and iceoryx2 request-response services,
//! busy-polling or blocking.
//!
//! Each request carries a tag in its first and last byte; the server answers with
//! one response of the same size carrying the tag back, and drops the request. The
//! client's timed part is loan + write + send + receiving that response; then,
//! untimed, it waits for the stream to end (iox: `is_finished`; iceoryx2: the pending
//! response is no longer connected), so the next request never meets a limit.
//!
//! Blocking: iox sleeps in `receive_timeout` on both sides (futex; the sender wakes
//! the sleeper). iceoryx2's request-response has no blocking receive: its users pair
//! the service with an event service each way and sleep in the listener's
//! `blocking_wait`, notifying after each send, which is what the iceoryx2 side does.

use std::time::{Duration, Instant};

use iceoryx2::node::Node;
use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::prelude::*;

/// The tag that stops the server (echoed back first).
pub const STOP: (u8, u8) = (0, 255);
const LONG: Duration = Duration::from_secs(30);

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LONG, "{what}");
        std::thread::yield_now();
    }
}

/// The client side.
pub trait RrClient {
    /// Sends a `len`-byte request tagged (`first`, `last`) and returns the tag of its
    /// response; the stream's end is awaited afterwards by [`RrClient::finish`].
    fn request(&mut self, len: usize, first: u8, last: u8) -> (u8, u8);
    /// Waits (untimed) until the last request's stream ended.
    fn finish(&mut self);
}

/// The server side: answers one request; false after answering [`STOP`].
pub trait RrServer {
    /// Answers the next request.
    fn serve_one(&mut self, len: usize) -> bool;
}

/// iox's request-response.
pub struct IoxRr {
    client: Option<iox_service::Client<[u8], [u8]>>,
    pending: Option<iox_service::PendingResponse<[u8], [u8]>>,
    server: Option<iox_service::Server<[u8], [u8]>>,
    block: bool,
    svc: iox_service::RequestResponseService<[u8], [u8]>,
}

impl IoxRr {
    /// Connects the client (`leader`) or the server of round trip `id`.
    pub fn connect(id: &str, leader: bool, len: usize, block: bool) -> Self {
        let svc = iox_service::Service::named(&format!("iox-bench/{id}/rr"))
            .expect("service name")
            .request_response::<[u8], [u8]>()
            .max_clients(1)
            .max_servers(1)
            .max_active_requests_per_client(2)
            .max_response_buffer(1)
            .request_slice_len(len)
            .response_slice_len(len)
            .open_or_create()
            .expect("iox service");
        let (client, server) = if leader {
            (Some(svc.client_builder().create().expect("iox client")), None)
        } else {
            (None, Some(svc.server_builder().create().expect("iox server")))
        };
        wait_for("the other side never connected", || svc.port_counts() == (1, 1));
        Self {
            client,
            pending: None,
            server,
            block,
            svc,
        }
    }
}

impl RrClient for IoxRr {
    fn request(&mut self, len: usize, first: u8, last: u8) -> (u8, u8) {
        let client = self.client.as_ref().expect("client side");
        let mut req = client.loan_slice_uninit(len).expect("iox loan");
        let p = req.payload_mut();
        p[0].write(first);
        p[len - 1].write(last);
        // SAFETY: shared memory is initialised at the machine level; only the first
        // and last byte are read (as in the pub-sub ping-pong).
        let pending = unsafe { req.assume_init() }.send().expect("iox send");
        let got = loop {
            let r = if self.block {
                pending.receive_timeout(LONG).expect("iox receive")
            } else {
                pending.receive().expect("iox receive")
            };
            if let Some(r) = r {
                break (r[0], r[len - 1]);
            }
        };
        self.pending = Some(pending);
        got
    }

    fn finish(&mut self) {
        if let Some(p) = self.pending.take() {
            while !p.is_finished() {
                let r = if self.block {
                    p.receive_timeout(LONG)
                } else {
                    p.receive()
                };
                assert!(r.expect("iox receive").is_none(), "one response per request");
            }
        }
    }
}

impl RrServer for IoxRr {
    fn serve_one(&mut self, len: usize) -> bool {
        let server = self.server.as_ref().expect("server side");
        let active = loop {
            let r = if self.block {
                server.receive_timeout(LONG).expect("iox receive")
            } else {
                server.receive().expect("iox receive")
            };
            if let Some(a) = r {
                break a;
            }
        };
        let tag = (active[0], active[active.len() - 1]);
        let mut resp = active.loan_slice_uninit(len).expect("iox loan");
        let p = resp.payload_mut();
        p[0].write(tag.0);
        p[len - 1].write(tag.1);
        // SAFETY: as for the request.
        unsafe { resp.assume_init() }.send().expect("iox respond");
        drop(active);
        if tag == STOP {
            // Let the client see the end before the service goes.
            wait_for("the client never left", || self.svc.port_counts().0 == 0);
        }
        tag != STOP
    }
}

type Ix2Client = iceoryx2::port::client::Client<ipc::Service, [u8], (), [u8], ()>;
type Ix2Server = iceoryx2::port::server::Server<ipc::Service, [u8], (), [u8], ()>;
type Ix2Pending = iceoryx2::pending_response::PendingResponse<ipc::Service, [u8], (), [u8], ()>;

/// iceoryx2's request-response (plus an event service each way when blocking).
pub struct Iceoryx2Rr {
    client: Option<Ix2Client>,
    pending: Option<Ix2Pending>,
    server: Option<Ix2Server>,
    events: Option<(Notifier<ipc::Service>, Listener<ipc::Service>)>,
    _node: Node<ipc::Service>,
}

impl Iceoryx2Rr {
    /// Connects the client (`leader`) or the server of round trip `id`.
    pub fn connect(id: &str, leader: bool, len: usize, block: bool) -> Self {
        set_log_level(LogLevel::Error);
        let node = crate::iceoryx2_files::node_builder()
            .create::<ipc::Service>()
            .expect("iceoryx2 node");
        let name = format!("iox-bench/{id}/rr");
        let svc = node
            .service_builder(&name.as_str().try_into().expect("service name"))
            .request_response::<[u8], [u8]>()
            .max_clients(1)
            .max_servers(1)
            .max_active_requests_per_client(2)
            .max_response_buffer_size(1)
            .open_or_create()
            .expect("iceoryx2 service");
        let (client, server) = if leader {
            let c = svc
                .client_builder()
                .initial_max_slice_len(len)
                .create()
                .expect("iceoryx2 client");
            (Some(c), None)
        } else {
            let s = svc
                .server_builder()
                .initial_max_slice_len(len)
                .create()
                .expect("iceoryx2 server");
            (None, Some(s))
        };
        let events = block.then(|| {
            let open = |dir: &str| {
                let name = format!("iox-bench/{id}/rr-{dir}");
                node.service_builder(&name.as_str().try_into().expect("service name"))
                    .event()
                    .max_notifiers(1)
                    .max_listeners(1)
                    .open_or_create()
                    .expect("iceoryx2 event service")
            };
            let (to_server, to_client) = (open("to-server"), open("to-client"));
            let (out, inp) = if leader {
                (&to_server, &to_client)
            } else {
                (&to_client, &to_server)
            };
            let listener = inp.listener_builder().create().expect("iceoryx2 listener");
            let notifier = out.notifier_builder().create().expect("iceoryx2 notifier");
            wait_for("the other side never connected", || {
                out.dynamic_config().number_of_listeners() == 1
                    && inp.dynamic_config().number_of_notifiers() == 1
            });
            (notifier, listener)
        });
        wait_for("the other side never connected", || {
            svc.dynamic_config().number_of_clients() == 1 && svc.dynamic_config().number_of_servers() == 1
        });
        Self {
            client,
            pending: None,
            server,
            events,
            _node: node,
        }
    }

    fn notify(&self) {
        if let Some((n, _)) = &self.events {
            n.notify().expect("iceoryx2 notify");
        }
    }

    fn sleep(&self) {
        if let Some((_, l)) = &self.events {
            l.blocking_wait(|_| {}).expect("iceoryx2 wait");
        }
    }
}

impl RrClient for Iceoryx2Rr {
    fn request(&mut self, len: usize, first: u8, last: u8) -> (u8, u8) {
        let client = self.client.as_ref().expect("client side");
        let mut req = client.loan_slice_uninit(len).expect("iceoryx2 loan");
        let p = req.payload_mut();
        p[0].write(first);
        p[len - 1].write(last);
        // SAFETY: as for iox.
        let pending = unsafe { req.assume_init() }.send().expect("iceoryx2 send");
        self.notify();
        let got = loop {
            if let Some(r) = pending.receive().expect("iceoryx2 receive") {
                let p = r.payload();
                break (p[0], p[p.len() - 1]);
            }
            self.sleep();
        };
        self.pending = Some(pending);
        got
    }

    fn finish(&mut self) {
        if let Some(p) = self.pending.take() {
            while p.is_connected() {
                std::hint::spin_loop();
            }
        }
    }
}

impl RrServer for Iceoryx2Rr {
    fn serve_one(&mut self, len: usize) -> bool {
        let server = self.server.as_ref().expect("server side");
        let active = loop {
            if let Some(a) = server.receive().expect("iceoryx2 receive") {
                break a;
            }
            self.sleep();
        };
        let p = active.payload();
        let tag = (p[0], p[p.len() - 1]);
        let mut resp = active.loan_slice_uninit(len).expect("iceoryx2 loan");
        let p = resp.payload_mut();
        p[0].write(tag.0);
        p[len - 1].write(tag.1);
        // SAFETY: as for iox.
        unsafe { resp.assume_init() }.send().expect("iceoryx2 respond");
        drop(active);
        self.notify();
        if tag == STOP {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(200) {
                std::thread::yield_now();
            }
        }
        tag != STOP
    }
}
