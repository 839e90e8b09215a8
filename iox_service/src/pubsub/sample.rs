//! Samples: a loaned chunk being written (`SampleMutUninit`, `SampleMut`) and a
//! received chunk being read (`Sample`).
//!
//! A loan is uninitialised memory (never zero-filled): write it with `write_payload`
//! / `write_from_fn` / `write_from_slice`, or through `payload_mut` and then the
//! `unsafe` `assume_init`. Dropping a loan without sending returns its chunk. A
//! received `Sample` only gives `&P`; dropping it clears this subscriber's owner bit on
//! the chunk, and the chunk is free again once no port and no queue holds it.

use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};

use iox_mempool::ChunkHandle;

use crate::publisher::{Publisher, SendError};
use crate::subscriber::Subscriber;
use crate::{Payload, ZeroCopySafe};

/// A loaned, not yet initialised sample.
#[derive(Debug)]
pub struct SampleMutUninit<'a, P: ?Sized + Payload> {
    publisher: &'a Publisher<P>,
    handle: ChunkHandle,
    ptr: *mut u8,
    len: usize,
}

/// A loaned, initialised sample, ready to send.
#[derive(Debug)]
pub struct SampleMut<'a, P: ?Sized + Payload> {
    inner: SampleMutUninit<'a, P>,
}

impl<'a, P: ?Sized + Payload> SampleMutUninit<'a, P> {
    pub(crate) fn new(publisher: &'a Publisher<P>, handle: ChunkHandle, ptr: *mut u8, len: usize) -> Self {
        Self {
            publisher,
            handle,
            ptr,
            len,
        }
    }

    /// Declares the payload initialised.
    ///
    /// # Safety
    /// Every byte of the payload must have been written (through `payload_mut`).
    pub unsafe fn assume_init(self) -> SampleMut<'a, P> {
        SampleMut { inner: self }
    }
}

impl<'a, T: ZeroCopySafe> SampleMutUninit<'a, T> {
    /// The uninitialised payload.
    pub fn payload_mut(&mut self) -> &mut MaybeUninit<T> {
        // SAFETY: the chunk is loaned to us alone, holds at least size_of::<T>() bytes
        // and is aligned for T (the layout's alignment is at least align_of::<T>()).
        unsafe { &mut *self.ptr.cast::<MaybeUninit<T>>() }
    }

    /// Writes `value` and returns the sample, ready to send.
    pub fn write_payload(mut self, value: T) -> SampleMut<'a, T> {
        self.payload_mut().write(value);
        // SAFETY: just written in full.
        unsafe { self.assume_init() }
    }
}

impl<'a, T: ZeroCopySafe> SampleMutUninit<'a, [T]> {
    /// The uninitialised payload, `len` elements.
    pub fn payload_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: the chunk is loaned to us alone, holds len * size_of::<T>() bytes
        // (checked at loan) and is aligned for T.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<MaybeUninit<T>>(), self.len) }
    }

    /// Writes element `i` as `f(i)` for every `i` and returns the sample.
    pub fn write_from_fn(mut self, mut f: impl FnMut(usize) -> T) -> SampleMut<'a, [T]> {
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
    pub fn write_from_slice(mut self, src: &[T]) -> SampleMut<'a, [T]> {
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

impl<P: ?Sized + Payload> Drop for SampleMutUninit<'_, P> {
    fn drop(&mut self) {
        self.publisher.drop_loan(self.handle);
    }
}

impl<P: ?Sized + Payload> SampleMut<'_, P> {
    /// Sends the sample to every connected subscriber; returns how many got it.
    pub fn send(self) -> Result<usize, SendError> {
        let inner = ManuallyDrop::new(self.inner);
        let sent = inner.publisher.send_chunk(inner.handle, inner.len);
        inner.publisher.refill_spare(inner.handle);
        sent
    }
}

impl<P: ?Sized + Payload> Deref for SampleMut<'_, P> {
    type Target = P;
    fn deref(&self) -> &P {
        // SAFETY: initialised (assume_init's contract), loaned to us alone, in range.
        unsafe { &*P::payload_ptr(self.inner.ptr, self.inner.len) }
    }
}

impl<P: ?Sized + Payload> DerefMut for SampleMut<'_, P> {
    fn deref_mut(&mut self) -> &mut P {
        // SAFETY: as for deref; the chunk is loaned to this publisher alone.
        unsafe { &mut *P::payload_ptr(self.inner.ptr, self.inner.len) }
    }
}

/// A received sample. Derefs to the payload; dropping it releases the chunk.
#[derive(Debug)]
pub struct Sample<'a, P: ?Sized + Payload> {
    subscriber: &'a Subscriber<P>,
    handle: ChunkHandle,
    ptr: *mut u8,
    len: usize,
}

impl<'a, P: ?Sized + Payload> Sample<'a, P> {
    pub(crate) fn new(subscriber: &'a Subscriber<P>, handle: ChunkHandle, ptr: *mut u8, len: usize) -> Self {
        Self {
            subscriber,
            handle,
            ptr,
            len,
        }
    }

    /// The chunk's address in this process (e.g. for a device pointer lookup).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The device address of the sample, for a kernel or copy to use it in place.
    /// Needs the `cuda` feature and a port of this process that pinned the pool.
    #[cfg(feature = "cuda")]
    pub fn device_ptr(&self) -> Result<u64, iox_cuda::CudaError> {
        iox_cuda::device_pointer(self.ptr)
    }

    /// The chunk's offset from the pool's base (the same in every process).
    pub fn offset(&self) -> usize {
        self.ptr as usize - self.subscriber.pool().payload_region().addr() as usize
    }
}

impl<P: ?Sized + Payload> Deref for Sample<'_, P> {
    type Target = P;
    fn deref(&self) -> &P {
        // SAFETY: the publisher finished writing before its Release push, which our
        // Acquire pop saw; our owner bit is set on the chunk, so it is not reused; the length
        // was checked against the chunk size at receive.
        unsafe { &*P::payload_ptr(self.ptr, self.len) }
    }
}

impl<P: ?Sized + Payload> Drop for Sample<'_, P> {
    fn drop(&mut self) {
        self.subscriber.drop_sample(self.handle);
    }
}
