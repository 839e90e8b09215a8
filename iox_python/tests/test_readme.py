"""The README's Python example runs as written: `sub.py`, then `pub.py` in another
process, each the README's text, as a user without privileges and with default limits
(run as `nobody` through setpriv when the tests run as root, as in CI), under their
own iox root."""

import os
import re
import selectors
import shutil
import stat
import subprocess
import sys
import tempfile
import time

from conftest import REPO


def readme_scripts():
    """The README's Python block, split into its `sub.py` and `pub.py`."""
    with open(os.path.join(REPO, "README.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) == 1, f"the README has {len(blocks)} Python blocks"
    sub, sep, pub = blocks[0].partition("\n# pub.py\n")
    assert sep and sub.startswith("# sub.py"), blocks[0]
    return sub, "# pub.py\n" + pub


def unprivileged():
    """The command prefix that drops root (nothing when not root)."""
    if os.geteuid() != 0:
        return []
    assert shutil.which("setpriv"), "running as root: setpriv (util-linux) is needed"
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def test_the_readme_python_example_runs_as_written_unprivileged():
    sub_py, pub_py = readme_scripts()
    work = tempfile.mkdtemp()
    try:
        # The unprivileged user writes the root and reads the scripts.
        os.chmod(work, stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO)
        for name, text in (("sub.py", sub_py), ("pub.py", pub_py)):
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        env = dict(os.environ, IOX_ROOT=work, PYTHONUNBUFFERED="1")
        prefix = unprivileged()
        probe = subprocess.run(prefix + [sys.executable, "-c", "import iox"], env=env,
                               capture_output=True, text=True)
        assert probe.returncode == 0, (
            "the unprivileged user cannot import iox from this venv "
            f"(make its directories readable by others): {probe.stderr}")
        sub = subprocess.Popen(prefix + [sys.executable, "sub.py"], cwd=work, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # "Run it, then pub.py": once its service exists.
            deadline = time.monotonic() + 30
            while not any(n.endswith(".service") for n in os.listdir(work)):
                assert sub.poll() is None, sub.stderr.read()
                assert time.monotonic() < deadline, "sub.py created no service"
                time.sleep(0.01)
            pub = subprocess.run(prefix + [sys.executable, "pub.py"], cwd=work, env=env,
                                 capture_output=True, text=True, timeout=120)
            assert pub.returncode == 0, pub.stderr
            # The last frame (all 99) reaches the subscriber: the newest sample is
            # never the one dropped.
            # (Raw reads: a buffered readline could hold lines select cannot see.)
            out = b""
            fd = sub.stdout.fileno()
            sel = selectors.DefaultSelector()
            sel.register(fd, selectors.EVENT_READ)
            deadline = time.monotonic() + 30
            while not any(l.startswith("99.0 ") for l in out.decode().splitlines()):
                assert time.monotonic() < deadline, f"no last frame: {out.decode()[-300:]}"
                if sel.select(timeout=1.0):
                    chunk = os.read(fd, 65536)
                    assert chunk, f"sub.py ended: {sub.stderr.read()}"
                    out += chunk
            lines = out.decode().splitlines()
            assert all("missed so far:" in l for l in lines), lines[:5]
        finally:
            sub.kill()
            sub.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
