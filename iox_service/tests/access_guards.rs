//! Chunk guards across real processes (`iox_core::chunk_guard`): a hostile reader
//! clearing every chunk word it can write never makes a publisher write into a sample
//! another reader holds, and a port SIGKILLed at each step of the guard leaves no lock
//! behind. The hostile-reader test runs its children as other users (root needed,
//! otherwise it says why it skips); the other needs no root.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iox_service::{AccessPolicy, Service};
use iox_testkit::{env, role, wait_ok, wait_until};

mod access;
use access::*;

const HOSTILE_TEST: &str =
    "a_hostile_reader_clearing_the_words_it_can_write_never_changes_what_another_reads";
/// Elements per message: element `i` of message `seq` is `seq * 1_000_003 + i`, so a
/// message overwritten or torn under a reader shows.
const WORDS: usize = 64;
type Frame = [u64; WORDS];

fn frame_ok(f: &Frame) -> bool {
    let seq = f[0] / 1_000_003;
    f.iter()
        .enumerate()
        .all(|(i, &v)| v == seq.wrapping_mul(1_000_003).wrapping_add(i as u64))
}

fn open_frames(root: &Path, name: &str) -> iox_service::PubSubService<Frame> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<Frame>()
        .open()
        .unwrap()
}

/// The victim: holds the last 8 samples it received, checks each when it arrives and
/// again when it lets it go; any change is a failure. Stops once `done` exists and
/// nothing more comes. Receive errors (entries the hostile reader spoiled) are
/// counted, not fatal.
fn victim(root: &Path, name: &str) {
    let svc = open_frames(root, name);
    let s = svc.subscriber_builder().create().unwrap();
    let mut held = std::collections::VecDeque::new();
    let (mut good, mut errors) = (0u64, 0u64);
    let start = Instant::now();
    let mut idle_since_done = None;
    while start.elapsed() < LIMIT {
        match s.receive() {
            Ok(Some(sample)) => {
                assert!(frame_ok(&sample), "a sample arrived torn: {:?}", &sample[..4]);
                let first = sample[0];
                held.push_back((first, sample));
                if held.len() > 8 {
                    let (seq, old) = held.pop_front().unwrap();
                    assert!(
                        old[0] == seq && frame_ok(&old),
                        "a held sample changed under its reader: {seq} became {}",
                        old[0]
                    );
                    good += 1;
                }
                idle_since_done = None;
            }
            Ok(None) => {
                if root.join("done").exists() {
                    let idle = *idle_since_done.get_or_insert_with(Instant::now);
                    if idle.elapsed() > Duration::from_millis(500) {
                        break;
                    }
                }
                std::thread::yield_now();
            }
            Err(_) => errors += 1,
        }
    }
    for (seq, old) in held {
        assert!(old[0] == seq && frame_ok(&old), "a held sample changed: {seq}");
        good += 1;
    }
    // The last messages, sent after the hostile reader was killed, all arrive.
    std::fs::write(root.join("victim-counts"), format!("{good} {errors}")).unwrap();
}

/// The hostile reader: maps the bookkeeping (every ownership word) read-write, as its
/// open lets it, and clears everything after its header again and again: every chunk
/// then looks free to a publisher, including those the victim holds.
fn hostile(root: &Path, name: &str) {
    let _svc = open_frames(root, name);
    let stem = iox_service::ServiceName::new(name).unwrap().stem();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join(format!("{stem}.chunks")))
        .unwrap();
    let len = file.metadata().unwrap().len() as usize;
    // SAFETY: a fresh shared mapping of the whole file, written below through raw
    // pointers only (other processes change it meanwhile: that is the attack).
    let map = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            &file,
            0,
        )
    }
    .unwrap()
    .cast::<u8>();
    std::fs::write(root.join("scribbling"), b"").unwrap();
    let start = Instant::now();
    while !root.join("stop").exists() && start.elapsed() < LIMIT {
        // SAFETY: within the mapping (64..len); volatile, as other processes race it.
        unsafe {
            for at in (64..len).step_by(8) {
                map.add(at).cast::<u64>().write_volatile(0);
            }
        }
        std::thread::yield_now();
    }
    // Killed by the test (SIGKILL) before it gets here, normally.
}

#[test]
fn a_hostile_reader_clearing_the_words_it_can_write_never_changes_what_another_reads() {
    if let Some(r) = role() {
        let (root, name) = child_env();
        match r.as_str() {
            "victim" => victim(&root, &name),
            "hostile" => hostile(&root, &name),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    if !iox_testkit::root_or_skip(HOSTILE_TEST) {
        return;
    }
    let dir = sticky_root();
    let root = dir.path();
    let svc = Service::named("frames")
        .unwrap()
        .root(root)
        .publish_subscribe::<Frame>()
        .permissions(0o666)
        // Room for everything sent after the attack, however slow the victim.
        .subscriber_buffer(256)
        .max_held(16)
        .access(policy())
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let victim = spawn(HOSTILE_TEST, "victim", GROUP_MEMBER, READER_GROUP, root, "frames");
    assert!(
        wait_until(LIMIT, || svc.port_counts().1 == 1),
        "the victim subscribed"
    );
    let mut hostile = spawn(HOSTILE_TEST, "hostile", READER, READER, root, "frames");
    assert!(
        wait_until(LIMIT, || root.join("scribbling").exists()),
        "scribbling"
    );
    let mut seq = 0u64;
    let mut publish = |count: u64| {
        let mut sent = 0;
        let start = Instant::now();
        while sent < count && start.elapsed() < LIMIT {
            seq += 1;
            // Loans and sends may fail while the words are spoiled; that is the cost.
            let Ok(loan) = p.loan_uninit() else {
                std::thread::yield_now();
                continue;
            };
            let s = seq;
            let frame: Frame = std::array::from_fn(|i| s.wrapping_mul(1_000_003).wrapping_add(i as u64));
            if loan.write_payload(frame).send().is_ok() {
                sent += 1;
            }
        }
        sent
    };
    let under_attack = publish(20_000);
    assert!(under_attack > 0, "nothing could be sent under attack");
    // The hostile reader dies as a crash would.
    hostile.kill().unwrap();
    hostile.wait().unwrap();
    let _ = svc.cleanup_dead();
    // Recoverable: what is sent after it went arrives whole.
    let after = publish(200);
    assert_eq!(
        after, 200,
        "the service works again once the hostile reader is gone"
    );
    std::fs::write(root.join("done"), b"").unwrap();
    wait_ok(victim, LIMIT);
    let counts = std::fs::read_to_string(root.join("victim-counts")).unwrap();
    let good: u64 = counts.split(' ').next().unwrap().parse().unwrap();
    assert!(good >= 200, "the victim checked {counts} (good, errors)");
    println!("sent {under_attack} under attack; victim: {counts} (checked, receive errors)");
}

const KILLED_TEST: &str = "a_port_killed_at_each_step_of_the_chunk_guard_leaves_no_lock_behind";

/// Whether any description holds a chunk lock of service `name` under `root` (asked
/// through a description of our own, which holds none): any lock on the dynamic
/// segment from `LOCKS_AT` on.
fn chunks_locked(root: &Path, name: &str) -> bool {
    let stem = iox_service::ServiceName::new(name).unwrap().stem();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(root.join(format!("{stem}.dynamic")))
        .unwrap();
    // SAFETY: a zeroed flock is valid; F_OFD_GETLK reads it and writes it back.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = libc::F_WRLCK as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = iox_core::chunk_guard::LOCKS_AT as libc::off_t;
    // SAFETY: `file` is open; `l` is a valid flock (l_len 0: to the end).
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &raw mut l) };
    assert_eq!(rc, 0);
    l.l_type != libc::F_UNLCK as libc::c_short
}

/// The chunk guard's steps (`iox_core::chunk_guard`), each with a process SIGKILLed
/// there (no root needed: every port of a service whose policy names readers has a
/// guard, whatever its own role):
/// - a subscriber stopped after it locked a taken chunk for reading and before it
///   looked for a publisher writing it: its lock is there while it lives, gone with
///   it (the kernel drops a dead process's locks), and recovery returns its chunk;
/// - a publisher stopped after it claimed a chunk's word and before it locked it for
///   writing: no lock, and recovery returns the chunk;
/// - a publisher holding a loan (locked for writing): gone with it.
///
/// After each, every chunk can be loaned and sent again.
#[test]
fn a_port_killed_at_each_step_of_the_chunk_guard_leaves_no_lock_behind() {
    if let Some(r) = role() {
        let (root, name) = child_env();
        let gate = PathBuf::from(env::<String>("GATE"));
        let svc = open(&root, &name).unwrap();
        match r.as_str() {
            "subscriber" => {
                let s = svc.subscriber_builder().create().unwrap();
                iox_service::testing::stall_at(iox_service::testing::Stall::GuardBeforeReadCheck, &gate);
                // Stops inside, with the chunk locked for reading; killed there.
                let _ = receive_within(&s, LIMIT);
            }
            "publisher" => {
                let p = svc.publisher_builder().create().unwrap();
                iox_service::testing::stall_at(iox_service::testing::Stall::GuardBeforeWriteLock, &gate);
                // Stops inside the loan, its word claimed; killed there.
                let _ = p.loan_uninit();
            }
            "loaning publisher" => {
                let p = svc.publisher_builder().create().unwrap();
                let _loan = p.loan_uninit().unwrap();
                std::fs::write(gate.join("reached"), b"").unwrap();
                assert!(wait_until(LIMIT, || false), "killed before this");
            }
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    // Readers named (any uid): every port has a guard.
    let svc = Service::named("killed")
        .unwrap()
        .root(&root)
        .publish_subscribe::<u64>()
        .access(AccessPolicy::new().read_uid(READER))
        .create()
        .unwrap();
    let p = svc.publisher_builder().create().unwrap();
    let s = svc.subscriber_builder().create().unwrap();
    let check_all_chunks = |round: u64| {
        assert!(!chunks_locked(&root, "killed"), "a lock was left behind");
        while s.receive().unwrap().is_some() {} // what the round sent before
        // Every chunk once round the pool: each loaned, locked, sent, received.
        let chunks: u64 = svc.pool_info().classes.iter().map(|c| u64::from(c.count)).sum();
        for i in 0..chunks {
            p.loan_uninit()
                .unwrap()
                .write_payload(round * 1000 + i)
                .send()
                .unwrap();
            assert_eq!(*s.receive().unwrap().expect("sent just now"), round * 1000 + i);
        }
    };
    for (round, role) in ["subscriber", "publisher", "loaning publisher"]
        .into_iter()
        .enumerate()
    {
        let gate = iox_testkit::Gate::new(dir.path(), role);
        let envs = [
            ("IOX_ROOT", root.display().to_string()),
            ("SERVICE", "killed".to_string()),
            ("GATE", gate.path().display().to_string()),
        ];
        let mut child = iox_testkit::spawn_self(KILLED_TEST, role, &envs);
        if role == "subscriber" {
            assert!(wait_until(LIMIT, || svc.port_counts().1 == 2), "it subscribed");
            p.loan_uninit().unwrap().write_payload(7).send().unwrap();
        }
        assert!(gate.wait_reached(LIMIT), "{role} stopped at its step");
        assert_eq!(
            chunks_locked(&root, "killed"),
            role != "publisher",
            "{role}: locked while it lives"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        svc.cleanup_dead();
        assert!(
            wait_until(LIMIT, || svc.port_counts() == (1, 1)),
            "{role} recovered"
        );
        check_all_chunks(round as u64 + 1);
    }
}
