//! Who is on the other end of a TCP connection from this machine: the uid that owns the
//! client's socket, as the kernel lists it in `/proc/net/tcp` and `/proc/net/tcp6`.
//!
//! `iox foxglove` shows its own user's services to whoever connects; on a machine with
//! other users, a connection from one of them (through the loopback interface, or any
//! local address) must not see them unless that was asked for. A connection whose
//! client socket is on this machine is admitted when it belongs to the same uid, or to
//! root; one from elsewhere (the address was opened with `--listen`) is not looked up.
//!
//! Invariant: a connection from this machine whose owner cannot be found is refused,
//! never admitted.

use std::net::{IpAddr, SocketAddr};

/// The uid owning the socket at `client` connected to `server`, if the kernel lists it.
pub fn owner(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let table = if client.is_ipv4() {
        "/proc/net/tcp"
    } else {
        "/proc/net/tcp6"
    };
    owner_in(&std::fs::read_to_string(table).ok()?, client, server)
}

/// Whether `client` is on this machine: a loopback address, this side's own address,
/// or a socket the kernel lists (`server`: this side of the connection).
pub fn is_local(client: SocketAddr, server: SocketAddr) -> bool {
    client.ip().is_loopback() || client.ip() == server.ip() || owner(client, server).is_some()
}

/// [`owner`] in a table's text: the line whose local address is `client` and whose
/// remote address is `server` (the client's side of the connection).
fn owner_in(text: &str, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let (local, remote) = (hex(client), hex(server));
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // sl, local_address, rem_address, st, tx:rx, tr:when, retrnsmt, uid, ...
        (fields.len() > 7
            && fields[1].eq_ignore_ascii_case(&local)
            && fields[2].eq_ignore_ascii_case(&remote))
        .then(|| fields[7].parse().ok())
        .flatten()
    })
}

/// An address as the kernel prints it in those tables: the address's 32-bit words in
/// this machine's byte order, in hex, then `:` and the port.
fn hex(addr: SocketAddr) -> String {
    let words: Vec<u32> = match addr.ip() {
        IpAddr::V4(ip) => vec![u32::from_ne_bytes(ip.octets())],
        IpAddr::V6(ip) => ip
            .octets()
            .chunks_exact(4)
            .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
            .collect(),
    };
    let mut out: String = words.iter().map(|w| format!("{w:08X}")).collect();
    out.push_str(&format!(":{:04X}", addr.port()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:2231 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1113 1\n\
   1: 0100007F:C350 0100007F:2231 01 00000000:00000000 00:00000000 00000000  1001        0 2222 1\n\
   2: 0100007F:2231 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 3333 1\n";

    #[test]
    fn the_client_side_of_the_connection_names_its_owner() {
        let client: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let server: SocketAddr = "127.0.0.1:8753".parse().unwrap();
        assert_eq!(hex(client), "0100007F:C350");
        assert_eq!(owner_in(TABLE, client, server), Some(1001));
        assert_eq!(owner_in(TABLE, "127.0.0.1:50001".parse().unwrap(), server), None);
    }

    #[test]
    fn this_processs_own_connection_is_found_with_its_uid() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let stream = std::net::TcpStream::connect(server).unwrap();
        let me = std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .unwrap();
        assert_eq!(owner(stream.local_addr().unwrap(), server), Some(me));
    }
}
