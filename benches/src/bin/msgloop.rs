//! One process sends and receives `N` `u64` messages through one service (one
//! publisher, one subscriber, default limits): the loop to count instructions per
//! message with callgrind, which is deterministic where timings on a shared VM are not.
//! Run it twice with different `N` and divide the difference, so set-up cancels out:
//!
//! ```sh
//! cargo build --release -p iox_benches --bin msgloop
//! for n in 10000 30000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n target/release/msgloop $n 2>&1 | grep Collected
//! done   # (Ir(30000) - Ir(10000)) / 20000 = instructions per message (send + receive)
//! ```

use iox_service::Service;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .expect("usage: msgloop MESSAGES");
    let dir = tempfile::tempdir().expect("a temporary root");
    let svc = Service::named("msgloop")
        .expect("a valid name")
        .root(dir.path())
        .publish_subscribe::<u64>()
        .open_or_create()
        .expect("the service");
    let publisher = svc.publisher_builder().create().expect("a publisher");
    let subscriber = svc.subscriber_builder().create().expect("a subscriber");
    let mut sum = 0u64;
    for i in 0..n {
        publisher
            .loan_uninit()
            .expect("a loan")
            .write_payload(i)
            .send()
            .expect("sent");
        let got = subscriber.receive().expect("received").expect("a sample");
        sum = sum.wrapping_add(*got);
    }
    println!("{n} messages, checksum {sum}");
}
