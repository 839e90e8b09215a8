//! Access policies of publish-subscribe services from C (see `iox_service::access`):
//! who may publish into a service's pool and who may only read it, enforced by the
//! kernel (a reader gets a read-only descriptor of the pool).
//!
//! Setting: `IoxPubSubOptions::access` points to an [`IoxAccessPolicy`] (NULL: none).
//! A creating call records it, this process's uid its creator (always a publisher); an
//! opening call that sets one requires the service to have the same rules
//! (`IOX_STATUS_OPEN_FAILED` naming both otherwise). The files' permissions
//! (`IoxPubSubOptions::permissions`) must still admit every uid it names.
//!
//! Refusals: an open by a process the policy does not name is
//! `IOX_STATUS_NOT_IN_ACCESS_POLICY`; a publisher of a reader is
//! `IOX_STATUS_NOT_A_PUBLISHER`. Both messages name the process's identity and the
//! policy.
//!
//! Reading: `iox_pubsub_access_policy` (with the service handle, in `service.rs`) gives
//! a service's policy as text its handle keeps, made here ([`describe`]).

use std::ffi::CString;

use iox_service::AccessPolicy;

use crate::status::{IoxStatus, refuse};

/// Who may publish besides the creator and who may only read (subscribe): four lists of
/// ids, each an array and its count (NULL with 0: none). All four empty: only the
/// creator (and root) may use the service.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IoxAccessPolicy {
    /// Users that may publish (`publish_uid_count` of them).
    pub publish_uids: *const u32,
    /// How many `publish_uids` there are.
    pub publish_uid_count: usize,
    /// Groups whose members may publish (`publish_gid_count` of them).
    pub publish_gids: *const u32,
    /// How many `publish_gids` there are.
    pub publish_gid_count: usize,
    /// Users that may only read (`read_uid_count` of them).
    pub read_uids: *const u32,
    /// How many `read_uids` there are.
    pub read_uid_count: usize,
    /// Groups whose members may only read (`read_gid_count` of them).
    pub read_gids: *const u32,
    /// How many `read_gids` there are.
    pub read_gid_count: usize,
    /// When opening: the uid the service must have been created by (NULL: any; a
    /// service of the same name and rules someone else created first is then accepted).
    /// When creating: this process's uid, or the create fails.
    pub created_by: *const u32,
}

/// The `count` ids at `ids` (NULL with 0 is none); `what` names the list in messages.
///
/// # Safety
/// `ids` is NULL or points to `count` readable `u32`s.
unsafe fn ids<'a>(ids: *const u32, count: usize, what: &str) -> Result<&'a [u32], IoxStatus> {
    if count == 0 {
        return Ok(&[]);
    }
    if ids.is_null() {
        return refuse(
            IoxStatus::NullPointer,
            format!("options.access->{what} is NULL but its count is {count}"),
        );
    }
    // SAFETY: the caller's contract; not NULL (checked), `count` entries.
    Ok(unsafe { std::slice::from_raw_parts(ids, count) })
}

/// The policy `policy` points to: `None` for NULL.
///
/// # Safety
/// `policy` is NULL or points to a readable `IoxAccessPolicy` whose arrays hold their
/// counts of `u32`s and whose `created_by` is NULL or points to a readable `u32`.
pub(crate) unsafe fn read(policy: *const IoxAccessPolicy) -> Result<Option<AccessPolicy>, IoxStatus> {
    if policy.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract; not NULL (checked).
    let p = unsafe { &*policy };
    let mut out = AccessPolicy::new();
    // SAFETY: the caller's contract: each array holds its count.
    for &uid in unsafe { ids(p.publish_uids, p.publish_uid_count, "publish_uids") }? {
        out = out.publish_uid(uid);
    }
    // SAFETY: as above.
    for &gid in unsafe { ids(p.publish_gids, p.publish_gid_count, "publish_gids") }? {
        out = out.publish_gid(gid);
    }
    // SAFETY: as above.
    for &uid in unsafe { ids(p.read_uids, p.read_uid_count, "read_uids") }? {
        out = out.read_uid(uid);
    }
    // SAFETY: as above.
    for &gid in unsafe { ids(p.read_gids, p.read_gid_count, "read_gids") }? {
        out = out.read_gid(gid);
    }
    if !p.created_by.is_null() {
        // SAFETY: the caller's contract; not NULL (checked).
        out = out.created_by(unsafe { *p.created_by });
    }
    Ok(Some(out))
}

/// A service's policy as text for C (`None` without one); kept by its handle.
pub(crate) fn describe(policy: Option<&AccessPolicy>) -> Option<CString> {
    // The text is made of numbers and ASCII words: it holds no NUL.
    policy.map(|p| CString::new(p.to_string()).unwrap_or_default())
}
