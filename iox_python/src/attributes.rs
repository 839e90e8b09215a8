//! Service attributes from Python (see `iox_service::attributes`): the builders'
//! `attribute`, `require_attribute` and `require_attribute_key` (in
//! `iox/_attributes.py`) collect them in the options dict as `attributes` (a list of
//! `(key, value)`) and `required_attributes` (a list of `(key, value or None)`), which
//! [`apply`] hands to the Rust builder of any pattern; a service's `attributes`
//! property is [`to_dict`] of what its creator recorded. Invalid keys or values, and
//! unmet requirements, come back from opening as the package's exceptions with the
//! Rust message (`errors.rs`).

use iox_service::{
    Attributes, BlackboardBuilder, EventBuilder, IntKeyBuilder, PubSubBuilder, RequestResponseBuilder,
    ZeroCopySafe,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The attribute methods every Rust service builder has (each as its own).
pub(crate) trait AttributeBuilder: Sized {
    fn attribute(self, key: String, value: String) -> Self;
    fn require_attribute(self, key: String, value: String) -> Self;
    fn require_attribute_key(self, key: String) -> Self;
}

macro_rules! attribute_builder {
    ($(impl$(<$k:ident>)? for $builder:ty;)*) => {$(
        impl$(<$k: ZeroCopySafe + std::fmt::Debug>)? AttributeBuilder for $builder {
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
attribute_builder! {
    impl for PubSubBuilder<[u8]>;
    impl for EventBuilder;
    impl for RequestResponseBuilder<[u8], [u8]>;
    impl<K> for BlackboardBuilder<K>;
    impl for IntKeyBuilder;
}

/// `builder` with the attributes and requirements of `opts` (none if absent).
pub(crate) fn apply<B: AttributeBuilder>(mut builder: B, opts: &Bound<'_, PyDict>) -> PyResult<B> {
    let get = |k: &str| opts.get_item(k).ok().flatten().filter(|v| !v.is_none());
    if let Some(v) = get("attributes") {
        for (key, value) in v.extract::<Vec<(String, String)>>()? {
            builder = builder.attribute(key, value);
        }
    }
    if let Some(v) = get("required_attributes") {
        for (key, value) in v.extract::<Vec<(String, Option<String>)>>()? {
            builder = match value {
                Some(value) => builder.require_attribute(key, value),
                None => builder.require_attribute_key(key),
            };
        }
    }
    Ok(builder)
}

/// `attributes` as a new dict, key to value.
pub(crate) fn to_dict<'py>(py: Python<'py>, attributes: &Attributes) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in attributes {
        dict.set_item(key, value)?;
    }
    Ok(dict)
}
