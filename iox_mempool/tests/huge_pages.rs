//! Payloads on huge pages: a hugetlb memfd lives on the pages asked for (the kernel
//! maps it with them), an opener expecting other pages refuses it, a shortage is an
//! error saying how many pages are needed and how to reserve them, and transparent
//! huge pages report what the kernel gave. Tests needing reserved 2 MiB pages skip
//! (saying so) where none are free.

use std::path::PathBuf;

use iox_mempool::memfd::{MemfdError, create_memfd, open_memfd};
use iox_mempool::pages::{self, PageSize};
use iox_mempool::segment::{Access, CreateSegmentError};
use iox_mempool::{MemoryType, Owner, Pool, PoolLayout};

const MIB2: usize = 2 << 20;

/// The tests that take huge pages run one at a time: the shortage test holds every
/// free page for a moment while the kernel tries to allocate more than there are.
static PAGES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    PAGES.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_hugetlb_payload_is_mapped_with_huge_pages_and_refused_as_another_size() {
    let _one = one_at_a_time();
    if !iox_testkit::huge_pages_or_skip(
        "a_hugetlb_payload_is_mapped_with_huge_pages_and_refused_as_another_size",
        2,
    ) {
        return;
    }
    let (seg, id) = create_memfd("huge", 2 * MIB2, PageSize::Huge2MiB).unwrap();
    // SAFETY: the mapping is 4 MiB, read-write, ours alone.
    unsafe { seg.as_ptr().add(MIB2 + 5).write(7) };
    let mapped = pages::mapped_here(seg.as_ptr() as usize)
        .unwrap()
        .expect("our mapping is in smaps");
    assert_eq!(mapped.kernel_page, MIB2 as u64, "{mapped:?}");
    assert_eq!(
        mapped.huge,
        2 * MIB2 as u64,
        "allocated in full at creation: {mapped:?}"
    );
    assert!(
        seg.file().set_len(8 * MIB2 as u64).is_err(),
        "sealed against growing"
    );

    let label = || PathBuf::from("/proc/x/fd/y");
    let again = open_memfd(
        seg.file().try_clone().unwrap(),
        label(),
        Access::ReadOnly,
        (id, PageSize::Huge2MiB),
    )
    .unwrap();
    // SAFETY: 4 MiB mapped read-only; written above through the other mapping.
    assert_eq!(unsafe { again.as_ptr().add(MIB2 + 5).read() }, 7);
    for wrong in [PageSize::Base, PageSize::Transparent, PageSize::Huge1GiB] {
        let e = open_memfd(
            seg.file().try_clone().unwrap(),
            label(),
            Access::ReadOnly,
            (id, wrong),
        )
        .unwrap_err();
        assert!(matches!(e, MemfdError::WrongPageSize { .. }), "{wrong:?}: {e}");
        assert!(e.to_string().contains("2 MiB hugetlb pages"), "{e}");
    }
    // And a base-page memfd is not taken for a huge one.
    let (base, base_id) = create_memfd("base", 2 * MIB2, PageSize::Base).unwrap();
    let e = open_memfd(
        base.file().try_clone().unwrap(),
        label(),
        Access::ReadOnly,
        (base_id, PageSize::Huge2MiB),
    )
    .unwrap_err();
    assert!(matches!(e, MemfdError::WrongPageSize { .. }), "{e}");
    assert!(e.to_string().contains("base pages"), "{e}");
}

#[test]
fn a_pool_on_huge_pages_loans_and_pins() {
    let _one = one_at_a_time();
    if !iox_testkit::huge_pages_or_skip("a_pool_on_huge_pages_loans_and_pins", 2) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = PoolLayout::new(&[(64, 8), (1 << 20, 3)])
        .unwrap()
        .on_pages(PageSize::Huge2MiB)
        .unwrap();
    assert_eq!(
        layout.payload_len(),
        2 * MIB2,
        "3 MiB and 512 B of chunks, rounded up to two pages"
    );
    let (payload, _) = create_memfd("pool", layout.payload_len(), PageSize::Huge2MiB).unwrap();
    let pool = std::sync::Arc::new(
        Pool::create_with_payload(dir.path(), "h", &layout, MemoryType::Locked, 0o600, 7, payload).unwrap(),
    );
    let pin = pool.pin().unwrap();
    assert!(pin.is_pinned());
    let me = Owner::new(0).unwrap();
    let mut hint = 0;
    let big = pool.loan(1 << 20, &mut hint, me).unwrap();
    let (ptr, len) = pool.chunk(big).unwrap();
    assert_eq!(len, 1 << 20);
    // SAFETY: the chunk is loaned to us, `len` bytes.
    unsafe { ptr.write_bytes(3, len) };
    pool.book().release(big, me).unwrap();
}

#[test]
fn too_few_huge_pages_is_an_error_that_says_how_to_reserve_them() {
    let _one = one_at_a_time();
    let Some(reserve) = PageSize::Huge2MiB.reserve() else {
        iox_testkit::skip(
            "too_few_huge_pages_is_an_error_that_says_how_to_reserve_them",
            iox_testkit::REQUIRE_HUGE_PAGES,
            "this kernel has no 2 MiB huge pages",
        );
        return;
    };
    // More pages than the machine has reserved or may add, so it fails however many
    // other tests hold now.
    let pages = reserve.total + reserve.overcommit + 1;
    let e = create_memfd("short", pages as usize * MIB2, PageSize::Huge2MiB).unwrap_err();
    let CreateSegmentError::HugePagesShort { pages: p, advice, .. } = &e else {
        panic!("expected HugePagesShort, got {e}");
    };
    assert_eq!(*p, PageSize::Huge2MiB);
    let text = e.to_string();
    eprintln!("{text}");
    assert!(
        text.contains(&format!("it needs {pages} x 2 MiB pages")),
        "{text}"
    );
    assert!(text.contains("/proc/sys/vm/nr_hugepages"), "{text}");
    assert!(text.contains("hugepages="), "{text}");
    assert!(advice.contains("nr_hugepages"), "{advice}");
}

#[test]
fn transparent_huge_pages_report_what_the_kernel_gave() {
    let (seg, id) = create_memfd("thp", 4 * MIB2, PageSize::Transparent).unwrap();
    let mapped = pages::mapped_here(seg.as_ptr() as usize)
        .unwrap()
        .expect("our mapping is in smaps");
    assert_eq!(mapped.size, 4 * MIB2 as u64);
    assert_eq!(
        mapped.resident,
        4 * MIB2 as u64,
        "populated at creation: {mapped:?}"
    );
    assert!(mapped.huge <= mapped.resident, "{mapped:?}");
    let setting =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").unwrap_or_default();
    if setting.contains("[never]") || setting.contains("[deny]") {
        assert_eq!(
            mapped.huge, 0,
            "shared-memory huge pages are off ({setting:?}): {mapped:?}"
        );
    }
    eprintln!(
        "transparent: {} of {} bytes on huge pages (shmem_enabled: {})",
        mapped.huge,
        mapped.size,
        setting.trim()
    );
    // Not hugetlb, so an opener expecting reserved pages refuses it.
    let e = open_memfd(
        seg.file().try_clone().unwrap(),
        PathBuf::from("t"),
        Access::ReadOnly,
        (id, PageSize::Huge2MiB),
    )
    .unwrap_err();
    assert!(matches!(e, MemfdError::WrongPageSize { .. }), "{e}");
    open_memfd(
        seg.file().try_clone().unwrap(),
        PathBuf::from("t"),
        Access::ReadOnly,
        (id, PageSize::Transparent),
    )
    .unwrap();
}

#[test]
fn layouts_on_huge_pages_round_the_pool_not_the_chunks_and_keep_base_layouts_as_they_were() {
    let base = PoolLayout::new(&[(100, 10)]).unwrap();
    let text = ron::to_string(&base).unwrap();
    assert!(!text.contains("page_size"), "{text}");
    let huge = base.clone().on_pages(PageSize::Huge1GiB).unwrap();
    assert_eq!(huge.payload_len(), 1 << 30);
    assert_eq!(huge.classes(), base.classes());
    let text = ron::to_string(&huge).unwrap();
    assert!(text.contains("page_size:Huge1GiB"), "{text}");
    let back: PoolLayout = ron::from_str(&text).unwrap();
    assert_eq!(back, huge);
    assert_eq!(back.hash(), huge.hash());
    assert_ne!(huge.hash(), base.hash());
    // Alignment up to the page size is allowed on huge pages.
    assert!(PoolLayout::with_alignment(MIB2, &[(10, 2)]).is_err());
    let aligned = PoolLayout::with_alignment(4096, &[(10, 2)])
        .unwrap()
        .on_pages(PageSize::Huge2MiB)
        .unwrap();
    assert_eq!(aligned.payload_len(), MIB2);
}
