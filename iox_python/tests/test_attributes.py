"""Service attributes from Python, across processes: a Rust process
(`examples/src/bin/attribute_peer.rs`) records them and Python requires and reads them,
Python records them and the Rust process requires and reads them, a Python child's
event service and blackboard; and what the builders refuse, raised as the package's
exceptions with the Rust message."""

import os
import subprocess

import numpy as np
import pytest

import iox
from conftest import spawn_python

MSGDEF = "uint64 data\n\t# a comment, ünïcödé"


def peer(rust_examples, *args, **kw):
    return subprocess.Popen([os.path.join(rust_examples, "attribute_peer"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_python_requires_and_reads_what_a_rust_process_recorded(root, rust_examples):
    rust = peer(rust_examples, "create", "py/attr/rust", "ros2/type=std_msgs/msg/UInt64",
                "ros2/msgdef=" + MSGDEF.replace("\n", "\\n"))
    try:
        assert rust.stdout.readline().strip() == "ready", rust.stderr.read()
        builder = lambda: iox.Service("py/attr/rust").publish_subscribe(np.uint64)  # noqa: E731
        svc = (builder().require_attribute("ros2/type", "std_msgs/msg/UInt64")
               .require_attribute_key("ros2/msgdef").open())
        assert svc.attributes == {"ros2/type": "std_msgs/msg/UInt64", "ros2/msgdef": MSGDEF}
        svc.attributes["other"] = "x"  # a copy: the service's stay as recorded
        assert "other" not in svc.attributes

        with pytest.raises(iox.IncompatibleService) as e:
            builder().require_attribute("ros2/type", "geometry_msgs/msg/Pose").open()
        for part in ("py/attr/rust", "ros2/type", "geometry_msgs/msg/Pose", "std_msgs/msg/UInt64"):
            assert part in str(e.value), str(e.value)
        with pytest.raises(iox.IncompatibleService, match='"dds/partition"'):
            builder().require_attribute_key("dds/partition").open()

        # A subscriber that gets the Rust process's sample and leaves lets it finish.
        sub = svc.subscriber()
        sample = sub.receive(timeout=30.0)
        assert sample is not None and int(sample.array) == 1
        del sample, sub
        out, err = rust.communicate(timeout=30)
        assert rust.returncode == 0, err
    finally:
        rust.kill()
        rust.wait()


def test_a_rust_process_requires_and_reads_what_python_recorded(root, rust_examples):
    svc = (iox.Service("py/attr/python").publish_subscribe(np.uint64)
           .attribute("ros2/type", "std_msgs/msg/UInt64")
           .attribute("note", "from Python\nline 2")
           .attribute("note", MSGDEF)  # a key given again replaces its value
           .create())
    assert svc.attributes == {"ros2/type": "std_msgs/msg/UInt64", "note": MSGDEF}
    out = subprocess.run([os.path.join(rust_examples, "attribute_peer"), "show", "py/attr/python",
                          "ros2/type=std_msgs/msg/UInt64", "note"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["note=" + MSGDEF.replace("\n", "\\n"), "ros2/type=std_msgs/msg/UInt64"]
    out = subprocess.run([os.path.join(rust_examples, "attribute_peer"), "show", "py/attr/python",
                          "ros2/type=std_msgs/msg/String"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    for part in ("ros2/type", "std_msgs/msg/String", "std_msgs/msg/UInt64"):
        assert part in out.stderr, out.stderr


def test_event_and_blackboard_attributes_of_another_python_process(root):
    child = spawn_python("""
        import iox, numpy as np, sys
        ev = iox.Service("py/attr/event").event().attribute("role", "estop").create()
        bb = (iox.Service("py/attr/board").blackboard(np.uint32).add(0, np.float64, 0.0)
              .attribute("unit", "m/s").create())
        listener = ev.listener()
        print("ready", flush=True)
        assert listener.wait(timeout=30.0) == [1], "no event 1 within 30 s"
    """)
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        ev = iox.Service("py/attr/event").event().require_attribute("role", "estop").open()
        assert ev.attributes == {"role": "estop"}
        bb = iox.Service("py/attr/board").blackboard(np.uint32).require_attribute_key("unit").open()
        assert bb.attributes == {"unit": "m/s"}
        with pytest.raises(iox.IncompatibleService, match='"unit"'):
            iox.Service("py/attr/board").blackboard(np.uint32).require_attribute("unit", "km/h").open()
        assert ev.notifier().notify(1) == 1
        out, err = child.communicate(timeout=30)
        assert child.returncode == 0, err
    finally:
        child.kill()
        child.wait()


def test_invalid_attributes_and_unmet_own_requirements_raise_error(root):
    pubsub = lambda: iox.Service("py/attr/bad").publish_subscribe(np.uint64)  # noqa: E731
    with pytest.raises(iox.Error, match='"bad key"') as e:
        pubsub().attribute("bad key", "v").create()
    assert not isinstance(e.value, iox.IncompatibleService)
    with pytest.raises(iox.Error, match="8192"):
        pubsub().attribute("k", "x" * 8193).open_or_create()
    with pytest.raises(iox.Error, match='"unit"'):
        pubsub().attribute("unit", "m").require_attribute("unit", "ft").open_or_create()
    with pytest.raises(iox.Error, match="control character"):
        iox.Service("py/attr/bad").event().require_attribute("k", "a\x1bb").open()
    assert os.listdir(root) == []
    with pytest.raises(TypeError):
        pubsub().attribute("k", 1).create()
