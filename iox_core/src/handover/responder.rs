//! The holder's side: the services whose descriptors this process offers, one
//! listening socket each, answered by one thread ([`super::serving`]).
//!
//! [`offer`] binds `iox_<H>.h.<incarnation>.<random>.<node>.sock` under the root
//! (`SOCK_SEQPACKET`, non-blocking, the service's mode), keeps duplicates of the
//! descriptors, and adds the socket to the responding thread's epoll set; the returned
//! [`Offer`] takes it all back when dropped. The random part ([`Offer::nonce`]) is what
//! the holder's user entry in the dynamic segment records, so requesters find the
//! socket and strangers, who cannot read that entry, cannot take its name first (a
//! name found taken is drawn again, never removed: in a sticky root it may be a
//! stranger's). Several handles of one service in one process share one offer
//! (counted), as long as they are of one incarnation and one node id: a handle made
//! after the process's node id changed (its last node went and a new one was drawn)
//! gets an offer of its own, named with its id.
//!
//! The thread is started with the first offer of the process (again in a forked child
//! that offers: threads do not survive `fork`, and a child never serves or removes its
//! parent's offers). The registry of offers is a [`ForkLock`], so a fork while another
//! thread offers or withdraws waits for it, and the child's first offer does not block.
//!
//! Cost per process: one thread (idle in `epoll_wait`), one epoll descriptor, one
//! reserve descriptor, and per offered service one listening socket, its socket file,
//! and one duplicate of each offered descriptor.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

use iox_mempool::fork::{ForkLock, Rank};
use rustix::event::epoll;
use rustix::net::{self, AddressFamily, SocketFlags, SocketType};

use super::serving::{self, Entries, Entry};

/// What this process offers for one service (dropped: taken back).
#[derive(Debug)]
pub struct Offer {
    token: u64,
    fork_generation: u64,
    nonce: u32,
}

impl Offer {
    /// The random part of the socket's name, for the holder's user entry.
    pub fn nonce(&self) -> u32 {
        self.nonce
    }
}

/// Which offer a service handle shares: the root (as the directory it is), the stem,
/// the incarnation, and the node id the socket is named with.
type OfferKey = ((u64, u64), String, u64, u64);

struct Responder {
    fork_generation: u64,
    epoll: Arc<OwnedFd>,
    entries: Entries,
    /// Per entry, the service handles of this process sharing it.
    counts: HashMap<u64, usize>,
    by_service: HashMap<OfferKey, u64>,
    next: u64,
}

static RESPONDER: ForkLock<Option<Responder>> = ForkLock::new(Rank::Responder, None);

/// The name of the hand-over socket of `node` for incarnation `incarnation` (its
/// static config's hash) of service `stem`, with random part `nonce`.
pub fn socket_name(stem: &str, incarnation: u64, nonce: u32, node: u64) -> String {
    crate::shm::files::handover_socket_name(stem, incarnation, nonce, node)
}

/// Offers `fds` of incarnation `incarnation` of service `stem` under `root`, from
/// node `node`, to the processes the owner, group and mode of file `guard` admit, and
/// `policy` (the service's access policy, if it has one) as its roles say (see
/// `serving::given`); the socket gets `mode`. One process may hold two incarnations of
/// a name at once (a handle of one that was removed, and one of its successor): each
/// has its offer.
#[allow(clippy::too_many_arguments)]
pub fn offer(
    root: &Path,
    stem: &str,
    incarnation: u64,
    node: u64,
    fds: &[BorrowedFd<'_>],
    guard: BorrowedFd<'_>,
    mode: u32,
    policy: Option<&crate::access::AccessPolicy>,
) -> std::io::Result<Offer> {
    let generation = crate::fork::generation();
    let dir = rustix::fs::stat(root)?;
    let key: OfferKey = ((dir.st_dev, dir.st_ino), stem.to_string(), incarnation, node);
    let mut slot = RESPONDER.lock();
    if slot.as_ref().is_none_or(|r| r.fork_generation != generation) {
        // First offer of this process (or of this forked child: the parent's thread
        // is not here, and its entries are not ours to serve or to remove).
        *slot = Some(start(generation)?);
    }
    let r = slot.as_mut().expect("started above");
    if let Some(&token) = r.by_service.get(&key) {
        *r.counts.entry(token).or_insert(0) += 1;
        let nonce = serving::lock(&r.entries).get(&token).map_or(0, |e| e.nonce);
        return Ok(Offer {
            token,
            fork_generation: generation,
            nonce,
        });
    }
    crate::testing::stall_point(crate::testing::Stall::HandoverOfferHeld);
    let (listener, name, nonce) = bind(root, stem, incarnation, node)?;
    let path = root.join(&name);
    let token = r.next;
    // Every step after the bind removes the socket file if it fails.
    let made = (|| {
        let entry = Entry {
            root: root.to_path_buf(),
            stem: stem.to_string(),
            socket_name: name,
            nonce,
            listener,
            fds: fds
                .iter()
                .map(|f| f.try_clone_to_owned())
                .collect::<Result<_, _>>()?,
            read_only: match policy {
                Some(p) if p.has_readers() => fds.iter().map(|&f| read_only(f)).collect::<Result<_, _>>()?,
                _ => Vec::new(),
            },
            policy: policy.cloned(),
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
    serving::lock(&r.entries).insert(token, Arc::new(entry));
    r.counts.insert(token, 1);
    r.by_service.insert(key, token);
    Ok(Offer {
        token,
        fork_generation: generation,
        nonce,
    })
}

/// `fd`'s file opened anew with `flags` (through `/proc/self/fd`, which reopens the
/// file itself, not the description: a description of its own, with the access the
/// file's mode gives this process), checked to be the same file.
pub fn reopen(fd: BorrowedFd<'_>, flags: rustix::fs::OFlags) -> std::io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let again = rustix::fs::open(
        path.as_str(),
        flags | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let (a, b) = (rustix::fs::fstat(fd)?, rustix::fs::fstat(&again)?);
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(std::io::Error::other(format!("{path} reopened another file")));
    }
    Ok(again)
}

/// `fd`'s file opened anew read-only ([`reopen`]): a description that cannot write,
/// whatever `fd` can, for a reader to receive.
pub fn read_only(fd: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    reopen(fd, rustix::fs::OFlags::RDONLY)
}

/// A non-blocking listening socket bound under a name with a fresh random part; the
/// name and the part. A name found taken was taken by someone else (the part is new):
/// another is drawn; eight in a row are no accident, and say so.
fn bind(root: &Path, stem: &str, incarnation: u64, node: u64) -> std::io::Result<(OwnedFd, String, u32)> {
    let mut taken = None;
    for _ in 0..8 {
        let nonce = (iox_mempool::random::random_u64() as u32).max(1);
        let name = socket_name(stem, incarnation, nonce, node);
        let listener = net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        let bound = crate::doorbell::with_address(root, &name, |addr| {
            net::bind(&listener, &net::SocketAddrUnix::new(addr)?).map_err(Into::into)
        });
        match bound {
            Ok(()) => return Ok((listener, name, nonce)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => taken = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(taken.unwrap_or_else(|| std::io::ErrorKind::AddrInUse.into()))
}

impl Drop for Offer {
    fn drop(&mut self) {
        if !crate::fork::is_same_process(self.fork_generation) {
            return;
        }
        crate::testing::stall_point(crate::testing::Stall::HandoverBeforeWithdraw);
        let mut slot = RESPONDER.lock();
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
        let Some(e) = serving::lock(&r.entries).remove(&self.token) else {
            return;
        };
        let _ = epoll::delete(&*r.epoll, &e.listener);
        // Unlinked here, under the lock, so a new offer of the same name (which binds
        // it again) never loses its file to this one; a request the thread is serving
        // on `e` meanwhile finishes on its connection.
        let _ = std::fs::remove_file(e.root.join(&e.socket_name));
    }
}

fn start(generation: u64) -> std::io::Result<Responder> {
    let epoll = Arc::new(epoll::create(epoll::CreateFlags::CLOEXEC)?);
    let entries: Entries = Arc::new(Mutex::new(HashMap::new()));
    serving::spawn(Arc::clone(&epoll), Arc::clone(&entries))?;
    Ok(Responder {
        fork_generation: generation,
        epoll,
        entries,
        counts: HashMap::new(),
        by_service: HashMap::new(),
        next: 1,
    })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    fn sockets(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".sock")
            })
            .count()
    }

    /// One directory by two paths: one offer per (directory, stem, incarnation, node);
    /// another node id of the process gets an offer (and socket) of its own.
    #[test]
    fn offers_are_shared_per_directory_and_node_id() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().with_extension("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        let file = std::fs::File::create(dir.path().join("guard")).unwrap();
        let a = offer(dir.path(), "iox_two", 1, 7, &[], file.as_fd(), 0o600, None).unwrap();
        let b = offer(&link, "iox_two", 1, 7, &[], file.as_fd(), 0o600, None).unwrap();
        assert_eq!((a.token, a.nonce), (b.token, b.nonce));
        assert_eq!(sockets(dir.path()), 1);
        let c = offer(dir.path(), "iox_two", 1, 8, &[], file.as_fd(), 0o600, None).unwrap();
        assert_ne!(a.token, c.token);
        assert_eq!(sockets(dir.path()), 2);
        drop((a, b));
        assert_eq!(
            sockets(dir.path()),
            1,
            "the shared offer went with its last handle"
        );
        drop(c);
        assert_eq!(sockets(dir.path()), 0);
        let _ = std::fs::remove_file(&link);
    }
}
