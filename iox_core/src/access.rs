//! Access roles: who may publish into a service's pool and who may only read it, as
//! its creator recorded in the static config ([`AccessPolicy`]).
//!
//! A service without a policy admits whoever its files' owner, group and mode admit,
//! and every admitted process may publish (what it always did). A service with one
//! admits, on top of the files' permissions, only the processes it names:
//! - a **publisher** (its uid is the creator's or listed with [`AccessPolicy::publish_uid`],
//!   or one of its groups is listed with [`AccessPolicy::publish_gid`]; uid 0 too, which
//!   could open every file anyway) receives the payload's descriptor read-write;
//! - a **reader** (listed with [`AccessPolicy::read_uid`] / [`AccessPolicy::read_gid`],
//!   and no publisher) receives a descriptor opened read-only: the kernel refuses it a
//!   writable mapping, an `mprotect` to writable, a `write`, and (the payload memfd's
//!   mode is `0644`, owned by the creator) a reopen of `/proc/self/fd/N` for writing;
//! - anyone else receives nothing: holders refuse it, naming the policy and its
//!   identity ([`AccessPolicy::refusal`]).
//!
//! Roles are decided by the holder that hands the descriptor over (`crate::handover`),
//! from the peer's credentials as the kernel reports them, against the policy the
//! holder read (or, for the creator, wrote) when it opened the service; a holder never
//! hands out more than it holds, so a reader-holder passes on read-only descriptors
//! only. A process also computes its own role ([`AccessPolicy::role_of_this_process`])
//! to refuse a publisher up front with a clear error; the kernel refuses it regardless.
//!
//! Only publish-subscribe services take a policy with readers: the other patterns'
//! participants all write shared words that carry their data (a blackboard's values, an
//! event's bits, requests and responses in the pool), so none of them is read-only.
//! Device pools (`CudaDevice`) take no readers either: a process that imports the
//! pool's exported handle sets its own access to the mapping (`cuMemSetAccess`), so a
//! read-only device mapping would be the reader's choice, not a limit on it.
//! ([`crate::static_config::StaticConfig::check`] refuses both.)

use serde::{Deserialize, Serialize};

/// Why a `CudaDevice` service takes no readers (see the module docs).
pub const NO_DEVICE_READERS: &str = "a CudaDevice pool cannot be handed to readers read-only: a process that imports the pool's exported handle sets its own access to it (cuMemSetAccess), so no holder can keep a reader from writing; its access policy may name publishers only (use CudaPinned host memory for read-only subscribers)";

/// Most uids and gids a policy lists (publishers and readers together).
pub const MAX_PRINCIPALS: usize = 64;

/// A user or a group named in a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Principal {
    /// A user id.
    Uid(u32),
    /// A group id: every process with it as its group or a supplementary group.
    Gid(u32),
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Uid(u) => write!(f, "uid {u}"),
            Self::Gid(g) => write!(f, "gid {g}"),
        }
    }
}

/// What a process may do with a service's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It may publish: its payload descriptor is read-write.
    Publisher,
    /// It may only read: its payload descriptor is read-only.
    Reader,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Publisher => "publisher",
            Self::Reader => "reader",
        })
    }
}

/// A process's credentials: effective uid, effective gid, supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Identity {
    /// This process's credentials.
    pub fn of_this_process() -> Self {
        Self {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            groups: rustix::process::getgroups()
                .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
                .unwrap_or_default(),
        }
    }

    fn has_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uid {} (gid {}", self.uid, self.gid)?;
        let extra: Vec<String> = self
            .groups
            .iter()
            .filter(|&&g| g != self.gid)
            .map(u32::to_string)
            .collect();
        if !extra.is_empty() {
            write!(f, ", groups {}", extra.join(","))?;
        }
        f.write_str(")")
    }
}

/// Who may publish into a service's pool and who may only read it; recorded in the
/// static config by the creator (see the module docs for what each role gets).
///
/// ```
/// use iox_core::access::{AccessPolicy, Identity, Role};
/// let policy = AccessPolicy::new().publish_uid(1001).read_gid(50).with_creator(1000);
/// let planner = Identity { uid: 1002, gid: 50, groups: vec![] };
/// assert_eq!(policy.role(&planner), Some(Role::Reader));
/// let driver = Identity { uid: 1001, gid: 1001, groups: vec![] };
/// assert_eq!(policy.role(&driver), Some(Role::Publisher));
/// let stranger = Identity { uid: 1003, gid: 1003, groups: vec![] };
/// assert_eq!(policy.role(&stranger), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessPolicy {
    /// The uid that created the service (always a publisher); the static config file
    /// and the payload must belong to it. Set by the creating process.
    pub creator: u32,
    /// Who may publish besides the creator.
    pub publish: Vec<Principal>,
    /// Who may only read.
    pub read: Vec<Principal>,
    /// The creator an opener requires ([`AccessPolicy::created_by`]); never recorded.
    #[serde(skip)]
    expected_creator: Option<u32>,
}

impl AccessPolicy {
    /// A policy in which only the creator's uid (and uid 0) may do anything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also lets user `uid` publish.
    pub fn publish_uid(mut self, uid: u32) -> Self {
        self.publish.push(Principal::Uid(uid));
        self
    }

    /// Also lets the members of group `gid` publish.
    pub fn publish_gid(mut self, gid: u32) -> Self {
        self.publish.push(Principal::Gid(gid));
        self
    }

    /// Lets user `uid` read (subscribe) without publishing.
    pub fn read_uid(mut self, uid: u32) -> Self {
        self.read.push(Principal::Uid(uid));
        self
    }

    /// Lets the members of group `gid` read (subscribe) without publishing.
    pub fn read_gid(mut self, gid: u32) -> Self {
        self.read.push(Principal::Gid(gid));
        self
    }

    /// Requires, when opening, that the service was created by user `uid` (and, when
    /// creating, that this process is that user). Without it an opener that gives a
    /// policy checks its rules only, and a service of the same name and rules that
    /// someone else created first (a user who may create files in the root) is
    /// accepted.
    pub fn created_by(mut self, uid: u32) -> Self {
        self.expected_creator = Some(uid);
        self
    }

    /// The creator required with [`AccessPolicy::created_by`].
    pub fn expected_creator(&self) -> Option<u32> {
        self.expected_creator
    }

    /// The policy as a creator records it: `creator` set, both lists sorted and
    /// without repeats.
    pub fn with_creator(mut self, creator: u32) -> Self {
        self.creator = creator;
        self.expected_creator = None;
        for list in [&mut self.publish, &mut self.read] {
            list.sort_unstable();
            list.dedup();
        }
        self
    }

    /// What `who` may do: `None` when the policy names none of its ids.
    pub fn role(&self, who: &Identity) -> Option<Role> {
        let names = |list: &[Principal]| {
            list.iter().any(|p| match *p {
                Principal::Uid(u) => u == who.uid,
                Principal::Gid(g) => who.has_group(g),
            })
        };
        if who.uid == 0 || who.uid == self.creator || names(&self.publish) {
            Some(Role::Publisher)
        } else if names(&self.read) {
            Some(Role::Reader)
        } else {
            None
        }
    }

    /// This process's role.
    pub fn role_of_this_process(&self) -> Option<Role> {
        self.role(&Identity::of_this_process())
    }

    /// Whether two policies let the same ids do the same (the creator aside).
    pub fn same_rules(&self, other: &Self) -> bool {
        let sorted = |p: &Self| p.clone().with_creator(0);
        let (a, b) = (sorted(self), sorted(other));
        a.publish == b.publish && a.read == b.read
    }

    /// Whether it names readers (a policy of publishers only admits but never
    /// restricts an admitted process).
    pub fn has_readers(&self) -> bool {
        !self.read.is_empty()
    }

    /// Why `who` is refused, naming the policy and the identity.
    pub fn refusal(&self, who: &Identity) -> String {
        format!("{who} is neither a publisher nor a reader in the service's access policy ({self})")
    }

    /// Problems a reader of a static config must not trust: too many principals.
    pub fn check(&self) -> Result<(), String> {
        let n = self.publish.len() + self.read.len();
        if n > MAX_PRINCIPALS {
            return Err(format!(
                "the access policy names {n} uids and gids; at most {MAX_PRINCIPALS}"
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for AccessPolicy {
    /// `publish: uid 1000 (creator), uid 1001, gid 50; read: uid 1002` (`read: nobody
    /// else` when it names no reader).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |l: &[Principal]| l.iter().map(ToString::to_string).collect::<Vec<_>>();
        let mut publish = vec![format!("uid {} (creator)", self.creator)];
        publish.extend(list(&self.publish));
        let read = list(&self.read);
        write!(
            f,
            "publish: {}; read: {}",
            publish.join(", "),
            if read.is_empty() {
                "nobody else".to_string()
            } else {
                read.join(", ")
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(uid: u32, gid: u32, groups: &[u32]) -> Identity {
        Identity {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn roles_by_uid_group_and_supplementary_group() {
        let p = AccessPolicy::new()
            .publish_gid(60)
            .read_uid(1002)
            .read_gid(50)
            .with_creator(1000);
        assert_eq!(p.role(&who(1000, 1000, &[])), Some(Role::Publisher), "creator");
        assert_eq!(p.role(&who(0, 0, &[])), Some(Role::Publisher), "root");
        assert_eq!(
            p.role(&who(1005, 1, &[60])),
            Some(Role::Publisher),
            "publishing group"
        );
        assert_eq!(p.role(&who(1002, 1, &[])), Some(Role::Reader));
        assert_eq!(p.role(&who(1003, 50, &[])), Some(Role::Reader), "primary group");
        assert_eq!(
            p.role(&who(1003, 1, &[7, 50])),
            Some(Role::Reader),
            "supplementary"
        );
        // A publisher listed also as a reader publishes.
        assert_eq!(p.role(&who(1004, 60, &[50])), Some(Role::Publisher));
        assert_eq!(p.role(&who(1003, 1, &[7])), None);
        let why = p.refusal(&who(1003, 1, &[7]));
        assert!(
            why.contains("uid 1003 (gid 1, groups 7)")
                && why.contains("publish: uid 1000 (creator), gid 60; read: uid 1002, gid 50"),
            "{why}"
        );
    }

    #[test]
    fn rules_compare_as_sets_whatever_the_creator() {
        let a = AccessPolicy::new().read_uid(2).read_uid(1).with_creator(7);
        let b = AccessPolicy::new().read_uid(1).read_uid(2).read_uid(1);
        assert!(a.same_rules(&b));
        assert!(!a.same_rules(&AccessPolicy::new().publish_uid(1).publish_uid(2)));
    }
}
