//! Readers never trust writers: the one check every typed reader of iox makes before
//! it hands out a value another process wrote (see "Readers never trust writers" in
//! [`crate::zero_copy`]).
//!
//! Invariant: a typed reader (a subscriber's sample, a request-response client's
//! response and server's request, a blackboard reader's value) builds no reference to
//! a payload or user header of a type with invalid bit patterns before
//! [`check_values`] accepted its bytes; for every other type the check is a constant
//! and compiles away.

use crate::user_header::{UserHeader, offset_for};
use crate::zero_copy::{Payload, ZeroCopySafe};

/// A typed reader's bytes were no value of their type (see "Readers never trust
/// writers" in the module docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a sample holds bytes that are no value of {type_name} (a bool other than 0 or 1, in the payload or its user header): its writer broke the type's rules (another process, a binding, a replayed file); the sample was dropped, not read"
)]
pub struct InvalidValue {
    /// The type whose value was refused (the payload's, or the user header's).
    pub type_name: String,
}

/// Checks the values a typed reader is about to hand out of a chunk: the user header
/// `H` at `chunk` and `len` elements of payload `P` after it (at `offset_for::<H, _>()`).
/// Free (compiled away) unless `H` or `P` is a type with invalid bit patterns.
///
/// # Safety
/// `chunk` points to the chunk's header and payload, `len` elements, all readable and
/// inside the chunk (the reader checked the length), not written meanwhile by this
/// thread.
#[inline(always)]
pub unsafe fn check_values<P: ?Sized + Payload, H: UserHeader>(
    chunk: *const u8,
    len: usize,
) -> Result<(), InvalidValue> {
    if !(H::CHECK_ON_READ || <P::Element as ZeroCopySafe>::CHECK_ON_READ) {
        return Ok(());
    }
    // SAFETY: the caller's duty, passed on.
    unsafe { check_slowly::<P, H>(chunk, len) }
}

/// [`check_values`] of a type that needs it, off the inlined path.
///
/// # Safety
/// As [`check_values`].
#[cold]
#[inline(never)]
unsafe fn check_slowly<P: ?Sized + Payload, H: UserHeader>(
    chunk: *const u8,
    len: usize,
) -> Result<(), InvalidValue> {
    // SAFETY: the header at the chunk's start (the caller's duty).
    if H::CHECK_ON_READ && !unsafe { H::header_is_valid(chunk) } {
        return Err(InvalidValue {
            type_name: H::header_type().map_or_else(String::new, |h| h.identity.type_name().to_owned()),
        });
    }
    let elements = if P::IS_SLICE { len } else { 1 };
    let payload = chunk.wrapping_add(offset_for::<H, P::Element>());
    // SAFETY: `elements` elements of the payload after the header (the caller's duty).
    if !unsafe { P::Element::all_valid(payload.cast(), elements) } {
        return Err(InvalidValue {
            type_name: P::payload_type().type_name().to_owned(),
        });
    }
    Ok(())
}
