"""Across processes: Python to Python, a Rust example publisher to Python, Python to
the Rust example subscriber (content checks both ways), and a Python subscriber
killed with SIGKILL while holding samples (its chunks recovered)."""

import os
import signal
import subprocess

import numpy as np
import pytest

import iox
from conftest import spawn_python

SHAPE = (32, 32)
# The Rust examples' payload (examples/src/lib.rs, `Reading`), by its Rust type name.
READING = iox.Type("iox_examples::Reading", np.dtype([("seq", "<u8"), ("value", "<f8")], align=True))


def test_python_to_python(root):
    child = spawn_python(f"""
        import iox, numpy as np
        svc = iox.Service("py/frames").publish_subscribe(np.float64, shape={SHAPE}).subscriber_buffer(8).open_or_create()
        sub = svc.subscriber()
        print("ready", flush=True)
        total = 0.0
        for _ in range(5):
            s = sub.receive(timeout=10.0)
            assert s is not None, "no sample within 10 s"
            total += float(s.array.sum())
        print(total, flush=True)
    """)
    assert child.stdout.readline().strip() == "ready"
    svc = iox.Service("py/frames").publish_subscribe(np.float64, shape=SHAPE).subscriber_buffer(8).open_or_create()
    pub = svc.publisher()
    assert pub.wait_for_subscribers(1, 10.0) >= 1
    expected = 0.0
    for i in range(5):
        frame = np.full(SHAPE, float(i))
        expected += frame.sum()
        with pub.loan() as s:
            s.array[...] = frame
            s.send()
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert float(out.strip()) == expected


def test_rust_publisher_to_python(root, rust_examples):
    svc = (iox.Service("examples/readings").publish_subscribe(READING)
           .subscriber_buffer(16).open_or_create())
    sub = svc.subscriber()
    rust = subprocess.Popen([os.path.join(rust_examples, "publisher"), "--count", "5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = []
    while len(got) < 5:
        s = sub.receive(timeout=10.0)
        assert s is not None, "no reading from the Rust publisher within 10 s"
        a = s.array
        got.append((int(a["seq"]), float(a["value"])))
    out, err = rust.communicate(timeout=30)
    assert rust.returncode == 0, err
    assert got == [(i, i * 0.5) for i in range(5)]


def test_python_to_rust_subscriber(root, rust_examples):
    svc = (iox.Service("examples/readings").publish_subscribe(READING)
           .subscriber_buffer(16).open_or_create())
    pub = svc.publisher()
    rust = subprocess.Popen([os.path.join(rust_examples, "subscriber"), "--count", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert pub.wait_for_subscribers(1, 30.0) >= 1
    for seq in range(3):
        pub.send(np.array((seq, seq * 0.25), dtype=READING.dtype))
    out, err = rust.communicate(timeout=30)
    assert rust.returncode == 0, err
    for seq in range(3):
        assert f"subscriber: got seq {seq} value {seq * 0.25:g}" in out, out


def in_use(root):
    return sum(u for _, _, u in iox.pool_usage("py/killed", root))


def test_sigkilled_subscriber_holding_samples(root):
    svc = (iox.Service("py/killed").publish_subscribe(np.uint8, shape=(1024,))
           .max_publishers(1).max_subscribers(2).open_or_create())
    pub = svc.publisher()
    pub.send(np.zeros(1024, np.uint8))  # to nobody: the publisher now holds its spare chunk
    baseline = in_use(root)
    child = spawn_python("""
        import iox, numpy as np, time
        svc = iox.Service("py/killed").publish_subscribe(np.uint8, shape=(1024,)).open()
        sub = svc.subscriber()
        print("subscribed", flush=True)
        held = [sub.receive(timeout=10.0) for _ in range(2)]
        views = [s.array for s in held]
        assert all(s is not None for s in held)
        print("holding", flush=True)
        time.sleep(60)
    """)
    assert child.stdout.readline().strip() == "subscribed"
    pub.send(np.full(1024, 1, np.uint8))
    pub.send(np.full(1024, 2, np.uint8))
    assert child.stdout.readline().strip() == "holding"
    assert in_use(root) >= baseline + 2
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    # The next port created recovers the dead subscriber's slot and chunks.
    sub = svc.subscriber()
    assert in_use(root) == baseline
    # And the service works on: every chunk can cycle again.
    for i in range(20):
        pub.send(np.full(1024, i, np.uint8))
        assert sub.receive(timeout=1.0).array[0] == i
    assert in_use(root) == baseline


def test_samples_dropped_for_a_full_buffer_are_counted(root):
    """A publisher in another process sends 20 samples into a buffer of 4 before the
    subscriber reads: every `send` reports 1 subscriber reached, the subscriber gets the
    last 4, and `missed()` says 16 were dropped for it."""
    svc = (iox.Service("py/missed").publish_subscribe(np.uint32)
           .subscriber_buffer(4).open_or_create())
    sub = svc.subscriber()
    assert sub.missed() == 0
    child = spawn_python("""
        import iox, numpy as np, sys
        svc = iox.Service("py/missed").publish_subscribe(np.uint32).open()
        pub = svc.publisher()
        assert pub.wait_for_subscribers(1, 10.0) >= 1
        print(sum(pub.send(np.uint32(i)) for i in range(20)), flush=True)
        sys.stdin.readline()  # the publisher lives until the parent has read
    """, stdin=subprocess.PIPE)
    assert int(child.stdout.readline().strip()) == 20  # each send reached the subscriber
    got = []
    while (s := sub.receive()) is not None:
        got.append(int(s.array))
    assert got == [16, 17, 18, 19]
    assert sub.missed() == 16
    out, err = child.communicate(input="done\n", timeout=30)
    assert child.returncode == 0, err


def test_a_service_left_by_a_sigtermed_subscriber_is_recreated_with_another_dtype(root):
    """A subscriber stopped with SIGTERM leaves its service behind (stale); opening the
    name again with another dtype creates it afresh instead of refusing."""
    child = spawn_python("""
        import iox, numpy as np, time
        svc = iox.Service("py/stale").publish_subscribe(np.uint8, shape=(16,)).open_or_create()
        sub = svc.subscriber()
        print("subscribed", flush=True)
        time.sleep(60)
    """)
    assert child.stdout.readline().strip() == "subscribed"
    with pytest.raises(iox.IncompatibleService):  # its user is alive
        iox.Service("py/stale").publish_subscribe(np.float32, shape=(4,)).open_or_create()
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=10)
    svc = iox.Service("py/stale").publish_subscribe(np.float32, shape=(4,)).open_or_create()
    pub, sub = svc.publisher(), svc.subscriber()
    pub.send(np.array([1.5, 2.5, 3.5, 4.5], np.float32))
    assert sub.receive(timeout=1.0).array.tolist() == [1.5, 2.5, 3.5, 4.5]


def test_fork_start_method_with_a_busy_background_thread(root):
    """Issue 45, items 2 and 3: with multiprocessing's `fork` start method, a child
    forked while a background iox thread was inside a process-global lock (offering
    or withdrawing a memfd service, making or dropping its node, pinning) blocked on
    that lock forever. Every lock is held across fork now: each child opens and uses a
    service of its own, and all of them finish."""
    import multiprocessing
    import threading

    stop = threading.Event()

    def churn():
        # Services come and go: offers made and withdrawn, nodes made and dropped, the
        # pin registry taken (Locked pools pinned by their subscribers).
        i = 0
        while not stop.is_set():
            svc = (iox.Service(f"fork/churn{i % 3}").publish_subscribe(np.uint32)
                   .memory_type(iox.MemoryType.LOCKED).open_or_create())
            sub = svc.subscriber(pin=True)
            del sub, svc
            i += 1

    background = threading.Thread(target=churn)
    background.start()
    ctx = multiprocessing.get_context("fork")
    try:
        with ctx.Pool(4) as pool:
            results = pool.map_async(_child_opens_its_own_service, range(24)).get(timeout=120)
    finally:
        stop.set()
        background.join()
    assert results == list(range(24))


def _child_opens_its_own_service(i):
    svc = iox.Service(f"fork/child{i}").publish_subscribe(np.uint32).timeout(5.0).open_or_create()
    pub, sub = svc.publisher(), svc.subscriber()
    pub.send(np.uint32(i))
    got = sub.receive(timeout=5.0)
    return int(got.array) if got is not None else -1


def test_a_replaced_static_config_is_reported_at_once(root):
    """A static config replaced beside its live service (by hand, or by another user)
    no longer matches the service's shared memory; waiting mends nothing, so another
    process's open says so at once instead of waiting out its 10 s timeout."""
    import glob
    import time
    svc = iox.Service("replaced/config").publish_subscribe(np.uint32).create()
    [config] = glob.glob(os.path.join(root, "*.service"))
    with open(config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text + "\n")              # the same settings, another text: another hash
    started = time.monotonic()
    p = spawn_python("""
        import iox, numpy as np
        try:
            iox.Service("replaced/config").publish_subscribe(np.uint32).open()
        except iox.Error as e:
            print(e)
    """)
    out, err = p.communicate(timeout=60)
    took = time.monotonic() - started
    assert p.returncode == 0, err
    assert "belongs to another static config" in out and "remove the service" in out, out
    assert took < 5, f"reported after {took:.1f} s"
    del svc
