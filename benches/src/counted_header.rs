//! The instruction-count loop of [`Case::Header64`](crate::counted::Case::Header64):
//! `counted`'s `one` with a 64-byte user header (`[u64; 8]`) written per send and read
//! per receive, for iox and iceoryx2. Kept apart from `counted`, out of line, so that
//! adding it changed nothing in how the other loops are compiled.

use crate::counted::Library;

/// Runs the header loop for `n` messages with `library`; returns a checksum.
#[inline(never)]
pub fn run(library: Library, n: u64) -> u64 {
    match library {
        Library::Iox => {
            let dir = tempfile::tempdir().expect("a temporary root");
            run_iox_header(dir.path(), n)
        }
        Library::Iceoryx2 => {
            use iceoryx2::prelude::*;
            set_log_level(LogLevel::Error);
            let node = crate::iceoryx2_files::node_builder()
                .create::<ipc::Service>()
                .expect("iceoryx2 node");
            let name = format!("iox-counted-header/{}", std::process::id());
            run_iceoryx2_header(&node, &name, n)
        }
    }
}

pub(crate) fn run_iox_header(root: &std::path::Path, n: u64) -> u64 {
    let svc = iox_service::Service::named("counted-header")
        .expect("a valid name")
        .root(root)
        .publish_subscribe::<u64>()
        .user_header::<[u64; 8]>()
        .open_or_create()
        .expect("the service");
    let publisher = svc.publisher_builder().create().expect("a publisher");
    let subscriber = svc.subscriber_builder().create().expect("a subscriber");
    let mut sum = 0u64;
    for i in 0..n {
        publisher
            .loan_uninit()
            .expect("a loan")
            .write_header([i; 8])
            .write_payload(i)
            .send()
            .expect("sent");
        sum = sum.wrapping_add(counted_receive_iox_header(&subscriber));
    }
    sum
}

/// [`counted_receive_iox`] with the header read too.
#[inline(never)]
fn counted_receive_iox_header(s: &iox_service::Subscriber<u64, [u64; 8]>) -> u64 {
    let sample = s.receive().expect("received").expect("a sample");
    sample.user_header()[7].wrapping_add(*sample)
}

/// As [`counted_receive_iox_header`], for iceoryx2.
#[inline(never)]
fn counted_receive_iceoryx2_header(
    s: &iceoryx2::port::subscriber::Subscriber<iceoryx2::prelude::ipc::Service, u64, [u64; 8]>,
) -> u64 {
    let sample = s.receive().expect("iceoryx2 receive").expect("a sample");
    sample.user_header()[7].wrapping_add(*sample.payload())
}

fn run_iceoryx2_header(
    node: &iceoryx2::node::Node<iceoryx2::prelude::ipc::Service>,
    name: &str,
    n: u64,
) -> u64 {
    let svc = node
        .service_builder(&name.try_into().expect("a service name"))
        .publish_subscribe::<u64>()
        .user_header::<[u64; 8]>()
        .open_or_create()
        .expect("iceoryx2 service");
    let publisher = svc.publisher_builder().create().expect("iceoryx2 publisher");
    let subscriber = svc.subscriber_builder().create().expect("iceoryx2 subscriber");
    let mut sum = 0u64;
    for i in 0..n {
        let mut loan = publisher.loan_uninit().expect("iceoryx2 loan");
        *loan.user_header_mut() = [i; 8];
        loan.write_payload(i).send().expect("iceoryx2 send");
        sum = sum.wrapping_add(counted_receive_iceoryx2_header(&subscriber));
    }
    sum
}
