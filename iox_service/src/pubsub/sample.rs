//! Samples: a loaned chunk being written (`SampleMutUninit`, `SampleMut`) and a
//! received chunk being read (`Sample`).
//!
//! A loan is uninitialised memory (never zero-filled): write it with `write_payload`
//! / `write_from_fn` / `write_from_slice`, or through `payload_mut` and then the
//! `unsafe` `assume_init`. Dropping a loan without sending returns its chunk. A
//! received `Sample` only gives `&P`; dropping it clears this subscriber's owner bit on
//! the chunk, and the chunk is free again once no port and no queue holds it.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::sync::Arc;

use iox_mempool::Located;

use crate::publisher::{PublisherPort, SendError};
use crate::subscriber::SubscriberPort;
use crate::{Payload, ZeroCopySafe};

/// A loaned, not yet initialised sample.
#[derive(Debug)]
pub struct SampleMutUninit<P: ?Sized + Payload> {
    port: Rc<PublisherPort>,
    /// The chunk, located by the port's pool (its addresses, see `iox_mempool::Located`);
    /// `None` once sent (then dropping it returns nothing).
    chunk: Option<Located>,
    /// The payload's address (the chunk's), kept apart so that writing it needs no
    /// test of `chunk`.
    ptr: *mut u8,
    len: usize,
    _payload: PhantomData<fn() -> Box<P>>,
}

/// A loaned, initialised sample, ready to send.
#[derive(Debug)]
pub struct SampleMut<P: ?Sized + Payload> {
    inner: SampleMutUninit<P>,
}

impl<P: ?Sized + Payload> SampleMutUninit<P> {
    pub(crate) fn new(port: Rc<PublisherPort>, chunk: Located, len: usize) -> Self {
        Self {
            port,
            ptr: chunk.addr(),
            chunk: Some(chunk),
            len,
            _payload: PhantomData,
        }
    }

    /// The loaned chunk (`None` once sent).
    pub(crate) fn chunk_handle(&self) -> Option<iox_mempool::ChunkHandle> {
        self.chunk.as_ref().map(Located::handle)
    }

    /// Declares the payload initialised.
    ///
    /// # Safety
    /// Every byte of the payload must have been written (through `payload_mut`).
    pub unsafe fn assume_init(self) -> SampleMut<P> {
        SampleMut { inner: self }
    }

    /// The device address of the loaned payload, for a publisher that pinned a
    /// `CudaPinned` pool (`pin_memory(true)`): where a kernel on the device writes it
    /// with no copy (synchronise that work before `send`). As [`Sample::device_ptr`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{DevicePtrError, Service};
    /// let service = Service::named("doc/loan-device").unwrap().root(dir.path())
    ///     .publish_subscribe::<u64>().open_or_create().unwrap();
    /// let publisher = service.publisher_builder().create().unwrap();
    /// let loan = publisher.loan_uninit().unwrap();
    /// // An unpinned Cpu publisher has no device address for it.
    /// assert!(matches!(loan.device_ptr(), Err(DevicePtrError::NotPinned)));
    /// ```
    #[inline]
    pub fn device_ptr(&self) -> Result<u64, DevicePtrError> {
        let offset = self.ptr as usize - self.port.pool().payload_base();
        match self.port.device_base() {
            Some(base) => Ok(base + offset as u64),
            None => Err(DevicePtrError::NotPinned),
        }
    }
}

impl<T: ZeroCopySafe> SampleMutUninit<T> {
    /// The uninitialised payload.
    pub fn payload_mut(&mut self) -> &mut MaybeUninit<T> {
        // SAFETY: the chunk is loaned to us alone, holds at least size_of::<T>() bytes
        // and is aligned for T (the layout's alignment is at least align_of::<T>()).
        unsafe { &mut *self.ptr.cast::<MaybeUninit<T>>() }
    }

    /// Writes `value` and returns the sample, ready to send.
    pub fn write_payload(mut self, value: T) -> SampleMut<T> {
        self.payload_mut().write(value);
        // SAFETY: just written in full.
        unsafe { self.assume_init() }
    }
}

impl<T: ZeroCopySafe> SampleMutUninit<[T]> {
    /// The uninitialised payload, `len` elements.
    pub fn payload_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: the chunk is loaned to us alone, holds len * size_of::<T>() bytes
        // (checked at loan) and is aligned for T.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<MaybeUninit<T>>(), self.len) }
    }

    /// Writes element `i` as `f(i)` for every `i` and returns the sample.
    pub fn write_from_fn(mut self, mut f: impl FnMut(usize) -> T) -> SampleMut<[T]> {
        for (i, e) in self.payload_mut().iter_mut().enumerate() {
            e.write(f(i));
        }
        // SAFETY: every element was just written.
        unsafe { self.assume_init() }
    }

    /// Copies `src` in and returns the sample.
    ///
    /// # Panics
    /// If `src.len()` differs from the loaned length (like `copy_from_slice`).
    pub fn write_from_slice(mut self, src: &[T]) -> SampleMut<[T]> {
        let dst = self.payload_mut();
        assert_eq!(
            dst.len(),
            src.len(),
            "write_from_slice: the loan holds {} elements",
            dst.len()
        );
        for (d, s) in dst.iter_mut().zip(src) {
            d.write(*s);
        }
        // SAFETY: every element was just written.
        unsafe { self.assume_init() }
    }
}

impl<P: ?Sized + Payload> Drop for SampleMutUninit<P> {
    fn drop(&mut self) {
        if let Some(chunk) = self.chunk.take() {
            self.port.drop_loan(chunk);
        }
    }
}

impl<P: ?Sized + Payload> SampleMut<P> {
    /// See [`SampleMutUninit::device_ptr`].
    #[inline]
    pub fn device_ptr(&self) -> Result<u64, DevicePtrError> {
        self.inner.device_ptr()
    }

    /// Sends the sample to every connected subscriber; returns how many got it.
    #[inline]
    pub fn send(mut self) -> Result<usize, SendError> {
        let Some(chunk) = self.inner.chunk.take() else {
            unreachable!("a loan is sent at most once (send consumes it)")
        };
        self.inner.port.send_chunk(chunk, self.inner.len)
    }
}

impl<P: ?Sized + Payload> Deref for SampleMut<P> {
    type Target = P;
    fn deref(&self) -> &P {
        // SAFETY: initialised (assume_init's contract), loaned to us alone, in range.
        unsafe { &*P::payload_ptr(self.inner.ptr, self.inner.len) }
    }
}

impl<P: ?Sized + Payload> DerefMut for SampleMut<P> {
    fn deref_mut(&mut self) -> &mut P {
        // SAFETY: as for deref; the chunk is loaned to this publisher alone.
        unsafe { &mut *P::payload_ptr(self.inner.ptr, self.inner.len) }
    }
}

/// Why a sample has no device address ([`Sample::device_ptr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DevicePtrError {
    /// The port (the subscriber that received it, or the publisher that loaned it) did
    /// not pin the pool with a pinner that maps it for a device.
    #[error(
        "the payload has no device address: its port did not pin the pool for a device (build the publisher or subscriber with .pin_memory(true) on a CudaPinned service, with iox_service's `cuda` feature)"
    )]
    NotPinned,
}

/// A received sample. Derefs to the payload; dropping it releases the chunk. It owns
/// a reference to its subscriber's port, so it may outlive the subscriber handle and be
/// moved to another thread.
///
/// ```
/// fn needs_send_static<T: Send + Sync + 'static>() {}
/// needs_send_static::<iox_service::Sample<u64>>();
/// needs_send_static::<iox_service::Sample<[u8]>>();
/// fn needs_send<T: Send>() {}
/// needs_send::<iox_service::Subscriber<u64>>(); // Send, not Sync (one consumer)
/// ```
#[derive(Debug)]
pub struct Sample<P: ?Sized + Payload> {
    port: Arc<SubscriberPort>,
    /// The chunk, located by the port's pool at receive (its ownership word's and its
    /// payload's addresses), so that dropping the sample looks nothing up.
    chunk: Located,
    len: usize,
    /// The publisher slot whose queue it came from (see [`Sample::publisher_slot`]).
    publisher: u32,
    _payload: PhantomData<fn() -> Box<P>>,
}

// SAFETY: a Sample only reads its payload (`&P`, and `P`'s elements are ZeroCopySafe,
// hence Send + Sync) through a mapping its `Arc` keeps alive, and dropping it is an
// atomic release on the chunk's ownership word plus the `Arc`'s atomic count; nothing in
// it is tied to the thread that received it. (These impls are needed for the
// `PhantomData<fn() -> Box<P>>` with unsized `P`; `Located` is Send + Sync itself.)
unsafe impl<P: ?Sized + Payload> Send for Sample<P> {}
// SAFETY: `&Sample` only gives `&P` and addresses; see Send.
unsafe impl<P: ?Sized + Payload> Sync for Sample<P> {}

// The impls above rely on the port state being shareable: keep it so.
const _: () = {
    fn shareable<T: Send + Sync>() {}
    let _ = shareable::<SubscriberPort>;
};

impl<P: ?Sized + Payload> Sample<P> {
    pub(crate) fn new(port: Arc<SubscriberPort>, chunk: Located, len: usize, publisher: usize) -> Self {
        Self {
            port,
            chunk,
            len,
            publisher: publisher as u32,
            _payload: PhantomData,
        }
    }

    /// The slot of the publisher that sent it: the queue the subscriber took it from
    /// (recorded at receive, one register store; nothing is added to the queue entry).
    /// Compare with [`Publisher::publisher_slot`](crate::Publisher::publisher_slot) of
    /// one's own publishers to tell one's own samples apart, as a bridge does so as not
    /// to send back what it received. A slot is one live publisher at a time; a sample
    /// that a dead publisher left queued reports that slot too, even after a new
    /// publisher took it over.
    #[inline]
    pub fn publisher_slot(&self) -> usize {
        self.publisher as usize
    }

    /// The received chunk.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn chunk_handle(&self) -> iox_mempool::ChunkHandle {
        self.chunk.handle()
    }

    /// The payload as bytes, whatever its type: `len x` the element size recorded in
    /// the static config (the whole value for typed payloads), so a program that opened
    /// the service as `[u8]` with
    /// [`carry_payload_type`](crate::PubSubBuilder::carry_payload_type) reads the
    /// whole payload. `None` if that length does not fit the chunk (a corrupt entry),
    /// or if the recorded payload type has padding or invalid bit patterns
    /// ([`PayloadType::any_bit_pattern`](crate::PayloadType::any_bit_pattern)): padding
    /// bytes a writer left are not initialised memory, which no `&[u8]` may show.
    pub fn payload_bytes(&self) -> Option<&[u8]> {
        if !self.port.recorded_payload().any_bit_pattern() {
            return None;
        }
        let element = self.port.element_size();
        let bytes = self.len.checked_mul(element)?;
        let (_, chunk) = self.port.pool().chunk(self.chunk.handle())?;
        if bytes > chunk {
            return None;
        }
        // SAFETY: `bytes` bytes from `ptr` lie inside the chunk (checked above), which
        // our owner bit keeps from reuse; the publisher wrote them before its Release
        // push that our Acquire pop saw. The recorded type has no padding (checked
        // above), so every one of them was written as part of a value.
        Some(unsafe { std::slice::from_raw_parts(self.chunk.addr(), bytes) })
    }

    /// The chunk's address in this process (e.g. for a device pointer lookup).
    pub fn as_ptr(&self) -> *const u8 {
        self.chunk.addr()
    }

    /// The device address of the sample, for a kernel or copy to use it in place: the
    /// pool's device address, learned once when the subscriber pinned the pool (a
    /// `CudaPinned` service with the `cuda` feature: `cuMemHostGetDevicePointer` at
    /// registration), plus the chunk's offset. No driver call, no lock.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use iox_service::{DevicePtrError, Service};
    /// let service = Service::named("doc/device").unwrap().root(dir.path())
    ///     .publish_subscribe::<u64>().open_or_create().unwrap();
    /// let subscriber = service.subscriber_builder().create().unwrap();
    /// let publisher = service.publisher_builder().create().unwrap();
    /// publisher.loan_uninit().unwrap().write_payload(7).send().unwrap();
    /// let sample = subscriber.receive().unwrap().unwrap();
    /// // An unpinned Cpu subscriber has no device address for it.
    /// assert!(matches!(sample.device_ptr(), Err(DevicePtrError::NotPinned)));
    /// ```
    #[inline]
    pub fn device_ptr(&self) -> Result<u64, DevicePtrError> {
        match self.port.device_base() {
            Some(base) => Ok(base + self.offset() as u64),
            None => Err(DevicePtrError::NotPinned),
        }
    }

    /// The user word: elements for a slice, 1 for a typed payload (no `Deref`).
    pub(crate) fn word(&self) -> usize {
        self.len
    }

    /// The chunk's offset from the pool's base (the same in every process).
    pub fn offset(&self) -> usize {
        self.chunk.addr() as usize - self.port.pool().payload_base()
    }
}

impl<P: ?Sized + Payload> Deref for Sample<P> {
    type Target = P;
    fn deref(&self) -> &P {
        // SAFETY: the publisher finished writing before its Release push, which our
        // Acquire pop saw; our owner bit is set on the chunk, so it is not reused; the length
        // was checked against the chunk size at receive.
        unsafe { &*P::payload_ptr(self.chunk.addr(), self.len) }
    }
}

impl<P: ?Sized + Payload> Drop for Sample<P> {
    fn drop(&mut self) {
        self.port.drop_sample(&self.chunk);
    }
}
