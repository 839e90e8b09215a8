//! Active requests (the server's side of one request: read it, respond, drop it to
//! end the stream) and response loans.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::rc::Rc;

use iox_mempool::{ChunkHandle, Located};

use super::Types;
use super::request_word;
use super::server::{ResponseSendError, ServerPort};
use super::slots;
use crate::port::LoanError;
use crate::{Payload, ZeroCopySafe};

/// Which request an active request is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestRef {
    pub(crate) client: usize,
    pub(crate) client_generation: u64,
    pub(crate) seq: u32,
    /// The request slot word while the request is active.
    pub(crate) token: u64,
}

/// A request being handled. Derefs to the request payload; respond with
/// `loan_uninit()?.write_payload(..).send()` any number of times; dropping it ends the
/// stream (the client's pending response sees the end after the last response).
#[derive(Debug)]
pub struct ActiveRequest<Req: ?Sized + Payload, Resp: ?Sized + Payload> {
    port: Rc<ServerPort>,
    handle: ChunkHandle,
    ptr: *mut u8,
    len: usize,
    r: RequestRef,
    _payload: PhantomData<Types<Req, Resp>>,
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> ActiveRequest<Req, Resp> {
    pub(crate) fn new(
        port: Rc<ServerPort>,
        handle: ChunkHandle,
        ptr: *mut u8,
        len: usize,
        r: RequestRef,
    ) -> Self {
        Self {
            port,
            handle,
            ptr,
            len,
            r,
            _payload: PhantomData,
        }
    }

    /// Whether the client still waits for responses (a snapshot; a send says for
    /// sure).
    pub fn is_connected(&self) -> bool {
        self.port.check(&self.r).is_ok()
    }

    /// The client slot that sent the request.
    pub fn client_slot(&self) -> usize {
        self.r.client
    }

    /// The request payload's address (`reqres::raw`).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The user word: elements for a slice, 1 for a typed payload (`reqres::raw`).
    pub(crate) fn word(&self) -> usize {
        self.len
    }

    /// Bytes in the request's chunk (0 if the handle is not the pool's).
    pub(crate) fn chunk_size(&self) -> usize {
        self.port.pool.chunk(self.handle).map_or(0, |(_, size)| size)
    }

    /// Bytes in the pool's largest chunks.
    pub(crate) fn max_chunk_size(&self) -> usize {
        self.port.pool.layout().max_chunk_size()
    }

    /// The request and response payloads recorded in the static config.
    pub(crate) fn recorded_payloads(&self) -> (&crate::PayloadType, &crate::PayloadType) {
        super::raw::recorded(&self.port.service.config)
    }

    pub(crate) fn loan_bytes(
        &self,
        bytes: usize,
        len: usize,
    ) -> Result<ResponseMutUninit<'_, Req, Resp>, LoanError> {
        let chunk = self.port.loan(bytes)?;
        Ok(ResponseMutUninit {
            request: self,
            chunk: Some(chunk),
            len,
        })
    }
}

impl<Req: ?Sized + Payload, T: ZeroCopySafe> ActiveRequest<Req, T> {
    /// Loans uninitialised memory for one response (never zero-filled).
    pub fn loan_uninit(&self) -> Result<ResponseMutUninit<'_, Req, T>, LoanError> {
        self.loan_bytes(size_of::<T>(), 1)
    }
}

impl<Req: ?Sized + Payload, T: ZeroCopySafe> ActiveRequest<Req, [T]> {
    /// Loans uninitialised memory for a response of `len` elements.
    pub fn loan_slice_uninit(&self, len: usize) -> Result<ResponseMutUninit<'_, Req, [T]>, LoanError> {
        let max = self.port.pool.layout().max_chunk_size() / size_of::<T>().max(1);
        if len > max && size_of::<T>() > 0 {
            return Err(LoanError::SliceTooLong { len, max });
        }
        self.loan_bytes(len * size_of::<T>(), len)
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Deref for ActiveRequest<Req, Resp> {
    type Target = Req;
    fn deref(&self) -> &Req {
        // SAFETY: the client finished writing before its Release push, which our
        // Acquire pop saw; our owner bit keeps the chunk; the length was checked.
        unsafe { &*Req::payload_ptr(self.ptr, self.len) }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Drop for ActiveRequest<Req, Resp> {
    fn drop(&mut self) {
        let port = &self.port;
        if !port.is_own_process() {
            return;
        }
        let _ = port.pool.book().release(self.handle, port.owner);
        let d = port.service.dynamic();
        let w = &d.request_words(self.r.client)[slots::slot_of(self.r.seq)];
        if request_word::end(w, self.r.token) == request_word::Ended::Fin {
            port.after_push(&self.r);
        }
    }
}

/// A loaned, not yet initialised response.
#[derive(Debug)]
pub struct ResponseMutUninit<'a, Req: ?Sized + Payload, Resp: ?Sized + Payload> {
    request: &'a ActiveRequest<Req, Resp>,
    /// `None` once sent.
    chunk: Option<Located>,
    len: usize,
}

/// A loaned, initialised response, ready to send.
#[derive(Debug)]
pub struct ResponseMut<'a, Req: ?Sized + Payload, Resp: ?Sized + Payload> {
    inner: ResponseMutUninit<'a, Req, Resp>,
}

impl<'a, Req: ?Sized + Payload, Resp: ?Sized + Payload> ResponseMutUninit<'a, Req, Resp> {
    /// The chunk's address (a loan not sent yet always has its chunk).
    pub(crate) fn addr(&self) -> *mut u8 {
        self.chunk
            .as_ref()
            .expect("a loan has its chunk until it is sent")
            .addr()
    }

    /// Declares the payload initialised.
    ///
    /// # Safety
    /// Every byte of the payload must have been written (through `payload_mut`).
    pub unsafe fn assume_init(self) -> ResponseMut<'a, Req, Resp> {
        ResponseMut { inner: self }
    }
}

impl<'a, Req: ?Sized + Payload, T: ZeroCopySafe> ResponseMutUninit<'a, Req, T> {
    /// The uninitialised payload.
    pub fn payload_mut(&mut self) -> &mut MaybeUninit<T> {
        // SAFETY: loaned to this server alone, at least size_of::<T>() bytes, aligned.
        unsafe { &mut *self.addr().cast::<MaybeUninit<T>>() }
    }

    /// Writes `value` and returns the response, ready to send.
    pub fn write_payload(mut self, value: T) -> ResponseMut<'a, Req, T> {
        self.payload_mut().write(value);
        // SAFETY: just written in full.
        unsafe { self.assume_init() }
    }
}

impl<'a, Req: ?Sized + Payload, T: ZeroCopySafe> ResponseMutUninit<'a, Req, [T]> {
    /// The uninitialised payload, `len` elements.
    pub fn payload_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: loaned to us alone, len * size_of::<T>() bytes (checked), aligned.
        unsafe { std::slice::from_raw_parts_mut(self.addr().cast::<MaybeUninit<T>>(), self.len) }
    }

    /// Writes element `i` as `f(i)` for every `i` and returns the response.
    pub fn write_from_fn(mut self, mut f: impl FnMut(usize) -> T) -> ResponseMut<'a, Req, [T]> {
        for (i, e) in self.payload_mut().iter_mut().enumerate() {
            e.write(f(i));
        }
        // SAFETY: every element was just written.
        unsafe { self.assume_init() }
    }

    /// Copies `src` in (its length must be the loaned length) and returns the response.
    pub fn write_from_slice(self, src: &[T]) -> ResponseMut<'a, Req, [T]> {
        assert_eq!(
            self.len,
            src.len(),
            "write_from_slice: the loan holds {} elements",
            self.len
        );
        self.write_from_fn(|i| src[i])
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Drop for ResponseMutUninit<'_, Req, Resp> {
    fn drop(&mut self) {
        if let Some(chunk) = self.chunk.take() {
            self.request.port.drop_loan(chunk);
        }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> ResponseMut<'_, Req, Resp> {
    /// Sends the response to the client that asked. Waits while the request's
    /// response buffer is full (see the module docs).
    pub fn send(mut self) -> Result<(), ResponseSendError> {
        let chunk = self.inner.chunk.take().expect("a loan is sent at most once");
        let request = self.inner.request;
        request.port.send(&request.r, chunk, self.inner.len)
    }

    /// [`send`](Self::send), waiting at most `timeout` while the client's queue for this
    /// request is full: [`ResponseSendError::Timeout`] then, with nothing sent (the
    /// chunk returns to the pool; loan and send again). For callers that must look at
    /// something else between waits (a binding's signal handling).
    pub fn send_timeout(mut self, timeout: std::time::Duration) -> Result<(), ResponseSendError> {
        let chunk = self.inner.chunk.take().expect("a loan is sent at most once");
        let request = self.inner.request;
        request
            .port
            .send_timeout(&request.r, chunk, self.inner.len, timeout)
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> Deref for ResponseMut<'_, Req, Resp> {
    type Target = Resp;
    fn deref(&self) -> &Resp {
        // SAFETY: initialised (assume_init's contract), loaned to us alone, in range.
        unsafe { &*Resp::payload_ptr(self.inner.addr(), self.inner.len) }
    }
}

impl<Req: ?Sized + Payload, Resp: ?Sized + Payload> std::ops::DerefMut for ResponseMut<'_, Req, Resp> {
    fn deref_mut(&mut self) -> &mut Resp {
        // SAFETY: as for deref; the chunk is loaned to this server alone.
        unsafe { &mut *Resp::payload_ptr(self.inner.addr(), self.inner.len) }
    }
}
