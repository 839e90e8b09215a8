//! The loops the instruction-count benchmark (`--bin instructions`) runs under
//! callgrind, one process each: iox and iceoryx2 doing the same work, so that their
//! counts per message compare. Every loop sends (or loans) `n` `u64` messages; set-up
//! and teardown are the same for every `n`, so the difference of two runs with
//! different `n`, divided by the difference of the `n`s, is what one message costs.
//!
//! The cases ([`Case`]): one publisher and one subscriber with default limits; the
//! same with `max_subscribers(1)` and `max_subscribers(16)` (one connected: what slots
//! that are not connected cost); fan-out to four connected subscribers (each message
//! is sent once and received four times); a loan released without sending; and a
//! request-response round trip (one client, one server, `u64` both ways: request
//! loaned, sent, received, answered with one response, received, everything dropped);
//! and `one` with a 64-byte user header (`[u64; 8]`) written per send and read per
//! receive beside the payload.

use std::hint::black_box;

/// What one run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// 1 publisher, 1 subscriber, the library's default limits: send + receive.
    One,
    /// As `one`, with `max_subscribers(1)`.
    Max1,
    /// As `one`, with `max_subscribers(16)` and one subscriber connected.
    Max16,
    /// 1 publisher, 4 connected subscribers (default limits): one send, four receives.
    Fanout4,
    /// Loan a sample and drop it unsent (default limits).
    Loan,
    /// One request and its one response (1 client, 1 server, 2 active requests, a
    /// response buffer of 1): a message here is the whole round trip.
    Reqres,
    /// As `one`, each sample with a 64-byte user header (`[u64; 8]`), written in the
    /// loan and read from the sample.
    Header64,
}

impl Case {
    /// Every case, in table order.
    pub const ALL: [Case; 7] = [
        Case::One,
        Case::Max1,
        Case::Max16,
        Case::Fanout4,
        Case::Loan,
        Case::Reqres,
        Case::Header64,
    ];

    /// Its name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Case::One => "one",
            Case::Max1 => "max1",
            Case::Max16 => "max16",
            Case::Fanout4 => "fanout4",
            Case::Loan => "loan",
            Case::Reqres => "reqres",
            Case::Header64 => "header64",
        }
    }

    /// `max_subscribers` the service is made with (`None`: the default).
    fn max_subscribers(self) -> Option<u32> {
        match self {
            Case::Max1 => Some(1),
            Case::Max16 => Some(16),
            _ => None,
        }
    }

    /// Subscribers connected.
    fn subscribers(self) -> usize {
        match self {
            Case::Fanout4 => 4,
            Case::Loan | Case::Reqres => 0,
            _ => 1,
        }
    }
}

/// The library measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Library {
    /// This crate's library.
    Iox,
    /// iceoryx2 (the version pinned in Cargo.lock).
    Iceoryx2,
}

impl Library {
    /// Its name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Library::Iox => "iox",
            Library::Iceoryx2 => "iceoryx2",
        }
    }
}

/// Runs `case` for `n` messages with `library`; returns a checksum (printed, so that
/// nothing is optimised away). Not for [`Case::Header64`], which runs in its own
/// module ([`crate::counted_header`], dispatched by the benchmark's child), so that
/// adding it changed nothing in how these loops are compiled: their counts compare
/// with builds that had no header case.
pub fn run(library: Library, case: Case, n: u64) -> u64 {
    match library {
        Library::Iox => run_iox(case, n),
        Library::Iceoryx2 => run_iceoryx2(case, n),
    }
}

fn run_iox(case: Case, n: u64) -> u64 {
    let dir = tempfile::tempdir().expect("a temporary root");
    if case == Case::Reqres {
        return run_iox_reqres(dir.path(), n);
    }

    let mut builder = iox_service::Service::named("counted")
        .expect("a valid name")
        .root(dir.path())
        .publish_subscribe::<u64>();
    if let Some(max) = case.max_subscribers() {
        builder = builder.max_subscribers(max);
    }
    let svc = builder.open_or_create().expect("the service");
    let publisher = svc.publisher_builder().create().expect("a publisher");
    let subscribers: Vec<_> = (0..case.subscribers())
        .map(|_| svc.subscriber_builder().create().expect("a subscriber"))
        .collect();
    let mut sum = 0u64;
    for i in 0..n {
        let loan = publisher.loan_uninit().expect("a loan");
        if case == Case::Loan {
            drop(black_box(loan));
            continue;
        }
        loan.write_payload(i).send().expect("sent");
        for s in &subscribers {
            sum = sum.wrapping_add(counted_receive_iox(s));
        }
    }
    sum
}

fn run_iox_reqres(root: &std::path::Path, n: u64) -> u64 {
    let svc = iox_service::Service::named("counted-rr")
        .expect("a valid name")
        .root(root)
        .request_response::<u64, u64>()
        .max_clients(1)
        .max_servers(1)
        .max_active_requests_per_client(2)
        .max_response_buffer(1)
        .open_or_create()
        .expect("the service");
    let client = svc.client_builder().create().expect("a client");
    let server = svc.server_builder().create().expect("a server");
    let mut sum = 0u64;
    for i in 0..n {
        let pending = client
            .loan_uninit()
            .expect("a request loan")
            .write_payload(i)
            .send()
            .expect("the request sent");
        let active = server.receive().expect("received").expect("a request");
        let answer = *active + 1;
        active
            .loan_uninit()
            .expect("a response loan")
            .write_payload(answer)
            .send()
            .expect("the response sent");
        drop(active);
        let response = pending.receive().expect("received").expect("a response");
        sum = sum.wrapping_add(*response);
    }
    sum
}

/// One receive and the drop of its sample, out of line under a name the benchmark
/// gives callgrind (`--toggle-collect=*counted_receive*`) to count receives alone.
#[inline(never)]
fn counted_receive_iox(s: &iox_service::Subscriber<u64>) -> u64 {
    *s.receive().expect("received").expect("a sample")
}

/// As [`counted_receive_iox`], for iceoryx2.
#[inline(never)]
fn counted_receive_iceoryx2(
    s: &iceoryx2::port::subscriber::Subscriber<iceoryx2::prelude::ipc::Service, u64, ()>,
) -> u64 {
    *s.receive()
        .expect("iceoryx2 receive")
        .expect("a sample")
        .payload()
}

fn run_iceoryx2(case: Case, n: u64) -> u64 {
    use iceoryx2::prelude::*;
    set_log_level(LogLevel::Error);
    let node = crate::iceoryx2_files::node_builder()
        .create::<ipc::Service>()
        .expect("iceoryx2 node");
    let name = format!("iox-counted/{}", std::process::id());
    if case == Case::Reqres {
        return run_iceoryx2_reqres(&node, &name, n);
    }

    let mut builder = node
        .service_builder(&name.as_str().try_into().expect("a service name"))
        .publish_subscribe::<u64>();
    if let Some(max) = case.max_subscribers() {
        builder = builder.max_subscribers(max as usize);
    }
    let svc = builder.open_or_create().expect("iceoryx2 service");
    let publisher = svc.publisher_builder().create().expect("iceoryx2 publisher");
    let subscribers: Vec<_> = (0..case.subscribers())
        .map(|_| svc.subscriber_builder().create().expect("iceoryx2 subscriber"))
        .collect();
    let mut sum = 0u64;
    for i in 0..n {
        let loan = publisher.loan_uninit().expect("iceoryx2 loan");
        if case == Case::Loan {
            drop(black_box(loan));
            continue;
        }
        loan.write_payload(i).send().expect("iceoryx2 send");
        for s in &subscribers {
            sum = sum.wrapping_add(counted_receive_iceoryx2(s));
        }
    }
    sum
}

fn run_iceoryx2_reqres(
    node: &iceoryx2::node::Node<iceoryx2::prelude::ipc::Service>,
    name: &str,
    n: u64,
) -> u64 {
    let svc = node
        .service_builder(&name.try_into().expect("a service name"))
        .request_response::<u64, u64>()
        .max_clients(1)
        .max_servers(1)
        .max_active_requests_per_client(2)
        .max_response_buffer_size(1)
        .open_or_create()
        .expect("iceoryx2 service");
    let client = svc.client_builder().create().expect("iceoryx2 client");
    let server = svc.server_builder().create().expect("iceoryx2 server");
    let mut sum = 0u64;
    for i in 0..n {
        let pending = client
            .loan_uninit()
            .expect("iceoryx2 loan")
            .write_payload(i)
            .send()
            .expect("iceoryx2 request");
        let active = server.receive().expect("iceoryx2 receive").expect("a request");
        let answer = *active.payload() + 1;
        active
            .loan_uninit()
            .expect("iceoryx2 loan")
            .write_payload(answer)
            .send()
            .expect("iceoryx2 response");
        drop(active);
        let response = pending.receive().expect("iceoryx2 receive").expect("a response");
        sum = sum.wrapping_add(*response.payload());
    }
    sum
}
