//! The entry point users start from: [`Service`], a name and a root, and the pattern
//! builders it leads to. Opening and creating (the protocol every pattern shares) is
//! the core's (`iox_core::service`); this module re-exports what the patterns use of
//! it, so they reach it as `crate::service`.

use std::path::{Path, PathBuf};

pub use iox_core::service::{
    CreateError, OpenError, OpenOrCreateError, RootError, Target, UserHeaderMismatch,
};

use crate::cleanup::{self, CleanupError, RemoveError};
use crate::node;
use crate::recovery::CleanupReport;
use crate::shm::files;
use crate::static_config::{ConfigError, StaticConfig};
use crate::{NameError, Payload, PubSubBuilder, ServiceName};

/// The entry point: a service name, and where its files live.
///
/// ```
/// use iox_service::Service;
/// let dir = tempfile::tempdir().unwrap();
/// let service = Service::named("camera/front").unwrap()
///     .root(dir.path())
///     .publish_subscribe::<u64>()
///     .open_or_create()
///     .unwrap();
/// let publisher = service.publisher_builder().create().unwrap();
/// let subscriber = service.subscriber_builder().create().unwrap();
/// publisher.loan_uninit().unwrap().write_payload(42).send().unwrap();
/// assert_eq!(*subscriber.receive().unwrap().unwrap(), 42);
/// ```
#[derive(Debug, Clone)]
pub struct Service {
    pub(crate) name: ServiceName,
    pub(crate) root: PathBuf,
}

impl Service {
    /// A service called `name` under the default root (`$IOX_ROOT` or `/dev/shm`).
    pub fn named(name: &str) -> Result<Self, NameError> {
        Ok(Self {
            name: ServiceName::new(name)?,
            root: node::absolute_root(&iox_mempool::root::root_dir()),
        })
    }

    /// Uses `dir` as the root instead of `$IOX_ROOT` / `/dev/shm`.
    pub fn root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.root = node::absolute_root(&dir.into());
        self
    }

    /// A publish-subscribe service carrying `P`: a `T: ZeroCopySafe` or a slice `[T]`.
    pub fn publish_subscribe<P: ?Sized + Payload>(self) -> PubSubBuilder<P> {
        PubSubBuilder::new(self.target())
    }

    /// An event service: notifiers signal event ids to listeners (see
    /// [`crate::EventBuilder`]).
    pub fn event(self) -> crate::EventBuilder {
        crate::EventBuilder::new(self.target())
    }

    /// A blackboard with keys of type `K` (an integer or an array of them): the
    /// latest value of each key, kept for readers (see [`crate::BlackboardBuilder`]).
    pub fn blackboard<K: crate::ZeroCopySafe + std::fmt::Debug>(self) -> crate::BlackboardBuilder<K> {
        crate::BlackboardBuilder::new(self.target())
    }

    /// A blackboard whose integer key type is chosen at run time (for language
    /// bindings; see [`crate::IntKeyBuilder`]).
    pub fn int_key_blackboard(self, key_type: crate::KeyType) -> crate::IntKeyBuilder {
        use crate::KeyType::*;
        match key_type {
            U8 => self.blackboard::<u8>().into(),
            U16 => self.blackboard::<u16>().into(),
            U32 => self.blackboard::<u32>().into(),
            U64 => self.blackboard::<u64>().into(),
            I8 => self.blackboard::<i8>().into(),
            I16 => self.blackboard::<i16>().into(),
            I32 => self.blackboard::<i32>().into(),
            I64 => self.blackboard::<i64>().into(),
        }
    }

    /// A request-response service: clients send requests of `Req`, servers stream
    /// responses of `Resp` back (each a `T: ZeroCopySafe` or a slice `[T]`; see
    /// [`crate::RequestResponseBuilder`]).
    pub fn request_response<Req: ?Sized + Payload, Resp: ?Sized + Payload>(
        self,
    ) -> crate::RequestResponseBuilder<Req, Resp> {
        crate::RequestResponseBuilder::new(self.target())
    }

    /// Whether a service called `name` exists under the default root.
    pub fn exists(name: &str) -> Result<bool, NameError> {
        Self::exists_in(&iox_mempool::root::root_dir(), name)
    }

    /// [`Service::exists`] under `root`.
    pub fn exists_in(root: &Path, name: &str) -> Result<bool, NameError> {
        let stem = ServiceName::new(name)?.stem();
        Ok(root.join(files::config_name(&stem)).exists())
    }

    /// The static configs of every service under the default root. Files that cannot
    /// be read are returned as errors in the list, not skipped silently.
    pub fn list() -> std::io::Result<Vec<Result<StaticConfig, ConfigError>>> {
        Self::list_in(&iox_mempool::root::root_dir())
    }

    /// [`Service::list`] under `root`.
    pub fn list_in(root: &Path) -> std::io::Result<Vec<Result<StaticConfig, ConfigError>>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(root)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if files::stem_of_config(&name).is_some() {
                out.push(StaticConfig::read(&root.join(&*name)).map(|(c, _)| c));
            }
        }
        Ok(out)
    }
}

impl Service {
    /// What a builder of this service starts from.
    fn target(self) -> Target {
        Target::new(self.name, self.root)
    }
}

impl Service {
    /// Removes the files of service `name` under the default root, whoever uses it.
    /// Returns whether anything existed. Mapped users keep working on their mappings;
    /// new openers create the service afresh.
    pub fn remove(name: &str) -> Result<bool, RemoveError> {
        Self::remove_in(&iox_mempool::root::root_dir(), name)
    }

    /// [`Service::remove`] under `root`.
    pub fn remove_in(root: &Path, name: &str) -> Result<bool, RemoveError> {
        cleanup::remove_in(root, name)
    }

    /// Recovers the dead participants of service `name` under the default root now,
    /// and removes it if no live process uses it any more.
    ///
    /// ```
    /// use iox_service::Service;
    /// let dir = tempfile::tempdir().unwrap();
    /// let service = Service::named("status").unwrap().root(dir.path())
    ///     .publish_subscribe::<u32>().open_or_create().unwrap();
    /// let report = Service::cleanup_dead_in(dir.path(), "status").unwrap();
    /// assert_eq!(report.ports, 0); // everyone is alive
    /// # drop(service);
    /// ```
    pub fn cleanup_dead(name: &str) -> Result<CleanupReport, CleanupError> {
        Self::cleanup_dead_in(&iox_mempool::root::root_dir(), name)
    }

    /// [`Service::cleanup_dead`] under `root`.
    pub fn cleanup_dead_in(root: &Path, name: &str) -> Result<CleanupReport, CleanupError> {
        cleanup::cleanup_dead_in(root, name)
    }

    /// Cleans up every service under `root` (as [`Service::cleanup_dead_in`]) and
    /// removes the node lock files and temporary files of dead processes. Services that
    /// cannot be cleaned up are returned with their error, not skipped silently.
    pub fn cleanup_all_dead_in(
        root: &Path,
    ) -> Result<(CleanupReport, Vec<(String, CleanupError)>), CleanupError> {
        cleanup::cleanup_all_dead_in(root)
    }
}
