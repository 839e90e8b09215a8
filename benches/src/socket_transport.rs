//! The copying baseline: a Unix domain stream socket, the whole payload written and
//! read in both directions.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use crate::endpoint::Endpoint;

/// One side of a socket ping-pong.
pub struct SocketEndpoint {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl SocketEndpoint {
    /// The leader listens at `path` (call before starting the follower).
    pub fn listen(path: &Path) -> UnixListener {
        let _ = std::fs::remove_file(path);
        UnixListener::bind(path).expect("bind unix socket")
    }

    /// The leader's side, once the follower connected.
    pub fn accept(listener: &UnixListener, len: usize) -> Self {
        let (stream, _) = listener.accept().expect("accept");
        Self::new(stream, len)
    }

    /// The follower's side.
    pub fn connect(path: &Path, len: usize) -> Self {
        Self::new(UnixStream::connect(path).expect("connect unix socket"), len)
    }

    fn new(stream: UnixStream, len: usize) -> Self {
        Self {
            stream,
            buf: vec![0; len.max(1)],
        }
    }
}

impl Endpoint for SocketEndpoint {
    fn send(&mut self, len: usize, first: u8, last: u8) {
        self.buf[0] = first;
        self.buf[len - 1] = last;
        self.stream.write_all(&self.buf[..len]).expect("socket write");
    }

    fn lossy(&self) -> bool {
        false
    }

    /// A stream loses nothing, so this simply blocks until the next payload.
    fn try_recv(&mut self) -> Option<(u8, u8)> {
        Some(self.recv())
    }

    fn recv(&mut self) -> (u8, u8) {
        let len = self.buf.len();
        self.stream.read_exact(&mut self.buf).expect("socket read");
        (self.buf[0], self.buf[len - 1])
    }
}
