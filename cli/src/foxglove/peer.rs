//! Who is on the other end of a TCP connection from this machine: the uid that owns the
//! client's socket, asked of the kernel by the connection's addresses (`sock_diag`,
//! the netlink interface `ss` uses: one exact lookup, whatever the number of sockets).
//!
//! `iox foxglove` shows its own user's services to whoever connects; on a machine with
//! other users, a connection from one of them (through loopback, or any address of the
//! machine) must not see them unless that was asked for ([`Peer`]).
//!
//! Invariants: addresses are compared in their canonical form (an IPv4 client of a
//! dual-stack listener arrives as `::ffff:a.b.c.d`, and is looked up as the IPv4 socket
//! it is, then as an IPv6 one); a client socket the kernel lists in this network
//! namespace is this machine's, and is judged by its owner; a loopback client whose
//! socket cannot be found is refused, never admitted.

use std::net::{IpAddr, SocketAddr};

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType};

/// Who a connection comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A socket of this machine owned by this uid.
    Local(u32),
    /// From this machine, but its owner could not be found.
    Unknown,
    /// From another machine (not a socket of this network namespace).
    Remote,
}

/// Who the client at `client` of this side's `server` address is.
pub fn peer(client: SocketAddr, server: SocketAddr) -> Peer {
    let (c, s) = (canonical(client), canonical(server));
    let found = match (c.ip(), s.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => {
            owner(AF_INET, c, s).or_else(|| owner(AF_INET6, mapped(c), mapped(s)))
        }
        _ => owner(AF_INET6, mapped(c), mapped(s)),
    };
    match found {
        Some(uid) => Peer::Local(uid),
        None if c.ip().is_loopback() || c.ip() == s.ip() => Peer::Unknown,
        None => Peer::Remote,
    }
}

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const IPPROTO_TCP: u8 = 6;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
/// Bytes of `struct nlmsghdr`.
const HEADER: usize = 16;
/// Offset of `idiag_uid` in `struct inet_diag_msg`.
const UID_AT: usize = 64;

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// `a` as an IPv6 address (IPv4 ones mapped).
fn mapped(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V4(ip) => SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), a.port()),
        IpAddr::V6(_) => a,
    }
}

/// The address's bytes as `inet_diag_sockid` holds them (network order, IPv4 in the
/// first four).
fn address_bytes(a: SocketAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match a.ip() {
        IpAddr::V4(ip) => out[..4].copy_from_slice(&ip.octets()),
        IpAddr::V6(ip) => out = ip.octets(),
    }
    out
}

/// The `SOCK_DIAG_BY_FAMILY` request for the TCP socket whose own address is `client`
/// and whose peer is `server` (`nlmsghdr` and `inet_diag_req_v2`).
fn request(family: u8, client: SocketAddr, server: SocketAddr) -> Vec<u8> {
    let mut r = Vec::with_capacity(HEADER + 56);
    r.extend_from_slice(&((HEADER + 56) as u32).to_ne_bytes());
    r.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    r.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    r.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    r.extend_from_slice(&[family, IPPROTO_TCP, 0, 0]);
    r.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    r.extend_from_slice(&client.port().to_be_bytes());
    r.extend_from_slice(&server.port().to_be_bytes());
    r.extend_from_slice(&address_bytes(client));
    r.extend_from_slice(&address_bytes(server));
    r.extend_from_slice(&0u32.to_ne_bytes()); // any interface
    r.extend_from_slice(&[0xff; 8]); // INET_DIAG_NOCOOKIE
    r
}

/// The uid in the kernel's answer to [`request`], if it found the socket.
fn uid_in(answer: &[u8]) -> Option<u32> {
    let kind = u16::from_ne_bytes(answer.get(4..6)?.try_into().ok()?);
    if kind != SOCK_DIAG_BY_FAMILY || kind == NLMSG_ERROR {
        return None;
    }
    let at = HEADER + UID_AT;
    Some(u32::from_ne_bytes(answer.get(at..at + 4)?.try_into().ok()?))
}

/// Asks the kernel for the owner of the `family` TCP socket at `client` connected to
/// `server`.
fn owner(family: u8, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let socket = rustix::net::socket(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        Some(rustix::net::netlink::SOCK_DIAG),
    )
    .ok()?;
    let kernel = SocketAddrNetlink::new(0, 0);
    rustix::net::sendto(
        &socket,
        &request(family, client, server),
        SendFlags::empty(),
        &kernel,
    )
    .ok()?;
    let mut answer = [0u8; 512];
    let (n, _) = rustix::net::recv(&socket, &mut answer, RecvFlags::empty()).ok()?;
    uid_in(&answer[..n.min(answer.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    #[test]
    fn this_processs_own_connections_are_found_with_its_uid() {
        for host in ["127.0.0.1:0", "[::1]:0"] {
            let listener = std::net::TcpListener::bind(host).unwrap();
            let server = listener.local_addr().unwrap();
            let stream = std::net::TcpStream::connect(server).unwrap();
            assert_eq!(
                peer(stream.local_addr().unwrap(), server),
                Peer::Local(me()),
                "{host}"
            );
        }
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_is_found() {
        let Ok(listener) = std::net::TcpListener::bind("[::]:0") else {
            return; // no IPv6 here: nothing dual-stack to check
        };
        let port = listener.local_addr().unwrap().port();
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, client) = listener.accept().unwrap();
        // The server side sees the client as ::ffff:127.0.0.1.
        assert!(matches!(client.ip(), IpAddr::V6(_)), "{client}");
        assert_eq!(peer(client, accepted.local_addr().unwrap()), Peer::Local(me()));
        drop(stream);
    }

    #[test]
    fn a_loopback_socket_that_does_not_exist_is_unknown_and_a_foreign_one_remote() {
        let server: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(peer("127.0.0.1:1".parse().unwrap(), server), Peer::Unknown);
        assert_eq!(
            peer(
                "192.0.2.1:40000".parse().unwrap(),
                "192.0.2.1:8765".parse().unwrap()
            ),
            Peer::Unknown
        );
        assert_eq!(
            peer(
                "198.51.100.7:40000".parse().unwrap(),
                "192.0.2.1:8765".parse().unwrap()
            ),
            Peer::Remote
        );
    }
}
