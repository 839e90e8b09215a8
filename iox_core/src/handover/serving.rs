//! The responding thread: one per process, answering hand-over requests on the
//! sockets of every service the process offers, never waiting on any one peer.
//!
//! Every socket it touches is non-blocking and in one epoll set: the listening sockets
//! (keyed by their offer's token) and the connections accepted from them (keyed by a
//! connection number with `CONNECTION` set). A connection is served as soon as its
//! request is readable, usually right at the accept (a requester sends as soon as it
//! is connected): request read, credentials checked (see [`super::admission`]), reply
//! and descriptors sent without waiting (`MSG_DONTWAIT`), connection closed. A
//! connection that says nothing is closed at its deadline, [`PEER_TIMEOUT`] after its
//! accept. The thread sleeps in `epoll_wait` until the next event or deadline (with no
//! connection pending: no timeout, no CPU). So a silent peer costs one descriptor for
//! at most [`PEER_TIMEOUT`], and no peer's behaviour delays another peer's hand-over.
//!
//! Bounds against a flood (a local user of another uid may connect to any socket
//! whose mode lets it):
//! - at most [`PER_UID`] pending connections per peer uid: a newer one closes that
//!   uid's oldest, so one user's connections never take another's place; and at most
//!   [`MAX_PENDING`] in all (then the oldest of the uid with the most is closed), so
//!   they never take the process's descriptors;
//! - at most `ACCEPT_BURST` accepts per listening socket per wake-up, so one
//!   socket's flood does not hold up the others (level-triggered: the rest wait for
//!   the next round);
//! - at the descriptor limit (`accept` fails with `EMFILE`/`ENFILE`), a pending
//!   connection is closed to make room (the oldest of the uid with the most), or else,
//!   with none pending, the thread's reserve descriptor (a `/dev/null` kept open for
//!   this) is given up for one accept; the reserve is taken back once a descriptor is
//!   free again. A queued connection is so served or refused, never left queued while
//!   its listener stays readable (which would spin the thread). If no descriptor can
//!   be had at all, or `accept` fails otherwise, the listener leaves the epoll set for
//!   `BACKOFF`;
//! - a connection leaves the epoll set before it is closed: a process forked from this
//!   one holds copies of its descriptors, which would keep the registration (and its
//!   readiness) alive;
//! - a request is one record of at most [`wire::MAX_REQUEST`] bytes; descriptors a peer
//!   sends along are never received (no control buffer: the kernel closes them).

use std::collections::{BTreeMap, HashMap};
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::epoll;
use rustix::net::{self, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags};

use super::admission::{self, Peer};
use super::wire::{self, Status};

/// How long a connection may stay silent before it is closed.
pub const PEER_TIMEOUT: Duration = Duration::from_millis(200);
/// Pending (silent so far) connections per peer uid.
pub const PER_UID: usize = 8;
/// Pending connections in all.
pub const MAX_PENDING: usize = 256;
/// Accepts per listening socket per wake-up.
const ACCEPT_BURST: usize = 32;
/// How long a listener rests when no descriptor can be had for an accept.
const BACKOFF: Duration = Duration::from_millis(50);
/// Marks a connection's key in the epoll set (listeners' tokens are small).
const CONNECTION: u64 = 1 << 63;

/// One offered service.
pub struct Entry {
    pub root: PathBuf,
    pub stem: String,
    pub socket_name: String,
    /// The random part of the socket's name.
    pub nonce: u32,
    pub listener: OwnedFd,
    /// The descriptors as this process holds them (read-write for a publisher,
    /// read-only for a reader of a service with an access policy).
    pub fds: Vec<OwnedFd>,
    /// The same files opened read-only, for the readers of the service's access
    /// policy (empty without a policy that names readers).
    pub read_only: Vec<OwnedFd>,
    /// The service's access policy, as this process read (or wrote) it when it
    /// opened (or created) the service.
    pub policy: Option<crate::access::AccessPolicy>,
    /// The file whose owner, group and mode admit a peer (the dynamic segment, as
    /// this process opened it: not a path someone could put another file under).
    pub guard: OwnedFd,
}

/// The offered services by token, shared with the thread: the thread takes only this
/// lock (briefly, to look one up), never the registry of offers, and a forked child
/// never touches its parent's (it starts a thread of its own with a map of its own).
pub type Entries = Arc<Mutex<HashMap<u64, Arc<Entry>>>>;

pub fn lock(entries: &Entries) -> MutexGuard<'_, HashMap<u64, Arc<Entry>>> {
    entries.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the thread that serves `entries`' sockets, which are in `epoll`.
pub fn spawn(epoll: Arc<OwnedFd>, entries: Entries) -> std::io::Result<()> {
    let reserve = reserve();
    std::thread::Builder::new()
        .name("iox-handover".into())
        .spawn(move || {
            Server {
                epoll,
                entries,
                pending: BTreeMap::new(),
                next: 0,
                reserve,
                resting: Vec::new(),
            }
            .run()
        })?;
    Ok(())
}

/// A descriptor kept to be given up at the descriptor limit.
fn reserve() -> Option<OwnedFd> {
    rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()
}

/// A connection whose request has not come yet.
struct Pending {
    conn: OwnedFd,
    entry: Arc<Entry>,
    peer: Peer,
    deadline: Instant,
}

struct Server {
    epoll: Arc<OwnedFd>,
    entries: Entries,
    /// By connection number: the oldest first.
    pending: BTreeMap<u64, Pending>,
    next: u64,
    reserve: Option<OwnedFd>,
    /// Listeners out of the epoll set until then (by token).
    resting: Vec<(u64, Instant)>,
}

impl Server {
    fn run(mut self) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(32);
        loop {
            let now = Instant::now();
            let next = self
                .pending
                .values()
                .map(|p| p.deadline)
                .chain(self.resting.iter().map(|&(_, at)| at))
                .min();
            let timeout = next.map(|at| {
                let wait = at.saturating_duration_since(now);
                rustix::time::Timespec {
                    tv_sec: wait.as_secs() as _,
                    // Rounded up to a millisecond: no busy turns just before a deadline.
                    tv_nsec: wait.subsec_nanos().max(1_000_000) as _,
                }
            });
            events.clear();
            match epoll::wait(
                &*self.epoll,
                rustix::buffer::spare_capacity(&mut events),
                timeout.as_ref(),
            ) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                // Only EBADF/EINVAL could come here (our own descriptor): stop answering;
                // requesters then turn to other holders.
                Err(_) => return,
            }
            for ev in &events {
                let key = ev.data.u64();
                if key & CONNECTION != 0 {
                    self.readable(key & !CONNECTION);
                } else {
                    let entry = lock(&self.entries).get(&key).cloned();
                    if let Some(entry) = entry {
                        self.accept(key, &entry);
                    }
                }
            }
            self.expire();
        }
    }

    /// Accepts what waits on `entry`'s socket (at most [`ACCEPT_BURST`]).
    fn accept(&mut self, token: u64, entry: &Arc<Entry>) {
        for _ in 0..ACCEPT_BURST {
            match net::accept_with(&entry.listener, SocketFlags::CLOEXEC | SocketFlags::NONBLOCK) {
                Ok(conn) => self.admit(conn, entry),
                Err(rustix::io::Errno::INTR | rustix::io::Errno::CONNABORTED) => {}
                Err(rustix::io::Errno::AGAIN) => return, // all accepted
                Err(rustix::io::Errno::MFILE | rustix::io::Errno::NFILE) => {
                    if !self.at_the_limit(token, entry) {
                        return;
                    }
                }
                // Anything else (no memory, no buffers): the listener stays readable,
                // so it rests rather than spin.
                Err(_) => return self.rest(token, entry),
            }
        }
    }

    /// `accept` found no descriptor free: frees one (see the module docs); whether
    /// to go on accepting.
    fn at_the_limit(&mut self, token: u64, entry: &Arc<Entry>) -> bool {
        if self.evict() {
            return true; // its descriptor is free now
        }
        if self.reserve.take().is_some() {
            // The reserve's place goes to one connection; taken back when one is free
            // (`expire`). Its listener's next connection, if any, finds it pending.
            if let Ok(conn) = net::accept_with(&entry.listener, SocketFlags::CLOEXEC | SocketFlags::NONBLOCK)
            {
                self.admit(conn, entry);
            }
            return false;
        }
        self.rest(token, entry);
        false
    }

    /// Takes `entry`'s listener out of the epoll set for [`BACKOFF`].
    fn rest(&mut self, token: u64, entry: &Entry) {
        let _ = epoll::modify(
            &*self.epoll,
            &entry.listener,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::empty(),
        );
        self.resting.push((token, Instant::now() + BACKOFF));
    }

    /// Closes pending connection `key`. Out of the epoll set first: a process forked
    /// meanwhile holds a copy of the descriptor, which keeps its registration alive
    /// after ours is closed (and would report it readable for ever).
    fn close(&mut self, key: u64) {
        if let Some(p) = self.pending.remove(&key) {
            let _ = epoll::delete(&*self.epoll, &p.conn);
        }
    }

    /// Closes the oldest pending connection of the peer uid with the most of them
    /// (one user's connections make room before another's); whether there was one.
    fn evict(&mut self) -> bool {
        let mut counts: HashMap<u32, usize> = HashMap::new();
        for p in self.pending.values() {
            *counts.entry(p.peer.uid).or_default() += 1;
        }
        let Some((&uid, _)) = counts.iter().max_by_key(|&(_, n)| *n) else {
            return false;
        };
        let oldest = self
            .pending
            .iter()
            .find(|(_, p)| p.peer.uid == uid)
            .map(|(&k, _)| k);
        oldest.inspect(|&k| self.close(k)).is_some()
    }

    /// A new connection: served at once if its request is there, else kept until its
    /// request comes or its deadline passes.
    fn admit(&mut self, conn: OwnedFd, entry: &Arc<Entry>) {
        let Ok(peer) = admission::peer(conn.as_fd()) else {
            return;
        };
        if serve(&conn, entry, &peer) == Served::Done {
            return;
        }
        let uid = peer.uid;
        if self.pending.values().filter(|p| p.peer.uid == uid).count() >= PER_UID {
            let oldest = self
                .pending
                .iter()
                .find(|(_, p)| p.peer.uid == uid)
                .map(|(&k, _)| k);
            if let Some(k) = oldest {
                self.close(k);
            }
        }
        if self.pending.len() >= MAX_PENDING {
            self.evict();
        }
        let key = self.next;
        self.next = (self.next + 1) & !CONNECTION;
        if epoll::add(
            &*self.epoll,
            &conn,
            epoll::EventData::new_u64(key | CONNECTION),
            epoll::EventFlags::IN,
        )
        .is_err()
        {
            return;
        }
        self.pending.insert(
            key,
            Pending {
                conn,
                entry: Arc::clone(entry),
                peer,
                deadline: Instant::now() + PEER_TIMEOUT,
            },
        );
    }

    /// Pending connection `key` is readable: its request (or its end) came.
    fn readable(&mut self, key: u64) {
        let Some(p) = self.pending.get(&key) else {
            return;
        };
        if serve(&p.conn, &p.entry, &p.peer) == Served::Done {
            self.close(key);
        }
    }

    /// Closes connections past their deadline, takes the reserve back if it was given
    /// up, and lets rested listeners back in.
    fn expire(&mut self) {
        let now = Instant::now();
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(&k, _)| k)
            .collect();
        for key in late {
            self.close(key);
        }
        if self.reserve.is_none() {
            self.reserve = reserve();
        }
        let entries = lock(&self.entries);
        self.resting.retain(|&(token, at)| {
            if at > now {
                return true;
            }
            if let Some(entry) = entries.get(&token) {
                let _ = epoll::modify(
                    &*self.epoll,
                    &entry.listener,
                    epoll::EventData::new_u64(token),
                    epoll::EventFlags::IN,
                );
            }
            false
        });
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Served {
    /// Answered, refused, or given up: close the connection.
    Done,
    /// Its request has not come yet.
    Waiting,
}

/// One exchange on `conn`, if its request is there: request in, credentials checked,
/// reply (and descriptors) out, without waiting for anything.
fn serve(conn: &OwnedFd, entry: &Entry, peer: &Peer) -> Served {
    let mut buf = [0u8; wire::MAX_REQUEST + 1];
    let n = match net::recv(conn, &mut buf, RecvFlags::DONTWAIT) {
        Ok((n, _)) => n,
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return Served::Waiting,
        Err(_) => return Served::Done,
    };
    // A malformed request, or one for another service: the peer sees the connection
    // close with no reply.
    if wire::parse_request(&buf[..n.min(buf.len())]) != Some(entry.stem.as_str()) {
        return Served::Done;
    }
    crate::testing::stall_point(crate::testing::Stall::HandoverBeforeReply);
    let verdict = rustix::fs::fstat(&entry.guard)
        .map_err(|e| format!("the service's files: {e}"))
        .and_then(|st| admission::admit(peer, st.st_uid, st.st_gid, st.st_mode));
    #[cfg(feature = "testing")]
    if misbehave(entry, conn) {
        return Served::Done;
    }
    let (status, fds, text): (Status, Vec<BorrowedFd<'_>>, String) =
        match verdict.and_then(|()| given(entry, peer)) {
            Ok(fds) => (Status::Here, fds.iter().map(AsFd::as_fd).collect(), String::new()),
            Err(why) => (Status::Refused, Vec::new(), why),
        };
    send(conn, &wire::reply(status, fds.len(), &text), &fds);
    Served::Done
}

/// Which of `entry`'s descriptors `peer` (admitted by the files' permissions) gets:
/// without an access policy, those this process holds; with one, those for a
/// publisher, the read-only ones for a reader, none (refused, naming the policy) for
/// anyone else. A holder that holds only read-only descriptors (a reader) hands out
/// nothing more to anyone.
fn given<'e>(entry: &'e Entry, peer: &Peer) -> Result<&'e [OwnedFd], String> {
    use crate::access::{Identity, Role};
    let Some(policy) = &entry.policy else {
        return Ok(&entry.fds);
    };
    let who = Identity {
        uid: peer.uid,
        gid: peer.gid,
        groups: peer.groups.clone(),
    };
    match policy.role(&who) {
        Some(Role::Publisher) => Ok(&entry.fds),
        Some(Role::Reader) => Ok(&entry.read_only),
        None => Err(policy.refusal(&who)),
    }
}

/// Sends `message` with `fds` (if any) as one record, without waiting; failures are
/// the peer's.
pub fn send(conn: &OwnedFd, message: &[u8], fds: &[BorrowedFd<'_>]) {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(wire::MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return;
    }
    let _ = net::sendmsg(
        conn,
        &[IoSlice::new(message)],
        &mut control,
        SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    );
}

/// Test hook: a responder that answers wrongly, as `IOX_TEST_HANDOVER` says
/// (`garbage`, `no-fd`, `wrong-fd`, `oversized`, `silent`, or a memfd named like the
/// service's but `unsealed`, `short`, another inode (`same-name`) or `other-nonce`);
/// true when it did. `silent` keeps the connection open, unanswered, for the life of
/// the process.
#[cfg(feature = "testing")]
fn misbehave(entry: &Entry, conn: &OwnedFd) -> bool {
    let Ok(how) = std::env::var(crate::testing::HANDOVER_ENV) else {
        return false;
    };
    // Only from the n-th well-formed request on, if the test said so.
    static SERVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let from = std::env::var(crate::testing::HANDOVER_FROM_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    if from.is_some_and(|from: usize| n < from) {
        return false;
    }
    match how.as_str() {
        "garbage" => send(conn, b"this is not a reply at all", &[]),
        "no-fd" => send(conn, &wire::reply(Status::Here, 1, ""), &[]),
        "wrong-fd" => {
            let Ok(other) = rustix::fs::memfd_create("iox:wrong", rustix::fs::MemfdFlags::CLOEXEC) else {
                return false;
            };
            let _ = rustix::fs::ftruncate(&other, 4096);
            send(conn, &wire::reply(Status::Here, 1, ""), &[other.as_fd()]);
        }
        "oversized" => {
            let mut m = wire::reply(Status::Here, 0, "");
            m.resize(wire::MAX_REPLY * 4, b'x');
            send(conn, &m, &[]);
        }
        "silent" => {
            if let Ok(kept) = conn.try_clone() {
                std::mem::forget(kept);
            }
        }
        // A memfd named like this service's that fails one later check.
        "unsealed" | "short" | "same-name" | "other-nonce" => {
            return forged_memfd(entry, conn, &how).is_some();
        }
        _ => return false,
    }
    true
}

/// The memfd-forging answers of [`misbehave`].
#[cfg(feature = "testing")]
fn forged_memfd(entry: &Entry, conn: &OwnedFd, how: &str) -> Option<()> {
    let real = entry.fds.first()?;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(real))).ok()?;
    let link = link.to_string_lossy().into_owned();
    let nonce = u64::from_str_radix(link.rsplit(':').next()?.split(' ').next()?, 16).ok()?;
    let len = rustix::fs::fstat(real).ok()?.st_size as u64;
    let (nonce, len, sealed) = match how {
        "unsealed" => (nonce, len, false),
        "short" => (nonce, 4096, true),
        "same-name" => (nonce, len, true),
        _ => (nonce ^ 1, len, true),
    };
    let name = format!("iox:{}:{nonce:016x}", entry.stem);
    let fd = rustix::fs::memfd_create(
        name.as_str(),
        rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    rustix::fs::ftruncate(&fd, len).ok()?;
    if sealed {
        use rustix::fs::SealFlags;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL).ok()?;
    }
    send(conn, &wire::reply(Status::Here, 1, ""), &[fd.as_fd()]);
    Some(())
}
