//! Every committed corpus input through its target, in a plain test build (no fuzzer):
//! the reported crash inputs (`crash-*`) and everything the fuzzer kept stay handled.
//! A panic names the target and the file; every target has a corpus. An allocation
//! above `iox_fuzz::MAX_ALLOCATION` aborts the test, as it does the fuzzer.

use std::path::Path;

#[global_allocator]
static ALLOC: iox_fuzz::LimitedAlloc = iox_fuzz::LimitedAlloc;

#[test]
fn every_corpus_input_is_handled_by_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, target) in iox_fuzz::TARGETS {
        let dir = root.join(name);
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("target {name} has no corpus at {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "target {name}: an empty corpus");
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                panic!("target {name} panicked on {}", input.display());
            }
        }
    }
}
