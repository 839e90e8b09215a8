//! `iox record` and `iox replay`: Rust publishers and subscribers in this test process,
//! the recorder and the player as `iox` processes, each test under its own roots. The
//! files are also read back with the `mcap` crate's streaming reader.

use std::path::Path;
use std::time::{Duration, Instant};

use iox_service::{Overflow, PubSubService, Publisher, SendError, Service, ZeroCopySafe};
use iox_testkit::wait_until;

mod common;
use common::{code, iox, spawn, text};

const LIMIT: Duration = Duration::from_secs(60);
/// Spacing of the recorded samples.
const STEP: Duration = Duration::from_millis(20);

#[derive(ZeroCopySafe, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Reading {
    seq: u32,
    valid: bool,
    value: f64,
}

/// A service of these tests: a 64-deep buffer that rejects when full (the publishers
/// retry), so the recorder gets every sample.
fn service<P: ?Sized + iox_service::Payload>(root: &Path, name: &str) -> iox_service::PubSubBuilder<P> {
    Service::named(name)
        .unwrap()
        .root(root)
        .publish_subscribe::<P>()
        .subscriber_buffer(64)
        .overflow(Overflow::Reject)
}

fn readings(root: &Path) -> PubSubService<Reading> {
    service(root, "rec/readings").open_or_create().unwrap()
}

fn counters(root: &Path) -> PubSubService<u64> {
    service(root, "rec/counter").open_or_create().unwrap()
}

fn scans(root: &Path) -> PubSubService<[u16]> {
    service(root, "rec/scan")
        .max_slice_len(32)
        .open_or_create()
        .unwrap()
}

/// Sends `value`, retrying while the recorder's queue is full (the services reject
/// rather than drop, so every sample is recorded), within the limit.
fn send<T: ZeroCopySafe>(p: &Publisher<T>, value: T) {
    let start = Instant::now();
    loop {
        match p.loan_uninit().unwrap().write_payload(value).send() {
            Ok(_) => return,
            Err(SendError::QueueFull { .. }) => std::thread::yield_now(),
            Err(e) => panic!("send: {e}"),
        }
        assert!(start.elapsed() < LIMIT, "the recorder stopped reading");
    }
}

/// `iox replay FILE --wait-for-subscribers` into `root`, and its `rec/readings`
/// service opened as `Reading` once the player created it.
fn replay_readings(root: &Path, file: &Path) -> (iox_testkit::Reaped, PubSubService<Reading>) {
    let player = spawn(
        root,
        &[
            "replay",
            file.to_str().unwrap(),
            "--wait-for-subscribers",
            "--timeout",
            "60s",
        ],
    );
    let mut svc = None;
    assert!(wait_until(LIMIT, || {
        svc = Service::named("rec/readings")
            .unwrap()
            .root(root)
            .publish_subscribe::<Reading>()
            .open()
            .ok();
        svc.is_some()
    }));
    (player, svc.expect("the player created it"))
}

/// Writes `messages` (channel, data) in order, 1 ns apart, and completes the file: a
/// recording crafted by a test.
fn write_messages(mut w: mcap::Writer<std::fs::File>, messages: &[(u16, &[u8])]) {
    for (i, &(channel, data)) in messages.iter().enumerate() {
        let header = mcap::records::MessageHeader {
            channel_id: channel,
            sequence: i as u32,
            log_time: 1000 + i as u64,
            publish_time: 1000 + i as u64,
        };
        w.write_to_known_channel(&header, data).unwrap();
    }
    w.finish().unwrap();
}

/// [`send`] for a slice service.
fn send_slice(p: &Publisher<[u16]>, value: &[u16]) {
    let start = Instant::now();
    loop {
        match p
            .loan_slice_uninit(value.len())
            .unwrap()
            .write_from_slice(value)
            .send()
        {
            Ok(_) => return,
            Err(SendError::QueueFull { .. }) => std::thread::yield_now(),
            Err(e) => panic!("send: {e}"),
        }
        assert!(start.elapsed() < LIMIT, "the recorder stopped reading");
    }
}

fn reading(i: u32) -> Reading {
    Reading {
        seq: i,
        valid: i.is_multiple_of(3),
        value: f64::from(i) * 0.25,
    }
}

fn scan(i: u32) -> Vec<u16> {
    (0..(i % 7 + 1)).map(|k| (i * 100 + k) as u16).collect()
}

/// (topic, log time, data) of every message the `mcap` reader gets from `path`,
/// stopping at the first damaged record.
fn read_back(path: &Path) -> Vec<(String, u64, Vec<u8>)> {
    let buf = std::fs::read(path).unwrap();
    let Ok(stream) = mcap::MessageStream::new_with_options(&buf, mcap::read::Options::IgnoreEndMagic.into())
    else {
        return Vec::new();
    };
    stream
        .map_while(Result::ok)
        .map(|m| (m.channel.topic.clone(), m.log_time, m.data.into_owned()))
        .collect()
}

/// A `u64` service's message: typed services are recorded in MCAP's ROS 2 profile, a
/// `uint64 data` message in little-endian CDR (a 4-byte encapsulation header first).
fn cdr_u64(data: &[u8]) -> u64 {
    assert_eq!(data.len(), 12, "{data:?}");
    assert_eq!(&data[..4], &[0, 1, 0, 0], "little-endian plain CDR");
    u64::from_le_bytes(data[4..].try_into().unwrap())
}

/// Three services recorded for a few seconds, replayed into a fresh root: a subscriber
/// of each sees the same samples in order, with the recorded spacing.
#[test]
fn record_three_services_and_replay_them_into_a_fresh_root() {
    const N: u32 = 60;
    let recorded_root = tempfile::tempdir().unwrap();
    let replay_root = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("run.mcap");
    let root = recorded_root.path();
    let (r, c, s) = (readings(root), counters(root), scans(root));
    let recorder = spawn(
        root,
        &[
            "record",
            "-o",
            file.to_str().unwrap(),
            "rec/*",
            "--count",
            &(3 * N).to_string(),
        ],
    );
    assert!(
        wait_until(LIMIT, || r.port_counts().1 == 1
            && c.port_counts().1 == 1
            && s.port_counts().1 == 1),
        "iox record never subscribed to all three"
    );
    let (pr, pc, ps) = (
        r.publisher_builder().create().unwrap(),
        c.publisher_builder().create().unwrap(),
        s.publisher_builder().create().unwrap(),
    );
    let start = Instant::now();
    for i in 0..N {
        // The publisher's pacing (what is recorded), not a synchronisation.
        std::thread::sleep((start + STEP * i).saturating_duration_since(Instant::now()));
        send(&pr, reading(i));
        send(&pc, u64::from(i) << 20);
        let v = scan(i);
        send_slice(&ps, &v);
    }
    let recorded_span = start.elapsed();
    let out = recorder.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(
        text(&out).contains(&format!("recorded {} sample(s) of 3 service(s)", 3 * N)),
        "{}",
        text(&out)
    );

    // The independent reader sees every message, in order per channel.
    let messages = read_back(&file);
    assert_eq!(messages.len(), 3 * N as usize);
    let counter: Vec<u64> = messages
        .iter()
        .filter(|m| m.0 == "/rec/counter")
        .map(|m| cdr_u64(&m.2))
        .collect();
    assert_eq!(counter, (0..u64::from(N)).map(|i| i << 20).collect::<Vec<_>>());

    // Replay into a fresh root: the player creates the services from the recorded
    // configs and waits for a subscriber on each.
    let player = spawn(
        replay_root.path(),
        &[
            "replay",
            file.to_str().unwrap(),
            "--wait-for-subscribers",
            "--timeout",
            "60s",
        ],
    );
    let open = |name: &str| {
        let mut found = false;
        wait_until(LIMIT, || {
            found = Service::list_in(replay_root.path())
                .map(|l| l.into_iter().flatten().any(|c| c.name == name))
                .unwrap_or(false);
            found
        });
        assert!(found, "replay never created {name}");
    };
    for name in ["rec/readings", "rec/counter", "rec/scan"] {
        open(name);
    }
    let root = replay_root.path();
    let (r2, c2, s2) = (
        Service::named("rec/readings")
            .unwrap()
            .root(root)
            .publish_subscribe::<Reading>()
            .open()
            .unwrap(),
        Service::named("rec/counter")
            .unwrap()
            .root(root)
            .publish_subscribe::<u64>()
            .open()
            .unwrap(),
        Service::named("rec/scan")
            .unwrap()
            .root(root)
            .publish_subscribe::<[u16]>()
            .open()
            .unwrap(),
    );
    assert_eq!(r2.static_config().schema, Some(Reading::schema()));
    assert_eq!(
        r2.static_config().publish_subscribe().unwrap().subscriber_buffer,
        64
    );
    let (sr, sc, ss) = (
        r2.subscriber_builder().create().unwrap(),
        c2.subscriber_builder().create().unwrap(),
        s2.subscriber_builder().create().unwrap(),
    );
    let mut first_last = (None, None);
    for i in 0..N {
        let got = *sr.receive_timeout(LIMIT).unwrap().expect("a replayed reading");
        assert_eq!(got, reading(i));
        let now = Instant::now();
        first_last.0.get_or_insert(now);
        first_last.1 = Some(now);
        assert_eq!(
            *sc.receive_timeout(LIMIT).unwrap().expect("a replayed counter"),
            u64::from(i) << 20
        );
        assert_eq!(
            &*ss.receive_timeout(LIMIT).unwrap().expect("a replayed scan"),
            &scan(i)[..]
        );
    }
    let out = player.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    // The recorded spacing (59 steps of 20 ms, about 1.2 s), within a wide tolerance.
    let (Some(first), Some(last)) = first_last else {
        unreachable!()
    };
    let replayed_span = last - first;
    let recorded = recorded_span.as_secs_f64();
    assert!(
        (0.6 * recorded..=1.6 * recorded).contains(&replayed_span.as_secs_f64()),
        "replayed over {replayed_span:?}, recorded over {recorded_span:?}"
    );
}

/// A recorder killed with SIGKILL leaves a file readable up to its last closed chunk;
/// `iox replay` replays that and exits 3.
#[test]
fn a_recording_cut_by_sigkill_stays_readable() {
    let root_dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("cut.mcap");
    let root = root_dir.path();
    let c = counters(root);
    let recorder = spawn(root, &["record", "-o", file.to_str().unwrap(), "rec/counter"]);
    assert!(wait_until(LIMIT, || c.port_counts().1 == 1));
    let p = c.publisher_builder().create().unwrap();
    let mut i = 0u64;
    // Publish until the reader finds at least 50 messages in closed chunks.
    let ok = wait_until(LIMIT, || {
        for _ in 0..10 {
            send(&p, i);
            i += 1;
        }
        read_back(&file).len() >= 50
    });
    assert!(ok, "no chunk was closed");
    recorder.kill();
    let messages = read_back(&file);
    assert!(messages.len() >= 50);
    let values: Vec<u64> = messages.iter().map(|m| cdr_u64(&m.2)).collect();
    assert_eq!(
        values,
        (0..values.len() as u64).collect::<Vec<_>>(),
        "in order, none lost before the cut"
    );

    let fresh = tempfile::tempdir().unwrap();
    let out = iox(
        fresh.path(),
        &["replay", file.to_str().unwrap(), "--rate", "1000"],
    );
    assert_eq!(code(&out), 3, "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(&format!("replayed {} sample(s)", values.len())),
        "{said}"
    );
    assert!(said.contains("last readable record"), "{said}");
}

/// `--split-size` starts new files, each with the channels, each replayable alone.
#[test]
fn split_recordings_hold_every_channel() {
    const N: u64 = 300;
    let root_dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let root = root_dir.path();
    let c = counters(root);
    let recorder = spawn(
        root,
        &[
            "record",
            "-o",
            files.path().join("part.mcap").to_str().unwrap(),
            "rec/counter",
            "--split-size",
            "1K",
            "--count",
            &N.to_string(),
        ],
    );
    assert!(wait_until(LIMIT, || c.port_counts().1 == 1));
    let p = c.publisher_builder().create().unwrap();
    for i in 0..N {
        send(&p, i);
    }
    let out = recorder.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let mut parts: Vec<_> = std::fs::read_dir(files.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    parts.sort();
    assert!(parts.len() >= 2, "{parts:?}");
    assert!(parts[0].ends_with("part_000.mcap"), "{parts:?}");
    let mut all = Vec::new();
    for part in &parts {
        let messages = read_back(part);
        assert!(!messages.is_empty(), "{part:?} is empty");
        all.extend(messages.iter().map(|m| cdr_u64(&m.2)));
    }
    assert_eq!(all, (0..N).collect::<Vec<_>>());
}

/// Bytes from a file are not trusted: a damaged file is exit 3, a recorded `bool` that
/// is neither 0 nor 1 is not sent (a Rust reader would get an invalid `bool`), a
/// channel of another encoding is skipped.
#[test]
fn replay_refuses_damaged_input() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.mcap");
    std::fs::write(&garbage, b"\x89MCAP0\r\nthis is not a recording at all").unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let out = iox(fresh.path(), &["replay", garbage.to_str().unwrap()]);
    assert_eq!(code(&out), 3, "{}", text(&out));

    // A recording written here: one channel for `Reading` (its real static config),
    // one of another encoding.
    let config_root = tempfile::tempdir().unwrap();
    let config = readings(config_root.path()).static_config().to_ron();
    let file = dir.path().join("crafted.mcap");
    {
        let mut w = mcap::Writer::new(std::fs::File::create(&file).unwrap()).unwrap();
        let schema = w
            .add_schema("Reading", "iox.static_config.ron", config.as_bytes())
            .unwrap();
        let ch = w
            .add_channel(schema, "rec/readings", "iox.raw", &Default::default())
            .unwrap();
        let other = w
            .add_channel(0, "foreign/json", "json", &Default::default())
            .unwrap();
        let bytes = |seq: u32, valid: u8| {
            let mut b = vec![0u8; size_of::<Reading>()];
            b[..4].copy_from_slice(&seq.to_ne_bytes());
            b[4] = valid;
            b[8..].copy_from_slice(&0.5f64.to_ne_bytes());
            b
        };
        let (bad, good) = (bytes(1, 2), bytes(2, 1));
        write_messages(w, &[(ch, &bad), (other, b"{}"), (ch, &good)]);
    }
    let (player, svc) = replay_readings(fresh.path(), &file);
    let s = svc.subscriber_builder().create().unwrap();
    let out = player.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("skipping channel \"foreign/json\""), "{said}");
    assert!(said.contains("is not a valid"), "{said}");
    let got = *s.receive().unwrap().expect("the valid sample");
    assert_eq!((got.seq, got.valid), (2, true));
    assert!(s.receive().unwrap().is_none(), "the invalid bool was not sent");
}

/// A recording whose channel says one service and whose config another is skipped; a
/// config whose schema leaves the `bool` of `Reading` undescribed (bytes) makes the
/// replay send nothing of it, even valid-looking samples: bytes from a file that no
/// schema can check are not written into a type with a `bool`.
#[test]
fn replay_checks_what_the_file_claims() {
    let dir = tempfile::tempdir().unwrap();
    let config_root = tempfile::tempdir().unwrap();
    let mut config = readings(config_root.path()).static_config().clone();
    config.schema = Some(iox_service::Schema::Bytes {
        size: size_of::<Reading>() as u64,
    });
    let file = dir.path().join("claims.mcap");
    {
        let mut w = mcap::Writer::new(std::fs::File::create(&file).unwrap()).unwrap();
        let schema = w
            .add_schema("Reading", "iox.static_config.ron", config.to_ron().as_bytes())
            .unwrap();
        let real = w
            .add_channel(schema, "rec/readings", "iox.raw", &Default::default())
            .unwrap();
        let decoy = w
            .add_channel(schema, "safe/elsewhere", "iox.raw", &Default::default())
            .unwrap();
        let mut sample = vec![0u8; size_of::<Reading>()];
        sample[4] = 1; // `valid: true`, a valid value, but nothing can show it
        write_messages(w, &[(decoy, &sample), (real, &sample)]);
    }
    let fresh = tempfile::tempdir().unwrap();
    let (player, svc) = replay_readings(fresh.path(), &file);
    let s = svc.subscriber_builder().create().unwrap();
    let out = player.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("skipping channel \"safe/elsewhere\": its config is of service \"rec/readings\""),
        "{said}"
    );
    assert!(said.contains("is not a valid"), "{said}");
    assert!(s.receive().unwrap().is_none(), "an uncheckable sample was sent");
    // The services the replay creates are its user's alone, whatever was recorded.
    let listed = Service::list_in(fresh.path()).unwrap();
    assert!(listed.into_iter().flatten().all(|c| c.permissions == 0o600));
}

/// When the writer's queue is full the recorder drops samples, counts them and says
/// so, and the publisher is never held up: here a byte budget smaller than one sample
/// drops every one.
#[test]
fn a_full_queue_drops_and_reports() {
    const N: u64 = 20;
    let root_dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("drops.mcap");
    let root = root_dir.path();
    let c = counters(root);
    let recorder = spawn(
        root,
        &[
            "record",
            "-o",
            file.to_str().unwrap(),
            "rec/counter",
            "--count",
            &N.to_string(),
            "--queue-bytes",
            "1",
        ],
    );
    assert!(wait_until(LIMIT, || c.port_counts().1 == 1));
    let p = c.publisher_builder().create().unwrap();
    for i in 0..N {
        send(&p, i);
    }
    let out = recorder.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("recorded 0 sample(s) of 1 service(s)"), "{said}");
    assert!(said.contains(&format!("dropped {N}")), "{said}");
    assert!(read_back(&file).is_empty());
}

/// A recording in MCAP's ROS 2 profile, as `iox record` writes typed services: replay
/// decodes the CDR into the struct, refuses messages that do not decode (short, a
/// `bool` holding 2) one by one, and replays a ROS 2 channel without iox's config
/// (another tool's) into a `[u8]` CDR service made for its type.
#[test]
fn replay_decodes_ros2_channels_and_refuses_bad_cdr() {
    let dir = tempfile::tempdir().unwrap();
    let config = readings(dir.path()).static_config().clone();
    let ros = iox_cli_ros_form(&config);
    let file = dir.path().join("ros2.mcap");
    let good = Reading {
        seq: 7,
        valid: true,
        value: 2.5,
    };
    // SAFETY: reading a value's bytes to encode them; the plan reads field bytes only.
    let bytes =
        unsafe { std::slice::from_raw_parts((&good as *const Reading).cast::<u8>(), size_of::<Reading>()) };
    let mut cdr = Vec::new();
    ros.plan.encode(bytes, &mut cdr);
    let mut bad_bool = cdr.clone();
    bad_bool[4 + 4] = 2; // `valid` follows the u32 `seq`
    {
        let mut w = mcap::Writer::new(std::fs::File::create(&file).unwrap()).unwrap();
        let schema = w.add_schema(&ros.name, "ros2msg", ros.text.as_bytes()).unwrap();
        let metadata = std::collections::BTreeMap::from([("iox.static_config".to_owned(), config.to_ron())]);
        let real = w.add_channel(schema, "rec/readings", "cdr", &metadata).unwrap();
        let foreign = w
            .add_channel(schema, "ros/other", "cdr", &Default::default())
            .unwrap();
        write_messages(
            w,
            &[
                (foreign, &cdr),
                (real, &cdr[..3]),
                (real, &bad_bool),
                (real, &cdr),
            ],
        );
    }
    let fresh = tempfile::tempdir().unwrap();
    let (player, svc) = replay_readings(fresh.path(), &file);
    let s = svc.subscriber_builder().create().unwrap();
    let mut other = None;
    assert!(wait_until(LIMIT, || {
        other = Service::named("ros/other")
            .unwrap()
            .root(fresh.path())
            .publish_subscribe::<[u8]>()
            .require_attribute("ros2/type", ros.name.as_str())
            .open()
            .ok();
        other.is_some()
    }));
    let o = other.unwrap().subscriber_builder().create().unwrap();
    let out = player.into_inner().wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let said = text(&out);
    assert_eq!(said.matches("is not a whole").count(), 2, "{said}");
    assert_eq!(
        &*o.receive().unwrap().expect("the other tool's message, as CDR"),
        &cdr[..]
    );
    let got = *s.receive().unwrap().expect("the good message");
    assert_eq!(got, good);
    assert!(s.receive().unwrap().is_none(), "only the good message was sent");
}

/// The ROS 2 form `iox record` gives a config (the same function the tool uses).
fn iox_cli_ros_form(config: &iox_service::StaticConfig) -> iox_ros2::generate::Generated {
    let schema = config.schema.as_ref().expect("a derived type records its schema");
    iox_ros2::generate::generate(schema, config.payload.type_name()).expect("Reading has a ROS 2 form")
}
