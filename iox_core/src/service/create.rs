//! Step 2 of the protocol (see the parent module): creating a service, or finding out
//! what the dynamic segment already in place is.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use iox_mempool::Pool;
use iox_mempool::segment::{self, Access};

use super::{Attempt, CreateError, RootError, ServiceShared, Target};
use crate::dynamic::{self, Corruption, DynamicError, DynamicLayout, DynamicSegment};
use crate::lifecycle::{self, Phase};
use crate::liveness::Liveness;
use crate::node::{self, Node};
use crate::recovery::{self};
use crate::shm::files;
use crate::static_config::{self, PayloadBacking, StaticConfig};

pub(super) fn try_create(
    t: &Target,
    config: &StaticConfig,
    init: &dyn Fn(&StaticConfig, crate::dynamic::Dynamic<'_>),
) -> Result<Attempt<ServiceShared, CreateError>, CreateError> {
    let stem = t.name.stem();
    let (config_name, dynamic_name) = (files::config_name(&stem), files::dynamic_name(&stem));
    let name = || t.name.to_string();
    // A file under the root that could not be written: the root's error when the
    // root is why (full, read-only, gone), so every such step says what to do.
    let io = |what, source| match RootError::classify(&t.root, what, source) {
        RootError::Io { what, source, .. } => CreateError::Io {
            name: name(),
            what,
            source,
        },
        source => CreateError::Root { name: name(), source },
    };
    let node = Node::for_root(&t.root).map_err(|e| CreateError::Root {
        name: name(),
        source: RootError::classify(&t.root, "set up the process node file", e),
    })?;
    let me = node.id();
    // A memfd payload is made first: its identity is part of the static config,
    // whose hash identifies this incarnation.
    // Only sized and named here (cheap); its pages are allocated and it is sealed
    // once we have won the race for the name.
    let mut config = config.clone();
    // Device memory is allocated here too (its length is known only then); a
    // creator that loses the race frees it again.
    let (mut memfd, mut device) = (None, None);
    match config.backing {
        PayloadBacking::File => {}
        PayloadBacking::Memfd(_) => {
            let unsealed = iox_mempool::memfd::Unsealed::new(
                &stem,
                config.layout.payload_len(),
                config.layout.page_size(),
            )
            .map_err(|source| match source {
                short @ segment::CreateSegmentError::HugePagesShort { .. } => segment_error(t, short),
                source => CreateError::Segment { name: name(), source },
            })?;
            config.backing = PayloadBacking::Memfd(unsealed.identity());
            memfd = Some(unsealed);
        }
        PayloadBacking::CudaDevice(planned) => {
            let (memory, id) = crate::device::allocate(planned, config.layout.payload_len())
                .map_err(|reason| CreateError::DeviceMemory { name: name(), reason })?;
            config.backing = PayloadBacking::CudaDevice(id);
            device = Some(memory);
        }
    }
    let config = &config;
    remove_dead_temp_files(&t.root, &[&dynamic_name, &format!(".{config_name}")], me);
    let tmp = node::temp_file_name(&dynamic_name, me);
    let hash = static_config::text_hash(&config.to_ron());
    let dynamic = DynamicSegment::create(
        &t.root,
        &tmp,
        DynamicLayout::new(config),
        config.permissions,
        hash,
        me,
        dynamic::CREATING,
    )
    .map_err(|source| segment_error(t, source))?;
    let d = dynamic.view();
    // The pattern's own regions, before the segment appears under its name.
    init(config, d);
    d.users()[0].store(me, Ordering::Relaxed);
    dynamic.seal_header();
    crate::testing::stall_point(crate::testing::Stall::CreateBeforeRename);
    // The exclusive step: the complete segment appears under its name, or not.
    match files::rename_noreplace(&t.root, &tmp, &dynamic_name) {
        Ok(()) => {}
        Err(rustix::io::Errno::EXIST) => {
            let _ = segment::remove(&t.root, &tmp);
            return Ok(existing(t, &stem, me));
        }
        Err(e) => {
            let _ = segment::remove(&t.root, &tmp);
            return Err(io("place the dynamic segment", e.into()));
        }
    }
    // We hold the anchor (CREATING by us): files of this name are ours to replace.
    let undo = |e: CreateError| {
        let _ = lifecycle::remove_files(&t.root, &stem, &dynamic);
        e
    };
    let _ = Pool::remove(&t.root, &stem);
    let created = match (memfd, device) {
        (_, Some(memory)) => {
            Pool::create_with_device(&t.root, &stem, &config.layout, config.permissions, hash, memory)
        }
        (Some(unsealed), None) => unsealed.finish().map_err(Into::into).and_then(|payload| {
            Pool::create_with_payload(
                &t.root,
                &stem,
                &config.layout,
                config.memory_type,
                config.permissions,
                hash,
                payload,
            )
        }),
        (None, None) => Pool::create_tagged(
            &t.root,
            &stem,
            &config.layout,
            config.memory_type,
            config.permissions,
            hash,
        ),
    };
    let mut pool = created.map_err(|e| {
        undo(match e {
            iox_mempool::CreatePoolError::Segment(source) => segment_error(t, source),
            source => CreateError::Pool { name: name(), source },
        })
    })?;
    // The creator holds the payload like any opener: read-only until it publishes.
    pool.make_payload_read_only()
        .map_err(|e| undo(io("map the payload read-only", std::io::Error::other(e))))?;
    // With an access policy, only the creator may reopen the memfd for writing
    // (`/proc/self/fd/N`, from any descriptor of it): a reader's read-only descriptor
    // stays read-only (see `crate::access`). A memfd is made 0777.
    if config.access.is_some() && matches!(config.backing, PayloadBacking::Memfd(_)) {
        rustix::fs::fchmod(pool.payload_fd(), rustix::fs::Mode::from_raw_mode(0o644))
            .map_err(|e| undo(io("make the payload writable by its creator only", e.into())))?;
    }
    let offer = match config.backing {
        PayloadBacking::Memfd(_) | PayloadBacking::CudaDevice(_) => Some(
            crate::handover::offer(
                &t.root,
                &stem,
                hash,
                me,
                &[pool.payload_fd()],
                dynamic.file().as_fd(),
                config.permissions,
                config.access.as_ref(),
            )
            .map_err(|e| undo(io("offer the payload's descriptor to other processes", e)))?,
        ),
        PayloadBacking::File => None,
    };
    if let Some(offer) = &offer {
        // Offered before the service says ALIVE (openers ask only then; the CAS below
        // publishes the mark).
        d.user_holders()[0].store(offer.nonce(), Ordering::Relaxed);
    }
    crate::testing::stall_point(crate::testing::Stall::CreateBeforeConfig);
    let written = config
        .write_atomic(&t.root, &config_name, me)
        .map_err(|source| undo(io("write the static config", source)))?;
    debug_assert_eq!(written, hash);
    if d.header()
        .lifecycle
        .compare_exchange(
            dynamic::lifecycle_word(me, dynamic::CREATING),
            dynamic::lifecycle_word(0, dynamic::ALIVE),
            Ordering::SeqCst,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return Err(undo(io(
            "mark it alive",
            std::io::Error::other("its lifecycle word was changed by another process"),
        )));
    }
    Ok(Attempt::Done(ServiceShared {
        name: t.name.clone(),
        root: t.root.clone(),
        stem,
        config: config.clone(),
        pool: Arc::new(pool),
        dynamic,
        node,
        user: 0,
        _offer: offer,
        created: true,
        fork_generation: crate::fork::generation(),
    }))
}

/// A dynamic segment is in place already: is it a service, one being created or
/// removed, or debris of a dead creator or remover (taken over and removed)?
fn existing(t: &Target, stem: &str, me: u64) -> Attempt<ServiceShared, CreateError> {
    let name = || t.name.to_string();
    let dynamic = match DynamicSegment::open(&t.root, stem, Access::ReadWrite) {
        Ok(d) => d,
        Err(DynamicError::NotFound) => return Attempt::Retry("removed meanwhile".into()),
        Err(DynamicError::Corrupt { path, problem }) => {
            return Attempt::Failed(CreateError::Corrupt {
                name: name(),
                path,
                problem,
            });
        }
        Err(e) => {
            return Attempt::Failed(CreateError::Corrupt {
                name: name(),
                path: t.root.join(files::dynamic_name(stem)),
                problem: Corruption::Unreadable(format!("{e:?}")),
            });
        }
    };
    let corrupt = |problem: Corruption| {
        Attempt::Failed(CreateError::Corrupt {
            name: name(),
            path: dynamic.path().to_owned(),
            problem,
        })
    };
    let d = dynamic.view();
    let mut live = Liveness::new(&t.root, me);
    match lifecycle::phase(&t.root, stem, &dynamic, &mut live) {
        Phase::Alive if t.root.join(files::config_name(stem)).exists() => {
            Attempt::Failed(CreateError::AlreadyExists(name()))
        }
        Phase::Alive
            if dynamic::split_lifecycle(d.header().lifecycle.load(Ordering::SeqCst)).1 != dynamic::ALIVE =>
        {
            // A remover took it between our looks (it unlinks the config first).
            Attempt::Retry("being removed".into())
        }
        Phase::Alive => {
            // Alive without a static config (deleted by hand): debris if none of
            // its users lives.
            recovery::recover_users(d, &mut live);
            if lifecycle::remove_if_unused(&t.root, stem, &dynamic, me) {
                Attempt::Retry("removed a service left without static config and users".into())
            } else {
                corrupt(Corruption::NoStaticConfig)
            }
        }
        Phase::Busy { creating: true, .. } => Attempt::Failed(CreateError::AlreadyExists(name())),
        Phase::Busy { node, .. } => Attempt::Retry(format!("being removed by node {node:016x}")),
        Phase::Removed => Attempt::Retry("its creator or remover had died; removed it".into()),
        Phase::Corrupt(word) => corrupt(Corruption::Lifecycle(word)),
    }
}

/// Removes temporary files of `bases` (see [`node::temp_file_name`]) left by dead
/// nodes, with the dead nodes' lock files: a creator killed before its rename leaves
/// both behind, referenced from nowhere else.
fn remove_dead_temp_files(root: &Path, bases: &[&str], me: u64) {
    let Ok(dir) = std::fs::read_dir(root) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(node) = node::parse_temp_file_name(name) else {
            continue;
        };
        if node == me || !bases.iter().any(|b| name.starts_with(&format!("{b}."))) {
            continue;
        }
        if !node::is_alive(root, node) {
            let _ = std::fs::remove_file(root.join(name));
            node::remove_if_dead(root, node); // its lock file too
        }
    }
}

/// A segment that could not be made under the root: a full root is a [`RootError`]
/// (it names the root and says what to do), anything else the segment's own error.
fn segment_error(t: &Target, source: segment::CreateSegmentError) -> CreateError {
    match source {
        segment::CreateSegmentError::HugePagesShort { pages, advice, .. } => CreateError::HugePages {
            name: t.name.to_string(),
            pages,
            advice,
        },
        segment::CreateSegmentError::NoSpace { .. } => CreateError::Root {
            name: t.name.to_string(),
            source: RootError::NoSpace {
                root: t.root.clone(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            },
        },
        // No inode left, a read-only root, ...: the root's error.
        segment::CreateSegmentError::Io { op, path, source } => {
            match RootError::classify(&t.root, op, source) {
                RootError::Io { source, .. } => CreateError::Segment {
                    name: t.name.to_string(),
                    source: segment::CreateSegmentError::Io { op, path, source },
                },
                source => CreateError::Root {
                    name: t.name.to_string(),
                    source,
                },
            }
        }
        source => CreateError::Segment {
            name: t.name.to_string(),
            source,
        },
    }
}
