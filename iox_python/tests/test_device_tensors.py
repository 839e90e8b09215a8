"""Typed tensors on CUDA_DEVICE services from Python, against the CUDA driver double
(cuda_double/, loaded as libcuda.so.1 in the child processes): Python producers (a
loan written in place through DLPack, `send_tensor` from host arrays and from another
service's device samples) and consumers, with the Rust example `gpu_tensors` on the
other side, element type, shape, strides and every element checked; bad layouts
refused at the loan; loans dropped unsent and capsules never consumed give their
chunks back. The children reach the device memory through ctypes (dlpack_ctypes.py),
as a consumer such as PyTorch does."""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import REPO, double_and_example
from test_device import log_calls, wait_for_service

TESTS = os.path.dirname(os.path.abspath(__file__))
COUNT = 4


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    """(libcuda.so.1 -> the double's directory, the gpu_tensors example)."""
    return double_and_example(tmp_path_factory, "gpu_tensors")


def env_for(root, driver):
    return dict(os.environ, LD_LIBRARY_PATH=driver, IOX_ROOT=root, PYTHONPATH=TESTS)


def run_python(code, env, **kw):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def finish(proc, name, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"{name} failed:\n{err}\n{out}"
    return out


# A Python consumer of `examples/typed-tensors` (what gpu_tensors publishes: tensor i
# of shape [i + 1, 8], element k = 1000 i + k): checks each sample's dtype, shape and
# strides as iox reports them and as its DLPack capsule gives them, and every element.
CONSUMER = """
import time
import numpy as np
import iox
from dlpack_ctypes import Consumed

deadline = time.time() + 30
while True:
    try:
        svc = iox.Service("examples/typed-tensors").publish_subscribe().open()
        break
    except iox.ServiceNotFound:
        assert time.time() < deadline, "the producer never made its service"
        time.sleep(0.01)
sub = svc.device_subscriber()
for _ in range(COUNT):
    s = sub.receive(timeout=30)
    assert s is not None, "no tensor within 30 s"
    t = Consumed(s.__dlpack__(stream=None))
    i = int(t.span()[0]) // 1000 if t.span().size else 0
    assert s.dtype == "float32" and t.dtype == np.float32, (s.dtype, t.dtype)
    assert tuple(s.shape) == t.shape and tuple(s.strides) == t.strides, (s.shape, t.shape)
    span = t.span()
    assert (span == 1000 * i + np.arange(span.size, dtype=np.float32)).all(), (i, span[:8])
    print(s.dtype, list(t.shape), "strides", list(t.strides))
    t.done()
"""


def test_rust_to_python_tensors_arrive_typed(root, tensors):
    driver, example = tensors
    env = env_for(root, driver)
    publisher = subprocess.Popen([example, "--publish", "--count", str(COUNT)], env=env)
    try:
        wait_for_service(root)
        out = finish(run_python(CONSUMER.replace("COUNT", str(COUNT)), env), "the Python consumer")
        assert publisher.wait(timeout=60) == 0
    finally:
        if publisher.poll() is None:
            publisher.kill()
    assert out.split("\n")[:COUNT] == [f"float32 [{i + 1}, 8] strides [8, 1]" for i in range(COUNT)], out


# A Python producer for gpu_tensors --receive: tensor i as gpu_tensors writes it, sent
# three ways in turn: a loan written in place through its DLPack capsule, send_tensor
# of a numpy array (host to device), and send_tensor of a transposed numpy view (its
# strides travel with it; the bytes keep their order in memory).
PRODUCER = """
import numpy as np
import iox
from dlpack_ctypes import Consumed

svc = iox.Service("examples/typed-tensors").publish_subscribe().timeout(30).open()
pub = svc.device_publisher()
assert pub.dtype == "float32" and pub.max_bytes == 64 * 8 * 4, (pub.dtype, pub.max_bytes)
assert pub.wait_for_subscribers(1, 30) == 1
for i in range(COUNT):
    rows = i + 1
    values = (1000 * i + np.arange(rows * 8)).astype(np.float32)
    if i % 3 == 0:
        loan = pub.loan((rows, 8))
        assert loan.shape == [rows, 8] and loan.dtype == "float32" and loan.nbytes == values.nbytes
        view = Consumed(loan.__dlpack__(stream=None))
        assert view.data == loan.device_ptr and view.shape == (rows, 8)
        view.write(values)
        view.done()
        assert loan.send() == 1
    elif i % 3 == 1:
        assert pub.send_tensor(values.reshape(rows, 8)) == 1
    else:
        assert pub.send_tensor(values.reshape(8, rows).T) == 1   # shape (rows, 8), strides (1, rows)
print("sent")
"""


def produce_for(root, driver, receiver_command):
    """Starts the receiving program `receiver_command` (it makes the service), runs
    PRODUCER against it, and returns what the receiver printed."""
    env = env_for(root, driver)
    receiver = subprocess.Popen(receiver_command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_service(root)
        finish(run_python(PRODUCER.replace("COUNT", str(COUNT)), env), "the Python producer")
        return finish(receiver, " ".join(map(str, receiver_command)))
    finally:
        if receiver.poll() is None:
            receiver.kill()


def test_python_to_rust_loans_and_send_tensor(root, tensors):
    driver, example = tensors
    out = produce_for(root, driver, [example, "--receive", "--count", str(COUNT)])
    expected = []
    for i in range(COUNT):
        rows = i + 1
        strides = f"[1, {rows}]" if i % 3 == 2 else "[8, 1]"
        expected.append(f"float32 [{rows}, 8] strides {strides} checked")
    assert out.split("\n")[:COUNT] == expected, out


# Python to Python, device to device: a relay takes gpu_tensors' tensors and sends each
# one on to `relay/out` with send_tensor (the DeviceSample is the DLPack producer), a
# consumer reads them there.
RELAY = """
import iox
src = iox.Service("examples/typed-tensors").publish_subscribe().timeout(30).open()
sub = src.device_subscriber()
import numpy as np
out = iox.Service("relay/out").publish_subscribe(np.float32, max_len=64 * 8) \\
    .memory_type(iox.MemoryType.CUDA_DEVICE).subscriber_buffer(16).open_or_create()
pub = out.device_publisher()
assert pub.wait_for_subscribers(1, 30) == 1
for _ in range(COUNT):
    s = sub.receive(timeout=30)
    assert s is not None
    assert pub.send_tensor(s) == 1
    try:
        s.__dlpack__()
        raise AssertionError("send_tensor left the sample exportable")
    except BufferError:
        pass
print("relayed")
"""


def test_python_to_python_through_a_relay_on_the_gpu(root, tensors, tmp_path):
    """Also the relay's driver calls per tensor, from the double's log: one wait on the
    writer's event (the sample's), one device-to-device copy and one host wait for it
    (send_tensor's, before the source's deleter runs), the loan's waits on the chunk's
    last users, two records (the sample's release, the send), and no other host
    synchronisation until its ports retire after the last tensor."""
    driver, example = tensors
    log = str(tmp_path / "cuda-calls.log")
    env = dict(env_for(root, driver), IOX_CUDA_DOUBLE_LOG=log)
    publisher = subprocess.Popen([example, "--publish", "--count", str(COUNT)], env=env)
    try:
        wait_for_service(root)
        relay = run_python(RELAY.replace("COUNT", str(COUNT)), env)
        consumer = run_python(CONSUMER.replace("COUNT", str(COUNT)).replace("examples/typed-tensors", "relay/out"),
                              env)
        out = finish(consumer, "the consumer")
        assert "relayed" in finish(relay, "the relay")
        assert publisher.wait(timeout=60) == 0
    finally:
        if publisher.poll() is None:
            publisher.kill()
    assert out.split("\n")[:COUNT] == [f"float32 [{i + 1}, 8] strides [8, 1]" for i in range(COUNT)], out
    calls = [c for c in log_calls(log) if c.get("pid") == str(relay.pid)]
    names = [c["call"] for c in calls]
    copies = [i for i, n in enumerate(names) if n == "cuMemcpyDtoDAsync_v2"]
    assert len(copies) == COUNT, names
    assert names.count("cuEventRecord") == 2 * COUNT, names
    assert not any(n in {"cuEventSynchronize", "cuCtxSynchronize"} for n in names[:copies[-1]]), names
    syncs = [i for i, n in enumerate(names) if n == "cuStreamSynchronize"]
    # One host wait after each copy, before the next tensor's.
    bounds = copies[1:] + [len(names)]
    assert all(any(c < w < b for w in syncs) for c, b in zip(copies, bounds)), list(enumerate(names))
    assert len([w for w in syncs if w < copies[-1]]) == COUNT - 1, list(enumerate(names))
    per_tensor = names.count("cuStreamWaitEvent") / COUNT
    # The sample's wait, and the loan's on the chunk's last reader and last writer.
    assert per_tensor <= 3, names


@pytest.fixture(scope="module")
def cpp_tensors(tmp_path_factory):
    """iox_ffi/examples/device_tensors.cpp (iox.hpp's device ports), compiled."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to build the C++ example")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    libdir = next((d for d in (os.path.join(target, "debug", "deps"), os.path.join(target, "debug"))
                   if os.path.exists(os.path.join(d, "libiox_ffi.so"))), None)
    if libdir is None:
        subprocess.run(["cargo", "build", "-q", "-p", "iox_ffi"], cwd=REPO, check=True)
        libdir = os.path.join(target, "debug")
    exe = str(tmp_path_factory.mktemp("cpp") / "device_tensors")
    ffi = os.path.join(REPO, "iox_ffi")
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ffi, "include"),
                    os.path.join(ffi, "examples", "device_tensors.cpp"), "-o", exe, f"-L{libdir}",
                    f"-Wl,--disable-new-dtags,-rpath,{libdir}", "-liox_ffi", "-ldl"], check=True)
    return exe


def test_cpp_to_python_tensors_arrive_typed(root, tensors, cpp_tensors):
    """The C++ example publishes (DevicePublisher, DeviceLoan); Python reads."""
    driver, _ = tensors
    env = env_for(root, driver)
    producer = subprocess.Popen([cpp_tensors, "--count", str(COUNT)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        out = finish(run_python(CONSUMER.replace("COUNT", str(COUNT)), env), "the Python consumer")
        assert "sent 4 tensors" in finish(producer, "device_tensors")
    finally:
        if producer.poll() is None:
            producer.kill()
    assert out.split("\n")[:COUNT] == [f"float32 [{i + 1}, 8] strides [8, 1]" for i in range(COUNT)], out


def test_python_to_cpp_tensors_arrive_typed(root, tensors, cpp_tensors):
    """Python publishes (loans and send_tensor, a strided one too); the C++ example
    reads (DeviceSubscriber, DeviceSample) and checks every element."""
    driver, _ = tensors
    out = produce_for(root, driver, [cpp_tensors, "--receive", "--count", str(COUNT)])
    expected = [f"float32 [{i + 1}, 8] strides {f'[1, {i + 1}]' if i % 3 == 2 else '[8, 1]'} checked"
                for i in range(COUNT)]
    assert out.split("\n")[:COUNT] == expected, out


# Bad input and chunks given back, in one process (it makes the service).
FAULTS = """
import gc
import numpy as np
import iox
from dlpack_ctypes import Consumed

svc = iox.Service("faults/tensors").publish_subscribe(np.float32, max_len=16) \\
    .memory_type(iox.MemoryType.CUDA_DEVICE).subscriber_buffer(4).create()
pub = svc.device_publisher()
sub = svc.device_subscriber()
import os
ROOT = os.environ["IOX_ROOT"]
chunks = sum(count for _, count, _ in iox.pool_usage("faults/tensors", ROOT))
def free():
    return sum(count - used for _, count, used in iox.pool_usage("faults/tensors", ROOT))
assert free() == chunks

def refused(call, *words):
    try:
        call()
    except (iox.Error, BufferError, ValueError) as e:
        assert all(w in str(e) for w in words), (str(e), words)
        return
    raise AssertionError(f"accepted: {words}")

refused(lambda: pub.loan((4, 5)), "80 bytes", "64 bytes fit")                            # larger than the service's
refused(lambda: pub.loan(4, strides=[10]), "124 bytes", "64")                    # strides reach past it
refused(lambda: pub.loan((2,) * 9), "9 dimensions", "at most 8")
refused(lambda: pub.loan(4, strides=[-1]), "stride -1")
refused(lambda: pub.send_tensor(np.zeros(4, np.float64)), "float64", "float32")  # another dtype
refused(lambda: pub.send_tensor(np.zeros(17, np.float32)), "68 bytes", "64")
refused(lambda: pub.send_tensor(np.zeros(4, np.complex64)), "not a tensor element type")
assert free() == chunks, "a refused loan holds no chunk"

# A loan dropped unsent, or closed, gives its chunk back (to the publisher, which keeps
# one as its spare for the next loan): loaning and dropping more often than
# max_loans allows at once never runs out.
for _ in range(8):
    loan = pub.loan(4)
    del loan
    with pub.loan(4) as loan:
        pass
refused(lambda: loan.send(), "sent or closed")

# A loan is not sent while a view of it lives (writing through the view after the send
# would change what subscribers read): del the view first.
loan = pub.loan(4)
view = Consumed(loan.__dlpack__(stream=None))
refused(lambda: loan.send(), "1 DLPack view")
view.write(np.arange(4, dtype=np.float32))
view.done()
assert loan.send() == 1
t = Consumed(sub.receive().__dlpack__(stream=None))
assert list(t.span()) == [0, 1, 2, 3]
t.done()

# A sample exported to a capsule nobody consumes gives its chunk back with the capsule;
# one consumed, when the consumer calls the deleter.
def used():
    return chunks - free()
assert pub.send_tensor(np.arange(4, dtype=np.float32)) == 1
queued = used()
s = sub.receive()
cap = s.__dlpack__(stream=None)
del s
gc.collect()
assert used() == queued, "the capsule holds the sample"
del cap
gc.collect()
assert used() == queued - 1, "an unconsumed capsule kept its chunk"
assert pub.send_tensor(np.arange(4, dtype=np.float32)) == 1
queued = used()
t = Consumed(sub.receive().__dlpack__(stream=None))
assert list(t.span()) == [0, 1, 2, 3]
gc.collect()
assert used() == queued
t.done()
assert used() == queued - 1
del pub, sub, loan
gc.collect()
assert free() == chunks, "every chunk is back once the ports are gone"
print("ok")
"""


def test_bad_tensors_are_refused_and_chunks_come_back(root, tensors):
    driver, _ = tensors
    assert "ok" in finish(run_python(FAULTS, env_for(root, driver)), "the faults script")


# The kill test's processes, each one role of one script (ROLE set by the test):
# keeper creates the service and holds it; producer sends two tensors and parks;
# holder takes one, exports it and holds the capsule; writer sends until killed...
KILLED = """
import os, sys, time
import numpy as np
import iox
from dlpack_ctypes import Consumed

ROOT, DIR, ROLE = os.environ["IOX_ROOT"], os.environ["TEST_DIR"], os.environ["ROLE"]
def mark(name):
    open(os.path.join(DIR, name), "w").close()
def wait_for(name):
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(DIR, name)):
        assert time.time() < deadline, f"{name} never appeared"
        time.sleep(0.01)
def service():
    return iox.Service("kill/tensors").publish_subscribe(np.float32, max_len=64) \\
        .memory_type(iox.MemoryType.CUDA_DEVICE).subscriber_buffer(2).max_subscribers(2).open_or_create()

if ROLE == "keeper":
    svc = service()
    mark("created")
    wait_for("done")
elif ROLE == "producer":
    pub = service().device_publisher()
    assert pub.wait_for_subscribers(1, 30) == 1
    for i in range(2):
        pub.send_tensor(np.full(64, 7 + i, np.float32))
    mark("sent")
    while True:
        time.sleep(1)             # until SIGKILL
elif ROLE == "reader":
    sub = service().device_subscriber()
    mark("subscribed")
    s = sub.receive(timeout=30)
    assert s is not None
    t = Consumed(s.__dlpack__(stream=None))
    mark("held")
    wait_for("producer-killed")
    # The producer is gone; the memory is this process's import and stays valid.
    assert (t.span() == 7).all(), t.span()[:4]
    t.done()
    print("read after the producer's death")
elif ROLE == "stuck-reader":
    sub = service().device_subscriber()
    mark("stuck-subscribed")
    s = sub.receive(timeout=30)
    assert s is not None
    cap = s.__dlpack__(stream=None)
    mark("stuck-held")
    while True:
        time.sleep(1)             # until SIGKILL, holding the sample
elif ROLE == "writer":
    pub = service().device_publisher()
    assert pub.wait_for_subscribers(1, 30) >= 1
    pub.send_tensor(np.zeros(64, np.float32))
    wait_for("reader-killed")
    # The killed reader's sample and queue hold chunks; loans go on (the queue drops
    # its oldest, recovery returns what the dead process held).
    for i in range(20):
        pub.send_tensor(np.full(64, i, np.float32))
    print("kept loaning")
elif ROLE == "survivor":
    svc = service()
    sub = svc.device_subscriber()          # claiming a slot recovers the dead ports first
    del sub
    used = sum(u for _, _, u in iox.pool_usage("kill/tensors", ROOT))
    assert used == 0, iox.pool_usage("kill/tensors", ROOT)
    print("pool whole")
"""


def test_killed_producers_and_consumers_lose_nothing(root, tensors, tmp_path):
    driver, _ = tensors
    env = env_for(root, driver)
    env["TEST_DIR"] = str(tmp_path)
    procs = {}

    def start(role):
        procs[role] = run_python(KILLED, dict(env, ROLE=role))
        return procs[role]

    def wait_for(name):
        deadline = time.time() + 60
        while not (tmp_path / name).exists():
            assert time.time() < deadline, f"{name} never appeared: " + repr({r: p.poll() for r, p in procs.items()})
            time.sleep(0.01)

    try:
        start("keeper")
        wait_for("created")
        start("reader")
        wait_for("subscribed")
        start("producer")
        wait_for("held")
        procs["producer"].kill()
        procs["producer"].wait()
        (tmp_path / "producer-killed").touch()
        assert "read after the producer's death" in finish(procs["reader"], "reader")
        start("stuck-reader")
        wait_for("stuck-subscribed")
        start("writer")
        wait_for("stuck-held")
        procs["stuck-reader"].kill()
        procs["stuck-reader"].wait()
        (tmp_path / "reader-killed").touch()
        assert "kept loaning" in finish(procs["writer"], "writer")
        assert "pool whole" in finish(start("survivor"), "survivor")
        (tmp_path / "done").touch()
        finish(procs["keeper"], "keeper")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
