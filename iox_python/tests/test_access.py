"""Access policies from Python (``iox.AccessPolicy``, ``PubSubBuilder.access``):
the policy reads back as its creator recorded it and must match on open; and across
real users, a reader uid subscribes and receives but its publisher is refused
(``iox.NotAPublisher``), while a uid the policy does not name is refused at open
(``iox.AccessDenied``). The cross-user tests run Python children as uids 1002 and 1004
(through ``setpriv``), so they need root; otherwise they skip, saying so."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

import iox

READER = 1002
STRANGER = 1004
LIMIT = 30.0


def test_a_policy_reads_back_as_recorded_and_must_match_on_open(root):
    given = iox.AccessPolicy(publish_uids=[1001], read_uids=[READER], read_gids=[1003])
    assert given.creator is None
    assert (given.publish_uids, given.publish_gids, given.read_uids, given.read_gids) == ((1001,), (), (READER,), (1003,))
    assert str(given) == "publish: the creator, uid 1001; read: uid 1002, gid 1003"
    svc = iox.Service("access/readback").publish_subscribe(np.uint64).permissions(0o666).access(given).create()
    recorded = svc.access_policy
    me = os.geteuid()
    assert recorded.creator == me
    assert str(recorded) == f"publish: uid {me} (creator), uid 1001; read: uid 1002, gid 1003"
    assert repr(recorded) == f"<iox.AccessPolicy {recorded}>"
    # Opened with the same rules, or without any (it takes the service's).
    same = iox.Service("access/readback").publish_subscribe(np.uint64).access(given).open()
    assert str(same.access_policy) == str(recorded)
    assert str(iox.Service("access/readback").publish_subscribe().open().access_policy) == str(recorded)
    with pytest.raises(iox.IncompatibleService, match="has access policy"):
        iox.Service("access/readback").publish_subscribe(np.uint64).access(iox.AccessPolicy()).open()
    # The creator pinned: this user's service is accepted, another's creator is not.
    pinned = iox.AccessPolicy(publish_uids=[1001], read_uids=[READER], read_gids=[1003], created_by=me)
    assert str(iox.Service("access/readback").publish_subscribe(np.uint64).access(pinned).open().access_policy) == str(recorded)
    other = iox.AccessPolicy(publish_uids=[1001], read_uids=[READER], read_gids=[1003], created_by=me + 1)
    with pytest.raises(iox.IncompatibleService, match=f"uid {me + 1} \\(creator\\)"):
        iox.Service("access/readback").publish_subscribe(np.uint64).access(other).open()
    assert iox.Service("access/none").publish_subscribe(np.uint64).create().access_policy is None
    with pytest.raises(TypeError, match="iox.AccessPolicy"):
        iox.Service("access/none").publish_subscribe(np.uint64).access([READER])


@pytest.fixture
def shared_root():
    """An iox root every user may use (sticky and open to all, as /dev/shm is), as
    root; the test skips otherwise."""
    if os.geteuid() != 0:
        pytest.skip("running children as other users (uids 1002 and 1004) needs root")
    work = tempfile.mkdtemp(prefix="iox-access-")
    os.chmod(work, 0o1777)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def as_user(uid):
    """The command prefix that runs a program as `uid` (its own group, no other groups).
    setpriv rather than Popen's `user=`: it executes the program before giving up root,
    so an interpreter whose directories only root may search (a pyenv under /root)
    still starts; the program then runs without any privilege."""
    assert shutil.which("setpriv"), "running as root: setpriv (util-linux) is needed"
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def spawn_as(uid, code, root, name):
    """`code` in a Python child running as `uid`, with the service's root and name in
    $IOX_ROOT and $SERVICE (stdout and stderr piped, text mode)."""
    env = dict(os.environ, IOX_ROOT=root, SERVICE=name)
    return subprocess.Popen(as_user(uid) + [sys.executable, "-c", textwrap.dedent(code)], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(child):
    """Waits (bounded) for `child` and checks it exited 0."""
    try:
        out, err = child.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the child ran past {LIMIT} s: {err}")
    assert child.returncode == 0, f"the child failed (exit {child.returncode}): {out}{err}"


def create(root, name):
    return (iox.Service(name, root=root).publish_subscribe(np.uint64).permissions(0o666)
            .access(iox.AccessPolicy(read_uids=[READER])).create())


def test_a_reader_uid_subscribes_but_may_not_publish(shared_root):
    probe = subprocess.run(as_user(READER) + [sys.executable, "-c", "import iox"], cwd=shared_root,
                           capture_output=True, text=True)
    assert probe.returncode == 0, (
        f"uid {READER} cannot import iox from this venv (make its directories readable by others): {probe.stderr}")
    svc = create(shared_root, "access/reader")
    child = spawn_as(READER, f"""
        import os, iox, numpy as np
        svc = iox.Service(os.environ["SERVICE"]).publish_subscribe(np.uint64).open()
        policy = svc.access_policy
        assert (policy.creator, policy.read_uids) == (0, ({READER},)), policy
        try:
            svc.publisher()
        except iox.NotAPublisher as e:
            assert "is a reader in its access policy" in str(e), e
        else:
            raise AssertionError("a reader made a publisher")
        sample = svc.subscriber().receive(timeout={LIMIT})
        assert sample is not None, "nothing received within {LIMIT} s"
        assert int(sample.array) == 7, sample.array
    """, shared_root, "access/reader")
    pub = svc.publisher()
    # Until its subscriber is connected (then it is sent what it waits for), or it ended.
    deadline = time.monotonic() + LIMIT
    while pub.wait_for_subscribers(1, 0.1) < 1:
        if child.poll() is not None:
            finish(child)  # says why it failed
            pytest.fail("the reader ended without waiting for its sample")
        assert time.monotonic() < deadline, f"the reader did not subscribe within {LIMIT} s"
    pub.send(7)
    finish(child)


def test_a_uid_the_policy_does_not_name_is_refused_at_open(shared_root):
    svc = create(shared_root, "access/stranger")  # alive while the child tries
    child = spawn_as(STRANGER, f"""
        import os, iox, numpy as np
        try:
            iox.Service(os.environ["SERVICE"]).publish_subscribe(np.uint64).open()
        except iox.AccessDenied as e:
            assert type(e) is iox.AccessDenied, type(e)
            text = str(e)
            assert "uid {STRANGER} (gid {STRANGER})" in text and "read: uid {READER}" in text, text
        else:
            raise AssertionError("a uid the policy does not name opened the service")
    """, shared_root, "access/stranger")
    finish(child)
    assert svc.port_counts() == (0, 0)
