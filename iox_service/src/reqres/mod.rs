//! The request-response pattern: clients send requests, each to one server; a server
//! streams any number of responses back to the client that asked, in order, and ends
//! the stream by dropping the request.
//!
//! Layout. A request-response service uses the core's files and protocol (static
//! config, dynamic segment, users, node liveness, recovery, `iox list/show/clean`):
//! clients take the publisher port slots (owner bit `c`), servers the subscriber slots
//! (owner bit `max_clients + s`), so a chunk's ownership word, the send journal, the
//! queue claims and "recover dead port X = clear bit X everywhere" work as for
//! pub-sub. One pool holds requests and responses (a class per payload size).
//! - Request path: the pair queue (client `c`, server `s`), `max_active_requests_per_client`
//!   deep, client the producer, server the consumer.
//! - Response path: one more queue per (server `s`, client `c`),
//!   `max_active_requests_per_client x max_response_buffer` deep, server the producer.
//! - Request slots: per client slot, `max_active_requests_per_client` words in the
//!   dynamic segment ([`request_word`]): the state of each active request, shared by the
//!   client and the server handling it. A queue entry (request or response) is
//!   `seq << 32 | chunk`, `seq` naming the request (its request slot and a per-client
//!   counter), so responses find their request and stale ones are recognised.
//!
//! Protocol.
//! - Send (client): take a free request slot (word 0; else
//!   [`RequestSendError::TooManyActiveRequests`]), pick a server (round robin over the
//!   active server slots, from after the last one used; none:
//!   [`RequestSendError::NoServer`]), write the slot word (`server | seq`), then the
//!   journaled send of pub-sub: journal the entry, push, hand the chunk to the queue
//!   in one step, clear the journal, fence, wake the server.
//! - Receive (server): pop its queues round-robin over the clients; a request whose
//!   slot word no longer names it (the client dropped it, or died) is released and
//!   skipped. The request's chunk stays under the server's bit until the
//!   [`ActiveRequest`] drops.
//! - Respond (server): check the slot word still names the request (else
//!   [`ResponseSendError::ClientGone`] or [`ResponseSendError::Abandoned`]), then a
//!   journaled send into the (server, client) queue. Decision: a full response queue
//!   makes `send` wait for the client (polling with a growing pause, up to 100 µs,
//!   watching the client's liveness) rather than dropping responses: a stream is only
//!   useful complete and in order.
//! - End of stream: dropping the [`ActiveRequest`] sets the FIN flag of the slot
//!   word (Release, after every push) and wakes the client. The client, finding its
//!   queue empty, reads the word (Acquire) and on FIN looks once more: so it sees
//!   every response before the end. No queue entry is spent on the end, so dropping
//!   never waits.
//! - Drop of a [`PendingResponse`]: its slot word becomes ABANDONED (the server's
//!   next send reports it and its drop frees the slot), or 0 at once when the stream
//!   ended or the server is gone. Its responses still queued are released when the
//!   client next pops them, or when the client goes.
//!
//! Faults (see [`recovery`]). A dead server is recovered as a dead subscriber (its
//! queued requests drained, the chunks of the requests it held released) plus as a
//! dead publisher for its response queues (a response send it died in is finished);
//! the clients are woken, and a pending response whose server slot changed
//! generation or closed ends with [`ResponseReceiveError::ServerGone`] once the
//! responses that reached it are taken. A dead client is recovered the other way
//! round; its request slots are cleared, so the server's next send on one of its
//! requests reports [`ResponseSendError::ClientGone`]. Processes find dead peers
//! without anyone else's help: a client waiting on a server, and a server sending to
//! a client, look at the peer's node lock at most every 10 ms and run recovery when it
//! is free.
//!
//! Readiness: `Client`, `Server` and `PendingResponse` are `AsFd` (the doorbell of
//! their slot; a pending response shares its client's): readable when something may
//! have arrived; receive until nothing is left. Client doorbells are numbered after
//! the servers' (`max_servers + c`).
//!
//! Files: `service.rs` (builder, sizing, [`RequestResponseService`]), `slots.rs`
//! (request-slot words, entries, waiting), `client.rs`, `pending.rs`, `server.rs`, `active.rs` (active requests, response loans),
//! `layout.rs` (the pattern's part of the dynamic segment, and what the core asks of
//! it), `recovery.rs`.

pub(crate) mod active;
pub(crate) mod client;
pub(crate) use iox_core::shm::regions::reqres as layout;
pub(crate) mod pending;
pub(crate) mod raw;
pub(crate) use iox_core::recovery::reqres as recovery;
pub(crate) use iox_core::shm::request_word;
pub(crate) mod server;
pub(crate) mod service;
pub(crate) mod slots;

pub use iox_core::static_config::reqres::MAX_ACTIVE_REQUESTS;

pub use active::{ActiveRequest, ResponseMut, ResponseMutUninit};
pub use client::{Client, ClientBuilder, RequestMut, RequestMutUninit, RequestSendError};
pub use pending::{PendingResponse, Response, ResponseReceiveError};
pub use server::{ResponseSendError, Server, ServerBuilder, ServerReceiveError};
pub use service::{RequestResponseBuilder, RequestResponseService};

/// The payload types of a port or loan, as a marker: neither owned nor shared, so
/// the types impose no auto traits of their own.
pub(crate) type Types<Req, Resp> = fn() -> (Box<Req>, Box<Resp>);
