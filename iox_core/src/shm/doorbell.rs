//! Readiness descriptors: the receiving side's doorbell socket, the sending side's
//! connections to it, and the arming protocol that decides when a sender rings.
//!
//! **Mechanism.** Every receiving port (subscriber, listener) binds a Unix datagram
//! socket under the root, `iox_<H>.r<slot>.<generation>.<random>.<node>.sock` (see
//! [`crate::shm::files`]): the slot's generation makes the name unique to this port,
//! so a port created in the slot another thread of the process is releasing never
//! shares its file, and the random part, recorded in the port's header while the slot
//! is claimed, makes it a name no stranger can take first (one found taken is drawn
//! again, never removed). Its descriptor is the port's readiness descriptor (`AsFd`):
//! readable while a token datagram is queued on it. A sender rings by sending a
//! one-byte datagram over a connected socket it keeps per receiver slot (reconnected
//! when the slot's owner, generation or random part changes).
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
//!   already). A dead receiver's socket file is removed by recovery or by a root
//!   cleanup (the name ends in its node id, as temporary files do).
//!
//! **Arming** (the atomics are in [`crate::shm::arming`], model-checked by
//! `tests/loom_arming.rs`). The receiver slot's `waiting` word holds, from the top: bit `ARMED`
//! (the receiver waits on its descriptor), a 15-bit arming epoch, and the count of
//! threads asleep on the futex (16 bits). A sender rings only when the receiver is
//! armed. The receiver, when it finds nothing, consumes a token, sets the bit with a
//! new epoch (SeqCst CAS, then a SeqCst fence) and looks once more; the sender, after
//! its push and its SeqCst fence, reads the word and, if the bit is set, rings *first*
//! and then clears the bit with a CAS from the word it read (so only that arming is
//! cleared: a receiver that re-armed since has a new epoch and stays armed). So either
//! the sender sees the bit and rings, or the receiver's second look sees the push: a
//! sample never waits behind an unreadable descriptor. A sender that dies, or fails to
//! ring, before its CAS leaves the bit set, and the next sender rings: no arming is
//! used up without a token. Two senders may both ring one arming (an extra token,
//! harmless). The residual window: a sender stalled between its load and its CAS
//! while the receiver re-arms 32,768 times (the epoch wraps to the same value) would
//! clear a fresh arming without having rung for it.
//!
//! A receiver that never hands out its descriptor never arms, and its senders never
//! ring: busy polling costs a sender nothing. A ring can be spurious (the receiver's
//! second look took the sample): the descriptor is then readable with nothing to
//! take; the next empty look consumes the token.
//!
//! Long roots: a socket address holds at most 107 bytes of path. When the root makes
//! the path longer, the socket is bound and reached through `/proc/self/fd/<dir>/`,
//! a short alias of the root directory.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::AtomicU32;

use crate::shm::{arming, files};

pub use crate::shm::arming::{SLEEPERS, reset as reset_arming, ring_armed, wants_wake};

/// The longest path a Unix socket address holds.
const MAX_SOCKET_PATH: usize = 107;

/// Runs `f` with an address for `root/name` that fits a socket address: the path
/// itself, or the same file through `/proc/self/fd/<dir>/`.
pub fn with_address<T>(root: &Path, name: &str, f: impl FnOnce(&Path) -> io::Result<T>) -> io::Result<T> {
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
pub struct Doorbell {
    socket: UnixDatagram,
    root: PathBuf,
    name: String,
}

impl Doorbell {
    /// Binds the socket of receiver slot `slot` of service `stem`, owned by `node` in
    /// `generation`, with the service's permissions `mode`, under a name with a fresh
    /// random part, which it stores in `nonce` (the port's header) once bound: senders
    /// read it there once the port is active.
    pub fn bind(
        root: &Path,
        stem: &str,
        (slot, generation, node): (usize, u64, u64),
        nonce: &std::sync::atomic::AtomicU64,
        mode: u32,
    ) -> io::Result<Self> {
        // A name that is taken was taken by someone else (the random part is new):
        // draw again. Eight collisions in a row are no accident: say so.
        let mut taken = None;
        for _ in 0..8 {
            let drawn = iox_mempool::random::random_u64().max(1);
            let name = files::socket_name(stem, slot, generation, drawn, node);
            match with_address(root, &name, |addr| UnixDatagram::bind(addr)) {
                Ok(socket) => {
                    nonce.store(drawn, std::sync::atomic::Ordering::Relaxed);
                    return Self::finish(socket, root, name, mode);
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => taken = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(taken.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrInUse)))
    }

    fn finish(socket: UnixDatagram, root: &Path, name: String, mode: u32) -> io::Result<Self> {
        let bell = Self {
            socket,
            root: root.to_path_buf(),
            name,
        };
        bell.socket.set_nonblocking(true)?;
        // A socket file gets the umask's mode: set the service's explicitly (senders
        // need write permission to connect).
        rustix::fs::chmod(bell.root.join(&bell.name), rustix::fs::Mode::from_raw_mode(mode))?;
        Ok(bell)
    }

    /// Consumes one queued token, if there is one (one system call). Tokens do not
    /// pile up: an arming is rung once, or a few times when senders race on it (each
    /// rings before it clears the bit), and a receiver drains once per arming; a token
    /// left over only makes the next wait wake early, find nothing, and drain it then.
    pub fn drain(&self) {
        let mut buf = [0u8; 8];
        let _ = self.socket.recv(&mut buf);
    }

    /// Makes the descriptor readable (a token to itself).
    pub fn ring_self(&self) {
        let _ = with_address(&self.root, &self.name, |addr| self.socket.send_to(&[1], addr));
    }

    /// The receiver's side of arming, called when it found nothing: consumes a token
    /// and sets `ARMED` in `waiting` with a new epoch. The caller must look for work
    /// once more afterwards (see the module docs).
    pub fn rearm(&self, waiting: &AtomicU32) {
        self.drain();
        arming::arm(waiting);
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

impl Drop for Doorbell {
    /// Removes the socket file, then takes every queued token: a duplicate of the
    /// descriptor that outlives the port (kept by a WaitSet of the C API, or by a
    /// program's own epoll set) must not stay readable for a port that is gone. Tokens
    /// are few (see [`Doorbell::drain`]); the bound only guards against a flood.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.root.join(&self.name));
        let mut buf = [0u8; 8];
        for _ in 0..1024 {
            if self.socket.recv(&mut buf).is_err() {
                break;
            }
        }
    }
}

/// A sender's connections to the doorbells of a service's receiver slots.
#[derive(Debug)]
pub struct Ringer {
    root: PathBuf,
    stem: String,
    /// Per receiver slot: the connection, if any.
    peers: Mutex<Vec<Option<Peer>>>,
}

/// A connection to one receiver's socket: the (node, generation, random part) of the
/// port it was made for, and the connected socket.
type Peer = ((u64, u64, u64), UnixDatagram);

impl Ringer {
    pub fn new(root: &Path, stem: &str, slots: usize) -> Self {
        Self {
            root: root.to_path_buf(),
            stem: stem.to_string(),
            peers: Mutex::new((0..slots).map(|_| None).collect()),
        }
    }

    /// Rings the doorbell of receiver slot `slot`, owned by `node` in `generation`,
    /// whose socket's random part is `nonce`. Returns whether the arming is served: a token went out, the receiver's buffer
    /// is full (it is readable), or the receiver is gone (its socket refuses or no
    /// longer exists: nobody to wake). Any other failure (out of descriptors, no
    /// permission) returns false, so the arming stays for the next sender.
    pub fn ring(&self, slot: usize, node: u64, generation: u64, nonce: u64) -> bool {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let Some(peer) = peers.get_mut(slot) else {
            return false;
        };
        let key = (node, generation, nonce);
        let mut last = None;
        for attempt in 0..2 {
            if peer.as_ref().is_none_or(|(k, _)| *k != key) || attempt == 1 {
                *peer = None;
                match self.connect(slot, key) {
                    Ok(socket) => *peer = Some((key, socket)),
                    Err(e) => {
                        last = Some(e);
                        break;
                    }
                }
            }
            let Some((_, socket)) = peer.as_ref() else {
                break;
            };
            match socket.send(&[1]) {
                Ok(_) => return true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                // The socket connected to may have been re-bound: reconnect once.
                Err(e) => last = Some(e),
            }
        }
        *peer = None;
        last.is_some_and(|e| is_gone(&e))
    }

    fn connect(&self, slot: usize, (node, generation, nonce): (u64, u64, u64)) -> io::Result<UnixDatagram> {
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        let name = files::socket_name(&self.stem, slot, generation, nonce, node);
        with_address(&self.root, &name, |addr| socket.connect(addr))?;
        Ok(socket)
    }
}

/// Whether a connect or send failed because the receiver is gone (its socket closed,
/// or its file removed).
fn is_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound | io::ErrorKind::ConnectionReset
    )
}
