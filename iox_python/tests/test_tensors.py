"""Tensor services from Python: host services created with ``.tensors()`` carry each
sample's element type, shape and strides as CUDA_DEVICE services do, through the same
calls (``svc.tensor_publisher()``, ``svc.tensor_subscriber()``, DLPack both ways), so
one producer program runs with or without a GPU. Host tests need no GPU; the device
variant runs against the CUDA driver double (cuda_double/)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_device_tensors import TESTS, env_for, finish, run_python, tensors  # noqa: F401

import iox

# The producer, the same program for every memory type: tensor i (shape [i + 1, 8],
# element k = 1000 i + k) sent three ways in turn: a loan written in place through
# numpy's DLPack import (host) or by copying a numpy array in (`send_tensor`), and a
# transposed numpy view whose strides travel with it.
PRODUCER = """
import os
import numpy as np
import iox
MEMORY = iox.MemoryType[os.environ["MEMORY"]]
svc = iox.Service("same/tensors").publish_subscribe(np.float32, max_len=64 * 8) \\
    .memory_type(MEMORY).tensors().subscriber_buffer(16).open_or_create()
pub = svc.tensor_publisher()
assert pub.dtype == "float32"
assert pub.wait_for_subscribers(1, 30) == 1
for i in range(COUNT):
    rows = i + 1
    values = (1000 * i + np.arange(rows * 8)).astype(np.float32)
    if i % 3 == 0 and MEMORY == iox.MemoryType.CPU:
        with pub.loan((rows, 8)) as loan:
            np.from_dlpack(loan)[...] = values.reshape(rows, 8)
            assert loan.send() == 1
    elif i % 3 == 2:
        assert pub.send_tensor(values.reshape(8, rows).T) == 1
    else:
        assert pub.send_tensor(values.reshape(rows, 8)) == 1
print("sent")
"""

# Host consumer: numpy reads each sample in place (read-only), with the recorded
# shape and strides.
HOST_CONSUMER = """
import numpy as np
import iox, time
deadline = time.time() + 30
while True:
    try:
        svc = iox.Service("same/tensors").publish_subscribe().open()
        break
    except iox.ServiceNotFound:
        assert time.time() < deadline
        time.sleep(0.01)
sub = svc.tensor_subscriber()
for i in range(COUNT):
    s = sub.receive(timeout=30)
    assert s is not None
    a = np.from_dlpack(s)
    assert not a.flags.writeable
    rows = i + 1
    assert a.dtype == np.float32 and a.shape == (rows, 8), (a.dtype, a.shape)
    if i % 3 == 2:
        assert a.strides == (4, 4 * rows), a.strides      # the transposed view's
        expected = (1000 * i + np.arange(rows * 8)).astype(np.float32).reshape(8, rows).T
    else:
        expected = (1000 * i + np.arange(rows * 8)).astype(np.float32).reshape(rows, 8)
    assert (a == expected).all(), (i, a)
    print(s.dtype, list(a.shape))
"""

COUNT = 4


def run_pair(env, consumer):
    producer = run_python(PRODUCER.replace("COUNT", str(COUNT)), env)
    try:
        out = finish(run_python(consumer.replace("COUNT", str(COUNT)), env), "the consumer")
        assert "sent" in finish(producer, "the producer")
    finally:
        if producer.poll() is None:
            producer.kill()
    return out


def test_host_tensors_cross_processes_in_place(root):
    env = dict(os.environ, IOX_ROOT=root, PYTHONPATH=TESTS, MEMORY="CPU")
    out = run_pair(env, HOST_CONSUMER)
    assert out.split("\n")[:COUNT] == [f"float32 [{i + 1}, 8]" for i in range(COUNT)], out


def test_host_tensors_from_cpp_to_python(root, c_examples):
    """The C++ example's tensor publisher (iox_ffi/examples/tensors.cpp: the producer
    above, written with the C++ host tensor ports) read by the Python consumer."""
    env = dict(os.environ, IOX_ROOT=root, PYTHONPATH=TESTS)
    cpp = subprocess.Popen([str(c_examples / "cpp_tensors"), "publish", "--count", str(COUNT)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = finish(run_python(HOST_CONSUMER.replace("COUNT", str(COUNT)), env), "the consumer")
        sent, err = cpp.communicate(timeout=60)
    finally:
        cpp.kill()
    assert cpp.returncode == 0 and sent.strip() == "sent", err
    assert out.split("\n")[:COUNT] == [f"float32 [{i + 1}, 8]" for i in range(COUNT)], out


def test_host_tensors_from_python_to_c(root, c_examples):
    """The Python producer above read by the C tensor subscriber
    (iox_ffi/examples/tensor_subscriber.c), which checks every layout and value."""
    env = dict(os.environ, IOX_ROOT=root, PYTHONPATH=TESTS, MEMORY="CPU")
    producer = run_python(PRODUCER.replace("COUNT", str(COUNT)), env)
    try:
        c = subprocess.run([str(c_examples / "c_tensor_subscriber"), "--count", str(COUNT)], env=env,
                           capture_output=True, text=True, timeout=120)
        assert c.returncode == 0, c.stderr
        assert "sent" in finish(producer, "the producer")
    finally:
        if producer.poll() is None:
            producer.kill()
    assert c.stdout.splitlines() == [f"float32 [{i + 1}, 8]" for i in range(COUNT)], c.stdout


def test_host_tensors_from_python_to_cpp(root, c_examples):
    """The Python producer above read by the C++ example's tensor subscriber."""
    env = dict(os.environ, IOX_ROOT=root, PYTHONPATH=TESTS, MEMORY="CPU")
    producer = run_python(PRODUCER.replace("COUNT", str(COUNT)), env)
    try:
        cpp = subprocess.run([str(c_examples / "cpp_tensors"), "subscribe", "--count", str(COUNT)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert cpp.returncode == 0, cpp.stderr
        assert "sent" in finish(producer, "the producer")
    finally:
        if producer.poll() is None:
            producer.kill()
    assert cpp.stdout.splitlines() == [f"float32 [{i + 1}, 8]" for i in range(COUNT)], cpp.stdout


def test_the_same_producer_runs_on_a_gpu_service(root, tensors):  # noqa: F811
    """The producer above, unchanged but for MEMORY, on a CUDA_DEVICE service."""
    driver, _ = tensors
    env = dict(env_for(root, driver), MEMORY="CUDA_DEVICE")
    consumer = """
import iox, time
from dlpack_ctypes import Consumed
import numpy as np
deadline = time.time() + 30
while True:
    try:
        svc = iox.Service("same/tensors").publish_subscribe().open()
        break
    except iox.ServiceNotFound:
        assert time.time() < deadline
        time.sleep(0.01)
sub = svc.tensor_subscriber()
for i in range(COUNT):
    s = sub.receive(timeout=30)
    t = Consumed(s.__dlpack__(stream=None))
    span = t.span()
    assert (span == 1000 * i + np.arange(span.size)).all()
    print(s.dtype, list(t.shape))
    t.done()
"""
    out = run_pair(env, consumer)
    assert out.split("\n")[:COUNT] == [f"float32 [{i + 1}, 8]" for i in range(COUNT)], out


def test_plain_publishers_bad_layouts_and_unconsumed_capsules(root):
    svc = iox.Service("faults/host-tensors").publish_subscribe(np.float32, max_len=16).tensors().create()
    with pytest.raises(iox.Error, match="tensor_publisher"):
        svc.publisher()
    pub = svc.tensor_publisher()
    sub = svc.tensor_subscriber()
    # Every refusal of a tensor, whatever is wrong with it, is one type: iox.TensorError
    # (an iox.Error and a BufferError).
    with pytest.raises(iox.TensorError, match="80 bytes; 64 bytes fit"):
        pub.loan((4, 5))
    with pytest.raises(iox.TensorError, match="stride -1"):
        pub.loan(4, strides=[-1])
    with pytest.raises(iox.TensorError, match="9 dimensions"):
        pub.loan((1,) * 9)
    with pytest.raises(iox.TensorError, match="float64 on a service of float32"):
        pub.send_tensor(np.zeros(4))
    with pytest.raises(iox.TensorError, match="negative strides"):
        pub.send_tensor(np.arange(4, dtype=np.float32)[::-1])
    assert issubclass(iox.TensorError, iox.Error) and issubclass(iox.TensorError, BufferError)

    def used():
        return sum(u for _, _, u in iox.pool_usage("faults/host-tensors"))

    assert pub.send_tensor(np.arange(4, dtype=np.float32)) == 1
    queued = used()
    s = sub.receive()
    cap = s.__dlpack__()
    del s
    assert used() == queued
    del cap                                   # never consumed: the sample goes with it
    assert used() == queued - 1
    plain = iox.Service("faults/plain").publish_subscribe(np.float32, max_len=4).create()
    with pytest.raises(iox.Error, match=r"\.tensors\(\)"):
        plain.tensor_publisher()


def test_loans_and_samples_are_exported_in_place_only(root):
    """A consumer asking for another device or a copy is refused, and the refusal
    leaves the loan and the sample as they were."""
    svc = iox.Service("faults/in-place").publish_subscribe(np.float32, max_len=16).tensors().create()
    pub = svc.tensor_publisher()
    sub = svc.tensor_subscriber()
    loan = pub.loan((4,))
    with pytest.raises(BufferError, match=r"a loan is exported in place, in host memory; no copy to DLPack device \(2, 0\)"):
        loan.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="a loan is exported in place, in host memory; copy=True"):
        loan.__dlpack__(copy=True)
    np.from_dlpack(loan)[...] = np.arange(4, dtype=np.float32)
    assert loan.send() == 1
    s = sub.receive()
    with pytest.raises(BufferError, match=r"a sample is exported in place, in host memory; no copy to DLPack device \(2, 0\)"):
        s.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="a sample is exported in place, in host memory; copy=True"):
        s.__dlpack__(copy=True)
    assert (np.from_dlpack(s) == np.arange(4, dtype=np.float32)).all()


def test_a_loan_is_not_sent_while_a_view_of_it_lives(root):
    """A DLPack view of a loan kept past send() would write into what subscribers read
    (a sample once changed from [5, ...] to [999, ...] after delivery): send() is
    refused while any view of the loan lives (a consumed one or a capsule not yet
    consumed), as for a plain loan's numpy views; a loan closed with a view alive keeps
    its chunk until the view goes, so the view never writes a chunk someone else has."""
    svc = iox.Service("faults/kept-view").publish_subscribe(np.int32, max_len=4).tensors().create()
    pub, sub = svc.tensor_publisher(), svc.tensor_subscriber()

    def used():
        return sum(u for _, _, u in iox.pool_usage("faults/kept-view"))

    loan = pub.loan((4,))
    view = np.from_dlpack(loan)
    view[...] = 5
    with pytest.raises(iox.ViewsAlive, match="1 DLPack view"):
        loan.send()
    cap = loan.__dlpack__()
    del view
    with pytest.raises(iox.ViewsAlive, match="1 DLPack view"):
        loan.send()
    del cap
    assert loan.send() == 1
    s = sub.receive()
    assert np.from_dlpack(s).tolist() == [5, 5, 5, 5]
    del s
    idle = used()
    loan = pub.loan((4,))
    view = np.from_dlpack(loan)
    loan.close()
    other = pub.loan((4,))
    assert other.data_ptr != loan.data_ptr, "closed with a view alive: the chunk stays the view's"
    other.close()
    view[...] = 999
    del view
    assert used() == idle, "the chunk comes back with the view"
    with pytest.raises(BufferError, match="sent or closed"):
        loan.send()
