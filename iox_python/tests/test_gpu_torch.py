"""CudaDevice services with PyTorch on a real GPU: the gpu_device example publishes
16 MiB tensors (tensor i all bytes i) from its own process, and a Python process
takes each with `torch.from_dlpack`, in place on the GPU, and sums it there; and a
PyTorch producer and a PyTorch consumer in two processes exchange typed float32
tensors in place (the producer writes loans through `torch.from_dlpack(loan)` and
sends others with `send_tensor`; the consumer's tensors have the sent shape and dtype
and `data_ptr` equal to the sample's device pointer), timed as tensors/s.

Needs torch with CUDA and a GPU; skipped with the reason otherwise (CI has neither),
and with IOX_REQUIRE_GPU=1 (what scripts/gpu-check.sh sets) a skip is a failure. The
example binary: $IOX_GPU_DEVICE_EXAMPLE, else target/{release,debug}/gpu_device (built
with `--features cuda`)."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

COUNT = 8


def skip(reason):
    if os.environ.get("IOX_REQUIRE_GPU") == "1":
        pytest.fail(f"IOX_REQUIRE_GPU=1 but {reason}")
    pytest.skip(reason)


def example():
    named = os.environ.get("IOX_GPU_DEVICE_EXAMPLE")
    if named:
        return named
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    for profile in ("release", "debug"):
        path = os.path.join(target, profile, "gpu_device")
        if os.path.exists(path):
            return path
    skip("no gpu_device example built (cargo build -p iox_examples --features cuda --bin gpu_device)")


CONSUMER = """
import os, sys, time
import iox, torch
root = os.environ["IOX_ROOT"]
deadline = time.time() + 60
while not any(f.endswith(".service") for f in os.listdir(root)):
    assert time.time() < deadline, "the publisher never created its service"
    time.sleep(0.01)
sub = iox.Service("examples/gpu-tensors").publish_subscribe().open().device_subscriber()
# gpu_device keeps at most two tensors unacknowledged: one acknowledgement per tensor.
deadline = time.time() + 60
while True:
    try:
        ack = iox.Service("examples/gpu-acks").publish_subscribe().open().publisher()
        break
    except iox.ServiceNotFound:
        assert time.time() < deadline, "no acknowledgement service"
        time.sleep(0.01)
import numpy as np
for i in range(COUNT):
    s = sub.receive(timeout=30)
    assert s is not None, "no tensor within 30 s"
    t = torch.from_dlpack(s)
    assert t.is_cuda and t.dtype == torch.uint8 and t.numel() == 16 << 20, (t.device, t.dtype, t.shape)
    assert t.data_ptr() == s.device_ptr, "not in place"
    total = int(t.to(torch.int64).sum().item())
    assert total == i * (16 << 20), (i, total)
    del t
    ack.send(np.uint64(1))
print("torch consumed", COUNT, "on", torch.cuda.get_device_name(0))
"""


def test_torch_reads_device_tensors_in_place(root):
    try:
        import torch
    except ImportError:
        skip("torch is not installed")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    binary = example()
    env = dict(os.environ, IOX_ROOT=root)
    publisher = subprocess.Popen([binary, "--publish", "--count", str(COUNT)], env=env)
    try:
        consumer = subprocess.run([sys.executable, "-c", textwrap.dedent(CONSUMER).replace("COUNT", str(COUNT))],
                                  env=env, capture_output=True, text=True, timeout=120)
        assert consumer.returncode == 0, consumer.stderr
        assert f"torch consumed {COUNT}" in consumer.stdout, consumer.stdout
        assert publisher.wait(timeout=60) == 0
    finally:
        if publisher.poll() is None:
            publisher.kill()
            publisher.wait()
    assert os.listdir(root) == [], "files left behind"


TYPED = 128
ROWS, COLS = 1024, 1024   # 4 MiB float32 tensors

PRODUCER = """
import time
import numpy as np
import iox, torch
svc = iox.Service("torch/typed").publish_subscribe(np.float32, max_len=ROWS * COLS) \\
    .memory_type(iox.MemoryType.CUDA_DEVICE).max_publishers(1).max_subscribers(1) \\
    .subscriber_buffer(TYPED).open_or_create()
pub = svc.tensor_publisher()
stream = torch.cuda.current_stream().cuda_stream
assert pub.wait_for_subscribers(1, 60) == 1
start = time.perf_counter()
for i in range(TYPED):
    if i % 2 == 0:
        loan = pub.loan((ROWS, COLS), stream=stream)
        t = torch.from_dlpack(loan)
        assert t.data_ptr() == loan.device_ptr and t.shape == (ROWS, COLS) and t.dtype == torch.float32
        t.fill_(float(i))
        del t
        loan.send(stream=stream)
    else:
        pub.send_tensor(torch.full((ROWS, COLS), float(i), device="cuda"), stream=stream)
torch.cuda.synchronize()
print(f"torch produced {TYPED} at {TYPED / (time.perf_counter() - start):.0f} tensors/s")
"""

TORCH_CONSUMER = """
import os, time
import iox, torch
deadline = time.time() + 60
while True:
    try:
        svc = iox.Service("torch/typed").publish_subscribe().open()
        break
    except iox.ServiceNotFound:
        assert time.time() < deadline
        time.sleep(0.01)
sub = svc.tensor_subscriber()
start = None
for i in range(TYPED):
    s = sub.receive(timeout=60)
    assert s is not None, "no tensor within 60 s"
    start = start or time.perf_counter()
    t = torch.from_dlpack(s)
    assert t.data_ptr() == s.device_ptr, "not in place"
    assert t.shape == (ROWS, COLS) and t.dtype == torch.float32, (t.shape, t.dtype)
    assert float(t[0, 0]) == float(i) and float(t[-1, -1]) == float(i), i
    del t
torch.cuda.synchronize()
print(f"torch consumed {TYPED} typed tensors at {TYPED / (time.perf_counter() - start):.0f} tensors/s")
"""


def test_torch_producer_and_consumer_exchange_typed_tensors_in_place(root):
    try:
        import torch
    except ImportError:
        skip("torch is not installed")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    env = dict(os.environ, IOX_ROOT=root)

    def code(text):
        return textwrap.dedent(text).replace("TYPED", str(TYPED)).replace("ROWS", str(ROWS)).replace(
            "COLS", str(COLS))

    consumer = subprocess.Popen([sys.executable, "-c", code(TORCH_CONSUMER)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        producer = subprocess.run([sys.executable, "-c", code(PRODUCER)], env=env, capture_output=True, text=True,
                                  timeout=300)
        assert producer.returncode == 0, producer.stderr
        out, err = consumer.communicate(timeout=300)
        assert consumer.returncode == 0, err
    finally:
        if consumer.poll() is None:
            consumer.kill()
    print(producer.stdout.strip())
    print(out.strip())
    assert f"torch consumed {TYPED}" in out
