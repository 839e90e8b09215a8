//! Service incarnations: who may create, join and delete the files of a service.
//!
//! The dynamic segment is the anchor of an incarnation. It is created under a
//! temporary name, filled in (lifecycle `CREATING` by the creator's node, the creator
//! registered as the first user, magic last) and renamed into place with
//! `RENAME_NOREPLACE`, so the name `iox_<H>.dynamic` only ever shows a complete header.
//! The pool and the static config follow; the lifecycle word then goes to `ALIVE`.
//! Removal is the mirror image: the lifecycle word goes to `DESTROYING` by the
//! remover's node, then the static config, the pool files and last the dynamic
//! segment are unlinked.
//!
//! So while the anchor exists no other incarnation's files can exist, and a process
//! that holds the anchor's lifecycle word (`CREATING` or `DESTROYING` by its node) may
//! unlink the other files by path. A remover first checks that the anchor path is
//! still the inode it holds. A creator or remover found dead (its node lock free) is
//! replaced by CAS, and the replacement removes the incarnation; nothing a dead
//! process started blocks the next `open_or_create`.
//!
//! Users: each open service handle registers its node id in the users table (a CAS of
//! an empty entry) and then checks that the lifecycle is `ALIVE`; the last user to
//! leave moves the lifecycle to `DESTROYING` and then checks the table is still empty
//! (both sides SeqCst, so at least one sees the other), backing off if not.
//!
//! That back-off makes a `DESTROYING` that reverts to `ALIVE`. Who can see it: only an
//! opener between its registration and its look at the lifecycle, and it retries the
//! open from the start (`RegisterError::NotAlive`), finding the service alive (or
//! gone, and creating it). A port never sees it: ports are built from a registered
//! handle, and a remover's *first* look at the table (SeqCst, after that
//! registration) finds the handle's entry and stops before it writes the lifecycle.
//! So a port's `ServiceRemoved` always means a removal that will not be undone.
//!
//! Removal as seen by live ports ([`is_removed`]). An explicit remove (`iox remove
//! --force`, `Service::remove`) marks the lifecycle `DESTROYING` and unlinks
//! the files while processes still map them. Those processes must find out rather
//! than keep talking into an incarnation no new participant can reach. A registered
//! user sees its incarnation's lifecycle word leave `ALIVE` only through such a
//! removal, and then it never comes back: the last-user removal above cannot begin
//! while we are registered (its first look at the table sees our entry, by the SeqCst
//! order of our registration), takeovers only replace dead creators and removers, and
//! a forced remove never reverts. So "the word is not `ALIVE`" is exact, and costs one
//! load of the header's line, which is written only at creation and removal. Ports
//! look at it only on slow paths (never per message): a publisher when a send reached
//! no subscriber, a subscriber when a receive found nothing and before it sleeps,
//! port creation, and `PubSubService::is_removed`. They then report `ServiceRemoved`
//! (in `SendError`, `ReceiveError`, `PortCreateError`), so the program can drop its
//! ports and handle and open the service again, which creates a fresh incarnation.
//! Samples already in flight between live ports of the removed incarnation are still
//! delivered: a subscriber that finds one returns it.

use std::path::Path;
use std::sync::atomic::Ordering;

use iox_mempool::Pool;
use iox_mempool::segment;

use crate::dynamic::{self, ALIVE, CREATING, DESTROYING, Dynamic, DynamicLayout, DynamicSegment};
use crate::liveness::Liveness;
use crate::shm::files;

/// Why a user could not register.
pub enum RegisterError {
    /// Every entry of the users table is taken.
    Full,
    /// The service is not (or no longer) alive.
    NotAlive,
}

/// Registers `me` as a user, a holder of the service's descriptors if `holder` is not
/// 0 (it offers them, see `crate::handover`: `holder` is the random part of its
/// socket's name); returns the entry index.
pub fn register_user(d: Dynamic<'_>, me: u64, holder: u32) -> Result<usize, RegisterError> {
    for (i, entry) in d.users().iter().enumerate() {
        if entry.load(Ordering::Relaxed) == 0
            && entry
                .compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            d.user_holders()[i].store(holder, Ordering::Release);
            let (_, phase) = dynamic::split_lifecycle(d.header().lifecycle.load(Ordering::SeqCst));
            if phase != ALIVE {
                d.user_holders()[i].store(0, Ordering::Release);
                entry.store(0, Ordering::SeqCst);
                return Err(RegisterError::NotAlive);
            }
            return Ok(i);
        }
    }
    Err(RegisterError::Full)
}

/// Whether the incarnation of `d` is being or was removed, as seen by a registered
/// user of it (see the module docs: for such a user, not `ALIVE` means removed).
#[inline]
pub fn is_removed(d: Dynamic<'_>) -> bool {
    dynamic::split_lifecycle(d.header().lifecycle.load(Ordering::Acquire)).1 != ALIVE
}

fn has_users(d: Dynamic<'_>) -> bool {
    d.users().iter().any(|u| u.load(Ordering::SeqCst) != 0)
}

/// Unregisters user entry `index` of `me`; the last user removes the service.
pub fn unregister_user(root: &Path, stem: &str, dynamic: &DynamicSegment, index: usize, me: u64) {
    let d = dynamic.view();
    // The holder mark first, so no reader takes the next occupant for a holder.
    d.user_holders()[index].store(0, Ordering::Release);
    let _ = d.users()[index].compare_exchange(me, 0, Ordering::SeqCst, Ordering::Relaxed);
    remove_if_unused(root, stem, dynamic, me);
}

/// Removes an `ALIVE` service that has no users. Returns whether it did.
pub fn remove_if_unused(root: &Path, stem: &str, dynamic: &DynamicSegment, me: u64) -> bool {
    let d = dynamic.view();
    if has_users(d) {
        return false;
    }
    let lifecycle = &d.header().lifecycle;
    let destroying = dynamic::lifecycle_word(me, DESTROYING);
    if lifecycle
        .compare_exchange(
            dynamic::lifecycle_word(0, ALIVE),
            destroying,
            Ordering::SeqCst,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return false;
    }
    if has_users(d) {
        // Someone registered between our two looks: it stays.
        let _ = lifecycle.compare_exchange(
            destroying,
            dynamic::lifecycle_word(0, ALIVE),
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
        return false;
    }
    let _ = remove_files(root, stem, dynamic);
    true
}

/// What the lifecycle word of an incarnation says, with dead creators and removers
/// replaced by `me`.
pub enum Phase {
    /// Usable.
    Alive,
    /// A live process (this node) is creating or removing it.
    Busy { node: u64, creating: bool },
    /// Its creator or remover was dead; we took over and removed it.
    Removed,
    /// The word is no lifecycle this iox writes.
    Corrupt(u64),
}

/// Reads the lifecycle of `d` and takes over an incarnation whose creator or remover
/// died, removing its files.
pub fn phase(root: &Path, stem: &str, dynamic: &DynamicSegment, live: &mut Liveness) -> Phase {
    let lifecycle = &dynamic.view().header().lifecycle;
    loop {
        let word = lifecycle.load(Ordering::Acquire);
        let (node, phase) = dynamic::split_lifecycle(word);
        match phase {
            ALIVE if node == 0 => return Phase::Alive,
            CREATING | DESTROYING => {}
            _ => return Phase::Corrupt(word),
        }
        if live.alive(node) {
            return Phase::Busy {
                node,
                creating: phase == CREATING,
            };
        }
        if take_destroying(lifecycle, word, live.me()) {
            let _ = remove_files(root, stem, dynamic);
            return Phase::Removed;
        }
    }
}

/// Moves a lifecycle word from `seen` to `DESTROYING` by `me`; whether it did.
fn take_destroying(lifecycle: &std::sync::atomic::AtomicU64, seen: u64, me: u64) -> bool {
    lifecycle
        .compare_exchange(
            seen,
            dynamic::lifecycle_word(me, DESTROYING),
            Ordering::SeqCst,
            Ordering::Relaxed,
        )
        .is_ok()
}

/// Outcome of [`force_destroying`].
pub enum Destroying {
    /// The lifecycle word is ours (`DESTROYING` by us): we may remove the files.
    Ours,
    /// A live process is creating or removing it: wait and look again.
    Busy,
}

/// Marks the incarnation of `d` as being removed by `me`, whatever state it is in
/// (an explicit remove), unless a live process is creating or removing it right now.
pub fn force_destroying(d: Dynamic<'_>, live: &mut Liveness) -> Destroying {
    let lifecycle = &d.header().lifecycle;
    loop {
        let word = lifecycle.load(Ordering::Acquire);
        let (node, phase) = dynamic::split_lifecycle(word);
        // Our own node counts as alive: another thread of this process may be the one
        // creating or removing it.
        if (phase == DESTROYING || phase == CREATING) && live.alive(node) {
            return Destroying::Busy;
        }
        if take_destroying(lifecycle, word, live.me()) {
            return Destroying::Ours;
        }
    }
}

/// Takes a service name that has no anchor with an anchor of our own, already
/// `DESTROYING` by `me`, so no creator can start while leftovers of the name are
/// removed. `None` if an anchor appeared meanwhile.
pub fn place_removal_anchor(root: &Path, stem: &str, me: u64) -> std::io::Result<Option<DynamicSegment>> {
    let dynamic_name = files::dynamic_name(stem);
    let tmp = crate::node::temp_file_name(&dynamic_name, me);
    let anchor = DynamicSegment::create(
        root,
        &tmp,
        DynamicLayout::header_only(),
        segment::DEFAULT_MODE,
        0,
        me,
        DESTROYING,
    )
    .map_err(std::io::Error::other)?;
    anchor.seal_header();
    match files::rename_noreplace(root, &tmp, &dynamic_name) {
        Ok(()) => Ok(Some(anchor)),
        Err(e) => {
            let _ = segment::remove(root, &tmp);
            if e == rustix::io::Errno::EXIST {
                Ok(None)
            } else {
                Err(e.into())
            }
        }
    }
}

/// Unlinks the static config, the pool and last the dynamic segment of the
/// incarnation whose dynamic segment is `dynamic`, if the anchor path still is that
/// segment. The caller holds its lifecycle word (`CREATING`/`DESTROYING` by its node).
pub fn remove_files(root: &Path, stem: &str, dynamic: &DynamicSegment) -> std::io::Result<bool> {
    if !files::same_file(dynamic.segment().file(), &root.join(files::dynamic_name(stem))) {
        return Ok(false);
    }
    remove_by_path(root, stem)
}

/// Unlinks every file of `stem` by path, the dynamic segment last (for a caller that
/// holds the anchor, or for names whose anchor is not one this iox wrote: no creator or
/// remover of ours can be working behind it). Whether any file was there.
pub fn remove_by_path(root: &Path, stem: &str) -> std::io::Result<bool> {
    let config = segment::remove(root, &files::config_name(stem))?;
    let pool = Pool::remove(root, stem)?;
    let dynamic = segment::remove(root, &files::dynamic_name(stem))?;
    Ok(config || pool || dynamic)
}
