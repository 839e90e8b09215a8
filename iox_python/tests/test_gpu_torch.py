"""A CudaDevice service read by PyTorch on a real GPU: the gpu_device example
publishes 16 MiB tensors (tensor i all bytes i) from its own process, and a Python
process takes each with `torch.from_dlpack`, in place on the GPU, and sums it there.

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
for i in range(COUNT):
    s = sub.receive(timeout=30)
    assert s is not None, "no tensor within 30 s"
    t = torch.from_dlpack(s)
    assert t.is_cuda and t.dtype == torch.uint8 and t.numel() == 16 << 20, (t.device, t.dtype, t.shape)
    assert t.data_ptr() == s.device_ptr, "not in place"
    total = int(t.to(torch.int64).sum().item())
    assert total == i * (16 << 20), (i, total)
    del t
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
