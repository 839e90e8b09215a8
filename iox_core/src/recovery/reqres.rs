//! Recovery of dead clients and servers (run by `crate::recovery` under the
//! service's recovery lock; every step is safe to repeat).
//!
//! - A dead **client** slot: closed; a claim it held on a response queue (taking) or
//!   on a request queue (draining after its server closed) is finished or undone; a
//!   request send it died in (its journal) is finished; its response queues are
//!   drained, and so are its request queues to servers that are not active; its
//!   request slot words are cleared (so a server's next send on one of its requests
//!   reports `ClientGone`, and a request still queued is released when taken); its
//!   bit is cleared everywhere; the slot is freed.
//! - A dead **server** slot: closed; its claims resolved; a response send it died in
//!   is finished; its request queues are drained (those requests' chunks come back);
//!   its response queues to clients that are not active are drained (active clients
//!   take what reached them, then see the server gone); request slots ABANDONED for it
//!   are freed; its bit is cleared everywhere (the chunks of the requests it was
//!   handling, its loans); the slot is freed; then every active client is woken, so a
//!   pending response waiting on it looks and reports `ServerGone`.

use std::sync::atomic::Ordering;

use iox_mempool::Bookkeeping;

use crate::doorbell::Ringer;
use crate::dynamic::{self, Dynamic};
use crate::port;
use crate::queue;
use crate::recovery::{CleanupReport, finish_journaled_send, resolve_claims as resolve};
use crate::shm::request_word;

fn is_active(h: &crate::dynamic::PortHeader) -> bool {
    dynamic::split_state(h.state.load(Ordering::Acquire)).1 == dynamic::ACTIVE
}

/// Recovers dead client slot `c`.
pub fn recover_client(d: Dynamic<'_>, pool: &Bookkeeping, c: usize, report: &mut CleanupReport) {
    let l = d.layout();
    let header = d.sender(c);
    let owner = port::publisher_owner(c);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    port::close(header, generation);
    let servers = l.receiving;
    resolve(
        (0..servers).map(|s| d.response_queue(s, c)),
        queue::BY_CONSUMER,
        pool,
        owner,
        report,
    );
    resolve(
        (0..servers).map(|s| d.queue(c, s)),
        queue::BY_PRODUCER,
        pool,
        owner,
        report,
    );
    finish_journaled_send(header, (0..servers).map(|s| d.queue(c, s)), pool, owner, report);
    for s in 0..servers {
        report.chunks_freed += port::drain_queue(&d.response_queue(s, c), queue::BY_CONSUMER, pool, owner);
        if !is_active(d.receiver(s)) {
            report.chunks_freed += port::drain_queue(&d.queue(c, s), queue::BY_PRODUCER, pool, owner);
        }
    }
    for w in d.request_words(c) {
        w.store(0, Ordering::Release);
    }
    report.chunks_freed += pool.release_all(owner).1;
    port::free(header, generation);
    port::announce(d);
}

/// Recovers dead server slot `s`, then wakes the active clients.
pub fn recover_server(
    d: Dynamic<'_>,
    pool: &Bookkeeping,
    s: usize,
    ringer: &Ringer,
    report: &mut CleanupReport,
) {
    let l = d.layout();
    let header = d.receiver(s);
    let clients = l.sending;
    let owner = port::subscriber_owner(clients, s);
    let (generation, _) = dynamic::split_state(header.state.load(Ordering::Relaxed));
    port::close(header, generation);
    resolve(
        (0..clients).map(|c| d.queue(c, s)),
        queue::BY_CONSUMER,
        pool,
        owner,
        report,
    );
    resolve(
        (0..clients).map(|c| d.response_queue(s, c)),
        queue::BY_PRODUCER,
        pool,
        owner,
        report,
    );
    finish_journaled_send(
        header,
        (0..clients).map(|c| d.response_queue(s, c)),
        pool,
        owner,
        report,
    );
    for c in 0..clients {
        report.chunks_freed += port::drain_queue(&d.queue(c, s), queue::BY_CONSUMER, pool, owner);
        if !is_active(d.sender(c)) {
            report.chunks_freed +=
                port::drain_queue(&d.response_queue(s, c), queue::BY_PRODUCER, pool, owner);
        }
    }
    report.chunks_freed += pool.release_all(owner).1;
    port::free(header, generation);
    // After the state says FREE, as a server leaving by itself (see `request_word`).
    request_word::server_left((0..clients).flat_map(|c| d.request_words(c)), s, generation);
    port::announce(d);
    for c in 0..clients {
        let ch = d.sender(c);
        let waiting = ch.waiting.load(Ordering::SeqCst);
        if is_active(ch) && crate::doorbell::wants_wake(waiting) {
            port::wake(ch, waiting, ringer, l.receiving + c);
        }
    }
}

/// Recovers the dead clients and servers of a request-response service (servers
/// first, so the clients woken see them gone).
pub fn recover_ports(
    d: Dynamic<'_>,
    stem: &str,
    pool: &Bookkeeping,
    live: &mut crate::recovery::Liveness,
    report: &mut CleanupReport,
) {
    let l = d.layout();
    let ringer = Ringer::new(live.root(), stem, l.receiving + l.sending);
    for s in 0..l.receiving {
        let node = d.receiver(s).node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            recover_server(d, pool, s, &ringer, report);
            report.ports += 1;
        }
    }
    for c in 0..l.sending {
        let node = d.sender(c).node.load(Ordering::Acquire);
        if node != 0 && !live.alive(node) {
            recover_client(d, pool, c, report);
            report.ports += 1;
        }
    }
}

/// Requests in flight: request slot words in use (sent, not yet ended and released).
pub fn requests_in_flight(d: Dynamic<'_>) -> usize {
    (0..d.layout().sending)
        .flat_map(|c| d.request_words(c))
        .filter(|w| {
            let w = w.load(Ordering::Relaxed);
            w != 0 && w & request_word::FIN == 0
        })
        .count()
}

/// Requests in flight of client slot `c`.
pub fn client_in_flight(d: Dynamic<'_>, c: usize) -> usize {
    d.request_words(c)
        .iter()
        .filter(|w| {
            let w = w.load(Ordering::Relaxed);
            w != 0 && w & request_word::FIN == 0
        })
        .count()
}
