//! The holder's side: the services whose descriptors this process offers, one
//! listening socket each, and the one thread that answers on all of them.
//!
//! [`offer`] binds `iox_<H>.h.<node>.sock` under the root (`SOCK_SEQPACKET`, the
//! service's mode), keeps duplicates of the descriptors, and adds the socket to the
//! responder's epoll set; the returned [`Offer`] takes it all back when dropped.
//! Several handles of one service in one process share one offer (counted).
//!
//! The responder thread is started with the first offer of the process (again in a
//! forked child that offers: threads do not survive `fork`). It sleeps in
//! `epoll_wait` with no timeout, so it costs no CPU while no one asks. A request is
//! served in turn: read it, read the peer's credentials, admit or refuse it (see
//! [`super::admission`]), reply with the descriptors. Each read and write on a
//! connection is bounded by [`PEER_TIMEOUT`], so a peer that connects and says nothing
//! delays the next one by at most that, and never stops the thread.
//!
//! Cost per process: one thread (idle in `epoll_wait`), one epoll descriptor, and per
//! offered service one listening socket, its socket file, and one duplicate of each
//! offered descriptor.

use std::collections::HashMap;
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::event::epoll;
use rustix::net::{
    self, AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use super::admission;
use super::wire::{self, Status};

/// How long the responder waits on one peer's request, or to hand it its reply.
pub(crate) const PEER_TIMEOUT: Duration = Duration::from_millis(200);

/// What this process offers for one service (dropped: taken back).
#[derive(Debug)]
pub(crate) struct Offer {
    token: u64,
    fork_generation: u64,
}

/// One offered service.
struct Entry {
    root: PathBuf,
    stem: String,
    socket_name: String,
    listener: OwnedFd,
    fds: Vec<OwnedFd>,
    /// The file whose owner, group and mode admit a peer (the dynamic segment, as
    /// this process opened it: not a path someone could put another file under).
    guard: OwnedFd,
}

/// The offered services by token, shared with the responder thread: the thread takes
/// only this lock (briefly, to look one up), never [`RESPONDER`], so a `fork` while it
/// looks leaves a child's [`RESPONDER`] usable (a child starts a fresh responder with
/// a fresh map, and never touches its parent's).
type Entries = Arc<Mutex<HashMap<u64, Arc<Entry>>>>;

struct Responder {
    fork_generation: u64,
    epoll: Arc<OwnedFd>,
    entries: Entries,
    /// Per entry, the service handles of this process sharing it.
    counts: HashMap<u64, usize>,
    by_service: HashMap<(PathBuf, String, u64), u64>,
    next: u64,
}

static RESPONDER: Mutex<Option<Responder>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<Responder>> {
    RESPONDER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The name of the hand-over socket of `node` for incarnation `incarnation` (its
/// static config's hash) of service `stem`.
pub(crate) fn socket_name(stem: &str, incarnation: u64, node: u64) -> String {
    crate::shm::files::handover_socket_name(stem, incarnation, node)
}

/// Offers `fds` of incarnation `incarnation` of service `stem` under `root`, from
/// node `node`, to the processes the owner, group and mode of file `guard` admit; the
/// socket gets `mode`. One process may hold two incarnations of a name at once (a
/// handle of one that was removed, and one of its successor): each has its offer.
pub(crate) fn offer(
    root: &Path,
    stem: &str,
    incarnation: u64,
    node: u64,
    fds: &[BorrowedFd<'_>],
    guard: BorrowedFd<'_>,
    mode: u32,
) -> std::io::Result<Offer> {
    let generation = crate::recovery::fork::generation();
    let mut slot = lock();
    if slot.as_ref().is_none_or(|r| r.fork_generation != generation) {
        // First offer of this process (or of this forked child: the parent's thread
        // is not here, and its entries are not ours to serve or to remove).
        *slot = Some(start(generation)?);
    }
    let r = slot.as_mut().expect("started above");
    let key = (root.to_path_buf(), stem.to_string(), incarnation);
    if let Some(&token) = r.by_service.get(&key) {
        *r.counts.entry(token).or_insert(0) += 1;
        return Ok(Offer {
            token,
            fork_generation: generation,
        });
    }
    let name = socket_name(stem, incarnation, node);
    let listener = net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    crate::doorbell::with_address(root, &name, |addr| {
        let addr = net::SocketAddrUnix::new(addr)?;
        match net::bind(&listener, &addr) {
            // The name carries our node id: a file there is one this process left.
            Err(rustix::io::Errno::ADDRINUSE) => {
                std::fs::remove_file(root.join(&name))?;
                net::bind(&listener, &addr).map_err(Into::into)
            }
            other => other.map_err(Into::into),
        }
    })?;
    let path = root.join(&name);
    let token = r.next;
    // Every step after the bind removes the socket file if it fails.
    let made = (|| {
        let entry = Entry {
            root: root.to_path_buf(),
            stem: stem.to_string(),
            socket_name: name,
            listener,
            fds: fds
                .iter()
                .map(|f| f.try_clone_to_owned())
                .collect::<Result<_, _>>()?,
            guard: guard.try_clone_to_owned()?,
        };
        // Peers need write permission on a socket file to connect.
        rustix::fs::chmod(&path, rustix::fs::Mode::from_raw_mode(mode))?;
        net::listen(&entry.listener, 64)?;
        epoll::add(
            &*r.epoll,
            &entry.listener,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN,
        )?;
        Ok::<_, std::io::Error>(entry)
    })();
    let entry = made.inspect_err(|_| {
        let _ = std::fs::remove_file(&path);
    })?;
    r.next += 1;
    lock_entries(&r.entries).insert(token, Arc::new(entry));
    r.counts.insert(token, 1);
    r.by_service.insert(key, token);
    Ok(Offer {
        token,
        fork_generation: generation,
    })
}

impl Drop for Offer {
    fn drop(&mut self) {
        if !crate::recovery::fork::is_same_process(self.fork_generation) {
            return;
        }
        let mut slot = lock();
        let Some(r) = slot
            .as_mut()
            .filter(|r| r.fork_generation == self.fork_generation)
        else {
            return;
        };
        let Some(count) = r.counts.get_mut(&self.token) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        r.counts.remove(&self.token);
        r.by_service.retain(|_, token| *token != self.token);
        let Some(e) = lock_entries(&r.entries).remove(&self.token) else {
            return;
        };
        let _ = epoll::delete(&*r.epoll, &e.listener);
        // Unlinked here, under the lock, so a new offer of the same name (which binds
        // it again) never loses its file to this one; a request the thread is serving
        // on `e` meanwhile finishes on its connection.
        let _ = std::fs::remove_file(e.root.join(&e.socket_name));
    }
}

fn lock_entries(entries: &Entries) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Entry>>> {
    entries.lock().unwrap_or_else(|e| e.into_inner())
}

fn start(generation: u64) -> std::io::Result<Responder> {
    let epoll = Arc::new(epoll::create(epoll::CreateFlags::CLOEXEC)?);
    let entries: Entries = Arc::default();
    let (thread_epoll, thread_entries) = (Arc::clone(&epoll), Arc::clone(&entries));
    std::thread::Builder::new()
        .name("iox-handover".into())
        .spawn(move || run(&thread_epoll, &thread_entries))?;
    Ok(Responder {
        fork_generation: generation,
        epoll,
        entries,
        counts: HashMap::new(),
        by_service: HashMap::new(),
        next: 1,
    })
}

/// The responder thread: waits on every listening socket, serves what arrives.
fn run(epoll: &OwnedFd, entries: &Entries) {
    let mut events: Vec<epoll::Event> = Vec::with_capacity(16);
    loop {
        events.clear();
        match epoll::wait(epoll, rustix::buffer::spare_capacity(&mut events), None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // Only EBADF/EINVAL could come here (our own descriptor): stop answering;
            // requesters then turn to other holders.
            Err(_) => return,
        }
        for ev in &events {
            let token = ev.data.u64();
            let entry = lock_entries(entries).get(&token).cloned();
            if let Some(entry) = entry {
                serve_all(&entry);
            }
        }
    }
}

/// Accepts and serves every connection waiting on `entry`'s socket.
fn serve_all(entry: &Entry) {
    loop {
        match net::accept_with(&entry.listener, SocketFlags::CLOEXEC) {
            Ok(conn) => serve(entry, &conn),
            Err(rustix::io::Errno::INTR | rustix::io::Errno::CONNABORTED) => {}
            // WOULDBLOCK (served all), or out of descriptors: the next event retries.
            Err(_) => return,
        }
    }
}

/// One exchange: request in, credentials checked, reply (and descriptors) out.
fn serve(entry: &Entry, conn: &OwnedFd) {
    use net::sockopt::{Timeout, set_socket_timeout};
    if set_socket_timeout(conn, Timeout::Recv, Some(PEER_TIMEOUT)).is_err()
        || set_socket_timeout(conn, Timeout::Send, Some(PEER_TIMEOUT)).is_err()
    {
        return;
    }
    let mut buf = [0u8; wire::MAX_REQUEST + 1];
    let Ok(n) = net::recv(conn, &mut buf, net::RecvFlags::empty()).map(|(n, _)| n) else {
        return;
    };
    // A malformed request, or one for another service: the peer sees the connection
    // close with no reply.
    if wire::parse_request(&buf[..n.min(buf.len())]) != Some(entry.stem.as_str()) {
        return;
    }
    crate::testing::stall_point("handover-before-reply");
    let verdict = admission::peer(conn.as_fd())
        .map_err(|e| format!("its credentials could not be read: {e}"))
        .and_then(|peer| {
            let st = rustix::fs::fstat(&entry.guard).map_err(|e| format!("the service's files: {e}"))?;
            admission::admit(&peer, st.st_uid, st.st_gid, st.st_mode)
        });
    #[cfg(feature = "testing")]
    if let Some(bad) = misbehave(entry, conn) {
        return bad;
    }
    let (status, fds, text): (Status, Vec<BorrowedFd<'_>>, String) = match verdict {
        Ok(()) => (
            Status::Here,
            entry.fds.iter().map(AsFd::as_fd).collect(),
            String::new(),
        ),
        Err(why) => (Status::Refused, Vec::new(), why),
    };
    send(conn, &wire::reply(status, fds.len(), &text), &fds);
}

/// Sends `message` with `fds` (if any) as one record; failures are the peer's.
pub(crate) fn send(conn: &OwnedFd, message: &[u8], fds: &[BorrowedFd<'_>]) {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(wire::MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return;
    }
    let _ = net::sendmsg(conn, &[IoSlice::new(message)], &mut control, SendFlags::NOSIGNAL);
}

/// Test hook: a responder that answers wrongly, as `IOX_TEST_HANDOVER` says
/// (`garbage`, `no-fd`, `wrong-fd`, `oversized`, `silent`, or a memfd named like the
/// service's but `unsealed`, `short`, another inode (`same-name`) or `other-nonce`);
/// `Some` when it did.
#[cfg(feature = "testing")]
fn misbehave(entry: &Entry, conn: &OwnedFd) -> Option<()> {
    let how = std::env::var(crate::testing::HANDOVER_ENV).ok()?;
    // Only from the n-th well-formed request on, if the test said so.
    static SERVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let from = std::env::var(crate::testing::HANDOVER_FROM_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    if from.is_some_and(|from: usize| n < from) {
        return None;
    }
    match how.as_str() {
        "garbage" => send(conn, b"this is not a reply at all", &[]),
        "no-fd" => send(conn, &wire::reply(Status::Here, 1, ""), &[]),
        "wrong-fd" => {
            let other = rustix::fs::memfd_create("iox:wrong", rustix::fs::MemfdFlags::CLOEXEC).ok()?;
            let _ = rustix::fs::ftruncate(&other, 4096);
            send(conn, &wire::reply(Status::Here, 1, ""), &[other.as_fd()]);
        }
        "oversized" => {
            let mut m = wire::reply(Status::Here, 0, "");
            m.resize(wire::MAX_REPLY * 4, b'x');
            send(conn, &m, &[]);
        }
        "silent" => std::thread::sleep(Duration::from_secs(3600)),
        // A memfd named like this service's that fails one later check.
        "unsealed" | "short" | "same-name" | "other-nonce" => {
            let real = entry.fds.first()?;
            let link = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(real)))
                .ok()?;
            let link = link.to_string_lossy().into_owned();
            let nonce = u64::from_str_radix(link.rsplit(':').next()?.split(' ').next()?, 16).ok()?;
            let len = rustix::fs::fstat(real).ok()?.st_size as u64;
            let (nonce, len, sealed) = match how.as_str() {
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
                rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
                    .ok()?;
            }
            send(conn, &wire::reply(Status::Here, 1, ""), &[fd.as_fd()]);
        }
        _ => return None,
    }
    Some(())
}
