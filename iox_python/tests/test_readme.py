"""The README's Python examples run as written: `sub.py`, then `pub.py` in another
process, each the README's text, as a user without privileges and with default limits
(run as `nobody` through setpriv when the tests run as root, as in CI), under their
own iox root; and `frames.py` reads the frames with their user headers that the Rust
`camera` example publishes, as the API tour says."""

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


def readme_block(first_line):
    """The one Python block of the README and the guide (docs/guide) that starts with
    `first_line`."""
    guide = os.path.join(REPO, "docs", "guide")
    texts = [os.path.join(REPO, "README.md")] + sorted(os.path.join(guide, f) for f in os.listdir(guide))
    blocks = []
    for path in texts:
        with open(path) as f:
            blocks += re.findall(r"```python\n(.*?)```", f.read(), re.S)
    found = [b for b in blocks if b.startswith(first_line + "\n") or b.startswith(first_line + " ")]
    assert len(found) == 1, f"the README has {len(found)} Python blocks starting {first_line!r}"
    return found[0]


def readme_scripts():
    """The README's first Python example, split into its `sub.py` and `pub.py`."""
    block = readme_block("# sub.py")
    sub, sep, pub = block.partition("\n# pub.py\n")
    assert sep, block
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


def test_the_readme_frames_example_reads_rust_frames_with_their_headers(rust_examples):
    script = readme_block("# frames.py")
    work = tempfile.mkdtemp()
    try:
        with open(os.path.join(work, "frames.py"), "w") as f:
            f.write(script)
        env = dict(os.environ, IOX_ROOT=work, PYTHONUNBUFFERED="1")
        # "While the camera example publishes them": it creates the service and waits
        # for a subscriber.
        camera = subprocess.Popen([os.path.join(rust_examples, "camera"), "publish", "--count", "5"],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not any(n.endswith(".service") for n in os.listdir(work)):
                assert camera.poll() is None, camera.stderr.read()
                assert time.monotonic() < deadline, "the camera example created no service"
                time.sleep(0.01)
            frames = subprocess.run([sys.executable, "frames.py"], cwd=work, env=env,
                                    capture_output=True, text=True, timeout=120)
            assert frames.returncode == 0, frames.stderr
            # stamp, width, height and the pixel count of frames 0..5 (see
            # `iox_examples::frame_header`).
            assert frames.stdout.splitlines() == [
                f"{1_000_000 + i} 64 {48 - i} {64 * (48 - i)}" for i in range(5)], frames.stdout
            _, err = camera.communicate(timeout=60)
            assert camera.returncode == 0, err
        finally:
            camera.kill()
            camera.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_guide_request_response_example_runs_as_written(root):
    """docs/guide/python.md's request-response example: its server and its client, each
    as written, in two processes."""
    block = readme_block("# square_server.py")
    server_py, sep, client_py = block.partition("\n# square_client.py\n")
    assert sep, block
    server = subprocess.Popen([sys.executable, "-c", server_py], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not any(n.endswith(".service") for n in os.listdir(root)):
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "square_server.py created no service"
            time.sleep(0.01)
        client = subprocess.run([sys.executable, "-c", client_py], capture_output=True, text=True, timeout=60)
        assert client.returncode == 0, client.stderr
        assert client.stdout.split() == ["7", "8", "64"]
        _, err = server.communicate(timeout=60)
        assert server.returncode == 0, err
    finally:
        server.kill()
