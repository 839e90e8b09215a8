//! Fuzzing, proptest-style and bounded so it runs in CI: the static-config parser on
//! arbitrary and mutated text, and opening, recovering and using a service whose
//! dynamic segment and pool bookkeeping were overwritten with random bytes. The only
//! requirement is that nothing panics, hangs or faults: errors are fine.
//! `PROPTEST_CASES=N` runs more cases.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use iox_service::{Service, ServiceName, StaticConfig};
use proptest::prelude::*;

fn valid_config_text() -> String {
    let dir = tempfile::tempdir().unwrap();
    let svc = Service::named("fuzz/config")
        .unwrap()
        .root(dir.path())
        .publish_subscribe::<[u32]>()
        .size_classes(&[(64, 8), (4096, 4)])
        .create()
        .unwrap();
    svc.static_config().to_ron()
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(2048)))]

    #[test]
    fn parser_survives_arbitrary_text(text in "\\PC{0,600}") {
        let _ = StaticConfig::parse(&text, Path::new("fuzz.service"));
    }

    #[test]
    fn parser_survives_mutated_configs(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = valid_config_text().into_bytes();
        for (at, byte, op) in edits {
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => { bytes.remove(i); }
            }
        }
        bytes.truncate(cut.index(bytes.len() + 1).max(bytes.len() / 2));
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(config) = StaticConfig::parse(&text, Path::new("fuzz.service")) {
            // Whatever parses is checked: it must also survive a round trip.
            prop_assert!(config.check().is_ok());
            let again = StaticConfig::parse(&config.to_ron(), Path::new("again")).unwrap();
            prop_assert_eq!(again, config);
        }
    }
}

const NAME: &str = "fuzz/segments";

fn overwrite(path: &Path, writes: &[(usize, Vec<u8>)]) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    for (at, bytes) in writes {
        let at = at % len.max(1);
        let n = bytes.len().min(len - at);
        f.write_all_at(&bytes[..n], at as u64).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn open_recover_and_use_survive_random_segment_bytes(
        dynamic_writes in prop::collection::vec((0usize..8192, prop::collection::vec(any::<u8>(), 1..64)), 0..6),
        chunks_writes in prop::collection::vec((0usize..4096, prop::collection::vec(any::<u8>(), 1..32)), 0..4),
        words in prop::collection::vec((0usize..1024, any::<u64>()), 0..16),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let builder = || {
            Service::named(NAME)
                .unwrap()
                .root(root)
                .publish_subscribe::<u64>()
                .timeout(Duration::from_millis(20))
        };
        let keep = builder().create().unwrap();
        let p = keep.publisher_builder().create().unwrap();
        let s = keep.subscriber_builder().create().unwrap();
        p.loan_uninit().unwrap().write_payload(1).send().unwrap();
        let stem = ServiceName::new(NAME).unwrap().stem();
        let dynamic = root.join(format!("{stem}.dynamic"));
        overwrite(&dynamic, &dynamic_writes);
        // Whole aligned words too: plausible-looking node ids, indices and claims.
        let word_writes: Vec<_> = words.iter().map(|(i, w)| (i * 8, w.to_le_bytes().to_vec())).collect();
        overwrite(&dynamic, &word_writes);
        overwrite(&root.join(format!("{stem}.chunks")), &chunks_writes);
        // The live ports keep working on what is there, or report errors.
        for i in 0..8 {
            if let Ok(sample) = p.loan_uninit() {
                let _ = sample.write_payload(i).send();
            }
            let _ = s.receive();
        }
        if let Ok(other) = builder().open()
            && let (Ok(p2), Ok(s2)) = (other.publisher_builder().create(), other.subscriber_builder().create())
        {
            if let Ok(sample) = p2.loan_uninit() {
                let _ = sample.write_payload(2).send();
            }
            let _ = s2.receive_timeout(Duration::from_millis(1));
        }
        let _ = Service::cleanup_dead_in(root, NAME);
        let _ = Service::cleanup_all_dead_in(root);
        drop((p, s, keep));
    }
}
