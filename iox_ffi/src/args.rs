//! Reading the arguments a C caller passes: strings (NULL or not UTF-8 refused with a
//! status naming the argument) and option structures (NULL refused).

use std::ffi::{CStr, c_char};

use crate::handle::non_null;
use crate::status::{IoxStatus, refuse};

/// The text behind a C string argument.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
pub(crate) unsafe fn text<'a>(s: *const c_char, what: &str) -> Result<&'a str, IoxStatus> {
    if s.is_null() {
        return refuse(IoxStatus::NullPointer, format!("{what} is NULL"));
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .or_else(|_| refuse(IoxStatus::InvalidArgument, format!("{what} is not valid UTF-8")))
}

/// The options behind `options` (refused if NULL).
///
/// # Safety
/// `options` is NULL or points to a readable `O`.
pub(crate) unsafe fn read_options<'a, O>(options: *const O) -> Result<&'a O, IoxStatus> {
    // SAFETY: the caller's contract; not NULL (checked).
    Ok(unsafe { &*non_null(options.cast_mut(), "options")? })
}
