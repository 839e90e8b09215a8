//! Step 1 of the protocol (see the parent module): opening an existing service.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use iox_mempool::segment::{Access, OpenSegmentError};
use iox_mempool::{Bookkeeping, OpenPoolError, Pool};

use super::{Attempt, OpenError, RootError, ServiceShared, Target, memfd_access};
use crate::dynamic::{self, Corruption, DynamicError, DynamicSegment};
use crate::lifecycle::{self, Phase, RegisterError};
use crate::liveness::Liveness;
use crate::node::Node;
use crate::recovery::{self};
use crate::shm::files;
use crate::static_config::{PayloadBacking, StaticConfig};

pub(super) fn try_open(
    t: &Target,
    check: &dyn Fn(&StaticConfig) -> Result<(), OpenError>,
    deadline: std::time::Instant,
) -> Attempt<ServiceShared, OpenError> {
    let stem = t.name.stem();
    let config_path = t.root.join(files::config_name(&stem));
    let (config, hash) = match StaticConfig::read(&config_path) {
        Ok(c) => c,
        // Not found: the caller decides (create it, or say what is missing).
        Err(e @ crate::ConfigError::NotFound { .. }) => return Attempt::Failed(e.into()),
        // Unreadable: because of the root itself (a file, say)?
        Err(e) => {
            return Attempt::Failed(match RootError::check_dir(&t.root) {
                Some(source) => OpenError::Root {
                    name: t.name.to_string(),
                    source,
                },
                None => e.into(),
            });
        }
    };
    if let Err(e) = check(&config) {
        return Attempt::Failed(e);
    }
    if let Err(why) = trusted_policy_file(&config, &config_path) {
        return Attempt::Failed(OpenError::AccessTampered {
            name: t.name.to_string(),
            why,
        });
    }
    let name = || t.name.to_string();
    let mut dynamic = match DynamicSegment::open(&t.root, &stem, Access::ReadWrite) {
        Ok(d) => d,
        Err(DynamicError::NotFound) => {
            // Removal unlinks the static config first and creation places the
            // dynamic segment first, so a static config still there (same text)
            // without one is debris, not a transient state.
            if StaticConfig::read(&config_path).is_ok_and(|(_, h)| h == hash) {
                return Attempt::Failed(OpenError::Corrupt {
                    name: name(),
                    path: config_path,
                    problem: Corruption::NoDynamicSegment,
                });
            }
            return Attempt::Retry("removed while opening".into());
        }
        Err(e) => return Attempt::Failed(open_failure(t, e)),
    };
    match dynamic.attach(&config, hash) {
        Ok(()) => {}
        Err(DynamicError::OtherIncarnation) => {
            // A dynamic segment of another incarnation than the static config read:
            // the service was removed and re-created since (then the file beside it
            // changed too: read it again), or one of the two files was replaced, which
            // no waiting mends (the file is the same: say so at once).
            if StaticConfig::read(&config_path).is_ok_and(|(_, h)| h == hash) {
                return Attempt::Failed(open_failure(t, DynamicError::OtherIncarnation));
            }
            return Attempt::Retry(format!(
                "{} belongs to another static config than {}",
                dynamic.path().display(),
                config_path.display()
            ));
        }
        Err(e) => return Attempt::Failed(open_failure(t, e)),
    }
    let d = dynamic.view();
    let node = match Node::for_root(&t.root) {
        Ok(n) => n,
        Err(source) => {
            return Attempt::Failed(OpenError::Root {
                name: name(),
                source: RootError::classify(&t.root, "set up the process node file", source),
            });
        }
    };
    let mut live = Liveness::new(&t.root, node.id());
    match lifecycle::phase(&t.root, &stem, &dynamic, &mut live) {
        Phase::Alive => {}
        Phase::Busy { node, creating } => {
            let doing = if creating { "created" } else { "removed" };
            return Attempt::Retry(format!("being {doing} by node {node:016x}"));
        }
        Phase::Removed => return Attempt::Retry("its creator or remover had died; removed it".into()),
        Phase::Corrupt(word) => {
            return Attempt::Failed(open_failure(t, dynamic.corrupt(Corruption::Lifecycle(word))));
        }
    }
    let opened = match config.backing {
        PayloadBacking::File => Pool::open_tagged(
            &t.root,
            &stem,
            &config.layout,
            Some(config.memory_type),
            // Read-only until a publisher of this handle makes it writable.
            Access::ReadOnly,
            hash,
        ),
        PayloadBacking::Memfd(id) => {
            let reached = memfd_access::reach_memfd(
                &t.root,
                d,
                (&stem, hash),
                (id, config.layout.page_size(), config.access.as_ref()),
                &mut live,
                deadline,
            );
            match reached {
                Ok(payload) => Pool::open_with_payload(
                    &t.root,
                    &stem,
                    &config.layout,
                    Some(config.memory_type),
                    hash,
                    payload,
                ),
                Err(unreachable) => {
                    return unreached(t, (&config, hash), d, &dynamic, &node, &mut live, unreachable);
                }
            }
        }
        PayloadBacking::CudaDevice(id) => {
            // Which GPU first: a process that cannot use it asks no holder.
            if let Err(reason) = crate::device::ordinal(&id) {
                return Attempt::Failed(OpenError::DeviceUnavailable {
                    name: name(),
                    uuid: id.uuid_text(),
                    reason,
                });
            }
            let payload_len = config.layout.payload_len();
            let reached = memfd_access::reach(&t.root, d, &stem, hash, &mut live, deadline, &mut |fd, _| {
                crate::device::import(fd, &id, payload_len)
            });
            match reached {
                Ok(payload) => Pool::open_with_device(&t.root, &stem, &config.layout, hash, payload),
                // Every live holder answered, and this process could not import
                // what it got (the driver refused): no retry helps.
                Err(memfd_access::Unreachable {
                    tried,
                    transient: false,
                    refused: false,
                    rejected: true,
                }) => {
                    return Attempt::Failed(OpenError::DeviceImport { name: name(), tried });
                }
                Err(unreachable) => {
                    return unreached(t, (&config, hash), d, &dynamic, &node, &mut live, unreachable);
                }
            }
        }
    };
    let pool = match opened {
        Ok(p) if config.access.is_some() => match trusted_payload(&config, &p) {
            Ok(()) => p,
            Err(why) => return Attempt::Failed(OpenError::AccessTampered { name: name(), why }),
        },
        Ok(p) => p,
        // Our dynamic segment was removed and the service created anew between
        // our reads: start over.
        Err(
            OpenPoolError::TagMismatch { .. } | OpenPoolError::Segment(OpenSegmentError::NotFound { .. }),
        ) => return Attempt::Retry("service re-created while opening".into()),
        // Anything else about the pool files is corruption of this incarnation, unless
        // it is gone: removed meanwhile (while the payload was handed over, say) and
        // its name taken by a new one whose files are still being made.
        Err(_) if lifecycle::is_removed(d) || !files::same_file(dynamic.file(), dynamic.path()) => {
            return Attempt::Retry("service removed and re-created while opening".into());
        }
        Err(source) => return Attempt::Failed(OpenError::Pool { name: name(), source }),
    };
    // Best effort: a live recoverer busy with it is fine too.
    let _ = recovery::recover_in(d, &stem, pool.book(), &mut live);
    if lifecycle::remove_if_unused(&t.root, &stem, &dynamic, node.id()) {
        return Attempt::Retry("no live process used it any more; removed it".into());
    }
    // Offered before our user entry says we hold it.
    let offer = match config.backing {
        PayloadBacking::Memfd(_) | PayloadBacking::CudaDevice(_) => match crate::handover::offer(
            &t.root,
            &stem,
            hash,
            node.id(),
            &[pool.payload_fd()],
            dynamic.file().as_fd(),
            config.permissions,
            config.access.as_ref(),
        ) {
            Ok(o) => Some(o),
            Err(source) => {
                return Attempt::Failed(OpenError::Root {
                    name: name(),
                    source: RootError::classify(
                        &t.root,
                        "offer the payload's descriptor to other processes",
                        source,
                    ),
                });
            }
        },
        PayloadBacking::File => None,
    };
    let user = match lifecycle::register_user(d, node.id(), offer.as_ref().map_or(0, |o| o.nonce())) {
        Ok(i) => i,
        Err(RegisterError::NotAlive) => return Attempt::Retry("being removed".into()),
        Err(RegisterError::Full) => {
            return Attempt::Failed(OpenError::TooManyUsers {
                name: name(),
                max: dynamic::USER_SLOTS,
            });
        }
    };
    Attempt::Done(ServiceShared {
        name: t.name.clone(),
        root: t.root.clone(),
        stem,
        config,
        pool: Arc::new(pool),
        dynamic,
        node,
        user,
        _offer: offer,
        created: false,
        fork_generation: crate::fork::generation(),
    })
}

/// For a service with an access policy: its static config file belongs to the creator
/// the policy names (or root), and neither its group nor others may write it. So in a
/// sticky root (`/dev/shm`), where no one but a file's owner may replace it, only the
/// creator (or root) can have written the policy; a file someone else made or may
/// change is refused rather than believed.
fn trusted_policy_file(config: &StaticConfig, path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let Some(policy) = &config.access else {
        return Ok(());
    };
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.uid() != policy.creator && meta.uid() != 0 {
        return Err(format!(
            "{} belongs to uid {}, but its policy names uid {} as the creator",
            path.display(),
            meta.uid(),
            policy.creator
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} has mode {:04o}: others than its owner may change it",
            path.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// For a service with an access policy: the payload handed over belongs to the creator
/// the policy names (a memfd belongs to the user that made it, and no one but root can
/// give it away), so a static config naming another creator is not this payload's.
fn trusted_payload(config: &StaticConfig, pool: &Pool) -> Result<(), String> {
    let (Some(policy), PayloadBacking::Memfd(_)) = (&config.access, config.backing) else {
        return Ok(());
    };
    let st = rustix::fs::fstat(pool.payload_fd()).map_err(|e| format!("the payload: {e}"))?;
    if st.st_uid != policy.creator {
        return Err(format!(
            "the payload handed over belongs to uid {}, but the static config names uid {} as the creator",
            st.st_uid, policy.creator
        ));
    }
    Ok(())
}

/// No live participant handed over the payload's descriptor: if none is alive, the
/// service is dead and recovery (on the bookkeeping alone) removes it; otherwise
/// whether to retry (a holder registering, leaving or silent) or fail (refused, or
/// every holder answered wrongly).
fn unreached(
    t: &Target,
    (config, hash): (&StaticConfig, u64),
    d: dynamic::Dynamic<'_>,
    dynamic: &DynamicSegment,
    node: &Node,
    live: &mut Liveness,
    unreachable: memfd_access::Unreachable,
) -> Attempt<ServiceShared, OpenError> {
    let memfd_access::Unreachable {
        tried,
        transient,
        refused,
        ..
    } = unreachable;
    let stem = t.name.stem();
    let name = || t.name.to_string();
    if let Ok(book) = Bookkeeping::open(&t.root, &stem, &config.layout, Some(config.memory_type), hash) {
        let _ = recovery::recover_in(d, &stem, &book, live);
    }
    if lifecycle::remove_if_unused(&t.root, &stem, dynamic, node.id()) {
        return Attempt::Retry("all its processes had died; removed it".into());
    }
    let leaving = dynamic::split_lifecycle(d.header().lifecycle.load(Ordering::Acquire)).1 != dynamic::ALIVE;
    if refused && !leaving {
        return Attempt::Failed(OpenError::MemfdRefused {
            name: name(),
            why: tried,
        });
    }
    if transient || leaving {
        return Attempt::Retry(format!("payload not reachable yet: {}", tried.join("; ")));
    }
    Attempt::Failed(OpenError::MemfdUnreachable { name: name(), tried })
}

/// For `open_or_create` of a service that exists with other settings: recovers its
/// dead participants and removes it if no live process uses it (what `iox clean`
/// does for it); whether it is gone. Only a service whose static config this user
/// owns (or any, as root) is tried, so that a removal cannot stop half-way on
/// another user's files in a sticky `/dev/shm`; best effort otherwise too: a service
/// that cannot be looked at (corrupt, unreadable) stays, and the caller's error stands.
pub(super) fn removed_if_stale(t: &Target) -> bool {
    use std::os::unix::fs::MetadataExt;
    let stem = t.name.stem();
    let config_path = t.root.join(files::config_name(&stem));
    let Ok(meta) = std::fs::symlink_metadata(&config_path) else {
        return false;
    };
    let euid = rustix::process::geteuid();
    if !euid.is_root() && meta.uid() != euid.as_raw() {
        return false;
    }
    let Ok(node) = Node::for_root(&t.root) else {
        return false;
    };
    let mut live = Liveness::new(&t.root, node.id());
    let removed =
        crate::cleanup::cleanup_stem(&t.root, &stem, &mut live).is_ok_and(|r| r.services_removed == 1);
    live.finish();
    removed && !config_path.exists()
}

/// The error for a dynamic segment that cannot be used (other than missing or of
/// another incarnation, which callers handle first).
fn open_failure(t: &Target, e: DynamicError) -> OpenError {
    let name = t.name.to_string();
    match e {
        DynamicError::Segment(source) => OpenError::Segment { name, source },
        DynamicError::Corrupt { path, problem } => OpenError::Corrupt { name, path, problem },
        DynamicError::NotFound => OpenError::DoesNotExist(name),
        DynamicError::OtherIncarnation => OpenError::Corrupt {
            name,
            path: t.root.join(files::dynamic_name(&t.name.stem())),
            problem: Corruption::OtherIncarnation,
        },
    }
}
