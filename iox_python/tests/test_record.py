"""`iox record` files read by an independent MCAP reader (the `mcap` package from PyPI):
the README's main job (the `pubsub` example: publisher and subscriber processes) is
recorded by the `iox` tool, and the recording is opened and decoded here."""

import json
import os
import time
import subprocess

import numpy as np
import pytest
from mcap.reader import make_reader

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
        reader = make_reader(f)
        summary = reader.get_summary()
        assert summary is not None and summary.statistics.message_count == 8
        messages = list(reader.iter_messages())
    assert len(messages) == 8
    schema, channel, _ = messages[0]
    assert channel.topic == "examples/readings"
    assert channel.message_encoding == "iox.raw"
    assert schema.encoding == "iox.static_config.ron"
    config = schema.data.decode()
    assert 'name: "seq"' in config and 'name: "value"' in config, config
    reading = np.dtype([("seq", "<u8"), ("value", "<f8")])
    values = [np.frombuffer(m.data, dtype=reading)[0] for _, _, m in messages]
    seqs = [int(v["seq"]) for v in values]
    assert seqs == list(range(seqs[0], seqs[0] + 8)), seqs
    assert all(float(v["value"]) == int(v["seq"]) * 0.5 for v in values)
    times = [m.log_time for _, _, m in messages]
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
