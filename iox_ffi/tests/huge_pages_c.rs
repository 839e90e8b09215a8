//! Huge-page pools through the C ABI and the C++ layer, across real processes:
//! - a C program creates a service on 2 MiB huge pages (`IoxPubSubOptions::page_size`,
//!   `tests/programs/c_huge_pages.c`) and publishes a frame of about 1 MiB; a C++
//!   program opens it with `iox::Options::page_size` (`tests/programs/cpp_huge_pages.cpp`),
//!   receives it and checks every byte; both ports' pool info say 2 MiB pages, and so
//!   does this process's view of the service;
//! - the refusals from C: an `IoxPageSize` that is none (`IOX_STATUS_INVALID_ARGUMENT`),
//!   more pages than the machine may have (`IOX_STATUS_NO_HUGE_PAGES`, the message
//!   saying how to reserve them, nothing left behind), huge pages of device memory, and
//!   a 4 KiB service opened asking for 2 MiB pages (`IOX_STATUS_OPEN_FAILED`).
//!
//! The first needs free 2 MiB pages (`iox_testkit::huge_pages_or_skip`); otherwise it
//! builds the programs (the API compiles) and says why it skips. Processes synchronise
//! through their output and the service's port counts.

use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use iox_service::{PageSize, Service};
use iox_testkit::{Reaped, wait_ok};

mod common;
use common::build;

const LIMIT: Duration = Duration::from_secs(60);
/// The frame's length: about 1 MiB, not a whole number of pages.
const FRAME: u64 = (1 << 20) - 4099;
/// Pages the smallest pool of 1 MiB slices takes, with room to spare.
const POOL_PAGES: u64 = 16;

/// One test at a time takes huge pages (the refusals' failed create holds every free
/// one for a moment, which would starve the other's create) and builds its programs
/// (both build the C one: one must not run it while the other writes it).
static PAGES: Mutex<()> = Mutex::new(());

/// `program` with its output piped, with the library it was built against.
fn command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd
}

/// The next line a program printed (its stderr, above, says why there is none).
fn line(lines: &mut Lines<BufReader<ChildStdout>>, program: &str) -> String {
    lines
        .next()
        .unwrap_or_else(|| panic!("{program} printed nothing more (its stderr is above)"))
        .unwrap()
}

const FRAME_TEST: &str = "a_c_publisher_on_2mib_pages_feeds_a_cpp_subscriber";

#[test]
fn a_c_publisher_on_2mib_pages_feeds_a_cpp_subscriber() {
    // Locked first: both tests build the same C program, and one must not run it while
    // the other writes it.
    let _one = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    let c = build("tests/programs/c_huge_pages.c", "c_huge_pages", &[]);
    let cpp = build("tests/programs/cpp_huge_pages.cpp", "cpp_huge_pages", &[]);
    if !iox_testkit::huge_pages_or_skip(FRAME_TEST, POOL_PAGES) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let name = "ffi/huge/frames";
    let mut publisher = command(&c)
        .arg("publish")
        .arg(root)
        .args([name, &FRAME.to_string()])
        .spawn()
        .expect("start the C publisher");
    let mut from_c = BufReader::new(publisher.stdout.take().unwrap()).lines();
    let publisher = Reaped::new(publisher);
    let created = line(&mut from_c, "c_huge_pages");
    let pages: Vec<u64> = created
        .strip_prefix("created ")
        .unwrap_or_else(|| panic!("c_huge_pages: {created:?}"))
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(
        pages[0],
        pages[1] * PageSize::Huge2MiB.bytes() as u64,
        "{created}"
    );
    assert!(pages[1] <= POOL_PAGES, "the pool takes {} pages", pages[1]);

    // What C recorded, as Rust sees it.
    let svc = Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .page_size(PageSize::Huge2MiB)
        .open()
        .unwrap();
    let info = svc.pool_info();
    assert_eq!(info.page_size, PageSize::Huge2MiB);
    assert_eq!(info.len as u64, pages[0]);
    drop(svc);

    let mut subscriber = command(&cpp)
        .arg(root)
        .args([name, &FRAME.to_string()])
        .spawn()
        .expect("start the C++ subscriber");
    let mut from_cpp = BufReader::new(subscriber.stdout.take().unwrap()).lines();
    let subscriber = Reaped::new(subscriber);
    assert_eq!(line(&mut from_cpp, "cpp_huge_pages"), "subscribed");
    assert_eq!(line(&mut from_c, "c_huge_pages"), "sent");
    assert_eq!(line(&mut from_cpp, "cpp_huge_pages"), format!("received {FRAME}"));
    wait_ok(subscriber.into_inner(), LIMIT);
    wait_ok(publisher.into_inner(), LIMIT);
    assert!(
        iox_testkit::wait_until(LIMIT, || std::fs::read_dir(root).unwrap().next().is_none()),
        "the service's files outlived its processes"
    );
}

#[test]
fn c_is_refused_unknown_page_sizes_too_few_huge_pages_and_a_page_size_the_service_lacks() {
    let _one = PAGES.lock().unwrap_or_else(|e| e.into_inner());
    let c = build("tests/programs/c_huge_pages.c", "c_huge_pages", &[]);
    // More than the machine has reserved or may add: fails however many are free (0:
    // this kernel has no 2 MiB hugetlb pages, so any pool of them fails).
    let needed = PageSize::Huge2MiB
        .reserve()
        .map_or(0, |r| r.total + r.overcommit + 1);
    let dir = tempfile::tempdir().unwrap();
    let out = command(&c)
        .arg("refuse")
        .arg(dir.path())
        .arg(needed.to_string())
        .stderr(Stdio::piped())
        .output()
        .expect("run the C refusals");
    assert!(
        out.status.success(),
        "c_huge_pages refuse ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "refused\n");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "the refusals left files behind"
    );
}
