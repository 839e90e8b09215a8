//! Fuzzing, proptest-style and bounded so it runs in CI. Every case must end in an
//! outcome named here, never a panic or a hang:
//!
//! - The static-config parser on arbitrary text, on random byte edits of a valid
//!   config, and on structured mutations deep in a valid config (a value replaced, a
//!   field deleted or duplicated, a number negated or grown, the text truncated, the
//!   version changed). Each ends in `Ok` (which must pass `check` and round-trip) or
//!   in a `ConfigError` variant; for each mutation class the variant is asserted
//!   where it is certain. The test also measures how many cases the parser got past
//!   the first token with, so the generator cannot silently degrade into prefix junk.
//! - Opening, recovering and using a live service whose dynamic segment and pool
//!   bookkeeping were overwritten with random bytes, under a watchdog: each step ends
//!   in `Ok` or in a listed error variant, and afterwards the root recovers: a fresh
//!   `open_or_create` works, carries a sample, and its pool is full again once the
//!   ports drop.
//!
//! `PROPTEST_CASES=N` runs more cases.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use iox_service::{
    ConfigError, LoanError, OpenError, PortCreateError, ReceiveError, SendError, Service, ServiceName,
    StaticConfig,
};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};

/// How long one case of the segment fuzz may take before it counts as a hang.
const WATCHDOG: Duration = Duration::from_secs(30);

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `n` cases, no failure persistence (these runners have no source file to name).
fn quiet(n: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(n)
    }
}

/// A valid config (pretty RON, one field per line, nested structs and a list), made
/// once.
fn valid_config_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let svc = Service::named("fuzz/config")
            .unwrap()
            .root(dir.path())
            .publish_subscribe::<[u32]>()
            .size_classes(&[(64, 86), (4096, 86)])
            .create()
            .unwrap();
        svc.static_config().to_ron()
    })
}

/// The outcome of one parse, by variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    Malformed,
    UnsupportedVersion,
    Invalid,
}

/// Parses `text`; panics on a variant `parse` can never return (it reads no file), and
/// checks that whatever parses passes `check` and round-trips. Returns the outcome
/// and whether the parser got past the first token (`Ok`, a typed complaint about a
/// parsed config, or a syntax error located after line 1).
fn parse(text: &str) -> Result<(Outcome, bool, Option<ConfigError>), TestCaseError> {
    match StaticConfig::parse(text, Path::new("fuzz.service")) {
        Ok(config) => {
            prop_assert!(config.check().is_ok(), "parsed but fails check: {config:?}");
            let again = StaticConfig::parse(&config.to_ron(), Path::new("again")).unwrap();
            prop_assert_eq!(again, config);
            Ok((Outcome::Ok, true, None))
        }
        Err(e) => {
            let (outcome, deep) = match &e {
                ConfigError::Malformed { message, .. } => {
                    // The message starts with the parser's position, `line:col`: a
                    // diagnostic only, used for the depth statistic, never asserted.
                    let line: usize = message
                        .split(':')
                        .next()
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(1);
                    (Outcome::Malformed, line > 1)
                }
                ConfigError::UnsupportedVersion { .. } => (Outcome::UnsupportedVersion, true),
                ConfigError::Invalid { .. } => (Outcome::Invalid, true),
                other => return Err(TestCaseError::fail(format!("parse cannot fail so: {other:?}"))),
            };
            Ok((outcome, deep, Some(e)))
        }
    }
}

/// The lines of the valid config that hold one scalar field (`key: value,`), with
/// their key and value: top-level fields and those nested in the payload, the layout
/// and its classes, and the memfd identity.
fn leaf_lines() -> &'static [(usize, String, String)] {
    static LEAVES: OnceLock<Vec<(usize, String, String)>> = OnceLock::new();
    LEAVES.get_or_init(|| {
        valid_config_text()
            .lines()
            .enumerate()
            .filter_map(|(i, line)| {
                let (key, value) = line.trim().strip_suffix(',')?.split_once(": ")?;
                let nested = value.ends_with('(') || value.ends_with('[') || value.contains('(');
                (!nested).then(|| (i, key.to_owned(), value.to_owned()))
            })
            .collect()
    })
}

/// What replaces a value.
#[derive(Debug, Clone)]
enum NewValue {
    Int(i64),
    /// Larger than any integer field (more than 64 bits).
    Huge,
    Str,
    Ident,
    Float,
}

impl NewValue {
    fn text(&self) -> String {
        match self {
            NewValue::Int(n) => n.to_string(),
            NewValue::Huge => "100000000000000000000000".into(),
            NewValue::Str => "\"fuzz\"".into(),
            NewValue::Ident => "Fuzz".into(),
            NewValue::Float => "1.5".into(),
        }
    }
}

/// One mutation of the valid config. Leaf indices are taken modulo the number of
/// scalar lines.
#[derive(Debug, Clone)]
enum Mutation {
    Replace(prop::sample::Index, NewValue),
    Delete(prop::sample::Index),
    Duplicate(prop::sample::Index),
    Negate(prop::sample::Index),
    /// Multiply a number by 2^k.
    Grow(prop::sample::Index, u32),
    /// Cut the text before its final `)`.
    Truncate(prop::sample::Index),
    Version(u32),
    /// Random byte replacements, insertions and removals anywhere.
    Bytes(Vec<(prop::sample::Index, u8, u8)>),
}

impl Mutation {
    fn class(&self) -> &'static str {
        match self {
            Mutation::Replace(..) => "replace",
            Mutation::Delete(_) => "delete",
            Mutation::Duplicate(_) => "duplicate",
            Mutation::Negate(_) => "negate",
            Mutation::Grow(..) => "grow",
            Mutation::Truncate(_) => "truncate",
            Mutation::Version(_) => "version",
            Mutation::Bytes(_) => "bytes",
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let idx = any::<prop::sample::Index>;
    let value = prop_oneof![
        any::<i64>().prop_map(NewValue::Int),
        (0i64..100_000).prop_map(NewValue::Int),
        Just(NewValue::Huge),
        Just(NewValue::Str),
        Just(NewValue::Ident),
        Just(NewValue::Float),
    ];
    prop_oneof![
        (idx(), value).prop_map(|(i, v)| Mutation::Replace(i, v)),
        idx().prop_map(Mutation::Delete),
        idx().prop_map(Mutation::Duplicate),
        idx().prop_map(Mutation::Negate),
        (idx(), 1u32..80).prop_map(|(i, k)| Mutation::Grow(i, k)),
        idx().prop_map(Mutation::Truncate),
        any::<u32>().prop_map(Mutation::Version),
        prop::collection::vec((idx(), any::<u8>(), 0u8..3), 1..8).prop_map(Mutation::Bytes),
    ]
}

/// Applies `m`; returns the text and the outcome it must have, if certain.
fn apply(m: &Mutation) -> (String, Option<Outcome>) {
    let base = valid_config_text();
    let mut lines: Vec<String> = base.lines().map(str::to_owned).collect();
    let leaves = leaf_lines();
    let leaf = |i: &prop::sample::Index| &leaves[i.index(leaves.len())];
    let numeric = |i: &prop::sample::Index| {
        // The leaf at or after `i` whose value is a number (there are many).
        let start = i.index(leaves.len());
        (0..leaves.len())
            .map(|k| &leaves[(start + k) % leaves.len()])
            .find(|(_, _, v)| v.parse::<u64>().is_ok())
            .expect("numeric fields")
    };
    let set = |lines: &mut Vec<String>, (line, key, _): &(usize, String, String), value: &str| {
        let indent = lines[*line].len() - lines[*line].trim_start().len();
        lines[*line] = format!("{}{key}: {value},", " ".repeat(indent));
    };
    let joined = |lines: &[String]| lines.join("\n") + "\n";
    match m {
        Mutation::Replace(i, v) => {
            let target = leaf(i);
            set(&mut lines, target, &v.text());
            let was_number = target.2.parse::<u64>().is_ok();
            let expect = match v {
                // Every numeric field is unsigned, at most 64 bits.
                NewValue::Huge if was_number => Some(Outcome::Malformed),
                NewValue::Int(n) if *n < 0 && was_number => Some(Outcome::Malformed),
                NewValue::Str | NewValue::Float if was_number => Some(Outcome::Malformed),
                // An unknown identifier where an enum or number is expected.
                NewValue::Ident if target.1 != "name" && target.1 != "element" => Some(Outcome::Malformed),
                _ => None,
            };
            (joined(&lines), expect)
        }
        Mutation::Delete(i) => {
            lines.remove(leaf(i).0);
            (joined(&lines), Some(Outcome::Malformed))
        }
        Mutation::Duplicate(i) => {
            let (line, ..) = leaf(i);
            lines.insert(*line, lines[*line].clone());
            (joined(&lines), Some(Outcome::Malformed))
        }
        Mutation::Negate(i) => {
            let target = numeric(i);
            let v = &target.2;
            set(&mut lines, target, &format!("-{v}"));
            let expect = (v != "0").then_some(Outcome::Malformed);
            (joined(&lines), expect)
        }
        Mutation::Grow(i, k) => {
            let target = numeric(i);
            let grown = u128::from(target.2.parse::<u64>().unwrap()) << k;
            set(&mut lines, target, &grown.to_string());
            let expect = (grown > u128::from(u64::MAX)).then_some(Outcome::Malformed);
            (joined(&lines), expect)
        }
        Mutation::Truncate(at) => {
            let end = base.rfind(')').unwrap();
            let mut cut = at.index(end);
            while !base.is_char_boundary(cut) {
                cut -= 1;
            }
            (base[..cut].to_owned(), Some(Outcome::Malformed))
        }
        Mutation::Version(v) => {
            let current = iox_service::static_config::CONFIG_VERSION;
            let text = base.replacen(&format!("version: {current},"), &format!("version: {v},"), 1);
            let expect = if *v == current {
                Outcome::Ok
            } else {
                Outcome::UnsupportedVersion
            };
            (text, Some(expect))
        }
        Mutation::Bytes(edits) => {
            let mut bytes = base.as_bytes().to_vec();
            for (at, byte, op) in edits {
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = *byte,
                    1 => bytes.insert(i, *byte),
                    _ => {
                        bytes.remove(i);
                    }
                }
            }
            (String::from_utf8_lossy(&bytes).into_owned(), None)
        }
    }
}

#[test]
fn parser_on_arbitrary_text_ends_in_a_config_error_or_a_round_trip() {
    let mut runner = TestRunner::new(quiet(cases(2048)));
    runner
        .run(&"\\PC{0,600}", |text| {
            let (outcome, ..) = parse(&text)?;
            // Text that is not RON at all is malformed; anything else was a config.
            if !text.contains('(') {
                prop_assert_eq!(outcome, Outcome::Malformed, "{:?}", text);
            }
            Ok(())
        })
        .unwrap();
}

/// Per mutation class: cases, cases past the first token, outcomes.
type ClassStats = (u32, u32, BTreeMap<Outcome, u32>);

#[test]
fn parser_on_mutated_configs_ends_in_the_expected_variant() {
    assert!(
        leaf_lines().len() >= 20,
        "the valid config lost its scalar fields: {}",
        valid_config_text()
    );
    let n = cases(2048);
    let stats: RefCell<BTreeMap<&str, ClassStats>> = Default::default();
    let mut runner = TestRunner::new(quiet(n));
    runner
        .run(&mutation(), |m| {
            let (text, expected) = apply(&m);
            let (outcome, deep, error) = parse(&text)?;
            if let Some(expected) = expected {
                prop_assert_eq!(outcome, expected, "{:?} gave {:?}\n{}", m, error, text);
            }
            if let (Mutation::Version(v), Some(ConfigError::UnsupportedVersion { found, .. })) = (&m, &error)
            {
                prop_assert_eq!(found, v);
            }
            let mut stats = stats.borrow_mut();
            let entry = stats.entry(m.class()).or_default();
            entry.0 += 1;
            entry.1 += u32::from(deep);
            *entry.2.entry(outcome).or_default() += 1;
            Ok(())
        })
        .unwrap();
    let stats = stats.into_inner();
    println!("mutation class: cases, past the first token, outcomes");
    for (class, (count, deep, outcomes)) in &stats {
        println!("  {class:<10} {count:>5} {deep:>5} {outcomes:?}");
    }
    // The generator must keep reaching into the document: every class occurs, and
    // most cases get past the first token. (Measured only for the cases that passed,
    // so it holds once the run got here.)
    let total: u32 = stats.values().map(|s| s.0).sum();
    let deep: u32 = stats.values().map(|s| s.1).sum();
    if n >= 256 {
        assert_eq!(stats.len(), 8, "a mutation class never occurred: {stats:?}");
        let outcomes: std::collections::BTreeSet<_> = stats.values().flat_map(|s| s.2.keys()).collect();
        assert_eq!(outcomes.len(), 4, "an outcome never occurred: {stats:?}");
    }
    assert!(
        deep * 10 >= total * 8,
        "only {deep} of {total} cases got past the first token"
    );
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

fn loan_ok(r: &Result<(), LoanError>) -> bool {
    matches!(
        r,
        Ok(()) | Err(LoanError::TooManyLoans { .. } | LoanError::Pool(_))
    )
}

fn send_ok(r: &Result<usize, SendError>) -> bool {
    // A damaged lifecycle word reads as a removed service.
    matches!(
        r,
        Ok(_) | Err(SendError::QueueFull { .. } | SendError::ServiceRemoved)
    )
}

fn receive_ok<T>(r: &Result<T, ReceiveError>) -> bool {
    matches!(
        r,
        Ok(_)
            | Err(ReceiveError::TooManyHeld { .. }
                | ReceiveError::Corrupt { .. }
                | ReceiveError::ServiceRemoved)
    )
}

/// What opening a service with damaged segments may end in, besides `Ok`: the
/// damage reported, the service judged dead and removed, or the limits of the
/// (damaged) user table. Never a config, payload or node error: those files are
/// intact.
fn open_error_ok(e: &OpenError) -> bool {
    matches!(
        e,
        OpenError::Corrupt { .. }
            | OpenError::TimedOut { .. }
            | OpenError::Segment { .. }
            | OpenError::Pool { .. }
            | OpenError::TooManyUsers { .. }
            | OpenError::MemfdUnreachable { .. }
            | OpenError::DoesNotExist(_)
    )
}

type Writes = Vec<(usize, Vec<u8>)>;

/// Cases whose service had to be removed by name before the root worked again, by
/// the error `open_or_create` gave.
static REMOVED_BY_NAME: std::sync::Mutex<BTreeMap<&str, u32>> = std::sync::Mutex::new(BTreeMap::new());

/// One case of the segment fuzz; panics (with what happened) on an outcome not listed.
fn damage_then_open_recover_and_use(dynamic_writes: Writes, chunks_writes: Writes, words: Vec<(usize, u64)>) {
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
    let word_writes: Vec<_> = words
        .iter()
        .map(|(i, w)| (i * 8, w.to_le_bytes().to_vec()))
        .collect();
    overwrite(&dynamic, &word_writes);
    overwrite(&root.join(format!("{stem}.chunks")), &chunks_writes);
    // The live ports keep working on what is there, or report typed errors.
    for i in 0..8 {
        match p.loan_uninit() {
            Ok(sample) => {
                let sent = sample.write_payload(i).send();
                assert!(send_ok(&sent), "send: {sent:?}");
            }
            Err(e) => assert!(loan_ok(&Err(e.clone())), "loan: {e:?}"),
        }
        let got = s.receive().map(|v| v.map(|v| *v));
        assert!(receive_ok(&got), "receive: {got:?}");
    }
    // Another handle opens it, or says why not.
    match builder().open() {
        Ok(other) => {
            let p2 = other.publisher_builder().create();
            let s2 = other.subscriber_builder().create();
            for port in [p2.as_ref().err(), s2.as_ref().err()].into_iter().flatten() {
                assert!(
                    matches!(
                        port,
                        PortCreateError::TooManyPorts { .. } | PortCreateError::ServiceRemoved { .. }
                    ),
                    "port create: {port:?}"
                );
            }
            if let (Ok(p2), Ok(s2)) = (p2, s2) {
                if let Ok(sample) = p2.loan_uninit() {
                    let sent = sample.write_payload(2).send();
                    assert!(send_ok(&sent), "send: {sent:?}");
                }
                let got = s2
                    .receive_timeout(Duration::from_millis(1))
                    .map(|v| v.map(|v| *v));
                assert!(receive_ok(&got), "receive: {got:?}");
            }
        }
        Err(e) => assert!(open_error_ok(&e), "open: {e:?}"),
    }
    // Recovery ends in a report or a typed error, never a panic.
    let _ = Service::cleanup_dead_in(root, NAME);
    let _ = Service::cleanup_all_dead_in(root);
    drop((p, s, keep));
    // Afterwards the root recovers: the service is opened or made afresh, carries a
    // sample, and (if created afresh) its pool is full once its ports drop.
    let _ = Service::cleanup_all_dead_in(root);
    let fresh = match builder().timeout(Duration::from_millis(200)).open_or_create() {
        Ok(svc) => svc,
        Err(iox_service::OpenOrCreateError::Open(e)) if open_error_ok(&e) => {
            // Damage the last user left behind (it could not tell it was the last, or
            // the dead-user judgement is stuck: TimedOut) stays until the service is
            // removed by name; that clears it.
            assert!(
                matches!(
                    e,
                    OpenError::Corrupt { .. }
                        | OpenError::Pool { .. }
                        | OpenError::Segment { .. }
                        | OpenError::TimedOut { .. }
                ),
                "open_or_create after the users left: {e:?}"
            );
            let variant = match e {
                OpenError::Corrupt { .. } => "Corrupt",
                OpenError::Pool { .. } => "Pool",
                OpenError::Segment { .. } => "Segment",
                _ => "TimedOut",
            };
            *REMOVED_BY_NAME.lock().unwrap().entry(variant).or_default() += 1;
            Service::remove_in(root, NAME).unwrap_or_else(|r| panic!("remove after {e:?}: {r:?}"));
            builder()
                .open_or_create()
                .unwrap_or_else(|e2| panic!("open_or_create after removing ({e:?}): {e2:?}"))
        }
        Err(e) => panic!("open_or_create after the users left: {e:?}"),
    };
    {
        let p = fresh.publisher_builder().create().unwrap();
        let s = fresh.subscriber_builder().create().unwrap();
        p.loan_uninit().unwrap().write_payload(77).send().unwrap();
        assert_eq!(
            s.receive().unwrap().map(|v| *v),
            Some(77),
            "the recovered service carries a sample"
        );
    }
    if fresh.is_creator() {
        let info = fresh.pool_info();
        assert_eq!(
            info.free_chunks(),
            info.total_chunks(),
            "pool full after the ports drop"
        );
    }
}

/// Runs `f` on a thread and fails if it does not finish within [`WATCHDOG`]; a panic
/// inside is passed on.
fn within_watchdog(what: String, f: impl FnOnce() + Send + 'static) -> Result<(), TestCaseError> {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(()) => {
            worker.join().unwrap();
            Ok(())
        }
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(TestCaseError::fail(format!("{what}: {message}")))
            }
            Ok(()) => Ok(()),
        },
        // The worker is left blocked; the test fails with the case.
        Err(RecvTimeoutError::Timeout) => Err(TestCaseError::fail(format!(
            "{what}: no outcome within {WATCHDOG:?} (hang)"
        ))),
    }
}

#[test]
fn damaged_segments_end_in_a_listed_outcome_and_the_root_recovers() {
    let config = ProptestConfig {
        cases: cases(256),
        // A hanging case takes the watchdog's time per shrink step.
        max_shrink_iters: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let strategy = (
        prop::collection::vec((0usize..8192, prop::collection::vec(any::<u8>(), 1..64)), 0..6),
        prop::collection::vec((0usize..4096, prop::collection::vec(any::<u8>(), 1..32)), 0..4),
        prop::collection::vec((0usize..1024, any::<u64>()), 0..16),
    );
    TestRunner::new(config)
        .run(&strategy, |(dynamic, chunks, words)| {
            let what = format!("dynamic {dynamic:?}, chunks {chunks:?}, words {words:?}");
            within_watchdog(what, move || {
                damage_then_open_recover_and_use(dynamic, chunks, words)
            })
        })
        .unwrap();
    println!(
        "cases whose service had to be removed by name afterwards: {:?}",
        REMOVED_BY_NAME.lock().unwrap()
    );
}
