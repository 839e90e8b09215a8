//! The newcomer's side: ask one holder for a service's descriptors.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::net::{
    self, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketFlags, SocketType,
};

use super::wire::{self, Status};

/// The longest one holder is waited for before the next is asked (a holder answers at
/// once unless it is stopped, overloaded, or dying).
pub const PER_HOLDER: Duration = Duration::from_secs(1);

/// Why a holder handed nothing over.
#[derive(Debug)]
pub enum Denied {
    /// Our credentials do not admit us: the holder's words (they name the permissions).
    Refused(String),
    /// It may work a moment later, or through another holder (not listening yet,
    /// leaving, gone, silent).
    Transient(String),
    /// The holder answered wrongly (malformed, oversized, descriptors missing).
    Broken(String),
}

/// Asks node `node`, whose socket's random part is `nonce` (its user entry's holder
/// word), for the descriptors of incarnation `incarnation` of service `stem` under
/// `root`, waiting at most until `deadline` (and at most [`PER_HOLDER`]).
pub fn fetch(
    root: &Path,
    stem: &str,
    incarnation: u64,
    (node, nonce): (u64, u32),
    deadline: Instant,
) -> Result<Vec<OwnedFd>, Denied> {
    let name = super::responder::socket_name(stem, incarnation, nonce, node);
    let wait = deadline.saturating_duration_since(Instant::now()).min(PER_HOLDER);
    let io = |what: &str, e: rustix::io::Errno| format!("{what} {name}: {e}");
    let conn = net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| Denied::Transient(io("a socket for", e)))?;
    // Before the connect: a holder whose backlog is full (it stopped accepting) makes
    // a connect wait until the send timeout, and a connect that times out is EAGAIN.
    use net::sockopt::{Timeout, set_socket_timeout};
    let wait = wait.max(Duration::from_millis(1));
    set_socket_timeout(&conn, Timeout::Recv, Some(wait))
        .map_err(|e| Denied::Transient(io("a timeout on", e)))?;
    set_socket_timeout(&conn, Timeout::Send, Some(wait))
        .map_err(|e| Denied::Transient(io("a timeout on", e)))?;
    crate::doorbell::with_address(root, &name, |addr| {
        net::connect(&conn, &net::SocketAddrUnix::new(addr)?).map_err(Into::into)
    })
    .map_err(|e: std::io::Error| {
        let errno = rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO);
        if errno == rustix::io::Errno::ACCESS || errno == rustix::io::Errno::PERM {
            Denied::Refused(io("permission denied connecting to", errno))
        } else if errno == rustix::io::Errno::AGAIN {
            Denied::Transient(format!(
                "{name} accepted no connection within {} ms",
                wait.as_millis()
            ))
        } else {
            // Not listening yet (registering), or gone (its node died or left).
            Denied::Transient(io("connect to", errno))
        }
    })?;
    net::send(&conn, &wire::request(stem), net::SendFlags::NOSIGNAL)
        .map_err(|e| Denied::Transient(io("ask", e)))?;
    let mut buf = [0u8; wire::MAX_REPLY + 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(wire::MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = net::recvmsg(
        &conn,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    );
    // Every descriptor that came is ours now, and closed on any return below.
    let fds: Vec<OwnedFd> = control
        .drain()
        .filter_map(|m| match m {
            RecvAncillaryMessage::ScmRights(fds) => Some(fds),
            _ => None,
        })
        .flatten()
        .collect();
    let got = match got {
        Ok(m) => m,
        Err(rustix::io::Errno::AGAIN) => {
            return Err(Denied::Transient(format!(
                "{name} did not answer within {} ms",
                wait.as_millis()
            )));
        }
        Err(e) => return Err(Denied::Transient(io("read the reply of", e))),
    };
    if got.bytes == 0 && fds.is_empty() {
        return Err(Denied::Transient(format!(
            "{name} closed the connection without a reply"
        )));
    }
    if got.flags.contains(net::ReturnFlags::TRUNC) || got.bytes > wire::MAX_REPLY {
        return Err(Denied::Broken(format!(
            "{name} sent an oversized reply (over {} bytes)",
            wire::MAX_REPLY
        )));
    }
    if got.flags.contains(net::ReturnFlags::CTRUNC) {
        return Err(Denied::Broken(format!(
            "{name} sent more descriptors than a reply carries ({})",
            wire::MAX_FDS
        )));
    }
    let reply =
        wire::parse_reply(&buf[..got.bytes]).map_err(|what| Denied::Broken(format!("{name}: {what}")))?;
    match reply.status {
        Status::Here if reply.fds == fds.len() && !fds.is_empty() => Ok(fds),
        Status::Here => Err(Denied::Broken(format!(
            "{name} announced {} descriptors and sent {}",
            reply.fds,
            fds.len()
        ))),
        Status::Unknown => Err(Denied::Transient(format!("{name} no longer holds the service"))),
        Status::Refused => Err(Denied::Refused(reply.text)),
    }
}
