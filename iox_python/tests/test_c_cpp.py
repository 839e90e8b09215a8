"""Python with the C and C++ examples (iox_ffi/examples), each in its own process, on
the examples' service: a Python publisher to the C++ subscriber, the C publisher to a
Python subscriber. The examples are compiled with gcc/g++ by the `c_examples` fixture
(conftest.py). Frames with a user header between Python and the C++ `camera` example:
test_user_header.py."""

import subprocess

import numpy as np

import iox

READING = iox.Type("iox_examples::Reading", np.dtype([("seq", "<u8"), ("value", "<f8")], align=True))


def test_python_publisher_to_cpp_subscriber(root, c_examples):
    svc = iox.Service("examples/readings").publish_subscribe(READING).subscriber_buffer(16).open_or_create()
    pub = svc.publisher()
    cpp = subprocess.Popen([str(c_examples / "cpp_subscriber"), "--count", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert pub.wait_for_subscribers(1, 30.0) >= 1, "the C++ subscriber did not connect"
        for seq in range(3):
            with pub.loan() as s:
                s.array["seq"] = seq
                s.array["value"] = seq * 0.5
                assert s.send() == 1
        out, err = cpp.communicate(timeout=30)
    finally:
        cpp.kill()
    assert cpp.returncode == 0, err
    assert out.splitlines() == [f"cpp_subscriber: got seq {i} value {i * 0.5:.1f}" for i in range(3)]


def test_c_publisher_to_python(root, c_examples):
    svc = iox.Service("examples/readings").publish_subscribe(READING).subscriber_buffer(16).open_or_create()
    sub = svc.subscriber()
    c = subprocess.Popen([str(c_examples / "c_publisher"), "--count", "3"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        got = []
        while len(got) < 3:
            s = sub.receive(timeout=10.0)
            assert s is not None, "no reading from the C publisher within 10 s"
            got.append((int(s.array["seq"]), float(s.array["value"])))
            del s
        _, err = c.communicate(timeout=30)
    finally:
        c.kill()
    assert c.returncode == 0, err
    assert got == [(i, i * 0.5) for i in range(3)]
