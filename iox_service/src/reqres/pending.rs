//! Pending responses: the client's side of one request's response stream.
//!
//! `receive` takes this request's responses in order: first those the client already
//! took for it (its stash), then from the response queue of its server, keeping
//! entries of the client's other requests in their stashes and releasing stale ones.
//! Finding nothing, it reads its request slot word: FIN means the stream ended (after
//! one more look, which the word's Release/Acquire pairing makes complete); a server
//! slot that is free or of a newer generation means the server is gone
//! ([`ResponseReceiveError::ServerGone`], after one more look too). While it waits it
//! looks at the server's node lock every 10 ms and recovers a dead server itself.

use super::Types;
use std::marker::PhantomData;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use iox_mempool::ChunkHandle;
use thiserror::Error;

use super::client::ClientPort;
use super::request_word;
use super::slots::{self, Step};
use crate::Payload;
use crate::dynamic;
use crate::port;
use crate::queue::{self, Popped};
use crate::valid::check_values;

/// Why receiving a response failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ResponseReceiveError {
    /// The server handling the request went away (its process died, or it dropped
    /// the request unreceived) before ending the stream. Responses that reached the
    /// client were returned first; the request's chunk was recovered.
    #[error(
        "the server handling this request is gone (its process died or it closed) before ending the stream"
    )]
    ServerGone,
    /// A queue held something that is not a valid response of this service.
    #[error("corrupt response entry {raw:#x}: {what}")]
    Corrupt {
        /// The entry.
        raw: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// A response held bytes that are no value of the response type (a `bool` other
    /// than 0 or 1): it was released unread; receive again for the next.
    #[error("refused a response: {0}")]
    InvalidValue(crate::valid::InvalidValue),
    /// This process is a fork of the one that made the client.
    #[error("this pending response belongs to the process this one was forked from")]
    ForkedProcess,
    /// Waiting on the futex failed.
    #[error("waiting for a response failed: {0}")]
    Wait(std::io::Error),
}

/// The stream of responses to one request. Dropping it before the end abandons the
/// request (the server's next send reports [`super::ResponseSendError::Abandoned`]).
///
/// ```
/// use std::time::Duration;
/// use iox_service::Service;
/// # let dir = tempfile::tempdir().unwrap();
/// let svc = Service::named("doc/pending")?
/// #   .root(dir.path())
///     .request_response::<u8, u8>()
///     .open_or_create()?;
/// let server = svc.server_builder().create()?;
/// let client = svc.client_builder().create()?;
/// let pending = client.loan_uninit()?.write_payload(1).send()?;
/// // Nothing yet: a timeout, not the end.
/// assert!(pending.receive_timeout(Duration::from_millis(1))?.is_none());
/// assert!(!pending.is_finished());
/// drop(server.receive()?); // answered with no response at all
/// assert!(pending.receive_timeout(Duration::from_secs(1))?.is_none());
/// assert!(pending.is_finished()); // the end
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct PendingResponse<Req: ?Sized + Payload, Resp: ?Sized + Payload> {
    port: Rc<ClientPort>,
    server: usize,
    server_generation: u64,
    seq: u32,
    finished: std::cell::Cell<bool>,
    server_gone: std::cell::Cell<bool>,
    _payload: PhantomData<Types<Req, Resp>>,
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> PendingResponse<Req, Resp> {
    pub(crate) fn new(port: Rc<ClientPort>, server: usize, server_generation: u64, seq: u32) -> Self {
        Self {
            port,
            server,
            server_generation,
            seq,
            finished: Default::default(),
            server_gone: Default::default(),
            _payload: PhantomData,
        }
    }

    /// Whether the stream ended: the server dropped the request and every response
    /// was received, or the server is gone (reported once as
    /// [`ResponseReceiveError::ServerGone`]). Tells the end from a timeout.
    pub fn is_finished(&self) -> bool {
        self.finished.get()
    }

    /// Whether the stream ended because the server went away.
    pub fn is_server_gone(&self) -> bool {
        self.server_gone.get()
    }

    /// The server slot handling the request.
    pub fn server_slot(&self) -> usize {
        self.server
    }

    /// Takes the next response, if one is there. Never blocks. `Ok(None)`: nothing
    /// yet, or the end of the stream ([`Self::is_finished`]).
    pub fn receive(&self) -> Result<Option<Response<Resp>>, ResponseReceiveError> {
        if !self.port.is_own_process() {
            return Err(ResponseReceiveError::ForkedProcess);
        }
        match self.look()? {
            Step::Got(r) => Ok(Some(r)),
            Step::Done | Step::Nothing => Ok(None),
        }
    }

    /// Takes the next response, waiting up to `timeout` (futex, no busy-waiting).
    /// `Ok(None)` on timeout or at the end of the stream: [`Self::is_finished`] tells
    /// which.
    pub fn receive_timeout(&self, timeout: Duration) -> Result<Option<Response<Resp>>, ResponseReceiveError> {
        if !self.port.is_own_process() {
            return Err(ResponseReceiveError::ForkedProcess);
        }
        slots::wait(
            self.port.header(),
            timeout,
            true,
            || self.look(),
            ResponseReceiveError::Wait,
        )
    }

    fn look(&self) -> Result<Step<Response<Resp>>, ResponseReceiveError> {
        if self.finished.get() {
            return Ok(Step::Done);
        }
        if let Some(r) = self.take()? {
            return Ok(Step::Got(r));
        }
        let port = &self.port;
        if port.armed.get() {
            port.doorbell.rearm(&port.header().waiting);
            if let Some(r) = self.take()? {
                return Ok(Step::Got(r));
            }
        }
        let d = port.service.dynamic();
        let word = d.request_words(port.slot)[slots::slot_of(self.seq)].load(Ordering::Acquire);
        let sh = d.receiver(self.server);
        let gone = |sh| {
            let (generation, phase) = slots::slot_state(sh);
            generation != self.server_generation || phase == dynamic::FREE
        };
        let mut server_gone = word & request_word::FIN == 0 && gone(sh);
        if word & request_word::FIN == 0 && !server_gone && port.liveness.due() {
            let node = sh.node.load(Ordering::Acquire);
            if node != 0 && !crate::node::is_alive(&port.service.root, node) {
                let _ = crate::recovery::recover(&port.service);
                server_gone = gone(sh);
            }
        }
        if word & request_word::FIN == 0 && !server_gone {
            return Ok(Step::Nothing);
        }
        // Ended or gone: what was pushed before is visible now; take it first.
        fence(Ordering::SeqCst);
        if let Some(r) = self.take()? {
            return Ok(Step::Got(r));
        }
        self.finished.set(true);
        if server_gone {
            self.server_gone.set(true);
            return Err(ResponseReceiveError::ServerGone);
        }
        Ok(Step::Done)
    }

    /// Takes this request's next response from the stash or the queue.
    fn take(&self) -> Result<Option<Response<Resp>>, ResponseReceiveError> {
        let port = &self.port;
        let stashed = port.stash.borrow_mut().pop(self.seq);
        if let Some(h) = stashed {
            return self.response(h, 0).map(Some);
        }
        let d = port.service.dynamic();
        let q = d.response_queue(self.server, port.slot);
        loop {
            let mut taken = None;
            let Popped::Took(raw) = q.pop(queue::BY_CONSUMER, |e| {
                taken = port::take_entry(port.pool.book(), e, port.owner)
            }) else {
                return Ok(None);
            };
            let Some(h) = taken else {
                return Err(ResponseReceiveError::Corrupt {
                    raw,
                    what: "no such chunk, or a duplicate entry",
                });
            };
            let seq = slots::seq_of(raw);
            if seq == self.seq {
                return self.response(h, raw).map(Some);
            }
            let kept = port.stash.borrow_mut().push(seq, h);
            // A response to a request whose pending response is gone.
            if let Err(h) = kept {
                let _ = port.pool.book().release(h, port.owner);
            }
        }
    }

    fn response(&self, h: ChunkHandle, raw: u64) -> Result<Response<Resp>, ResponseReceiveError> {
        let pool = &self.port.pool;
        let corrupt = |what| {
            let _ = pool.book().release(h, self.port.owner);
            Err(ResponseReceiveError::Corrupt { raw, what })
        };
        // One lookup for its length, size and address.
        let Ok(chunk) = pool.chunk_ref(h) else {
            return corrupt("no such chunk");
        };
        let (len, chunk_size, ptr) = (chunk.user_word(), chunk.size(), chunk.addr());
        let elem = size_of::<Resp::Element>() as u64;
        let fits = if Resp::IS_SLICE {
            len.checked_mul(elem).is_some_and(|b| b <= chunk_size as u64)
        } else {
            len == 1 && size_of::<Resp::Element>() <= chunk_size
        };
        if !fits {
            return corrupt("payload length does not fit the chunk");
        }
        // A response type with bytes that are no value is checked before it is handed
        // out (`zero_copy`: readers never trust writers); nothing for other types.
        // SAFETY: `len` elements fit the chunk (just checked), which our owner bit
        // holds; the server wrote them before its Release push, which our pop saw.
        if let Err(source) = unsafe { check_values::<Resp, ()>(ptr, len as usize) } {
            let _ = pool.book().release(h, self.port.owner);
            return Err(ResponseReceiveError::InvalidValue(source));
        }
        Ok(Response {
            port: Rc::clone(&self.port),
            handle: h,
            ptr,
            len: len as usize,
            _payload: PhantomData,
        })
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Drop for PendingResponse<Req, Resp> {
    fn drop(&mut self) {
        let port = &self.port;
        if !port.is_own_process() {
            return;
        }
        let k = slots::slot_of(self.seq);
        port.in_use.set(port.in_use.get() & !(1 << k));
        let stashed = port.stash.borrow_mut().close(self.seq);
        for h in stashed {
            let _ = port.pool.book().release(h, port.owner);
        }
        let d = port.service.dynamic();
        let sh = d.receiver(self.server);
        request_word::abandon(
            &d.request_words(port.slot)[k],
            self.seq,
            (self.server, self.server_generation),
            || {
                let (generation, phase) = slots::slot_state(sh);
                generation != self.server_generation || phase == dynamic::FREE
            },
        );
    }
}

/// The client's readiness descriptor (see [`super::Client`]'s `AsFd`).
impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> AsFd for PendingResponse<Req, Resp> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.port.arm()
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> AsRawFd for PendingResponse<Req, Resp> {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

/// A received response. Derefs to the payload; dropping it releases the chunk.
#[derive(Debug)]
pub struct Response<Resp: ?Sized + Payload> {
    port: Rc<ClientPort>,
    handle: ChunkHandle,
    ptr: *mut u8,
    len: usize,
    _payload: PhantomData<fn() -> Box<Resp>>,
}

impl<Resp: ?Sized + Payload> Deref for Response<Resp> {
    type Target = Resp;
    fn deref(&self) -> &Resp {
        // SAFETY: the server finished writing before its Release push, which our
        // Acquire pop saw; our owner bit keeps the chunk; the length was checked.
        unsafe { &*Resp::payload_ptr(self.ptr, self.len) }
    }
}

impl<Resp: ?Sized + Payload> Response<Resp> {
    /// The payload's address (`reqres::raw`).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The user word: elements for a slice, 1 for a typed payload (`reqres::raw`).
    pub(crate) fn word(&self) -> usize {
        self.len
    }

    /// Bytes in the response's chunk (0 if the handle is not the pool's).
    pub(crate) fn chunk_size(&self) -> usize {
        self.port.pool.chunk(self.handle).map_or(0, |(_, size)| size)
    }

    /// The response payload recorded in the static config.
    pub(crate) fn recorded_payload(&self) -> &crate::PayloadType {
        super::raw::recorded(&self.port.service.config).1
    }
}

impl<Resp: ?Sized + Payload> Drop for Response<Resp> {
    fn drop(&mut self) {
        if self.port.is_own_process() {
            let _ = self.port.pool.book().release(self.handle, self.port.owner);
        }
    }
}
