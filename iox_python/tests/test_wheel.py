"""The package as a user installs it: `maturin build` makes a wheel (abi3, CUDA support
built in), and `pip install` puts it into a fresh virtual environment whose processes
have no Rust toolchain on PATH; two processes of that environment then exchange a
sample and a CUDA-free process imports the device classes (the driver is loaded only
when a CUDA service is used); the wheel and `iox.__version__` carry the package's
version."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

SCRIPT = """
import sys, numpy as np, iox
role = sys.argv[1]
svc = iox.Service("wheel/check").publish_subscribe(np.uint32, shape=3).open_or_create()
if role == "sub":
    sub = svc.subscriber()
    print("ready", flush=True)
    s = sub.receive(timeout=30)
    assert s is not None and s.array.tolist() == [1, 2, 3], s
    assert iox.DeviceSample and iox.TensorPublisher   # the package's CUDA support is there
    print("got", s.array.tolist())
    print("version", iox.__version__)
else:
    pub = svc.publisher()
    assert pub.wait_for_subscribers(1, 30) == 1
    pub.send(np.array([1, 2, 3], np.uint32))
"""


def test_the_wheel_installs_and_runs_without_rust(tmp_path, root):
    maturin = shutil.which("maturin") or os.path.join(os.path.dirname(sys.executable), "maturin")
    if not os.path.exists(maturin):
        pytest.skip("maturin is not installed (scripts/python-tests.sh installs it)")
    wheels = tmp_path / "wheels"
    subprocess.run([maturin, "build", "-q", "-o", str(wheels)], cwd=os.path.join(REPO, "iox_python"), check=True)
    [wheel] = list(wheels.glob("iox-*.whl"))
    assert "abi3" in wheel.name, wheel.name
    with open(os.path.join(REPO, "iox_python", "pyproject.toml")) as f:
        version = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert wheel.name.startswith(f"iox-{version}-"), wheel.name
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # No cargo or rustc where the fresh environment looks.
    env = dict(os.environ, PATH=f"{venv / 'bin'}:/usr/bin:/bin", IOX_ROOT=root)
    for var in ("CARGO_HOME", "RUSTUP_HOME", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(var, None)
    if shutil.which("cargo", path=env["PATH"]) is not None:
        pytest.skip("cargo is installed system-wide here: no environment without Rust to install into")
    subprocess.run([python, "-m", "pip", "install", "-q", str(wheel)], env=env, check=True)
    sub = subprocess.Popen([python, "-c", SCRIPT, "sub"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        assert sub.stdout.readline().strip() == "ready", sub.stderr.read()
        pub = subprocess.run([python, "-c", SCRIPT, "pub"], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)
        assert pub.returncode == 0, pub.stderr
        out, err = sub.communicate(timeout=60)
        assert sub.returncode == 0, err
    finally:
        if sub.poll() is None:
            sub.kill()
    assert "got [1, 2, 3]" in out
    # The installed package says which iox it is: pyproject's version, the crates' too.
    assert f"version {version}" in out, out
