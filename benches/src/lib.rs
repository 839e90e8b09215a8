//! Benchmarks of iox, measured side by side with its peers in one run.
//!
//! - `cargo bench -p iox_benches --bench pool`: pool loan + release (criterion).
//! - `cargo run --release -p iox_benches --bin pingpong`: one-way latency between two
//!   processes (ping-pong, busy-polling) for iox, iceoryx2 and a Unix socket, payloads
//!   8 B .. 16 MiB, against the floor of one shared word bounced between them, and
//!   iox from C++ (both sides C++ programs on the C ABI, [`cpp_transport`]);
//!   throughput; pinning costs. `--quick` for a smoke run.
//! - `cargo run --release -p iox_benches --bin eventpingpong`: event notify ->
//!   listener wake-up latency, iox vs iceoryx2, both sides blocking on their
//!   listeners, against the floor of a futex word bounced between two processes.
//! - `cargo run --release -p iox_benches --bin wakeup`: blocking wake-up latency, each
//!   side asleep in a WaitSet (iox vs iceoryx2's WaitSet on an event Listener), 8 B and
//!   1 MiB; the same with 1,000 subscribers attached; CPU time while idle.
//! - `cargo run --release -p iox_benches --bin rrpingpong`: request -> response round
//!   trip, iox vs iceoryx2's request-response, 8 B and 1 MiB, busy-polling and
//!   blocking.
//!
//! - `cargo run --release -p iox_benches --bin instructions`: instructions per message
//!   counted with callgrind (deterministic), iox and iceoryx2 side by side; needs
//!   valgrind. The loops it counts are in [`counted`] and [`counted_header`]; `--header`
//!   on `pingpong` adds iox and iceoryx2 with a 64-byte user header (its transports
//!   live in that binary, so that they change nothing in how this library compiles).
//!
//! Modules: [`endpoint`] (the trait every transport implements and the ping-pong
//! loops), one module per transport ([`event_transport`] for the event benchmark,
//! [`waitset_transport`] the blocking pub-sub ones), [`report`] (histograms, table, CSV).

pub mod counted;
pub mod counted_header;
pub mod cpp_transport;
pub mod endpoint;
pub mod event_transport;
pub mod floor_transport;
pub mod iceoryx2_files;
pub mod iceoryx2_transport;
pub mod iox_transport;
pub mod report;
pub mod reqres_transport;
pub mod socket_transport;
pub mod waitset_transport;
