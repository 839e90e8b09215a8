//! What every pattern's service handle answers, written once: its name, whether it
//! created the service, its static config and attributes, whether it was removed, the
//! ports connected now, and recovery on demand. Each handle (`PubSubService`,
//! `EventService`, `RequestResponseService`, `BlackboardService`) has a
//! `shared: Arc<ServiceShared>` field and gets these methods from
//! [`handle_methods!`]; what differs per pattern (its config section, its builders,
//! the pool for patterns that carry payloads) stays on the handle.

/// The methods every service handle has (see the module docs). `$ports` names the
/// pattern's sending and receiving ports in `port_counts`' docs (e.g.
/// `"publishers and subscribers"`), `$pattern` is the builder's call on a `Service` in
/// the examples (e.g. `"event()"`), and `$cleanup` (optional) adds what a cleanup does
/// beyond recovery for this pattern.
macro_rules! handle_methods {
    ($ports:literal, $pattern:literal $(, $cleanup:literal)?) => {
        /// The service name.
        pub fn name(&self) -> &str {
            self.shared.name.as_str()
        }

        /// Whether this handle created the service (rather than opening it).
        pub fn is_creator(&self) -> bool {
            self.shared.created
        }

        /// The static config, as stored.
        pub fn static_config(&self) -> &crate::StaticConfig {
            &self.shared.config
        }

        /// The attributes its creator recorded ([`crate::attributes`]; the static
        /// config's `attributes`).
        pub fn attributes(&self) -> &crate::Attributes {
            &self.shared.config.attributes
        }

        /// The access policy its creator recorded, if any ([`crate::access`]).
        pub fn access_policy(&self) -> Option<&crate::AccessPolicy> {
            self.shared.config.access.as_ref()
        }

        /// Whether the service was removed (e.g. `iox remove --force`, or
        /// [`crate::Service::remove`]) after this handle opened it. Ports built from a
        /// removed service's handle talk only among themselves; new openers create a
        /// fresh service. Open it again to reach them.
        pub fn is_removed(&self) -> bool {
            self.shared.is_removed()
        }

        #[doc = concat!("The ", $ports, " connected right now (a snapshot): (sending, receiving).")]
        pub fn port_counts(&self) -> (usize, usize) {
            self.shared.port_counts()
        }

        /// Recovers the dead participants of this service now (as port creation and
        /// `iox clean` do), waiting briefly for a live process doing so already.
        $(#[doc = $cleanup])?
        ///
        /// ```
        /// # let dir = tempfile::tempdir().unwrap();
        /// use iox_service::Service;
        #[doc = concat!("let svc = Service::named(\"doc/handle\")?.root(dir.path()).", $pattern)]
        ///     .open_or_create()?;
        /// assert!(svc.is_creator() && !svc.is_removed());
        /// assert_eq!(svc.name(), "doc/handle");
        /// assert_eq!(svc.port_counts(), (0, 0));
        /// assert_eq!(svc.cleanup_dead().ports, 0); // everyone is alive
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        pub fn cleanup_dead(&self) -> crate::CleanupReport {
            crate::recovery::recover_waiting(&self.shared).unwrap_or_default()
        }
    };
}
pub(crate) use handle_methods;
