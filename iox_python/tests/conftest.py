"""Shared fixtures: each test gets its own iox root (a temporary directory, also set
as $IOX_ROOT for child processes), a helper that runs Python code in a child, the
Rust example binaries, and the C and C++ examples (iox_ffi/examples) compiled."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("IOX_ROOT", str(tmp_path))
    return str(tmp_path)


def spawn_python(code: str, **kw) -> subprocess.Popen:
    """Starts `code` in a new Python process (stdout piped, text mode)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


@pytest.fixture(scope="session")
def rust_examples():
    """The directory of the Rust example binaries (built here if missing)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    bindir = os.path.join(target, "debug")
    bins = ("publisher", "subscriber", "schema_peer", "attribute_peer", "camera", "reqres_peer")
    if not all(os.path.exists(os.path.join(bindir, b)) for b in bins):
        subprocess.run(["cargo", "build", "-q", "-p", "iox_examples"] + [a for b in bins for a in ("--bin", b)],
                       cwd=REPO, check=True)
    return bindir


def double_and_example(tmp_path_factory, example: str) -> tuple[str, str]:
    """A directory holding libcuda.so(.1) -> the CUDA driver double, and the Rust GPU
    example `example` built with the `cuda` feature (both built here if missing)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    lib = os.path.join(target, "debug", "libiox_cuda_double.so")
    binary = os.path.join(target, "debug", example)
    if not os.path.exists(lib):
        subprocess.run(["cargo", "build", "-q", "-p", "iox_cuda_double"], cwd=REPO, check=True)
    if not os.path.exists(binary):
        subprocess.run(["cargo", "build", "-q", "-p", "iox_examples", "--features", "cuda", "--bin", example],
                       cwd=REPO, check=True)
    d = tmp_path_factory.mktemp("driver")
    for name in ("libcuda.so", "libcuda.so.1"):
        os.symlink(lib, d / name)
    return str(d), binary


@pytest.fixture(scope="session")
def c_examples(tmp_path_factory):
    """The C and C++ examples (iox_ffi/examples), compiled with gcc/g++ into a temporary
    directory against the `libiox_ffi.so` that `cargo test --workspace` built (or
    `cargo build -p iox_ffi`, run here if there is none)."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc and g++ are needed to build the C and C++ examples")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    candidates = [os.path.join(target, "debug", "deps"), os.path.join(target, "debug")]
    libdir = next((d for d in candidates if os.path.exists(os.path.join(d, "libiox_ffi.so"))), None)
    if libdir is None:
        subprocess.run(["cargo", "build", "-q", "-p", "iox_ffi"], cwd=REPO, check=True)
        libdir = os.path.join(target, "debug")
    out = tmp_path_factory.mktemp("c_examples")
    ffi = os.path.join(REPO, "iox_ffi")
    common = ["-I", os.path.join(ffi, "include"), f"-L{libdir}", f"-Wl,--disable-new-dtags,-rpath,{libdir}"]
    builds = {
        "c_publisher": ["gcc", "-std=c11", os.path.join(ffi, "examples", "publisher.c")],
        "cpp_subscriber": ["g++", "-std=c++17", os.path.join(ffi, "examples", "subscriber.cpp")],
        "cpp_camera": ["g++", "-std=c++17", os.path.join(ffi, "examples", "camera.cpp")],
        "cpp_ros2_camera": ["g++", "-std=c++17", os.path.join(ffi, "examples", "ros2_camera.cpp")],
        "cpp_tensors": ["g++", "-std=c++17", os.path.join(ffi, "examples", "tensors.cpp")],
        "cpp_request_response": ["g++", "-std=c++17", os.path.join(ffi, "examples", "request_response.cpp")],
        "cpp_blackboard": ["g++", "-std=c++17", os.path.join(ffi, "examples", "blackboard.cpp")],
        "c_tensor_subscriber": ["gcc", "-std=c11", os.path.join(ffi, "examples", "tensor_subscriber.c")],
    }
    for name, cmd in builds.items():
        subprocess.run(cmd + common + ["-o", str(out / name), "-liox_ffi"], check=True)
    return out
