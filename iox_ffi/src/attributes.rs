//! Service attributes from C (see `iox_service::attributes`): the ones an options
//! struct asks to record and to require, applied to any service builder, and a
//! service's recorded attributes read back.
//!
//! Setting: each options struct (`IoxPubSubOptions`, `IoxEventOptions`,
//! `IoxRequestResponseOptions`) has `attributes` / `attribute_count` (recorded when the
//! call creates the service, not compared on open) and `required_attributes` /
//! `required_attribute_count` (checked on open; an entry whose `value` is NULL
//! requires only the key). Invalid keys or values, and a creating call whose own
//! attributes do not meet its requirements, fail the open call with
//! `IOX_STATUS_OPEN_FAILED` and the library's message naming the key.
//!
//! Reading: a service handle keeps its service's attributes as C strings, made once
//! when it is opened, so `iox_*_attribute` and `iox_*_attribute_get` hand out pointers
//! that stay valid until the handle is dropped (no buffer to size, nothing to free).
//! Invariant: `CAttributes` holds the attributes in the service's order (sorted by
//! key) and never changes after the handle is made.

use std::ffi::{CString, c_char};

use iox_service::{Attributes, EventBuilder, IntKeyBuilder, PubSubBuilder, RequestResponseBuilder};

use crate::args::text;
use crate::status::{IoxStatus, refuse};

/// One attribute: a key and its value, NUL-terminated UTF-8.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxAttribute {
    /// The key (1 to 128 bytes of printable ASCII, no `=` or whitespace).
    pub key: *const c_char,
    /// The value (at most 8192 bytes, no control characters but `\n` and `\t`); in
    /// `required_attributes`, NULL requires only the key.
    pub value: *const c_char,
}

/// The attribute settings of an options struct, read out of C's arrays.
#[derive(Debug, Default)]
pub(crate) struct AttributeSettings {
    record: Vec<(String, String)>,
    require: Vec<(String, Option<String>)>,
}

/// The `count` entries at `items` (NULL with 0 is none).
///
/// # Safety
/// `items` is NULL or points to `count` readable `IoxAttribute`s.
unsafe fn entries<'a>(
    items: *const IoxAttribute,
    count: usize,
    what: &str,
) -> Result<&'a [IoxAttribute], IoxStatus> {
    if count == 0 {
        return Ok(&[]);
    }
    if items.is_null() {
        return refuse(
            IoxStatus::NullPointer,
            format!("{what} is NULL but its count is {count}"),
        );
    }
    // SAFETY: the caller's contract; not NULL (checked), `count` entries.
    Ok(unsafe { std::slice::from_raw_parts(items, count) })
}

impl AttributeSettings {
    /// Reads the attributes to record and to require.
    ///
    /// # Safety
    /// Each array is NULL or holds its count of `IoxAttribute`s whose strings are
    /// NUL-terminated (a required entry's `value` may be NULL).
    pub(crate) unsafe fn read(
        record: *const IoxAttribute,
        record_count: usize,
        require: *const IoxAttribute,
        require_count: usize,
    ) -> Result<Self, IoxStatus> {
        let mut settings = Self::default();
        // SAFETY: the caller's contract.
        for (i, a) in unsafe { entries(record, record_count, "options.attributes") }?
            .iter()
            .enumerate()
        {
            // SAFETY: the caller's contract: NUL-terminated strings (NULL refused).
            let (k, v) = unsafe {
                (
                    text(a.key, &format!("options.attributes[{i}].key"))?,
                    text(a.value, &format!("options.attributes[{i}].value"))?,
                )
            };
            settings.record.push((k.to_owned(), v.to_owned()));
        }
        // SAFETY: the caller's contract.
        let required = unsafe { entries(require, require_count, "options.required_attributes") }?;
        for (i, a) in required.iter().enumerate() {
            // SAFETY: the caller's contract: NUL-terminated strings, a NULL value
            // meaning any.
            let (k, v) = unsafe {
                let k = text(a.key, &format!("options.required_attributes[{i}].key"))?;
                let v = match a.value.is_null() {
                    true => None,
                    false => Some(text(a.value, &format!("options.required_attributes[{i}].value"))?),
                };
                (k, v)
            };
            settings.require.push((k.to_owned(), v.map(str::to_owned)));
        }
        Ok(settings)
    }

    /// `builder` with these attributes recorded and required (checked by its open
    /// call).
    pub(crate) fn apply<B: AttributeBuilder>(self, mut builder: B) -> B {
        for (k, v) in self.record {
            builder = builder.attribute(k, v);
        }
        for (k, v) in self.require {
            builder = match v {
                Some(v) => builder.require_attribute(k, v),
                None => builder.require_attribute_key(k),
            };
        }
        builder
    }
}

/// The attribute methods the service builders share (each has them as its own).
pub(crate) trait AttributeBuilder: Sized {
    fn attribute(self, key: String, value: String) -> Self;
    fn require_attribute(self, key: String, value: String) -> Self;
    fn require_attribute_key(self, key: String) -> Self;
}

macro_rules! attribute_builder {
    ($($builder:ty),*) => {$(
        impl AttributeBuilder for $builder {
            fn attribute(self, key: String, value: String) -> Self {
                <$builder>::attribute(self, key, value)
            }
            fn require_attribute(self, key: String, value: String) -> Self {
                <$builder>::require_attribute(self, key, value)
            }
            fn require_attribute_key(self, key: String) -> Self {
                <$builder>::require_attribute_key(self, key)
            }
        }
    )*};
}
attribute_builder!(
    PubSubBuilder<[u8]>,
    EventBuilder,
    RequestResponseBuilder<[u8], [u8]>,
    IntKeyBuilder
);

/// A service's attributes as C strings, kept by its handle (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct CAttributes(Vec<(CString, CString)>);

impl CAttributes {
    /// `a` as C strings (attributes hold no NUL: it is a control character, refused
    /// by the static config's check).
    pub(crate) fn of(a: &Attributes) -> Self {
        let c = |s: &str| CString::new(s).unwrap_or_default();
        Self(a.iter().map(|(k, v)| (c(k), c(v))).collect())
    }

    /// Writes how many there are to `*count`.
    ///
    /// # Safety
    /// `count` is NULL (refused) or points to writable memory for a `size_t`.
    pub(crate) unsafe fn count(&self, count: *mut usize) -> Result<(), IoxStatus> {
        let count = crate::handle::non_null(count, "count")?;
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { count.write(self.0.len()) };
        Ok(())
    }

    /// Writes attribute `index`'s key and value to `*key` and `*value` (either may be
    /// NULL: not written).
    ///
    /// # Safety
    /// `key` and `value` are NULL or point to writable memory for a pointer.
    pub(crate) unsafe fn at(
        &self,
        index: usize,
        key: *mut *const c_char,
        value: *mut *const c_char,
    ) -> Result<(), IoxStatus> {
        let Some((k, v)) = self.0.get(index) else {
            return refuse(
                IoxStatus::InvalidArgument,
                format!(
                    "attribute index {index} is out of range: the service has {} attributes",
                    self.0.len()
                ),
            );
        };
        // SAFETY: the caller's contract: NULL or writable.
        unsafe {
            crate::handle::put(key, k.as_ptr());
            crate::handle::put(value, v.as_ptr());
        }
        Ok(())
    }

    /// Writes the value of attribute `key` to `*value`, or NULL if the service has no
    /// such attribute.
    ///
    /// # Safety
    /// `key` is a NUL-terminated string; `value` is NULL (refused) or points to writable
    /// memory for a pointer.
    pub(crate) unsafe fn get(&self, key: *const c_char, value: *mut *const c_char) -> Result<(), IoxStatus> {
        // SAFETY: the caller's contract.
        let key = unsafe { text(key, "key") }?;
        let value = crate::handle::non_null(value, "value")?;
        let found = self
            .0
            .binary_search_by(|(k, _)| k.as_bytes().cmp(key.as_bytes()))
            .ok()
            .map_or(std::ptr::null(), |i| self.0[i].1.as_ptr());
        // SAFETY: the caller's contract; not NULL (checked).
        unsafe { value.write(found) };
        Ok(())
    }
}
