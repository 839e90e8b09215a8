//! The messages of a descriptor hand-over: one request, one reply, each a single
//! `SOCK_SEQPACKET` record (boundaries kept, so a short or long message is seen as
//! such), little-endian.
//!
//! Request: `"IOXH"`, version (u16), stem length (u16), the service's stem.
//! Reply: `"IOXH"`, version (u16), [`Status`] (u16), descriptor count (u16), text
//! length (u16), text (UTF-8, why a refusal); the descriptors travel as one
//! `SCM_RIGHTS` message, exactly `count` of them. Anything else is malformed.

/// Marks both messages.
const MAGIC: &[u8; 4] = b"IOXH";
/// The protocol version; a peer of another version is refused as malformed.
const VERSION: u16 = 1;
/// The longest reply (header and text): a longer one is refused as oversized.
pub const MAX_REPLY: usize = 1024;
/// The longest request (header and a stem).
pub const MAX_REQUEST: usize = 8 + 255;
/// Most descriptors one reply carries.
pub const MAX_FDS: usize = 8;
const REPLY_HEADER: usize = 12;

/// What a responder says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Status {
    /// Here are the service's descriptors.
    Here = 0,
    /// This process holds no such service (any more).
    Unknown = 1,
    /// The requester's credentials do not admit it to the service (text says why).
    Refused = 2,
}

pub fn request(stem: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(8 + stem.len());
    m.extend_from_slice(MAGIC);
    m.extend_from_slice(&VERSION.to_le_bytes());
    m.extend_from_slice(&(stem.len() as u16).to_le_bytes());
    m.extend_from_slice(stem.as_bytes());
    m
}

/// The stem a request asks for, if it is well formed.
pub fn parse_request(m: &[u8]) -> Option<&str> {
    let (head, stem) = m.split_at_checked(8)?;
    if &head[..4] != MAGIC || u16::from_le_bytes([head[4], head[5]]) != VERSION {
        return None;
    }
    let len = u16::from_le_bytes([head[6], head[7]]) as usize;
    (stem.len() == len).then(|| std::str::from_utf8(stem).ok())?
}

pub fn reply(status: Status, fds: usize, text: &str) -> Vec<u8> {
    let text = &text.as_bytes()[..text.len().min(MAX_REPLY - REPLY_HEADER)];
    let mut m = Vec::with_capacity(REPLY_HEADER + text.len());
    m.extend_from_slice(MAGIC);
    m.extend_from_slice(&VERSION.to_le_bytes());
    m.extend_from_slice(&(status as u16).to_le_bytes());
    m.extend_from_slice(&(fds as u16).to_le_bytes());
    m.extend_from_slice(&(text.len() as u16).to_le_bytes());
    m.extend_from_slice(text);
    m
}

/// A reply as read: status, descriptor count announced, text.
#[derive(Debug)]
pub struct Reply {
    pub status: Status,
    pub fds: usize,
    pub text: String,
}

/// Parses a reply; `Err` says what is malformed.
pub fn parse_reply(m: &[u8]) -> Result<Reply, &'static str> {
    let (head, text) = m
        .split_at_checked(REPLY_HEADER)
        .ok_or("a reply shorter than its header")?;
    if &head[..4] != MAGIC {
        return Err("not an iox hand-over reply");
    }
    let word = |i: usize| u16::from_le_bytes([head[i], head[i + 1]]);
    if word(4) != VERSION {
        return Err("a reply of another protocol version");
    }
    let status = match word(6) {
        0 => Status::Here,
        1 => Status::Unknown,
        2 => Status::Refused,
        _ => return Err("a reply with an unknown status"),
    };
    if text.len() != word(10) as usize {
        return Err("a reply whose text length is wrong");
    }
    Ok(Reply {
        status,
        fds: word(8) as usize,
        text: String::from_utf8_lossy(text).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_bad_ones_are_refused() {
        assert_eq!(parse_request(&request("iox_ab")), Some("iox_ab"));
        let mut bad = request("iox_ab");
        bad.push(b'x');
        assert_eq!(parse_request(&bad), None, "length disagrees");
        assert_eq!(parse_request(b"IOX"), None);
        let r = parse_reply(&reply(Status::Refused, 0, "mode 0600")).unwrap();
        assert_eq!(
            (r.status, r.fds, r.text.as_str()),
            (Status::Refused, 0, "mode 0600")
        );
        assert!(parse_reply(b"garbage garbage").is_err());
        let mut m = reply(Status::Here, 1, "");
        m[6] = 9;
        assert!(parse_reply(&m).is_err(), "unknown status");
    }
}
