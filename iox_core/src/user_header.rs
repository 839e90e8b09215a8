//! Per-sample user headers: a fixed-size value a publish-subscribe service carries in
//! every chunk beside its payload (a camera frame's stamp, width, height, encoding and
//! step in front of its pixels), written in place in the loan and read in place from
//! the sample, as iceoryx2's `user_header::<H>()`.
//!
//! # Where it is
//!
//! A chunk of a service with a header holds the header at the chunk's first byte and
//! the payload [`payload_offset`] bytes later: the header's size rounded up to the
//! payload's alignment. The pool's alignment is at least both types' alignments, so
//! both are aligned. The offset is a function of what the static config records
//! ([`HeaderType`] beside the payload), so a binding that knows the service only from
//! its config (Python, C, the tools) finds both where a Rust program put them. Every
//! size class holds the header in front of the payload sizes the builder was given
//! (`chunk_sizes`, `max_slice_len`), so a class is chosen by payload bytes alone.
//!
//! # What is recorded and checked
//!
//! The header type's identity ([`PayloadType::Typed`](crate::PayloadType::Typed): name, size, alignment, bit
//! validity) and its field layout ([`Schema`](crate::schema::Schema)), under the same rules as the payload's
//! (`crate::zero_copy`, `crate::schema`): an opener whose header differs is refused
//! with `OpenError::IncompatibleUserHeader` or, same name but other fields,
//! `OpenError::IncompatibleSchema` naming the header's field. A service without a header
//! records nothing (its config text has no header field); a program
//! that opens a service with a header without declaring it (or the reverse) is refused
//! the same way, so no program reads a header as payload.
//!
//! # Cost
//!
//! The header is a type parameter of the service, its ports and samples (`H`, default
//! `()` = no header): the payload's offset is a constant of the types, 0 for `()`, so a
//! service without a header runs exactly the code it ran before headers existed.
//! Bindings, which know the header only at run time, move it as bytes through
//! `RawLoan` / `RawSample`, which read the offset
//! from the static config.
//!
//! # Writing it
//!
//! A loan's header is uninitialised, like its payload. `write_header` writes it and
//! turns the loan into one whose payload writers (`write_payload`,
//! `write_from_slice`, ...) are available ([`HeaderWritten`]); a loan of a service
//! with a header has no safe way to be sent before its header is written. In place:
//! `user_header_mut()` and `payload_mut()`, then the `unsafe` `assume_init`. A
//! publisher killed before `send` leaves a loaned chunk that recovery returns: no
//! subscriber ever sees a half-written header.
//!
//! Decision: headers are for host memory. A `CudaDevice` service's chunks are GPU
//! memory a host program cannot read, so it refuses a header (`create` fails with
//! `InvalidConfig::UserHeader`).

use crate::ZeroCopySafe;

pub use crate::static_config::header::{
    HeaderType, checked_payload_offset, payload_offset, payload_offset_of,
};

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl<H: super::ZeroCopySafe> Sealed for H {}
    impl<H: super::ZeroCopySafe> Sealed for super::HeaderWritten<H> {}
}

/// A user header type of a publish-subscribe service: `()` (no header, the default) or
/// a `ZeroCopySafe` type. Sealed.
pub trait UserHeader: HeaderState<Header = Self> + Copy + Send + Sync + 'static {
    /// Whether a reader checks the header before reading it (`ZeroCopySafe`'s hidden
    /// `CHECK_ON_READ`; `false` for `()`).
    #[doc(hidden)]
    const CHECK_ON_READ: bool;

    /// What the static config records (`None` for `()`).
    fn header_type() -> Option<HeaderType>;

    /// Whether the header at `ptr` is a value of its type (see
    /// [`crate::zero_copy::check_values`]).
    ///
    /// # Safety
    /// `ptr` points to `size_of::<Self>()` readable, initialised bytes.
    #[doc(hidden)]
    unsafe fn header_is_valid(ptr: *const u8) -> bool;
}

impl UserHeader for () {
    const CHECK_ON_READ: bool = false;

    fn header_type() -> Option<HeaderType> {
        None
    }

    unsafe fn header_is_valid(_: *const u8) -> bool {
        true
    }
}

impl<H: ZeroCopySafe> UserHeader for H {
    const CHECK_ON_READ: bool = H::CHECK_ON_READ;

    fn header_type() -> Option<HeaderType> {
        Some(HeaderType::of::<H>())
    }

    #[inline]
    unsafe fn header_is_valid(ptr: *const u8) -> bool {
        // SAFETY: the caller's duty, passed on.
        unsafe { H::is_valid(ptr.cast()) }
    }
}

/// The state of a loan's header, the second type parameter of
/// `SampleMutUninit`: `()` (no header), `H` (a header not
/// yet written) or [`HeaderWritten<H>`]. Sealed.
pub trait HeaderState: sealed::Sealed + 'static {
    /// The header type of the service.
    type Header: UserHeader;
    /// What a loan in this state holds as its header: `MaybeUninit<H>` before
    /// `write_header`, `H` after, `()` without a header.
    type InLoan;
}

impl HeaderState for () {
    type Header = ();
    type InLoan = ();
}

impl<H: ZeroCopySafe> HeaderState for H {
    type Header = H;
    type InLoan = std::mem::MaybeUninit<H>;
}

/// The header state of a loan whose header `write_header` wrote: its payload writers
/// finish it.
#[derive(Debug)]
pub struct HeaderWritten<H>(std::marker::PhantomData<H>);

impl<H: ZeroCopySafe> HeaderState for HeaderWritten<H> {
    type Header = H;
    type InLoan = H;
}

/// A header state in which the header needs nothing more: no header, or written. A
/// loan in such a state is finished by writing its payload. Sealed.
pub trait HeaderReady: HeaderState {}
impl HeaderReady for () {}
impl<H: ZeroCopySafe> HeaderReady for HeaderWritten<H> {}

/// The type marker of a port, loan or sample of payload `P` with header (state) `H`:
/// owns neither, and is `Send` and `Sync` whatever they are.
pub type Marker<P, H> = std::marker::PhantomData<fn() -> (Box<P>, H)>;

/// The payload's offset in a chunk for header `H` and payload elements `E`: a
/// constant, 0 without a header.
#[inline(always)]
pub const fn offset_for<H, E>() -> usize {
    payload_offset(size_of::<H>(), align_of::<E>())
}
