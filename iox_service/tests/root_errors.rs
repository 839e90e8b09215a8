//! A root that cannot be used gets a `RootError` that names the directory and says what
//! to do: missing, not a directory, read-only (a tmpfs mounted `ro`), full (a small
//! tmpfs filled up). A full root keeps no temporary file of a failed attempt. The
//! mounts need root; without it those tests skip with the reason.

use std::path::{Path, PathBuf};

use iox_service::{CleanupError, CreateError, OpenError, OpenOrCreateError, RootError, Service};
use iox_testkit::Tmpfs;

fn open_or_create(root: &Path, name: &str) -> Result<iox_service::PubSubService<u64>, OpenOrCreateError> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open_or_create()
}

fn open(root: &Path, name: &str) -> Result<iox_service::PubSubService<u64>, OpenError> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<u64>()
        .open()
}

/// The root error inside an `open_or_create` failure.
fn root_error(e: &OpenOrCreateError) -> &RootError {
    match e {
        OpenOrCreateError::Create(CreateError::Root { source, .. }) => source,
        OpenOrCreateError::Open(OpenError::Root { source, .. }) => source,
        e => panic!("not a root error: {e:?}"),
    }
}

/// Checks that the message names the root.
fn names(e: &impl std::fmt::Display, root: &Path) {
    let text = e.to_string();
    assert!(text.contains(&root.display().to_string()), "{text}");
}

fn temp_files(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_missing_root_is_named_and_said_to_be_missing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("no/such/root");
    let e = open_or_create(&root, "root/missing").unwrap_err();
    assert!(matches!(root_error(&e), RootError::Missing { .. }), "{e:?}");
    assert_eq!(root_error(&e).root(), root);
    names(&e, &root);

    let e = open(&root, "root/missing").unwrap_err();
    assert!(
        matches!(
            &e,
            OpenError::Root {
                source: RootError::Missing { .. },
                ..
            }
        ),
        "{e:?}"
    );
    names(&e, &root);

    let e = Service::cleanup_all_dead_in(&root).unwrap_err();
    assert!(
        matches!(&e, CleanupError::Root(RootError::Missing { .. })),
        "{e:?}"
    );
    names(&e, &root);

    let e = iox_service::inspect::inspect_all_in(&root).unwrap_err();
    assert!(matches!(&e, RootError::Missing { .. }), "{e:?}");
    names(&e, &root);
    assert!(!root.exists(), "nothing created");
}

#[test]
fn a_root_that_is_a_file_is_named_and_said_not_to_be_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a-file");
    std::fs::write(&root, "not a directory").unwrap();
    let e = open_or_create(&root, "root/file").unwrap_err();
    assert!(matches!(root_error(&e), RootError::NotADirectory { .. }), "{e:?}");
    names(&e, &root);
    let e = open(&root, "root/file").unwrap_err();
    assert!(
        matches!(
            &e,
            OpenError::Root {
                source: RootError::NotADirectory { .. },
                ..
            }
        ),
        "{e:?}"
    );
    let e = Service::cleanup_all_dead_in(&root).unwrap_err();
    assert!(
        matches!(&e, CleanupError::Root(RootError::NotADirectory { .. })),
        "{e:?}"
    );
    names(&e, &root);
}

const READ_ONLY_TEST: &str = "a_read_only_root_is_named_and_said_to_be_read_only";

#[test]
fn a_read_only_root_is_named_and_said_to_be_read_only() {
    let fs = match Tmpfs::mount("ro,size=1m") {
        Ok(fs) => fs,
        Err(reason) => return iox_testkit::skip(READ_ONLY_TEST, iox_testkit::REQUIRE_ROOT, reason),
    };
    let root = fs.path().to_path_buf();
    let e = open_or_create(&root, "root/ro").unwrap_err();
    assert!(
        matches!(root_error(&e), RootError::PermissionDenied { .. }),
        "{e:?}"
    );
    names(&e, &root);
    // Nothing to clean, and nothing could be removed: said so, naming the root.
    let e = Service::cleanup_all_dead_in(&root).unwrap_err();
    assert!(
        matches!(&e, CleanupError::Root(RootError::PermissionDenied { .. })),
        "{e:?}"
    );
    names(&e, &root);
    // Reading works.
    assert!(
        iox_service::inspect::inspect_all_in(&root)
            .unwrap()
            .services
            .is_empty()
    );
}

const FULL_TEST: &str = "a_full_root_is_named_and_keeps_no_temporary_file";

#[test]
fn a_full_root_is_named_and_keeps_no_temporary_file() {
    let fs = match Tmpfs::mount("size=1m") {
        Ok(fs) => fs,
        Err(reason) => return iox_testkit::skip(FULL_TEST, iox_testkit::REQUIRE_ROOT, reason),
    };
    let root: PathBuf = fs.path().to_path_buf();
    iox_testkit::fill(&root);
    for attempt in 0..3 {
        let e = open_or_create(&root, "root/full").unwrap_err();
        assert!(
            matches!(root_error(&e), RootError::NoSpace { .. }),
            "attempt {attempt}: {e:?}"
        );
        names(&e, &root);
        assert_eq!(temp_files(&root), Vec::<String>::new(), "attempt {attempt}");
    }
    // A cleanup needs no file: it works on the full root (nothing to do here).
    let (report, failed) = Service::cleanup_all_dead_in(&root).unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(report.services, 0);
    // Space freed: creating works again. The space comes back when the last file
    // descriptor of the filler closes, which a process another test thread is forking
    // (`mount`) may hold for a moment between its fork and exec: poll, bounded.
    std::fs::remove_file(root.join("filler")).unwrap();
    let mut last = None;
    let created = iox_testkit::wait_until(std::time::Duration::from_secs(20), || {
        match open_or_create(&root, "root/full") {
            Ok(svc) => {
                drop(svc);
                true
            }
            Err(e) => {
                last = Some(e);
                false
            }
        }
    });
    assert!(created, "creating on the freed root kept failing: {last:?}");
}

const PARTLY_FULL_TEST: &str = "a_partly_full_root_gives_the_root_error_at_every_size";

/// With 0 to 64 KiB free, every step of creating a service that runs out of space
/// (the dynamic segment, the bookkeeping, a file-backed payload, the static config,
/// the node file and the memfd offer) fails with the full root's `RootError`, naming
/// the root, and keeps no temporary file.
#[test]
fn a_partly_full_root_gives_the_root_error_at_every_size() {
    let fs = match Tmpfs::mount("size=1m") {
        Ok(fs) => fs,
        Err(reason) => return iox_testkit::skip(PARTLY_FULL_TEST, iox_testkit::REQUIRE_ROOT, reason),
    };
    let root: PathBuf = fs.path().to_path_buf();
    iox_testkit::fill(&root);
    let filler = std::fs::OpenOptions::new()
        .write(true)
        .open(root.join("filler"))
        .unwrap();
    let full = filler.metadata().unwrap().len();
    type Make = fn(&Path) -> Result<(), OpenOrCreateError>;
    let services: [(&str, Make); 3] = [
        ("u64, memfd", |r| open_or_create(r, "root/partly").map(drop)),
        ("u64, file", |r| {
            Service::named("root/partly-file")
                .unwrap()
                .root(r)
                .publish_subscribe::<u64>()
                .backing(iox_service::Backing::File)
                .open_or_create()
                .map(drop)
        }),
        ("16 KiB slices, file", |r| {
            Service::named("root/partly-slices")
                .unwrap()
                .root(r)
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .subscriber_buffer(1)
                .size_classes(&[(16384, 6)])
                .backing(iox_service::Backing::File)
                .open_or_create()
                .map(drop)
        }),
    ];
    let (mut failed, mut created) = (0, 0);
    for free_kib in (0..=64).step_by(2) {
        filler.set_len(full.saturating_sub(free_kib * 1024)).unwrap();
        for (what, make) in services {
            match make(&root) {
                Ok(()) => created += 1,
                Err(e) => {
                    failed += 1;
                    let root_error = match &e {
                        OpenOrCreateError::Create(CreateError::Root { source, .. })
                        | OpenOrCreateError::Open(OpenError::Root { source, .. }) => source,
                        e => panic!("{what}, {free_kib} KiB free: not the root's error: {e}"),
                    };
                    assert!(
                        matches!(root_error, RootError::NoSpace { .. }),
                        "{what}, {free_kib} KiB free: {e}"
                    );
                    names(&e, &root);
                }
            }
            assert_eq!(
                temp_files(&root),
                Vec::<String>::new(),
                "{what}, {free_kib} KiB free"
            );
        }
    }
    assert!(
        failed > 0 && created > 0,
        "the sizes span both: {failed} failed, {created} created"
    );
    drop(filler);
    drop(fs);

    // No inode left: each file a service needs, in turn, cannot be made.
    let (mut failed, mut created) = (0, 0);
    for inodes in 2..=12 {
        let fs = Tmpfs::mount(&format!("size=1m,nr_inodes={inodes}")).unwrap();
        let root = fs.path().to_path_buf();
        for (what, make) in services {
            match make(&root) {
                Ok(()) => created += 1,
                Err(e) => {
                    failed += 1;
                    let text = e.to_string();
                    assert!(
                        text.contains("is full") || text.contains(&format!("{} is full", root.display())),
                        "{what}, {inodes} inodes: {text}"
                    );
                    names(&e, &root);
                }
            }
            assert_eq!(temp_files(&root), Vec::<String>::new(), "{what}, {inodes} inodes");
        }
    }
    assert!(
        failed > 0 && created > 0,
        "the inode counts span both: {failed} failed, {created} created"
    );
}
