//! Services on huge pages, across processes: a process in another PID namespace
//! publishes into a 2 MiB-page service and another user reads it through an access
//! policy (both handed the memfd, both mapping it with 2 MiB pages); other users that
//! could hold a hugetlb pool writable are refused; a holder SIGKILLed leaves the service to the
//! others, a newcomer then gets it from a survivor, and the pages go back to the
//! machine when the last holder leaves; too few pages fail the create with advice and
//! leave nothing behind; settings that cannot have huge pages are refused before
//! anything is made; transparent huge pages report what the kernel gave. Tests that
//! need reserved 2 MiB pages skip (saying so) where too few are free.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use iox_service::static_config::InvalidConfig;
use iox_service::{
    AccessPolicy, Backing, CreateError, MemoryType, OpenError, PageSize, PubSubService, Service,
};
use iox_testkit::{Gate, Reaped, env, role, spawn_self, wait_until};

const LIMIT: Duration = Duration::from_secs(60);
const MIB: usize = 1 << 20;
const OTHER_USER: u32 = 1001;
/// The group the other user reads as (its primary group in these tests).
const VIDEO: u32 = 1044;

/// Tests that count the machine's free huge pages run one at a time.
static PAGES: Mutex<()> = Mutex::new(());

/// Frames of 1 MiB, limits small enough that the pool is 8 chunks: 4 pages of 2 MiB.
fn builder(root: &Path, name: &str) -> iox_service::PubSubBuilder<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .max_slice_len(MIB)
        .max_publishers(1)
        .max_subscribers(2)
        .subscriber_buffer(2)
        .max_loans(1)
        .max_held(1)
}

fn create(root: &Path, name: &str, pages: PageSize) -> PubSubService<[u8]> {
    builder(root, name).page_size(pages).create().unwrap()
}

/// On 2 MiB pages, shared with the group `VIDEO` (the root directory's: see
/// [`group_root`]), whom an access policy lets read only (another user holding a
/// hugetlb pool writable could make its readers fault: see
/// `static_config::HUGETLB_WRITERS`). The guide's "Huge pages" shows these lines.
fn create_shared(root: &Path, name: &str) -> PubSubService<[u8]> {
    builder(root, name)
        .page_size(PageSize::Huge2MiB)
        .permissions(0o660) // the files' group: the root directory's (setgid)
        .access(AccessPolicy::new().read_gid(VIDEO)) // publishers: this uid (and root)
        .create()
        .unwrap()
}

/// A root as `docs/deploy.md` recommends for a group: owned by root and the group
/// `VIDEO`, setgid (its files get the group) and sticky (`chmod 3770`).
fn group_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(dir.path(), Some(0), Some(VIDEO)).unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o3770)).unwrap();
    dir
}

fn open(root: &Path, name: &str) -> PubSubService<[u8]> {
    builder(root, name).page_size(PageSize::Huge2MiB).open().unwrap()
}

fn free_pages() -> u64 {
    PageSize::Huge2MiB.reserve().map_or(0, |r| r.free)
}

/// The page size the kernel maps this process's view of the pool with.
fn kernel_page(svc: &PubSubService<[u8]>) -> u64 {
    let info = svc.pool_info();
    let mapped = iox_service::pages::mapped_here(info.base)
        .unwrap()
        .expect("the pool is mapped here");
    assert_eq!(mapped.size, info.len as u64);
    mapped.kernel_page
}

fn frame(seed: u8) -> impl Fn(usize) -> u8 {
    move |i| (i as u8).wrapping_mul(31).wrapping_add(seed)
}

fn send(svc: &PubSubService<[u8]>, seed: u8) {
    let publisher = svc.publisher_builder().create().unwrap();
    let sample = publisher
        .loan_slice_uninit(MIB)
        .unwrap()
        .write_from_fn(frame(seed));
    assert_eq!(sample.send().unwrap(), 1);
}

fn receive(sub: &iox_service::Subscriber<[u8]>, seed: u8) {
    let mut got = None;
    assert!(
        wait_until(LIMIT, || {
            got = sub.receive().unwrap();
            got.is_some()
        }),
        "no frame arrived"
    );
    let sample = got.unwrap();
    assert_eq!(sample.len(), MIB);
    let want = frame(seed);
    assert!(
        sample.iter().enumerate().all(|(i, &b)| b == want(i)),
        "frame {seed} arrived changed"
    );
}

fn child_env(root: &Path, name: &str, gate: &Gate) -> Vec<(&'static str, String)> {
    vec![
        ("IOX_ROOT", root.display().to_string()),
        ("SERVICE", name.to_string()),
        ("GATE", gate.path().display().to_string()),
    ]
}

/// The children of every test here: open the service (asking for 2 MiB pages), check
/// the kernel maps it so, then act as `role` says; say so at the gate; wait there
/// until it opens (or they are killed).
fn run_child() -> bool {
    let Some(role) = role() else { return false };
    let (root, name): (PathBuf, String) = (env("IOX_ROOT"), env("SERVICE"));
    let gate = PathBuf::from(env::<String>("GATE"));
    let svc = match role.as_str() {
        "creator" => create(&root, &name, PageSize::Huge2MiB),
        "racer" => builder(&root, &name)
            .page_size(PageSize::Huge2MiB)
            .open_or_create()
            .unwrap(),
        _ => open(&root, &name),
    };
    assert_eq!(svc.pool_info().page_size, PageSize::Huge2MiB);
    assert_eq!(
        kernel_page(&svc),
        2 * MIB as u64,
        "{role}: not mapped with 2 MiB pages"
    );
    let _held = match role.as_str() {
        "publisher" => {
            send(&svc, 7);
            None
        }
        "reader" => {
            let sub = svc.subscriber_builder().create().unwrap();
            std::fs::write(gate.join("subscribed"), b"").unwrap();
            receive(&sub, 7);
            None
        }
        "creator" => Some(svc.publisher_builder().create().unwrap()),
        "racer" => {
            let iox_service::PayloadBacking::Memfd(id) = svc.static_config().backing else {
                panic!("a memfd pool");
            };
            std::fs::write(gate.join("pool"), format!("{}:{}", id.dev, id.ino)).unwrap();
            None
        }
        other => panic!("unknown role {other}"),
    };
    std::fs::write(gate.join("reached"), b"").unwrap();
    assert!(wait_until(LIMIT, || gate.join("open").exists()), "never let go");
    true
}

/// A fresh root open to every user, sticky as /dev/shm.
fn shared_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    dir
}

#[test]
fn another_user_reads_what_another_pid_namespace_publishes_on_2mib_pages() {
    const TEST: &str = "another_user_reads_what_another_pid_namespace_publishes_on_2mib_pages";
    if run_child() {
        return;
    }
    if !iox_testkit::root_or_skip(TEST) {
        return;
    }
    let _one = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    if !iox_testkit::huge_pages_or_skip(TEST, 4) {
        return;
    }
    let (dir, root) = (shared_root(), group_root());
    let name = "huge/frames";
    let svc = create_shared(root.path(), name);
    assert_eq!(svc.pool_info().len, 8 * MIB, "8 chunks of 1 MiB: 4 pages");
    assert_eq!(kernel_page(&svc), 2 * MIB as u64);
    let text = svc.static_config().to_ron();
    assert!(text.contains("page_size: Huge2MiB"), "{text}");

    // A reader as another user (handed the pool read-only).
    let reader_gate = Gate::new(dir.path(), "reader");
    std::fs::set_permissions(
        reader_gate.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let reader = Reaped::new(iox_testkit::spawn_self_as(
        TEST,
        "reader",
        OTHER_USER,
        VIDEO,
        &child_env(root.path(), name, &reader_gate),
    ));
    assert!(
        wait_until(LIMIT, || reader_gate.path().join("subscribed").exists()),
        "the other user never subscribed"
    );
    // A publisher in another PID namespace (a container sharing the root volume).
    let publisher_gate = Gate::new(dir.path(), "publisher");
    let publisher = Reaped::new(iox_testkit::spawn_self_in_pid_namespace(
        TEST,
        "publisher",
        &child_env(root.path(), name, &publisher_gate),
    ));
    assert!(
        publisher_gate.wait_reached(LIMIT),
        "the publisher in another PID namespace never published"
    );
    assert!(
        reader_gate.wait_reached(LIMIT),
        "the reader never received the frame whole"
    );
    reader_gate.open();
    publisher_gate.open();
    iox_testkit::wait_ok(reader.into_inner(), LIMIT);
    iox_testkit::wait_ok(publisher.into_inner(), LIMIT);

    // An opener asking for other pages is refused, naming both.
    let e = refused_as_other_pages(root.path(), name, PageSize::Base);
    assert!(e.contains("2 MiB (hugetlb)"), "{e}");
}

/// Opening `name` asking for `pages` is refused as a page size mismatch; its message.
fn refused_as_other_pages(root: &Path, name: &str, pages: PageSize) -> String {
    let e = builder(root, name).page_size(pages).open().unwrap_err();
    assert!(
        matches!(
            &e,
            OpenError::IncompatibleLimit {
                what: "page size",
                ..
            }
        ),
        "{e}"
    );
    e.to_string()
}

#[test]
fn a_killed_holder_leaves_the_service_to_the_others_and_the_pages_go_back_at_the_end() {
    const TEST: &str = "a_killed_holder_leaves_the_service_to_the_others_and_the_pages_go_back_at_the_end";
    if run_child() {
        return;
    }
    let _one = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    if !iox_testkit::huge_pages_or_skip(TEST, 4) {
        return;
    }
    let before = free_pages();
    let (dir, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let name = "huge/crash";
    // A child creates the service and holds a publisher until it is killed.
    let creator_gate = Gate::new(dir.path(), "creator");
    let creator = Reaped::new(spawn_self(
        TEST,
        "creator",
        &child_env(root.path(), name, &creator_gate),
    ));
    assert!(creator_gate.wait_reached(LIMIT), "the creator never created");
    let svc = open(root.path(), name);
    assert_eq!(kernel_page(&svc), 2 * MIB as u64);
    // The creator dies: the pool stays with us, and a newcomer gets it from us.
    creator.kill();
    assert!(
        wait_until(LIMIT, || {
            svc.cleanup_dead();
            svc.port_counts().0 == 0
        }),
        "the dead creator's publisher was never recovered"
    );
    let sub = svc.subscriber_builder().create().unwrap();
    let publisher_gate = Gate::new(dir.path(), "publisher");
    let publisher = Reaped::new(spawn_self(
        TEST,
        "publisher",
        &child_env(root.path(), name, &publisher_gate),
    ));
    assert!(publisher_gate.wait_reached(LIMIT), "the newcomer never published");
    receive(&sub, 7);
    publisher_gate.open();
    iox_testkit::wait_ok(publisher.into_inner(), LIMIT);
    assert!(
        free_pages() + 4 <= before || before < 4,
        "our pool holds its 4 pages"
    );
    drop(sub);
    drop(svc);
    // (Node files of processes are theirs; the service's own files must be gone.)
    let left: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with("iox_node_"))
        .collect();
    assert!(left.is_empty(), "the last holder left files behind: {left:?}");
    assert!(
        wait_until(LIMIT, || free_pages() >= before),
        "the pool's pages never went back to the machine ({} free, {before} before)",
        free_pages()
    );
}

/// Processes racing `open_or_create` for one 2 MiB-page service, rounds in a row:
/// exactly one pool is made (they all hold the same memfd, and the machine's free
/// pages drop by that one pool's pages), and every page comes back when they go.
#[test]
fn racing_creators_make_one_huge_page_pool_and_give_its_pages_back() {
    const TEST: &str = "racing_creators_make_one_huge_page_pool_and_give_its_pages_back";
    const RACERS: usize = 4;
    if run_child() {
        return;
    }
    let _one = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    if !iox_testkit::huge_pages_or_skip(TEST, 4 * RACERS as u64) {
        return;
    }
    let before = free_pages();
    for round in 0..3 {
        let (dir, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let name = format!("huge/race{round}");
        let gates: Vec<Gate> = (0..RACERS)
            .map(|i| Gate::new(dir.path(), &format!("racer{i}")))
            .collect();
        let racers: Vec<Reaped> = gates
            .iter()
            .map(|g| Reaped::new(spawn_self(TEST, "racer", &child_env(root.path(), &name, g))))
            .collect();
        for g in &gates {
            assert!(g.wait_reached(LIMIT), "round {round}: a racer never opened");
        }
        let pools: std::collections::BTreeSet<String> = gates
            .iter()
            .map(|g| std::fs::read_to_string(g.path().join("pool")).unwrap())
            .collect();
        assert_eq!(pools.len(), 1, "round {round}: more than one pool: {pools:?}");
        assert_eq!(
            before - free_pages(),
            4,
            "round {round}: one pool of 4 pages, no more"
        );
        for g in &gates {
            g.open();
        }
        for r in racers {
            iox_testkit::wait_ok(r.into_inner(), LIMIT);
        }
        assert!(
            wait_until(LIMIT, || free_pages() == before),
            "round {round}: the pool's pages never came back ({} free, {before} before)",
            free_pages()
        );
    }
}

#[test]
fn too_few_huge_pages_fail_the_create_with_advice_and_leave_nothing_behind() {
    let _one = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    for pages in [PageSize::Huge2MiB, PageSize::Huge1GiB] {
        let reserve = pages.reserve();
        // More than the machine has reserved or may add: fails however many are free.
        let needed = reserve.map_or(1, |r| r.total + r.overcommit + 1);
        let root = tempfile::tempdir().unwrap();
        let e = Service::named("huge/short")
            .unwrap()
            .root(root.path())
            .publish_subscribe::<[u8]>()
            .size_classes(&[(needed as usize * pages.bytes() - 64, 1)])
            .allow_pool_exhaustion(true)
            .page_size(pages)
            .create()
            .err()
            .unwrap_or_else(|| panic!("{pages}: created with more pages than reserved"));
        let CreateError::HugePages { advice, pages: p, .. } = &e else {
            panic!("{pages}: expected HugePages, got {e}");
        };
        assert_eq!(*p, pages);
        let text = e.to_string();
        println!("{text}");
        if reserve.is_some() {
            assert!(advice.contains(&format!("it needs {needed} x ")), "{text}");
            assert!(advice.contains("nr_hugepages"), "{text}");
        }
        assert!(advice.contains("hugepages="), "{text}");
        assert!(
            std::fs::read_dir(root.path()).unwrap().next().is_none(),
            "{pages}: the failed create left files behind"
        );
    }
}

#[test]
fn settings_that_cannot_have_huge_pages_are_refused_before_anything_is_made() {
    let root = tempfile::tempdir().unwrap();
    // Each refused at create as an invalid setting that says `why`.
    let refused = |b: iox_service::PubSubBuilder<[u8]>, what: &str, why: &str| {
        let e = b
            .page_size(PageSize::Huge2MiB)
            .create()
            .err()
            .unwrap_or_else(|| panic!("{what}: created"));
        assert!(
            matches!(
                &e,
                CreateError::InvalidSetting {
                    source: InvalidConfig::PageSize { .. },
                    ..
                }
            ),
            "{what}: {e}"
        );
        assert!(e.to_string().contains(why), "{what}: {e}");
    };
    refused(
        builder(root.path(), "huge/file").backing(Backing::File),
        "a file",
        "memfd backing",
    );
    // Refused before the driver is asked (there is none here: that error would differ).
    refused(
        builder(root.path(), "huge/device").memory_type(MemoryType::CudaDevice),
        "device memory",
        "GPU memory",
    );
    // Other users holding a hugetlb pool writable (every admitted user without a
    // policy; other publishers with one) could make its readers fault.
    refused(
        builder(root.path(), "huge/group").permissions(0o660),
        "group access",
        "SIGBUS",
    );
    let sticky = shared_root();
    for (what, policy) in [
        ("another publisher", AccessPolicy::new().publish_uid(OTHER_USER)),
        ("a publishing group", AccessPolicy::new().publish_gid(OTHER_USER)),
    ] {
        refused(
            builder(sticky.path(), "huge/writers")
                .permissions(0o666)
                .access(policy),
            what,
            "SIGBUS",
        );
    }
    assert!(std::fs::read_dir(root.path()).unwrap().next().is_none());
    // Transparent huge pages are ordinary shared memory (a hole reads back as zeroes).
    drop(
        builder(root.path(), "huge/thp-shared")
            .permissions(0o666)
            .page_size(PageSize::Transparent)
            .create()
            .unwrap(),
    );
    // A base-page service is not opened as a huge-page one.
    let _base = create(root.path(), "huge/base", PageSize::Base);
    refused_as_other_pages(root.path(), "huge/base", PageSize::Huge2MiB);
}

#[test]
fn a_transparent_huge_page_service_reports_what_the_kernel_gave() {
    let root = tempfile::tempdir().unwrap();
    let svc = create(root.path(), "huge/thp", PageSize::Transparent);
    let info = svc.pool_info();
    assert_eq!(info.len, 8 * MIB, "rounded to 2 MiB like the hugetlb pages");
    let mapped = iox_service::pages::mapped_here(info.base).unwrap().unwrap();
    assert_eq!(
        mapped.kernel_page, 4096,
        "transparent huge pages are mapped as base pages"
    );
    assert!(
        mapped.huge <= mapped.resident && mapped.resident <= mapped.size,
        "{mapped:?}"
    );
    let setting =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").unwrap_or_default();
    if setting.contains("[never]") || setting.contains("[deny]") {
        assert_eq!(mapped.huge, 0, "{setting}: {mapped:?}");
    }
    println!(
        "{} of {} bytes on transparent huge pages ({})",
        mapped.huge,
        mapped.size,
        setting.trim()
    );
    // A publisher and a subscriber work on it as on any pool.
    let sub = svc.subscriber_builder().create().unwrap();
    send(&svc, 3);
    receive(&sub, 3);
}

/// Static config texts an opener reads as untrusted: one recording hugetlb pages with
/// a file backing, one a hostile creator wrote with hugetlb pages open to every user
/// (whose processes could make the opener fault), one with a page size iox does not
/// know: each refused with what is wrong, before anything is mapped.
#[test]
fn configs_with_impossible_or_unsafe_page_sizes_are_refused_as_invalid() {
    let root = tempfile::tempdir().unwrap();
    let svc = create(root.path(), "huge/config", PageSize::Transparent);
    let text = svc.static_config().to_ron();
    assert!(text.contains("page_size: Transparent"), "{text}");
    let path = Path::new("iox_x.service");
    let parse = |t: &str| iox_service::static_config::StaticConfig::parse(t, path);
    parse(&text).unwrap();
    let huge = text.replace("page_size: Transparent", "page_size: Huge2MiB");
    parse(&huge).unwrap();
    let backing_start = huge.find("backing: Memfd(").unwrap();
    let backing_end = backing_start + huge[backing_start..].find(")),").unwrap() + 3;
    let file_backed = format!("{}backing: File,{}", &huge[..backing_start], &huge[backing_end..]);
    let e = parse(&file_backed).unwrap_err();
    assert!(e.to_string().contains("needs the default memfd backing"), "{e}");
    let open_to_all = huge.replace("permissions: 384,", "permissions: 438,");
    assert_ne!(open_to_all, huge, "the config records permissions 0o600 as 384");
    let e = parse(&open_to_all).unwrap_err();
    assert!(e.to_string().contains("SIGBUS"), "{e}");
    let unknown = text.replace("page_size: Transparent", "page_size: Huge64KiB");
    let e = parse(&unknown).unwrap_err();
    assert!(e.to_string().contains("Huge64KiB"), "{e}");
}
