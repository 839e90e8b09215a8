//! Access policies from Python (`iox.AccessPolicy`): who may publish into a
//! publish-subscribe service's pool and who may only read it (see
//! `iox_service::access`). Python builds one and gives it to
//! `PubSubBuilder.access(...)`; a service handle's `access_policy` reads back the one
//! the creator recorded (then with its `creator` uid).

use iox_service::{AccessPolicy, Principal};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAccessPolicy>()
}

/// An access policy: the uids and gids that may publish besides the creator, and those
/// that may only read (subscribe; the kernel refuses them every write to the pool).
/// Anyone else is refused at open (`iox.AccessDenied`).
#[pyclass(name = "AccessPolicy", module = "iox", frozen)]
pub(crate) struct PyAccessPolicy {
    pub(crate) inner: AccessPolicy,
    /// Whether it comes from a service (its `creator` is then the creating uid).
    recorded: bool,
}

impl PyAccessPolicy {
    /// The policy a service records.
    pub(crate) fn recorded(policy: &AccessPolicy) -> Self {
        Self {
            inner: policy.clone(),
            recorded: true,
        }
    }

    /// The ids of `list` that `pick` selects (uids or gids), in order.
    fn ids<'py>(
        py: Python<'py>,
        list: &[Principal],
        pick: fn(&Principal) -> Option<u32>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, list.iter().filter_map(pick).collect::<Vec<_>>())
    }
}

fn uid(p: &Principal) -> Option<u32> {
    match *p {
        Principal::Uid(u) => Some(u),
        Principal::Gid(_) => None,
    }
}

fn gid(p: &Principal) -> Option<u32> {
    match *p {
        Principal::Gid(g) => Some(g),
        Principal::Uid(_) => None,
    }
}

#[pymethods]
impl PyAccessPolicy {
    /// A policy naming these uids and gids (sequences of ints). The creator's uid
    /// (whoever creates the service with it) and uid 0 may always publish.
    /// `created_by`: an opener requires the service to have been created by that uid
    /// (a creator must be it); without it, a service of the same name and rules that
    /// someone else created first is accepted.
    #[new]
    #[pyo3(signature = (*, publish_uids = Vec::new(), publish_gids = Vec::new(), read_uids = Vec::new(), read_gids = Vec::new(), created_by = None))]
    fn new(
        publish_uids: Vec<u32>,
        publish_gids: Vec<u32>,
        read_uids: Vec<u32>,
        read_gids: Vec<u32>,
        created_by: Option<u32>,
    ) -> Self {
        let mut p = AccessPolicy::new();
        if let Some(uid) = created_by {
            p = p.created_by(uid);
        }
        p = publish_uids.into_iter().fold(p, AccessPolicy::publish_uid);
        p = publish_gids.into_iter().fold(p, AccessPolicy::publish_gid);
        p = read_uids.into_iter().fold(p, AccessPolicy::read_uid);
        p = read_gids.into_iter().fold(p, AccessPolicy::read_gid);
        Self {
            inner: p,
            recorded: false,
        }
    }
    /// The uid that created the service (always a publisher), or `None` for a policy
    /// not read from a service.
    #[getter]
    fn creator(&self) -> Option<u32> {
        self.recorded.then_some(self.inner.creator)
    }
    /// The uids that may publish besides the creator.
    #[getter]
    fn publish_uids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        Self::ids(py, &self.inner.publish, uid)
    }
    /// The gids whose members may publish.
    #[getter]
    fn publish_gids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        Self::ids(py, &self.inner.publish, gid)
    }
    /// The uids that may only read.
    #[getter]
    fn read_uids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        Self::ids(py, &self.inner.read, uid)
    }
    /// The gids whose members may only read.
    #[getter]
    fn read_gids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        Self::ids(py, &self.inner.read, gid)
    }
    /// As iox prints it, e.g. `publish: uid 1000 (creator), uid 1001; read: uid 1002,
    /// gid 1003` (`the creator` before a service records it).
    fn __str__(&self) -> String {
        let text = self.inner.to_string();
        if self.recorded {
            return text;
        }
        // No creator uid yet: the placeholder's would mislead.
        text.replacen(&format!("uid {} (creator)", self.inner.creator), "the creator", 1)
    }
    fn __repr__(&self) -> String {
        format!("<iox.AccessPolicy {}>", self.__str__())
    }
}
