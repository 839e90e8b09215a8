"""Shared fixtures: each test gets its own iox root (a temporary directory, also set
as $IOX_ROOT for child processes), and a helper that runs Python code in a child."""

import os
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
    bins = ("publisher", "subscriber", "schema_peer", "attribute_peer")
    if not all(os.path.exists(os.path.join(bindir, b)) for b in bins):
        subprocess.run(["cargo", "build", "-q", "-p", "iox_examples"] + [a for b in bins for a in ("--bin", b)],
                       cwd=REPO, check=True)
    return bindir
