//! `iox show` and `iox clean` with pools on huge pages: `show` names the page size and
//! what the kernel gave each process that maps the pool (read from its `smaps`), and a
//! service whose only holder was SIGKILLed is cleaned like any other, its pages back
//! with the machine. Needs reserved 2 MiB pages for the hugetlb half (skipped, saying
//! so, where too few are free).

use std::path::{Path, PathBuf};
use std::time::Duration;

use iox_service::{PageSize, PubSubService, Service};
use iox_testkit::{Reaped, env, role, spawn_self, wait_until};

mod common;
use common::{code, iox, text};

const LIMIT: Duration = Duration::from_secs(30);

fn create(root: &Path, name: &str, pages: PageSize) -> PubSubService<[u8]> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<[u8]>()
        .max_slice_len(1 << 20)
        .max_publishers(1)
        .max_subscribers(1)
        .subscriber_buffer(1)
        .max_loans(1)
        .max_held(1)
        .page_size(pages)
        .create()
        .unwrap()
}

/// Child: creates the service on the pages `PAGES` names, holds a publisher, waits to
/// be killed.
fn holder() {
    let root = PathBuf::from(env::<String>("IOX_ROOT"));
    let pages: PageSize = env::<String>("PAGES").parse().unwrap();
    let svc = create(&root, &env::<String>("SERVICE"), pages);
    let _p = svc.publisher_builder().create().unwrap();
    loop {
        std::thread::park();
    }
}

fn spawn_holder(test: &str, root: &Path, name: &str, pages: PageSize) -> Reaped {
    let envs = [
        ("IOX_ROOT", root.display().to_string()),
        ("SERVICE", name.to_string()),
        ("PAGES", pages.short().to_string()),
    ];
    let child = Reaped::new(spawn_self(test, "holder", &envs));
    assert!(
        wait_until(LIMIT, || iox_service::inspect::inspect_in(root, name)
            .is_ok_and(|i| i.ports.iter().any(|p| p.phase == "active"))),
        "holder of {name} did not come up"
    );
    child
}

fn free_pages() -> u64 {
    PageSize::Huge2MiB.reserve().map_or(0, |r| r.free)
}

#[test]
fn show_names_the_pages_the_kernel_gave_and_clean_removes_a_killed_holders_service() {
    const TEST: &str = "show_names_the_pages_the_kernel_gave_and_clean_removes_a_killed_holders_service";
    if role().as_deref() == Some("holder") {
        holder();
    }
    if !iox_testkit::huge_pages_or_skip(TEST, 2) {
        return;
    }
    let before = free_pages();
    let root = tempfile::tempdir().unwrap();
    let holder = spawn_holder(TEST, root.path(), "huge/show", PageSize::Huge2MiB);
    let pid = holder.id();
    let out = iox(root.path(), &["show", "huge/show"]);
    let shown = text(&out);
    assert_eq!(code(&out), 0, "{shown}");
    assert!(shown.contains("pages     2 MiB (hugetlb)"), "{shown}");
    assert!(
        shown.contains(&format!(
            "pid {pid}: 4.0 MiB resident of 4.0 MiB, mapped with 2.0 MiB pages"
        )),
        "{shown}"
    );
    let json = text(&iox(root.path(), &["show", "huge/show", "--json"]));
    assert!(json.contains("\"kernel_page\": 2097152"), "{json}");

    holder.kill();
    let out = iox(root.path(), &["clean"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        std::fs::read_dir(root.path()).unwrap().next().is_none(),
        "clean left files: {}",
        text(&out)
    );
    assert!(
        wait_until(LIMIT, || free_pages() >= before),
        "the killed holder's pages never went back ({} free, {before} before)",
        free_pages()
    );
}

#[test]
fn show_reports_transparent_huge_pages_as_given() {
    const TEST: &str = "show_reports_transparent_huge_pages_as_given";
    if role().as_deref() == Some("holder") {
        holder();
    }
    let root = tempfile::tempdir().unwrap();
    let holder = spawn_holder(TEST, root.path(), "huge/thp", PageSize::Transparent);
    let shown = text(&iox(root.path(), &["show", "huge/thp"]));
    assert!(
        shown.contains("pages     transparent huge pages (2 MiB, best effort)"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("pid {}: 4.0 MiB resident of 4.0 MiB, ", holder.id())),
        "{shown}"
    );
    assert!(
        shown.contains("on transparent huge pages (the kernel gave them)"),
        "{shown}"
    );
    println!("{shown}");
}
