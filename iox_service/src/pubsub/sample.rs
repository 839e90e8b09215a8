//! Samples: a loaned chunk being written (`SampleMutUninit`, `SampleMut`) and a
//! received chunk being read (`Sample`).
//!
//! A loan is uninitialised memory (never zero-filled): write it with `write_payload`
//! / `write_from_fn` / `write_from_slice`, or through `payload_mut` and then the
//! `unsafe` `assume_init`. Dropping a loan without sending returns its chunk. A
//! received `Sample` only gives `&P`; dropping it clears this subscriber's owner bit on
//! the chunk, and the chunk is free again once no port and no queue holds it.
//!
//! A service with a user header (`crate::user_header`): the loan's second type
//! parameter says where its header stands: `H`, not written yet (only `write_header`,
//! `user_header_mut` and the `unsafe` `assume_init` lead on), then
//! [`HeaderWritten<H>`](crate::HeaderWritten) after `write_header`, whose payload
//! writers finish it. `()` is a service without a header. The payload lies at a
//! constant offset from the chunk (0 without a header).

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;
use std::sync::Arc;

use iox_mempool::Located;

use crate::publisher::{PublisherPort, SendError};
use crate::subscriber::SubscriberPort;
use crate::user_header::{HeaderReady, HeaderState, HeaderWritten, UserHeader, offset_for};
use crate::{Payload, ZeroCopySafe};

/// A loaned chunk: what every state of a loan holds, and what returns the chunk when
/// it is dropped unsent.
#[derive(Debug)]
struct Loan {
    port: Rc<PublisherPort>,
    /// The chunk, located by the port's pool (its addresses, see `iox_mempool::Located`);
    /// `None` once sent (then dropping it returns nothing).
    chunk: Option<Located>,
    /// The chunk's address (the header's, or the payload's without one), kept apart so
    /// that writing it needs no test of `chunk`.
    ptr: *mut u8,
    len: usize,
}

impl Drop for Loan {
    // Inline, as the generic loans' drop it replaces was: a sent loan's drop (its
    // chunk taken) then compiles to nothing in the caller.
    #[inline]
    fn drop(&mut self) {
        if let Some(chunk) = self.chunk.take() {
            self.port.drop_loan(chunk);
        }
    }
}

/// A loaned, not yet initialised sample. `S` is where its user header stands (module
/// docs): `()` for a service without one.
#[derive(Debug)]
pub struct SampleMutUninit<P: ?Sized + Payload, S: HeaderState = ()> {
    loan: Loan,
    _payload: crate::user_header::Marker<P, S>,
}

/// A loaned, initialised sample, ready to send. `H` is the service's user header
/// (`()`: none).
#[derive(Debug)]
pub struct SampleMut<P: ?Sized + Payload, H: UserHeader = ()> {
    loan: Loan,
    _payload: crate::user_header::Marker<P, H>,
}

impl<P: ?Sized + Payload, S: HeaderState> SampleMutUninit<P, S> {
    /// The loaning port, kept alive by whoever holds the returned handle: its slot is
    /// not freed before that handle goes, even if the publisher and this loan have
    /// (what a device loan needs to retire its events before the slot is let go).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn port(&self) -> Rc<PublisherPort> {
        Rc::clone(&self.loan.port)
    }

    pub(crate) fn new(port: Rc<PublisherPort>, chunk: Located, len: usize) -> Self {
        Self {
            loan: Loan {
                port,
                ptr: chunk.addr(),
                chunk: Some(chunk),
                len,
            },
            _payload: PhantomData,
        }
    }

    /// The payload's address: a constant offset from the chunk's (0 without a header).
    #[inline(always)]
    fn payload_ptr(&self) -> *mut u8 {
        // SAFETY: the loan was made for the offset plus the payload (`Publisher`'s
        // loans ask for both), so the address is inside the chunk.
        unsafe { self.loan.ptr.add(offset_for::<S::Header, P::Element>()) }
    }

    /// The loaned chunk (`None` once sent).
    pub(crate) fn chunk_handle(&self) -> Option<iox_mempool::ChunkHandle> {
        self.loan.chunk.as_ref().map(Located::handle)
    }

    /// The chunk's address (the header's; the payload's without a header).
    pub(crate) fn chunk_ptr(&self) -> *mut u8 {
        self.loan.ptr
    }

    /// The user header the service's static config records.
    pub(crate) fn recorded_header(&self) -> Option<&crate::HeaderType> {
        self.loan.port.recorded_header()
    }

    /// Declares the payload (and the user header, if the service has one) initialised.
    ///
    /// # Safety
    /// Every byte of the payload must have been written (through `payload_mut`), and
    /// of the header (through `user_header_mut` or `write_header`).
    pub unsafe fn assume_init(self) -> SampleMut<P, S::Header> {
        SampleMut {
            loan: self.loan,
            _payload: PhantomData,
        }
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
        let offset = self.payload_ptr() as usize - self.loan.port.pool().payload_base();
        match self.loan.port.device_base() {
            Some(base) => Ok(base + offset as u64),
            None => Err(DevicePtrError::NotPinned),
        }
    }
}

impl<P: ?Sized + Payload, S: HeaderState> SampleMutUninit<P, S>
where
    S::Header: ZeroCopySafe,
{
    /// The user header in place: `&mut MaybeUninit<H>` until
    /// [`write_header`](Self::write_header), `&mut H` after it.
    pub fn user_header_mut(&mut self) -> &mut S::InLoan {
        // SAFETY: the chunk is loaned to us alone; the header is its first
        // size_of::<H>() bytes, aligned for H (the pool's alignment is at least H's).
        // `S::InLoan` is `MaybeUninit<H>` (same layout as H) for a header not yet
        // written, and `H` for `HeaderWritten<H>`, whose header `write_header`
        // initialised (the sealed `HeaderState` has no other states with a header).
        unsafe { &mut *self.loan.ptr.cast::<S::InLoan>() }
    }
}

impl<P: ?Sized + Payload, H: ZeroCopySafe> SampleMutUninit<P, H> {
    /// Writes the user header in place; the payload is written next.
    #[inline]
    pub fn write_header(mut self, header: H) -> SampleMutUninit<P, HeaderWritten<H>> {
        self.user_header_mut().write(header);
        SampleMutUninit {
            loan: self.loan,
            _payload: PhantomData,
        }
    }
}

impl<T: ZeroCopySafe, S: HeaderState> SampleMutUninit<T, S> {
    /// The uninitialised payload.
    pub fn payload_mut(&mut self) -> &mut MaybeUninit<T> {
        // SAFETY: the chunk is loaned to us alone, holds at least the header's offset
        // plus size_of::<T>() bytes and the payload is aligned for T (the layout's
        // alignment is at least align_of::<T>(), the offset a multiple of it).
        unsafe { &mut *self.payload_ptr().cast::<MaybeUninit<T>>() }
    }
}

impl<T: ZeroCopySafe, S: HeaderReady> SampleMutUninit<T, S> {
    /// Writes `value` and returns the sample, ready to send.
    pub fn write_payload(mut self, value: T) -> SampleMut<T, S::Header> {
        self.payload_mut().write(value);
        // SAFETY: just written in full; the header needs nothing (`S: HeaderReady`).
        unsafe { self.assume_init() }
    }
}

impl<T: ZeroCopySafe, S: HeaderState> SampleMutUninit<[T], S> {
    /// The uninitialised payload, `len` elements.
    pub fn payload_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: the chunk is loaned to us alone, holds the header's offset plus
        // len * size_of::<T>() bytes (checked at loan) and the payload is aligned for T.
        unsafe { std::slice::from_raw_parts_mut(self.payload_ptr().cast::<MaybeUninit<T>>(), self.loan.len) }
    }
}

impl<T: ZeroCopySafe, S: HeaderReady> SampleMutUninit<[T], S> {
    /// Writes element `i` as `f(i)` for every `i` and returns the sample.
    pub fn write_from_fn(mut self, mut f: impl FnMut(usize) -> T) -> SampleMut<[T], S::Header> {
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
    pub fn write_from_slice(mut self, src: &[T]) -> SampleMut<[T], S::Header> {
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

impl<P: ?Sized + Payload, H: UserHeader> SampleMut<P, H> {
    /// The payload's address (see `SampleMutUninit::payload_ptr`).
    #[inline(always)]
    fn payload_ptr(&self) -> *mut u8 {
        // SAFETY: as for `SampleMutUninit::payload_ptr`.
        unsafe { self.loan.ptr.add(offset_for::<H, P::Element>()) }
    }

    /// See [`SampleMutUninit::device_ptr`].
    #[inline]
    pub fn device_ptr(&self) -> Result<u64, DevicePtrError> {
        let offset = self.payload_ptr() as usize - self.loan.port.pool().payload_base();
        match self.loan.port.device_base() {
            Some(base) => Ok(base + offset as u64),
            None => Err(DevicePtrError::NotPinned),
        }
    }

    /// Sends the sample to every connected subscriber; returns how many got it.
    #[inline]
    pub fn send(mut self) -> Result<usize, SendError> {
        let Some(chunk) = self.loan.chunk.take() else {
            unreachable!("a loan is sent at most once (send consumes it)")
        };
        self.loan.port.send_chunk(chunk, self.loan.len)
    }
}

impl<P: ?Sized + Payload, H: ZeroCopySafe> SampleMut<P, H> {
    /// The user header.
    pub fn user_header(&self) -> &H {
        // SAFETY: initialised (assume_init's contract), loaned to us alone, the chunk's
        // first bytes, aligned for H.
        unsafe { &*self.loan.ptr.cast::<H>() }
    }

    /// The user header, to change before sending.
    pub fn user_header_mut(&mut self) -> &mut H {
        // SAFETY: as for `user_header`; the chunk is loaned to this publisher alone.
        unsafe { &mut *self.loan.ptr.cast::<H>() }
    }
}

impl<P: ?Sized + Payload, H: UserHeader> Deref for SampleMut<P, H> {
    type Target = P;
    fn deref(&self) -> &P {
        // SAFETY: initialised (assume_init's contract), loaned to us alone, in range.
        unsafe { &*P::payload_ptr(self.payload_ptr(), self.loan.len) }
    }
}

impl<P: ?Sized + Payload, H: UserHeader> DerefMut for SampleMut<P, H> {
    fn deref_mut(&mut self) -> &mut P {
        // SAFETY: as for deref; the chunk is loaned to this publisher alone.
        unsafe { &mut *P::payload_ptr(self.payload_ptr(), self.loan.len) }
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
///
/// `H` is the service's user header (`()`: none), read with
/// [`user_header`](Sample::user_header).
#[derive(Debug)]
pub struct Sample<P: ?Sized + Payload, H: UserHeader = ()> {
    port: Arc<SubscriberPort>,
    /// The chunk, located by the port's pool at receive (its ownership word's and its
    /// payload's addresses), so that dropping the sample looks nothing up.
    chunk: Located,
    len: usize,
    /// The publisher slot whose queue it came from (see [`Sample::publisher_slot`]).
    publisher: u32,
    _payload: crate::user_header::Marker<P, H>,
}

// SAFETY: a Sample only reads its payload (`&P`, and `P`'s elements are ZeroCopySafe,
// hence Send + Sync) through a mapping its `Arc` keeps alive, and dropping it is an
// atomic release on the chunk's ownership word plus the `Arc`'s atomic count; nothing in
// it is tied to the thread that received it. (These impls are needed for the
// `PhantomData<fn() -> Box<P>>` with unsized `P`; `Located` is Send + Sync itself.)
unsafe impl<P: ?Sized + Payload, H: UserHeader> Send for Sample<P, H> {}
// SAFETY: `&Sample` only gives `&P` and addresses; see Send.
unsafe impl<P: ?Sized + Payload, H: UserHeader> Sync for Sample<P, H> {}

// The impls above rely on the port state being shareable: keep it so.
const _: () = {
    fn shareable<T: Send + Sync>() {}
    let _ = shareable::<SubscriberPort>;
};

impl<P: ?Sized + Payload, H: UserHeader> Sample<P, H> {
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
        self.chunk_bytes(self.port.payload_offset(), bytes)
    }

    /// The user header as bytes, whatever its type (empty for a service without one),
    /// for programs that move samples without knowing their types (a bridge, the
    /// tools): the header's size recorded in the static config. `None` if the recorded
    /// header type has padding or invalid bit patterns (as for
    /// [`payload_bytes`](Self::payload_bytes)).
    pub fn header_bytes(&self) -> Option<&[u8]> {
        let header = self.port.recorded_header();
        match header {
            None => Some(&[]),
            Some(h) if h.identity.any_bit_pattern() => self.chunk_bytes(0, h.size()),
            Some(_) => None,
        }
    }

    /// Whether `bytes` bytes from `offset` lie inside the chunk.
    pub(crate) fn fits_at(&self, offset: usize, bytes: usize) -> bool {
        self.port
            .pool()
            .chunk(self.chunk.handle())
            .is_some_and(|(_, chunk)| offset.checked_add(bytes).is_some_and(|end| end <= chunk))
    }

    /// The chunk's raw handle (for an error that names it).
    pub(crate) fn chunk_raw(&self) -> u32 {
        self.chunk.raw()
    }

    /// `bytes` bytes from `offset` in the chunk, if they lie inside it.
    fn chunk_bytes(&self, offset: usize, bytes: usize) -> Option<&[u8]> {
        let (_, chunk) = self.port.pool().chunk(self.chunk.handle())?;
        if offset.checked_add(bytes)? > chunk {
            return None;
        }
        // SAFETY: `bytes` bytes from `offset` lie inside the chunk (checked above),
        // which our owner bit keeps from reuse; the publisher wrote them before its
        // Release push that our Acquire pop saw. The callers read only types without
        // padding, so every one of them was written as part of a value.
        Some(unsafe { std::slice::from_raw_parts(self.chunk.addr().add(offset), bytes) })
    }

    /// The payload's address in this process (e.g. for a device pointer lookup).
    pub fn as_ptr(&self) -> *const u8 {
        self.payload_ptr()
    }

    /// The chunk's address (the header's, or the payload's without one).
    pub(crate) fn chunk_ptr(&self) -> *const u8 {
        self.chunk.addr()
    }

    /// Where the payload starts in the chunk, from the static config (0 without a
    /// user header): for the byte paths, which know no header type.
    pub(crate) fn payload_offset(&self) -> usize {
        self.port.payload_offset()
    }

    /// The user header the service's static config records.
    pub(crate) fn recorded_header(&self) -> Option<&crate::HeaderType> {
        self.port.recorded_header()
    }

    /// The payload's address: a constant offset from the chunk's (0 without a header).
    #[inline(always)]
    fn payload_ptr(&self) -> *mut u8 {
        // SAFETY: the receive checked that the offset and the payload fit the chunk.
        unsafe { self.chunk.addr().add(offset_for::<H, P::Element>()) }
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

    /// The payload's offset from the pool's base (the same in every process).
    pub fn offset(&self) -> usize {
        self.payload_ptr() as usize - self.port.pool().payload_base()
    }
}

impl<P: ?Sized + Payload, H: ZeroCopySafe> Sample<P, H> {
    /// The user header, read in place.
    #[inline]
    pub fn user_header(&self) -> &H {
        // SAFETY: the chunk's first size_of::<H>() bytes, aligned for H (the pool's
        // alignment is at least H's); written by the publisher before its Release push
        // (a loan cannot be sent before its header is written), which our Acquire pop
        // saw; our owner bit keeps the chunk from reuse. The service records H (checked
        // on open), so the writer wrote an H.
        unsafe { &*self.chunk.addr().cast::<H>() }
    }
}

impl<P: ?Sized + Payload, H: UserHeader> Deref for Sample<P, H> {
    type Target = P;
    fn deref(&self) -> &P {
        // SAFETY: the publisher finished writing before its Release push, which our
        // Acquire pop saw; our owner bit is set on the chunk, so it is not reused; the
        // header's offset and the length were checked against the chunk size at receive.
        unsafe { &*P::payload_ptr(self.payload_ptr(), self.len) }
    }
}

impl<P: ?Sized + Payload, H: UserHeader> Drop for Sample<P, H> {
    fn drop(&mut self) {
        self.port.drop_sample(&self.chunk);
    }
}
