"""Blackboards from Python: values of number, array and structured types; a Rust writer
read by Python and a Python writer read by Rust (the `blackboard` example); change
listeners; keys and types that do not match."""

import os
import subprocess

import numpy as np
import pytest

import iox

from conftest import spawn_python

POSE = iox.Type("Pose", np.dtype([("x", "<f8"), ("y", "<f8"), ("yaw", "<f4"), ("seq", "<u4")], align=True))


def board(root, name="py/board"):
    return (iox.Service(name, root=root).blackboard(np.uint32)
            .add(0, np.float64, 0.0)
            .add(1, np.float32, [0, 0, 0], shape=3)
            .add(7, POSE, (1.0, 2.0, 0.5, 3))
            .open_or_create())


def test_values_of_each_kind_round_trip(root):
    bb = board(root)
    r, w = bb.reader(), bb.writer()
    assert r.get(0) == 0.0 and r.generation(0) == 1
    assert list(r.get(1)) == [0.0, 0.0, 0.0]
    pose = r.get(7)
    assert (pose["x"], pose["y"], pose["yaw"], pose["seq"]) == (1.0, 2.0, 0.5, 3)
    assert not r.has_changed(0)
    assert w.update(0, 1.5) == 2
    assert r.has_changed(0)
    assert r.get(0) == 1.5 and isinstance(r.get(0), np.float64)
    w.update(1, [1, 2, 3])
    assert r.get(1).tolist() == [1.0, 2.0, 3.0]
    w.update(7, (4.0, 5.0, 1.5, 9))
    assert r.get(7)["seq"] == 9
    assert bb.keys() == [0, 1, 7]


def test_mistakes_are_clear_errors(root):
    bb = board(root)
    r = bb.reader()
    with pytest.raises(iox.Error, match="no key 5"):
        r.get(5)
    with pytest.raises(iox.IncompatibleService):
        iox.Service("py/board", root=root).blackboard(np.uint32).add(0, np.float32).open()
    with pytest.raises(iox.IncompatibleService):
        iox.Service("py/board", root=root).blackboard(np.uint64).open()
    with pytest.raises(TypeError, match="integer"):
        iox.Service("py/other", root=root).blackboard(np.float64)
    with pytest.raises(iox.Error, match="twice"):
        iox.Service("py/twice", root=root).blackboard(np.uint8).add(1, np.uint8).add(1, np.uint8).create()


def test_an_opener_without_adds_gets_typed_values(root):
    bb = board(root)
    bb.writer().update(1, [4, 5, 6])
    other = iox.Service("py/board", root=root).blackboard(np.uint32).open()
    r = other.reader()
    assert r.get(1).tolist() == [4.0, 5.0, 6.0], "an array of a number type"
    assert r.get(7).dtype == np.uint8 and len(r.get(7)) == POSE.dtype.itemsize, "a named type: its bytes"


def test_a_change_wakes_a_listener(root):
    bb = board(root)
    listener = bb.listener()
    bb.writer().update(7, (0.0, 0.0, 0.0, 1))
    assert listener.wait(timeout=5.0) == [bb.event_id(7)]


def test_a_python_writer_in_another_process(root):
    bb = board(root)
    r = bb.reader()
    child = spawn_python(f"""
        import numpy as np, iox
        bb = (iox.Service("py/board", root={root!r}).blackboard(np.uint32).open())
        w = bb.writer()
        for i in range(1, 11):
            w.update(0, i * 0.25)
        print("done")
    """)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert r.get(0) == 2.5 and r.generation(0) == 11


def test_rust_writer_python_reader_and_back(root, rust_examples):
    exe = os.path.join(rust_examples, "blackboard")
    if not os.path.exists(exe):
        subprocess.run(["cargo", "build", "-q", "-p", "iox_examples", "--bin", "blackboard"],
                       cwd=os.path.join(os.path.dirname(__file__), "..", ".."), check=True)
    bb = (iox.Service("examples/robot", root=root).blackboard(np.uint32)
          .add(0, np.float64, 0.0).add(1, np.float32, [0, 0, 0], shape=3).open_or_create())
    r = bb.reader()
    env = dict(os.environ, IOX_ROOT=root)
    done = subprocess.run([exe, "write", "4"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert r.get(0) == 2.0
    assert r.get(1).tolist() == [4.0, 8.0, 0.0]
    w = bb.writer()  # the one writer the blackboard allows, now that Rust's is gone
    w.update(0, 9.5)
    w.update(1, [1, 1, 2])
    out = subprocess.run([exe, "read"], env=env, check=True, capture_output=True, text=True, timeout=60).stdout
    assert "speed 9.5" in out and "position [1.0, 1.0, 2.0]" in out, out


def test_cpp_writer_python_reader_and_back(root, c_examples):
    """The C++ example (iox_ffi/examples/blackboard.cpp) on the same board."""
    exe = str(c_examples / "cpp_blackboard")
    bb = (iox.Service("examples/robot", root=root).blackboard(np.uint32)
          .add(0, np.float64, 0.0).add(1, np.float32, [0, 0, 0], shape=3).open_or_create())
    r = bb.reader()
    env = dict(os.environ, IOX_ROOT=root)
    done = subprocess.run([exe, "write", "3"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert r.get(0) == 1.5 and r.get(1).tolist() == [3.0, 6.0, 0.0]
    w = bb.writer()
    w.update(0, 9.5)
    w.update(1, [1, 1, 2])
    out = subprocess.run([exe, "read"], env=env, check=True, capture_output=True, text=True, timeout=60).stdout
    assert out.splitlines() == ["speed 9.5", "position [1, 1, 2] (generation 5)"], out


def test_a_type_with_invalid_bit_patterns_is_written_only_with_its_dtype(root):
    flagged = iox.Type("Flagged", np.dtype([("on", "?"), ("x", "<f4")], align=True))
    bb = iox.Service("py/flags", root=root).blackboard(np.uint8).add(9, flagged, (True, 1.5)).open_or_create()
    bb.writer().update(9, (False, 2.5))  # declared here: numpy makes a valid bool
    assert bb.reader().get(9)["x"] == 2.5
    other = iox.Service("py/flags", root=root).blackboard(np.uint8).open()
    raw = other.reader().get(9)
    assert raw.dtype == np.uint8 and raw[0] == 0, "read as bytes: the bool is 0"
    with pytest.raises(TypeError, match="declaring its dtype"):
        other.writer().update(9, np.zeros(8, np.uint8))
