//! The attribute methods of every service builder, written once (each builder has a
//! `target: Target` field whose attribute spec they fill; `iox_core::service` records
//! and checks the attributes when the builder opens or creates).

/// The attribute methods every service builder has (their one definition; each
/// builder has a `target: Target` field). `$pattern` is the builder's call on a
/// `Service` in the examples (e.g. `"event()"`).
macro_rules! attribute_methods {
    ($pattern:literal) => {
        /// Records attribute `key` with `value` in the static config when this builder
        /// creates the service (see [`crate::attributes`] for the rules: a key is 1 to
        /// 128 bytes of printable ASCII without `=` or whitespace, a value at most 8192
        /// bytes without control characters but `\n` and `\t`, at most 32 per
        /// service). A key given again replaces its value. Not compared with an
        /// existing service's on open (that is
        /// [`require_attribute`](Self::require_attribute)). An invalid key or value
        /// fails `create`, `open` and `open_or_create` with `InvalidSetting` naming it.
        ///
        /// ```
        /// # let dir = tempfile::tempdir().unwrap();
        /// use iox_service::Service;
        #[doc = concat!("let svc = Service::named(\"doc/attribute\")?.root(dir.path()).", $pattern)]
        ///     .attribute("ros2/type", "std_msgs/msg/String")
        ///     .create()?;
        /// assert_eq!(svc.attributes().get("ros2/type"), Some("std_msgs/msg/String"));
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.target.attributes.record(key.into(), value.into());
            self
        }

        /// Requires an existing service to have attribute `key` with exactly `value`
        /// when opening: otherwise `open` fails with
        /// [`OpenError::IncompatibleAttribute`](crate::OpenError::IncompatibleAttribute)
        /// (another value) or
        /// [`OpenError::MissingAttribute`](crate::OpenError::MissingAttribute), naming
        /// the key and both values. A builder that may create must record it too (with
        /// [`attribute`](Self::attribute)), else it fails with `InvalidSetting`.
        ///
        /// ```
        /// # let dir = tempfile::tempdir().unwrap();
        /// use iox_service::{OpenError, Service};
        #[doc = concat!("let svc = Service::named(\"doc/require\")?.root(dir.path()).", $pattern)]
        ///     .attribute("unit", "m")
        ///     .create()?;
        #[doc = concat!("let same = Service::named(\"doc/require\")?.root(dir.path()).", $pattern)]
        ///     .require_attribute("unit", "m")
        ///     .open()?;
        #[doc = concat!("let other = Service::named(\"doc/require\")?.root(dir.path()).", $pattern)]
        ///     .require_attribute("unit", "ft")
        ///     .open();
        /// assert!(matches!(other, Err(OpenError::IncompatibleAttribute { .. })));
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn require_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.target
                .attributes
                .require(key.into(), Some(value.into()));
            self
        }

        /// Requires an existing service to have attribute `key`, with any value, when
        /// opening: otherwise `open` fails with
        /// [`OpenError::MissingAttribute`](crate::OpenError::MissingAttribute). A
        /// builder that may create must record it too.
        ///
        /// ```
        /// # let dir = tempfile::tempdir().unwrap();
        /// use iox_service::{OpenError, Service};
        #[doc = concat!("let svc = Service::named(\"doc/require_key\")?.root(dir.path()).", $pattern)]
        ///     .create()?;
        #[doc = concat!("let opened = Service::named(\"doc/require_key\")?.root(dir.path()).", $pattern)]
        ///     .require_attribute_key("ros2/qos")
        ///     .open();
        /// assert!(matches!(opened, Err(OpenError::MissingAttribute { .. })));
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn require_attribute_key(mut self, key: impl Into<String>) -> Self {
            self.target.attributes.require(key.into(), None);
            self
        }
    };
}
pub(crate) use attribute_methods;
