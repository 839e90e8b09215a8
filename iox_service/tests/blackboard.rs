//! The blackboard across real processes: values written in one process read in
//! another, change listeners woken; a writer SIGKILLed in the middle of an update and
//! a reader SIGKILLed holding a guard (held there by gated stall points); keys and
//! types that do not match; and a soak of 4 writers and 8 readers in their own
//! processes under random SIGKILLs, every value checked against its checksum.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iox_service::{BlackboardService, CreateError, EntryError, OpenError, ReadError, Service, ZeroCopySafe};
use iox_testkit::{Gate, Reaped, Rng, env, role, spawn_self, wait_ok, wait_until};

const LIMIT: Duration = Duration::from_secs(60);

/// A value whose last field is a checksum of the others: a torn read shows.
#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Stamped {
    seq: u64,
    data: [u64; 6],
    check: u64,
}

impl Stamped {
    fn new(seq: u64) -> Self {
        let data = std::array::from_fn(|i| seq.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(i as u32 * 7));
        Self {
            seq,
            data,
            check: Self::sum(seq, &data),
        }
    }

    fn sum(seq: u64, data: &[u64; 6]) -> u64 {
        data.iter().fold(seq ^ 0xA5A5, |h, &d| h.rotate_left(13) ^ d)
    }

    fn whole(&self) -> bool {
        self.check == Self::sum(self.seq, &self.data)
    }
}

/// The blackboard of these tests: key 0 a `u64` counter, key 1 a `Stamped`.
fn board(root: &Path, name: &str, writers: u32) -> BlackboardService<u32> {
    Service::named(name)
        .unwrap()
        .root(root)
        .blackboard::<u32>()
        .max_writers(writers)
        .max_readers(8)
        .add::<u64>(0, 0)
        .add::<Stamped>(1, Stamped::new(0))
        .open_or_create()
        .unwrap()
}

fn scene() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    (dir, root)
}

fn child(test: &str, role: &str, root: &Path, envs: &[(&str, String)]) -> std::process::Child {
    let mut all = vec![("ROOT", root.display().to_string())];
    all.extend(envs.iter().cloned());
    spawn_self(test, role, &all)
}

#[test]
fn a_writer_in_another_process_updates_what_readers_read() {
    const TEST: &str = "a_writer_in_another_process_updates_what_readers_read";
    if role().as_deref() == Some("writer") {
        let root: PathBuf = env("ROOT");
        let b = board(&root, "bb/basic", 1);
        let w = b.writer_builder().create().unwrap();
        let (counter, stamped) = (w.entry::<u64>(&0).unwrap(), w.entry::<Stamped>(&1).unwrap());
        for i in 1..=100u64 {
            counter.update_with_copy(i).unwrap();
            let mut loan = stamped.loan_uninit().unwrap();
            loan.payload_mut().write(Stamped::new(i));
            // SAFETY: written in full just above.
            unsafe { loan.assume_init_update() }.unwrap();
        }
        return;
    }
    let (_dir, root) = scene();
    let b = board(&root, "bb/basic", 1);
    let reader = b.reader_builder().create().unwrap();
    let listener = b.listener_builder().create().unwrap();
    let counter = reader.entry::<u64>(&0).unwrap();
    let stamped = reader.entry::<Stamped>(&1).unwrap();
    assert_eq!(counter.get().unwrap(), 0, "the initial value");
    assert_eq!(counter.generation(), 1);
    assert!(!counter.has_changed());
    assert_eq!(*stamped.read().unwrap(), Stamped::new(0));

    wait_ok(child(TEST, "writer", &root, &[]), LIMIT);
    assert!(counter.has_changed());
    assert_eq!(counter.get().unwrap(), 100);
    assert_eq!(counter.generation(), 101, "one generation per update");
    let guard = stamped.read().unwrap();
    assert_eq!((*guard, guard.generation()), (Stamped::new(100), 101));
    assert!(
        matches!(stamped.read(), Err(ReadError::GuardHeld { .. })),
        "one guard per key"
    );
    assert_eq!(
        stamped.get().unwrap(),
        Stamped::new(100),
        "a copy while the guard lives"
    );
    drop(guard);
    // Both keys changed: the listener has both ids pending.
    let mut ids = Vec::new();
    listener.try_wait_all(|id| ids.push(id.as_value())).unwrap();
    ids.sort_unstable();
    assert_eq!(ids, vec![0, 1]);
    assert_eq!(b.event_id(&1).map(|e| e.as_value()), Some(1));
    assert_eq!(b.pins_of(1), Some(vec![]), "no pins left");
}

#[test]
fn an_update_in_another_process_wakes_a_waitset_on_the_change_listener() {
    const TEST: &str = "an_update_in_another_process_wakes_a_waitset_on_the_change_listener";
    if role().as_deref() == Some("writer") {
        let root: PathBuf = env("ROOT");
        let b = board(&root, "bb/waitset", 1);
        let w = b.writer_builder().create().unwrap();
        w.entry::<Stamped>(&1)
            .unwrap()
            .update_with_copy(Stamped::new(5))
            .unwrap();
        return;
    }
    let (_dir, root) = scene();
    let b = board(&root, "bb/waitset", 1);
    let reader = b.reader_builder().create().unwrap();
    let listener = b.listener_builder().create().unwrap();
    let waitset = iox_service::WaitSet::new().unwrap();
    let changes = waitset.attach_notification(&listener).unwrap();
    let child = child(TEST, "writer", &root, &[]);
    let mut woken = false;
    let result = waitset
        .wait_and_process_once_with_timeout(
            |id| {
                woken = id.has_event_from(&changes);
                iox_service::CallbackProgression::Stop
            },
            LIMIT,
        )
        .unwrap();
    assert!(woken, "the WaitSet woke for the change ({result:?})");
    assert_eq!(listener.try_wait_one().unwrap(), b.event_id(&1));
    assert_eq!(
        reader.entry::<Stamped>(&1).unwrap().get().unwrap(),
        Stamped::new(5)
    );
    wait_ok(child, LIMIT);
}

#[test]
fn a_writer_killed_in_the_middle_of_an_update_leaves_the_last_value() {
    const TEST: &str = "a_writer_killed_in_the_middle_of_an_update_leaves_the_last_value";
    if role().as_deref() == Some("writer") {
        let root: PathBuf = env("ROOT");
        let b = board(&root, "bb/killed-writer", 2);
        let w = b.writer_builder().create().unwrap();
        let e = w.entry::<Stamped>(&1).unwrap();
        e.update_with_copy(Stamped::new(1)).unwrap();
        // The next update stalls written but unpublished, holding the key's lock.
        let gate: PathBuf = env("GATE");
        iox_service::testing::stall_at(iox_service::testing::Stall::BlackboardBeforePublish, &gate);
        let mut loan = e.loan_uninit().unwrap();
        loan.payload_mut().write(Stamped {
            check: 0,
            ..Stamped::new(2)
        });
        // SAFETY: written in full just above.
        unsafe { loan.assume_init_update() }.unwrap();
        unreachable!("killed at the stall point");
    }
    let (dir, root) = scene();
    let b = board(&root, "bb/killed-writer", 2);
    let reader = b.reader_builder().create().unwrap();
    let entry = reader.entry::<Stamped>(&1).unwrap();
    let gate = Gate::new(dir.path(), "publish");
    let writer = Reaped::new(child(
        TEST,
        "writer",
        &root,
        &[("GATE", gate.path().display().to_string())],
    ));
    assert!(
        gate.wait_reached(LIMIT),
        "the writer never reached its stall point"
    );
    writer.kill();
    assert_eq!(entry.get().unwrap(), Stamped::new(1), "the last complete value");
    assert_eq!(entry.generation(), 2);
    // The next writer takes the dead writer's lock over and updates.
    let w = b.writer_builder().create().unwrap();
    let start = Instant::now();
    assert_eq!(
        w.entry::<Stamped>(&1)
            .unwrap()
            .update_with_copy(Stamped::new(3))
            .unwrap(),
        3
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "the dead holder was found within the wake interval"
    );
    assert_eq!(entry.get().unwrap(), Stamped::new(3));
}

#[test]
fn a_reader_killed_holding_a_guard_leaves_no_pin_after_recovery() {
    const TEST: &str = "a_reader_killed_holding_a_guard_leaves_no_pin_after_recovery";
    if role().as_deref() == Some("reader") {
        let root: PathBuf = env("ROOT");
        let b = board(&root, "bb/killed-reader", 1);
        let r = b.reader_builder().create().unwrap();
        let _guard = r.entry::<Stamped>(&1).unwrap().read().unwrap();
        unreachable!("killed at the stall point");
    }
    let (dir, root) = scene();
    let b = board(&root, "bb/killed-reader", 1);
    let gate = Gate::new(dir.path(), "pinned");
    let reader = Reaped::new(child(TEST, "reader", &root, &gate.env("blackboard-pinned")));
    assert!(
        gate.wait_reached(LIMIT),
        "the reader never reached its stall point"
    );
    assert_eq!(
        b.pins_of(1).unwrap().len(),
        1,
        "the reader pins the current buffer"
    );
    // Writers go on meanwhile, into other buffers.
    let w = b.writer_builder().create().unwrap();
    let e = w.entry::<Stamped>(&1).unwrap();
    for i in 1..=40 {
        e.update_with_copy(Stamped::new(i)).unwrap();
    }
    reader.kill();
    let report = Service::cleanup_dead_in(&root, "bb/killed-reader").unwrap();
    assert_eq!(report.ports, 1, "the dead reader's slot");
    assert_eq!(b.pins_of(1), Some(vec![]), "its pin was cleared");
    let r = b.reader_builder().create().unwrap();
    assert_eq!(r.entry::<Stamped>(&1).unwrap().get().unwrap(), Stamped::new(40));
}

#[test]
fn keys_and_types_that_do_not_match_are_refused() {
    let (_dir, root) = scene();
    let b = board(&root, "bb/mismatch", 1);
    let r = b.reader_builder().create().unwrap();
    let w = b.writer_builder().create().unwrap();
    let err = b.writer_builder().create().unwrap_err();
    assert!(
        err.to_string().contains("bb/mismatch") && err.to_string().contains("writer"),
        "a second writer of a one-writer blackboard: {err}"
    );
    let err = r.entry::<u64>(&7).unwrap_err();
    assert!(matches!(err, EntryError::NoSuchKey { .. }), "{err}");
    assert!(err.to_string().contains("[0, 1]"), "names the keys it has: {err}");
    let err = w.entry::<u32>(&0).unwrap_err();
    assert!(matches!(err, EntryError::WrongType { .. }), "{err}");
    assert!(
        err.to_string().contains("u64") && err.to_string().contains("u32"),
        "{err}"
    );

    let named = || Service::named("bb/mismatch").unwrap().root(&root);
    let err = named().blackboard::<u64>().open().unwrap_err();
    assert!(
        matches!(err, OpenError::IncompatibleLimit { what: "key type", .. }),
        "{err}"
    );
    let err = named().blackboard::<u32>().add::<u64>(9, 0).open().unwrap_err();
    assert!(
        matches!(err, OpenError::IncompatibleLimit { what: "no key", .. }),
        "{err}"
    );
    let err = named().blackboard::<u32>().add::<f64>(0, 0.0).open().unwrap_err();
    assert!(
        matches!(
            err,
            OpenError::IncompatibleLimit {
                what: "value type",
                ..
            }
        ),
        "{err}"
    );
    let err = named().blackboard::<u32>().max_writers(3).open().unwrap_err();
    assert!(
        matches!(
            err,
            OpenError::IncompatibleLimit {
                what: "max_writers",
                ..
            }
        ),
        "{err}"
    );
    let err = named().publish_subscribe::<u64>().open().unwrap_err();
    assert!(
        err.to_string().contains("blackboard"),
        "another pattern names it: {err}"
    );
    named().blackboard::<u32>().add::<u64>(0, 5).open().unwrap();

    let other = |n: &str| Service::named(n).unwrap().root(&root).blackboard::<u32>();
    let err = other("bb/none").create().unwrap_err();
    assert!(
        matches!(err, CreateError::InvalidSetting { .. }),
        "no keys: {err}"
    );
    let err = other("bb/twice")
        .add::<u8>(1, 0)
        .add::<u8>(1, 0)
        .create()
        .unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    let err = other("bb/big")
        .add::<u8>(1, 0)
        .max_readers(50)
        .create()
        .unwrap_err();
    assert!(matches!(err, CreateError::InvalidSetting { .. }), "{err}");
}

/// The soak's reader: reads both keys until told to stop, exits 3 on a torn value.
fn soak_reader(root: &Path) {
    let b = board(root, "bb/soak", 4);
    let r = b.reader_builder().create().unwrap();
    let e = r.entry::<Stamped>(&1).unwrap();
    let stop = root.join("../stop");
    let mut reads = 0u64;
    while !stop.exists() {
        for _ in 0..256 {
            let v = e.get().unwrap();
            let g = e.read().unwrap();
            if !v.whole() || !g.whole() {
                eprintln!("torn value: {v:?} / {:?}", *g);
                std::process::exit(3);
            }
            reads += 2;
        }
    }
    eprintln!("reader: {reads} reads");
}

/// The soak's writer: updates key 1 with increasing stamps until told to stop.
fn soak_writer(root: &Path, id: u64) {
    let b = board(root, "bb/soak", 4);
    let w = b.writer_builder().create().unwrap();
    let e = w.entry::<Stamped>(&1).unwrap();
    let stop = root.join("../stop");
    let mut i = id << 40;
    while !stop.exists() {
        for _ in 0..64 {
            i += 1;
            let mut loan = e.loan_uninit().unwrap();
            loan.payload_mut().write(Stamped::new(i));
            // SAFETY: written in full just above.
            unsafe { loan.assume_init_update() }.unwrap();
        }
    }
}

#[test]
fn four_writers_and_eight_readers_under_random_kills_never_see_a_torn_value() {
    const TEST: &str = "four_writers_and_eight_readers_under_random_kills_never_see_a_torn_value";
    match role().as_deref() {
        Some("reader") => return soak_reader(&env::<PathBuf>("ROOT")),
        Some("writer") => return soak_writer(&env::<PathBuf>("ROOT"), env("ID")),
        _ => {}
    }
    let (dir, root) = scene();
    let b = board(&root, "bb/soak", 4);
    let spawn = |role: &str, id: u64| Reaped::new(child(TEST, role, &root, &[("ID", id.to_string())]));
    let mut writers: Vec<Option<Reaped>> = (0..4).map(|i| Some(spawn("writer", i))).collect();
    let mut readers: Vec<Option<Reaped>> = (0..8).map(|i| Some(spawn("reader", i))).collect();
    let mut rng = Rng::new(0xB1AC_B0A2D);
    let mut kills = 0;
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        // Let the survivors run a little, in a bounded wait on their progress.
        let seen = b.generation(&1).unwrap();
        wait_until(Duration::from_millis(200), || {
            b.generation(&1).unwrap() > seen + 200
        });
        // None stops by itself before the end (a torn value exits 3, a failure 101).
        for (i, c) in writers.iter_mut().chain(readers.iter_mut()).flatten().enumerate() {
            if let Some(status) = c.try_wait() {
                panic!("soak process {i} stopped by itself: {status}");
            }
        }
        let (pool, role, id) = if rng.below(2) == 0 {
            (&mut writers, "writer", rng.below(4))
        } else {
            (&mut readers, "reader", rng.below(8))
        };
        // Killed first: its successor's port creation finds it dead and recovers it.
        let slot = id as usize;
        if let Some(mut old) = pool[slot].take() {
            // One that failed (a replacement refused its port, say) fails the soak,
            // even if it is the one picked to be killed.
            if let Some(status) = old.try_wait() {
                panic!("soak {role} {id} stopped by itself: {status}");
            }
            old.kill();
        }
        kills += 1;
        pool[slot] = Some(spawn(role, id + 100 * kills));
    }
    std::fs::write(dir.path().join("stop"), b"").unwrap();
    for (i, mut c) in writers.into_iter().chain(readers).flatten().enumerate() {
        assert!(
            wait_until(LIMIT, || c.try_wait().is_some()),
            "soak process {i} did not stop"
        );
        let status = c.try_wait().unwrap();
        assert!(
            status.success(),
            "soak process {i} ended with {status} (3: a torn value)"
        );
    }
    assert!(kills >= 5, "the soak killed {kills} processes");
    // Nothing is stuck: after recovery no pins, and a writer updates at once.
    Service::cleanup_dead_in(&root, "bb/soak").unwrap();
    for k in 0..2 {
        assert_eq!(b.pins_of(k), Some(vec![]), "key {k} pinned after recovery");
    }
    let w = b.writer_builder().create().unwrap();
    let before = b.generation(&1).unwrap();
    w.entry::<Stamped>(&1)
        .unwrap()
        .update_with_copy(Stamped::new(7))
        .unwrap();
    assert_eq!(b.generation(&1).unwrap(), before + 1);
    let r = b.reader_builder().create().unwrap();
    assert_eq!(r.entry::<Stamped>(&1).unwrap().get().unwrap(), Stamped::new(7));
}

/// Runs in a re-executed, single-threaded test process (see `tests/fork.rs`).
fn forked_child_leaves_the_parents_pins_and_loans() {
    let dir = tempfile::tempdir().unwrap();
    let b = board(dir.path(), "bb/fork", 1);
    let w = b.writer_builder().create().unwrap();
    let r = b.reader_builder().create().unwrap();
    let entry = r.entry::<Stamped>(&1).unwrap();
    let guard = entry.read().unwrap();
    let stamped = w.entry::<Stamped>(&1).unwrap();
    let loan = stamped.loan_uninit().unwrap();
    let pins = b.pins_of(1).unwrap();
    // SAFETY: a single-threaded process (re-executed for this test); the child only
    // drops its copies and reports.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let refused = (
            matches!(entry.get(), Err(ReadError::ForkedProcess)),
            matches!(
                stamped.update_with_copy(Stamped::new(9)),
                Err(iox_service::WriteError::UpdateInProgress { .. } | iox_service::WriteError::ForkedProcess)
            ),
            matches!(
                loan.write_and_update(Stamped::new(8)),
                Err(iox_service::WriteError::ForkedProcess)
            ),
        );
        drop(guard);
        let ok = refused == (true, true, true);
        if !ok {
            eprintln!("forked child: refused (get, update, publish) = {refused:?}");
        }
        // SAFETY: leaves the child at once, without the parent's exit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is a valid out pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's calls must be refused ({status:#x})"
    );
    assert_eq!(
        b.pins_of(1).unwrap(),
        pins,
        "the child's drop left the parent's guard pinned"
    );
    assert_eq!(entry.generation(), 1, "the child published nothing");
    assert_eq!(*guard, Stamped::new(0));
    assert_eq!(
        loan.write_and_update(Stamped::new(4)).unwrap(),
        2,
        "the parent's loan still publishes"
    );
}

#[test]
fn a_forked_child_neither_unpins_nor_publishes_for_its_parent() {
    const TEST: &str = "a_forked_child_neither_unpins_nor_publishes_for_its_parent";
    if role().as_deref() == Some("forker") {
        forked_child_leaves_the_parents_pins_and_loans();
        return;
    }
    wait_ok(spawn_self(TEST, "forker", &[]), LIMIT);
}

#[test]
fn a_second_update_of_a_key_under_way_is_refused() {
    let (_dir, root) = scene();
    let b = board(&root, "bb/twice", 1);
    let w = b.writer_builder().create().unwrap();
    let e = w.entry::<u64>(&0).unwrap();
    let first = e.loan_uninit().unwrap();
    assert!(matches!(
        e.loan_uninit(),
        Err(iox_service::WriteError::UpdateInProgress { .. })
    ));
    assert!(matches!(
        e.update_with_copy(3),
        Err(iox_service::WriteError::UpdateInProgress { .. })
    ));
    // Another key is another update.
    w.entry::<Stamped>(&1)
        .unwrap()
        .update_with_copy(Stamped::new(1))
        .unwrap();
    drop(first);
    assert_eq!(
        e.update_with_copy(3).unwrap(),
        2,
        "the dropped loan published nothing"
    );
}

#[test]
fn a_listener_created_after_updates_gets_the_next_change() {
    let (_dir, root) = scene();
    let b = board(&root, "bb/late-listener", 1);
    let w = b.writer_builder().create().unwrap();
    let e = w.entry::<u64>(&0).unwrap();
    e.update_with_copy(1).unwrap(); // the writer looks up the listener slots: none
    let listener = b.listener_builder().create().unwrap();
    e.update_with_copy(2).unwrap();
    assert_eq!(
        listener.try_wait_one().unwrap(),
        b.event_id(&0),
        "reached once the ports changed"
    );
    drop(listener);
    let other = b.listener_builder().create().unwrap();
    e.update_with_copy(3).unwrap();
    assert_eq!(
        other.try_wait_one().unwrap(),
        b.event_id(&0),
        "a listener in a freed slot"
    );
    assert_eq!(other.try_wait_one().unwrap(), None, "once");
}

/// A blackboard lives as long as its service (the guide's API tour says so): a value a
/// process wrote is read by a later process while another keeps the service open, and
/// is gone, back to the initial value, once the last handle anywhere closed.
#[test]
fn a_board_keeps_its_values_while_the_service_is_open_and_forgets_after() {
    const TEST: &str = "a_board_keeps_its_values_while_the_service_is_open_and_forgets_after";
    if let Some(r) = role() {
        let root = PathBuf::from(env::<String>("IOX_ROOT"));
        let b = board(&root, "bb/life", 1);
        match r.as_str() {
            "write" => {
                b.writer_builder()
                    .create()
                    .unwrap()
                    .entry::<u64>(&0)
                    .unwrap()
                    .update_with_copy(42)
                    .unwrap();
            }
            "read" => {
                let got = b
                    .reader_builder()
                    .create()
                    .unwrap()
                    .entry::<u64>(&0)
                    .unwrap()
                    .get()
                    .unwrap();
                let expected: u64 = env("EXPECTED");
                assert_eq!(got, expected);
            }
            _ => unreachable!(),
        }
        return;
    }
    let (_dir, root) = scene();
    let root_env = ("IOX_ROOT", root.display().to_string());
    let run = |role: &str, expected: &str| {
        wait_ok(
            spawn_self(TEST, role, &[root_env.clone(), ("EXPECTED", expected.into())]),
            LIMIT,
        )
    };
    // Kept open here: the written value outlives its writer.
    let keeper = board(&root, "bb/life", 1);
    run("write", "0");
    run("read", "42");
    drop(keeper);
    // No handle left anywhere: the next opener starts from the initial value.
    run("read", "0");
    run("write", "0");
    run("read", "0");
}
