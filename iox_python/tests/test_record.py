"""`iox record` files read by independent MCAP readers (the `mcap` package from PyPI, and
`mcap-ros2-support`, the ROS 2 profile's decoder that Foxglove's tools build on): the
README's main job (the `pubsub` example: publisher and subscriber processes) is
recorded by the `iox` tool, and the recording is opened and decoded here to the field
values that were sent."""

import json
import os
import time
import subprocess

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from conftest import REPO


@pytest.fixture(scope="session")
def bins():
    """The directory of the `iox` tool and the `pubsub` example (built if missing)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    bindir = os.path.join(target, "debug")
    if not all(os.path.exists(os.path.join(bindir, b)) for b in ("iox", "pubsub")):
        subprocess.run(["cargo", "build", "-q", "-p", "iox_cli", "--bin", "iox", "-p", "iox_examples",
                        "--bin", "pubsub"], cwd=REPO, check=True)
    return bindir


def test_a_recording_of_the_pubsub_example_opens_in_the_mcap_reader(root, bins, tmp_path):
    out = tmp_path / "pubsub.mcap"
    recorder = subprocess.Popen([os.path.join(bins, "iox"), "record", "-o", str(out), "examples/*",
                                 "--count", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        demo = subprocess.run([os.path.join(bins, "pubsub"), "--count", "30"], capture_output=True, text=True,
                              timeout=120)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        _, err = recorder.communicate(timeout=120)
    finally:
        recorder.kill()
    assert recorder.returncode == 0, err
    assert "recorded 8 sample(s) of 1 service(s)" in err, err

    with open(out, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        assert summary is not None and summary.statistics.message_count == 8
        decoded = list(reader.iter_decoded_messages())
    assert len(decoded) == 8
    schema, channel, _, _ = decoded[0]
    # A typed service is recorded in MCAP's ROS 2 profile: a .msg written for its type,
    # CDR messages, and iox's static config in the channel's metadata (for replay).
    assert channel.topic == "/examples/readings"  # named as ROS names topics
    assert channel.message_encoding == "cdr"
    assert schema.encoding == "ros2msg"
    assert schema.name == "iox_msgs/msg/Reading"
    assert schema.data.decode() == "uint64 seq\nfloat64 value\n"
    assert 'name: "examples/readings"' in channel.metadata["iox.static_config"]
    seqs = [int(d.seq) for _, _, _, d in decoded]
    assert seqs == list(range(seqs[0], seqs[0] + 8)), seqs
    assert all(d.value == d.seq * 0.5 for _, _, _, d in decoded)
    times = [m.log_time for _, _, m, _ in decoded]
    assert times == sorted(times)


def test_iox_echo_prints_python_published_samples_with_field_names(root, bins):
    """A structured dtype published from Python is recorded as a schema, so the Rust
    `iox echo` (another process) prints its samples field by field."""
    import iox

    pose = iox.Type("Pose2", np.dtype([("x", "f8"), ("y", "f8"), ("tag", "u2", (2,)), ("_pad", "u1", (4,))],
                                      align=True))
    svc = iox.Service("py/poses").publish_subscribe(pose).open_or_create()
    echo = subprocess.Popen([os.path.join(bins, "iox"), "echo", "py/poses", "--count", "2", "--timeout", "60s",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while svc.port_counts()[1] == 0:  # bounded polling until `iox echo` subscribed
            assert echo.poll() is None, echo.communicate()
            assert time.monotonic() < deadline, "iox echo never subscribed"
            time.sleep(0.01)
        pub = svc.publisher()
        for i in range(2):
            value = np.zeros((), dtype=pose.dtype)
            value["x"], value["y"], value["tag"] = i + 0.5, -1.0, [i, 7]
            pub.send(value)
        out, err = echo.communicate(timeout=60)
    finally:
        echo.kill()
    assert echo.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines == [{"x": 0.5, "y": -1.0, "tag": [0, 7], "_pad": [0, 0, 0, 0]},
                     {"x": 1.5, "y": -1.0, "tag": [1, 7], "_pad": [0, 0, 0, 0]}], out


MAGIC = b"\x89MCAP0\r\n"


def _records_end_at_a_boundary(path):
    """Walks the file's record framing (magic, then opcode u8 + length u64 + body):
    whether it ends exactly after a whole record, and how many records it holds."""
    data = path.read_bytes()
    assert data.startswith(MAGIC), data[:16]
    at, records = len(MAGIC), 0
    while at < len(data):
        if data[at:] == MAGIC:  # the closing magic after the footer
            return True, records
        if at + 9 > len(data):
            return False, records
        length = int.from_bytes(data[at + 1:at + 9], "little")
        if at + 9 + length > len(data):
            return False, records
        at += 9 + length
        records += 1
    return True, records


def _stream_messages(path):
    """Every message an independent streaming reader finds, up to the file's end (a
    file without its footer ends in EndOfFile, which must come between records)."""
    from mcap.exceptions import EndOfFile
    from mcap.records import Message
    from mcap.stream_reader import StreamReader

    found = []
    with open(path, "rb") as f:
        try:
            for record in StreamReader(f).records:
                if isinstance(record, Message):
                    found.append(record)
        except EndOfFile:
            pass
    return found


def _publishing(root, name, stop):
    """A thread publishing a counter into `name` every millisecond until `stop` is set."""
    import threading
    import iox

    svc = iox.Service(name, root=root).publish_subscribe(np.uint64).open_or_create()

    def run():
        pub = svc.publisher()  # a publisher belongs to the thread that makes it
        i = 0
        while not stop.is_set():
            pub.send(np.uint64(i))
            i += 1
            time.sleep(0.001)

    t = threading.Thread(target=run)
    t.start()
    return svc, t


def test_a_recording_stopped_by_timeout_is_complete(root, bins, tmp_path):
    """Issue 45, item 10: `timeout -s INT` signals the recorder and then its process
    group, two SIGINTs at once; the second must not kill it before it completes its
    file (it died in 2 runs of 15, leaving a placeholder length the reader rejected)."""
    import threading

    stop = threading.Event()
    svc, publisher = _publishing(root, "rec/timeout", stop)
    try:
        for run in range(6):
            out = tmp_path / f"run{run}.mcap"
            done = subprocess.run(["timeout", "-s", "INT", "0.6", os.path.join(bins, "iox"), "record", "-o",
                                   str(out), "rec/timeout"], capture_output=True, text=True, timeout=60)
            assert done.returncode == 124, (done.returncode, done.stderr)  # timeout's: it had to signal
            assert "recorded " in done.stderr, done.stderr  # the recorder's summary: it finished
            with open(out, "rb") as f:
                reader = make_reader(f)
                summary = reader.get_summary()
                assert summary is not None, f"run {run}: no summary"
                messages = list(reader.iter_messages())
            assert len(messages) == summary.statistics.message_count
    finally:
        stop.set()
        publisher.join()


def test_a_recording_killed_at_any_moment_ends_at_a_record(root, bins, tmp_path):
    """Issue 45, item 10: SIGKILL at any moment leaves no file (killed before its
    header was written) or one that ends at its last complete record (no footer then),
    never a torn record or a placeholder length; an independent streaming reader reads
    every message in it, in order."""
    import threading

    for run, after in enumerate([0.0, 0.02, 0.1, 0.3, 0.49, 0.51, 0.7, 1.05, 1.6]):
        name = f"rec/killed{run}"
        stop = threading.Event()
        svc, publisher = _publishing(root, name, stop)
        out = tmp_path / f"killed{run}.mcap"
        recorder = subprocess.Popen([os.path.join(bins, "iox"), "record", "-o", str(out), name],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if after > 0:
                deadline = time.monotonic() + 60
                while svc.port_counts()[1] < 1:  # bounded polling until the recorder subscribed
                    assert time.monotonic() < deadline, "the recorder never subscribed"
                    time.sleep(0.001)
                end = time.monotonic() + after
                while time.monotonic() < end:  # lets the recorder run for `after` seconds
                    time.sleep(0.001)
        finally:
            recorder.kill()
            recorder.wait(timeout=60)
            stop.set()
            publisher.join()
        if not out.exists():
            assert after < 0.1, f"killed after {after} s: no file"
            continue
        whole, records = _records_end_at_a_boundary(out)
        assert whole, f"killed after {after} s: the file ends inside a record ({records} whole ones)"
        messages = _stream_messages(out)
        # `uint64 data` in little-endian CDR, behind its 4-byte encapsulation header.
        values = [int(np.frombuffer(m.data[4:12], "<u8")[0]) for m in messages]
        assert values == sorted(values) and len(set(values)) == len(values), values
        if after >= 1.05:
            assert messages, f"killed after {after} s: nothing committed"
