"""CUDA_DEVICE services from Python, against the CUDA driver double (cuda_double/,
loaded as libcuda.so.1 through LD_LIBRARY_PATH in the child processes): a Rust
publisher (the gpu_device example) sends 16 MiB tensors in GPU memory; a Python
process receives them as DLPack capsules of kDLCUDA memory, reads them the way a
consumer does (the DLManagedTensor's data pointer, through the driver), and hands them
back through the capsule's deleter. The double's call log shows the consumer's stream
waiting for each write before the read, and one read-done record per tensor."""

import os
import subprocess
import sys
import textwrap
import time

import iox
import pytest
from conftest import double_and_example

TENSOR = 16 << 20
COUNT = 4


@pytest.fixture(scope="module")
def double(tmp_path_factory):
    """(libcuda.so.1 -> the double's directory, the gpu_device example)."""
    return double_and_example(tmp_path_factory, "gpu_device")


CONSUMER = """
import ctypes as c
import iox
from dlpack_ctypes import DLManagedTensor, api, cuda

svc = iox.Service("examples/gpu-tensors").publish_subscribe().open()
# The writer keeps at most two tensors unacknowledged (gpu_device's pacing): one
# acknowledgement per tensor taken, on the host service it made.
import time
deadline = time.time() + 30
while True:
    try:
        ack = iox.Service("examples/gpu-acks").publish_subscribe().open().publisher()
        break
    except iox.ServiceNotFound:
        assert time.time() < deadline, "no acknowledgement service"
        time.sleep(0.01)
sub = svc.device_subscriber()
for i in range(COUNT):
    s = sub.receive(timeout=30)
    assert s is not None, "no tensor within 30 s"
    assert s.__dlpack_device__() == (2, 0) and s.nbytes == TENSOR
    try:
        s.__dlpack__(stream=0)
        raise AssertionError("stream=0 was accepted")
    except ValueError:
        pass
    cap = s.__dlpack__(stream=None)       # the legacy default stream waits for the write
    try:
        s.__dlpack__()
        raise AssertionError("a second export was accepted")
    except BufferError:
        pass
    ptr = api.PyCapsule_GetPointer(cap, b"dltensor")
    m = DLManagedTensor.from_address(ptr)
    t = m.dl_tensor
    assert t.data == s.device_ptr and t.device.device_type == 2 and t.device.device_id == 0
    assert t.ndim == 1 and t.shape[0] == TENSOR and (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (1, 8, 1)
    assert t.strides[0] == 1 and t.byte_offset == 0   # a bytes service: one stride of 1
    head = (c.c_uint8 * 64)()
    assert cuda.cuMemcpyDtoH_v2(head, c.c_uint64(t.data), 64) == 0
    assert bytes(head) == bytes([i]) * 64, (i, bytes(head)[:8])
    # A consumer takes the capsule over and calls the deleter when done with it.
    api.PyCapsule_SetName(cap, b"used_dltensor")
    m.deleter(c.cast(ptr, c.POINTER(DLManagedTensor)))
    del cap
    ack.send(__import__("numpy").uint64(1))
print("consumed", COUNT)
"""


def wait_for_service(root):
    """Until the publisher's process has created the service (its static config)."""
    deadline = time.time() + 30
    while not any(f.endswith(".service") for f in os.listdir(root)):
        assert time.time() < deadline, "the publisher never created its service"
        time.sleep(0.01)


def log_calls(log):
    calls = []
    for line in open(log):
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        calls.append(f)
    return calls


def test_a_python_consumer_gets_device_tensors_through_dlpack(root, double):
    driver, example = double
    log = os.path.join(root, "..", "cuda-calls.log")
    env = dict(os.environ, LD_LIBRARY_PATH=driver, IOX_CUDA_DOUBLE_LOG=log, IOX_ROOT=root,
               PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    publisher = subprocess.Popen([example, "--publish", "--count", str(COUNT)], env=env)
    try:
        wait_for_service(root)
        consumer = subprocess.run([sys.executable, "-c", textwrap.dedent(CONSUMER)
                                   .replace("COUNT", str(COUNT)).replace("TENSOR", str(TENSOR))],
                                  env=env, capture_output=True, text=True, timeout=120)
        assert consumer.returncode == 0, consumer.stderr
        assert "consumed" in consumer.stdout
        assert publisher.wait(timeout=60) == 0
    finally:
        if publisher.poll() is None:
            publisher.kill()
    calls = log_calls(log)
    pids = {c["pid"] for c in calls if c.get("call") == "cuMemImportFromShareableHandle"}
    assert len(pids) == 1, "the Python process imported the pool once"
    me = pids.pop()
    mine = [c for c in calls if c["pid"] == me]
    waits = [i for i, c in enumerate(mine) if c["call"] == "cuStreamWaitEvent"]
    reads = [i for i, c in enumerate(mine) if c["call"] == "cuMemcpyDtoH_v2" and c.get("bytesize") == "64"]
    records = [c for c in mine if c["call"] == "cuEventRecord"]
    assert len(waits) == COUNT and len(reads) == COUNT and len(records) == COUNT
    assert all(w < r for w, r in zip(waits, reads)), "each read after its stream's wait"
    writer = {c["event"] for c in calls if c["pid"] != me and c.get("call") == "cuEventRecord"}
    assert {mine[w]["event"] for w in waits} <= writer, "the waits are on the writer's events"


def test_a_process_without_cuda_gets_an_error_naming_the_gpu(root, double):
    driver, example = double
    env = dict(os.environ, LD_LIBRARY_PATH=driver, IOX_ROOT=root)
    publisher = subprocess.Popen([example, "--publish", "--count", "1"], env=env)
    try:
        wait_for_service(root)
        code = textwrap.dedent("""
            import iox
            try:
                iox.Service('examples/gpu-tensors').publish_subscribe().open()
            except iox.Error as e:
                print(e)
            else:
                raise AssertionError('opened a GPU service without CUDA')
        """)
        plain = dict(os.environ, IOX_ROOT=root)   # no driver on its library path
        plain.pop("LD_LIBRARY_PATH", None)
        out = subprocess.run([sys.executable, "-c", code], env=plain, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "GPU-" in out.stdout and "no CUDA driver" in out.stdout, out.stdout
    finally:
        publisher.kill()
        publisher.wait()
