//! Readiness descriptors: the receiving side's doorbell socket, the sending side's
//! connections to it, and the arming protocol that decides when a sender rings.
//!
//! **Mechanism.** Every receiving port (subscriber, listener) binds a Unix datagram
//! socket under the root, `iox_<H>.r<slot>.<node>.sock` (see [`crate::shm::files`]). Its
//! descriptor is the port's readiness descriptor (`AsFd`): readable while a token
//! datagram is queued on it. A sender rings by sending a one-byte datagram over a
//! connected socket it keeps per receiver slot (reconnected when the slot's owner or
//! generation changes).
//!
//! Why this and not the alternatives:
//! - an `eventfd` cannot be reached by another process except through
//!   `/proc/<pid>/fd`, which needs ptrace rights over the owner: it fails for services
//!   shared by group permission between users (`.permissions(0o660)`);
//! - a FIFO can: but a writer to a FIFO whose reader died gets `SIGPIPE`, which kills
//!   the sender unless it changes the process's signal disposition;
//! - a socket file carries the service's permissions (it is `chmod`ed to them), so
//!   group members may connect; a send to a receiver that died fails at once with
//!   `ECONNREFUSED` (no signal, never blocks: every send is `MSG_DONTWAIT`), and a full
//!   receive buffer fails with `EAGAIN`, which is harmless (the descriptor is readable
//!   already). A dead receiver's socket file is removed by recovery (its slot names
//!   it) or by a root cleanup (the name ends in its node id, as temporary files do).
//!
//! **Arming.** A sender rings only when the receiver is *armed*: bit [`ARMED`] of the
//! receiver slot's `waiting` word. The receiver, when it finds nothing, consumes the
//! tokens on its socket, sets the bit (SeqCst RMW, then a SeqCst fence) and looks once
//! more; the sender, after its push and its SeqCst fence, reads the word and, if the
//! bit is set, clears it (one RMW: one ring per arming) and rings. So either the
//! sender sees the bit and rings, or the receiver's second look sees the push: a
//! sample never waits behind an unreadable descriptor. A receiver that never hands out
//! its descriptor never arms, and its senders never ring: busy polling costs a sender
//! nothing. A ring can be spurious (the receiver's second look took the sample): the
//! descriptor is then readable with nothing to take; the next empty look consumes the
//! token.
//!
//! Long roots: a socket address holds at most 107 bytes of path. When the root makes
//! the path longer, the socket is bound and reached through `/proc/self/fd/<dir>/`,
//! a short alias of the root directory.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering, fence};

use crate::shm::files;

/// Bit of a receiver slot's `waiting` word: the receiver waits on its descriptor and
/// the next sender rings. The low bits count threads asleep on the futex.
pub(crate) const ARMED: u32 = 1 << 31;

/// The longest path a Unix socket address holds.
const MAX_SOCKET_PATH: usize = 107;

/// Runs `f` with an address for `root/name` that fits a socket address: the path
/// itself, or the same file through `/proc/self/fd/<dir>/`.
fn with_address<T>(root: &Path, name: &str, f: impl FnOnce(&Path) -> io::Result<T>) -> io::Result<T> {
    let path = root.join(name);
    if path.as_os_str().len() <= MAX_SOCKET_PATH {
        return f(&path);
    }
    let dir: OwnedFd = rustix::fs::open(
        root,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    f(&PathBuf::from(format!(
        "/proc/self/fd/{}/{name}",
        dir.as_raw_fd()
    )))
}

/// A receiving port's socket: bound under the root, non-blocking, removed on drop.
#[derive(Debug)]
pub(crate) struct Doorbell {
    socket: UnixDatagram,
    path: PathBuf,
}

impl Doorbell {
    /// Binds the socket of receiver slot `slot` of service `stem`, owned by `node`,
    /// with the service's permissions `mode`.
    pub(crate) fn bind(root: &Path, stem: &str, slot: usize, node: u64, mode: u32) -> io::Result<Self> {
        let name = files::socket_name(stem, slot, node);
        let path = root.join(&name);
        // The name carries our node id: a file there is a socket this process left
        // (a port of the same slot whose drop could not unlink it).
        let socket = with_address(root, &name, |addr| match UnixDatagram::bind(addr) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                std::fs::remove_file(&path)?;
                UnixDatagram::bind(addr)
            }
            r => r,
        })?;
        let bell = Self { socket, path };
        bell.socket.set_nonblocking(true)?;
        // A socket file gets the umask's mode: set the service's explicitly (senders
        // need write permission to connect).
        rustix::fs::chmod(&bell.path, rustix::fs::Mode::from_raw_mode(mode))?;
        Ok(bell)
    }

    /// Consumes one queued token, if there is one (one system call). At most one
    /// sender rings per arming and a receiver drains once per arming, so tokens do not
    /// pile up; one left over (a ring that raced a self-ring) only makes the next wait
    /// wake early, find nothing, and drain it then.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 8];
        let _ = self.socket.recv(&mut buf);
    }

    /// Makes the descriptor readable (a token to itself).
    pub(crate) fn ring_self(&self) {
        let _ = self.socket.send_to(&[1], &self.path);
    }

    /// The receiver's side of arming, called when it found nothing: consumes the
    /// tokens and sets [`ARMED`] in `waiting`. The caller must look for work once more
    /// afterwards (see the module docs).
    pub(crate) fn rearm(&self, waiting: &AtomicU32) {
        self.drain();
        waiting.fetch_or(ARMED, Ordering::SeqCst);
        // Pairs with the sender's fence after its push (store-buffering pattern).
        fence(Ordering::SeqCst);
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The sender's side of arming, after its push and SeqCst fence, given the `waiting`
/// word it read: whether it must ring (it cleared [`ARMED`], so one sender rings per
/// arming).
#[inline]
pub(crate) fn take_armed(waiting: &AtomicU32, seen: u32) -> bool {
    seen & ARMED != 0 && waiting.fetch_and(!ARMED, Ordering::Relaxed) & ARMED != 0
}

/// A sender's connections to the doorbells of a service's receiver slots.
#[derive(Debug)]
pub(crate) struct Ringer {
    root: PathBuf,
    stem: String,
    /// Per receiver slot: the connection, if any.
    peers: Mutex<Vec<Option<Peer>>>,
}

/// A connection to one receiver's socket: the (node, generation) of the port it was
/// made for, and the connected socket.
type Peer = ((u64, u64), UnixDatagram);

impl Ringer {
    pub(crate) fn new(root: &Path, stem: &str, slots: usize) -> Self {
        Self {
            root: root.to_path_buf(),
            stem: stem.to_string(),
            peers: Mutex::new((0..slots).map(|_| None).collect()),
        }
    }

    /// Rings the doorbell of receiver slot `slot`, owned by `node` in `generation`.
    /// Best effort: a receiver that is gone or has a full buffer needs no ring.
    pub(crate) fn ring(&self, slot: usize, node: u64, generation: u64) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let Some(peer) = peers.get_mut(slot) else {
            return;
        };
        let key = (node, generation);
        for attempt in 0..2 {
            if peer.as_ref().is_none_or(|(k, _)| *k != key) || attempt == 1 {
                *peer = self.connect(slot, node).map(|s| (key, s));
            }
            let Some((_, socket)) = peer.as_ref() else {
                return;
            };
            match socket.send(&[1]) {
                Ok(_) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // The socket connected to is gone (the receiver re-bound it): once more.
                Err(_) => {}
            }
        }
        *peer = None;
    }

    fn connect(&self, slot: usize, node: u64) -> Option<UnixDatagram> {
        let socket = UnixDatagram::unbound().ok()?;
        socket.set_nonblocking(true).ok()?;
        let name = files::socket_name(&self.stem, slot, node);
        with_address(&self.root, &name, |addr| socket.connect(addr)).ok()?;
        Some(socket)
    }
}
