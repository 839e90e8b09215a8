"""One process: loans, sends, views and their lifetimes, errors, DLPack, bytes and
slice services, stable type names, the GIL, asyncio, the WaitSet and events."""

import asyncio
import gc
import math
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import iox

SHAPE = (48, 64, 3)


def frames(root, name="camera/front", **kw):
    b = iox.Service(name, root=root).publish_subscribe(np.uint8, shape=SHAPE)
    for k, v in kw.items():
        b = getattr(b, k)(v)
    svc = b.open_or_create()
    return svc, svc.publisher(), svc.subscriber()


def test_loan_send_receive_content(root):
    svc, pub, sub = frames(root, memory_type=iox.MemoryType.LOCKED)
    frame = np.random.default_rng(1).integers(0, 255, SHAPE, dtype=np.uint8)
    with pub.loan() as s:
        s.array[...] = frame
        assert s.send() == 1
    got = sub.receive(timeout=1.0)
    assert got.array.shape == SHAPE and got.array.dtype == np.uint8
    assert (got.array == frame).all()
    assert pub.send(frame[::-1]) == 1  # non-contiguous input: copied contiguous
    assert (sub.receive(timeout=1.0).array == frame[::-1]).all()
    assert sub.receive() is None
    assert sub.receive(timeout=0.05) is None


def test_view_outlives_del_sample(root):
    svc, pub, sub = frames(root)
    pub.send(np.full(SHAPE, 9, np.uint8))
    sample = sub.receive(timeout=1.0)
    view = sample.array[10:20]
    del sample
    gc.collect()
    # The chunk is still held by the view: the pool shows it in use, and the data is intact.
    for _ in range(5):  # churn the pool: a freed chunk would be reused and overwritten
        pub.send(np.zeros(SHAPE, np.uint8))
        s = sub.receive(timeout=1.0)
        del s
    assert (view == 9).all()
    in_use_with_view = sum(u for _, _, u in iox.pool_usage("camera/front", root))
    del view
    gc.collect()
    assert sum(u for _, _, u in iox.pool_usage("camera/front", root)) == in_use_with_view - 1


def test_received_array_is_read_only(root):
    svc, pub, sub = frames(root)
    pub.send(np.zeros(SHAPE, np.uint8))
    a = sub.receive(timeout=1.0).array
    with pytest.raises(ValueError):
        a[0, 0, 0] = 1
    with pytest.raises(ValueError):
        a.flags.writeable = True


def test_send_refused_while_loan_views_alive(root):
    svc, pub, sub = frames(root)
    loan = pub.loan()
    view = loan.array
    view[...] = 1
    with pytest.raises(iox.ViewsAlive, match="still alive"):
        loan.send()
    derived = view[1:]
    del view
    with pytest.raises(iox.ViewsAlive):
        loan.send()  # a view derived from the loan's array counts too
    del derived
    assert loan.send() == 1
    with pytest.raises(iox.Error, match="already sent"):
        loan.array
    assert (sub.receive(timeout=1.0).array == 1).all()


def test_unsent_loan_view_keeps_chunk(root):
    svc, pub, sub = frames(root)
    with pub.loan() as s:
        view = s.array
    view[...] = 3  # the loan was released, but its chunk lives while the view does
    del view
    assert sub.receive() is None


def test_wrong_dtype_or_shape_is_incompatible(root):
    keep = frames(root)
    with pytest.raises(iox.IncompatibleService, match=r"u16"):
        iox.Service("camera/front", root=root).publish_subscribe(np.uint16, shape=SHAPE).open()
    with pytest.raises(iox.IncompatibleService, match=r"\[\[\[u8; 3\]; 64\]; 48\].*\[\[\[u8; 3\]; 64\]; 40\]"):
        iox.Service("camera/front", root=root).publish_subscribe(np.uint8, shape=(40, 64, 3)).open()
    with pytest.raises(iox.ServiceNotFound):
        iox.Service("nothing/here", root=root).publish_subscribe(np.uint8).open()


def test_stable_type_name_and_mismatch(root):
    pose = np.dtype([("x", "<f8"), ("y", "<f8"), ("yaw", "<f4"), ("valid", "u1"), ("_pad", "u1", (3,))], align=True)
    svc = iox.Service("robot/pose", root=root).publish_subscribe(iox.Type("Pose", pose)).open_or_create()
    assert svc.payload_type == "Pose (size 24, alignment 8)"
    pub, sub = svc.publisher(), svc.subscriber()
    value = np.array((1.0, 2.0, 0.5, 1, (0, 0, 0)), dtype=pose)
    pub.send(value)
    got = sub.receive(timeout=1.0).array
    assert got["x"] == 1.0 and got["yaw"] == np.float32(0.5)
    packed = np.dtype([("x", "<f8"), ("y", "<f8"), ("yaw", "<f4"), ("valid", "u1"), ("_pad", "u1", (3,))])
    with pytest.raises(iox.IncompatibleService, match=r"Pose \(size 24, alignment 8\).*Pose \(size 24, alignment 1\)"):
        iox.Service("robot/pose", root=root).publish_subscribe(iox.Type("Pose", packed)).open()
    with pytest.raises(TypeError, match="iox.Type"):
        iox.Service("robot/pose", root=root).publish_subscribe(pose)


def test_dlpack_shares_memory(root):
    svc, pub, sub = frames(root)
    pub.send(np.ones(SHAPE, np.uint8))
    sample = sub.receive(timeout=1.0)
    t = np.from_dlpack(sample)
    assert np.shares_memory(t, sample.array)
    assert t.shape == SHAPE and not t.flags.writeable
    assert sample.__dlpack_device__() == (1, 0)
    del sample
    assert (t == 1).all()  # the capsule's array keeps the sample alive


def test_bytes_and_slices(root):
    raw = (iox.Service("lidar/points", root=root)
           .publish_subscribe(bytes, size_classes=[(4096, 64), (1 << 20, 16)])
           .max_publishers(1).max_subscribers(1).open_or_create())
    pub, sub = raw.publisher(), raw.subscriber()
    pub.send(b"hello")
    pub.send(bytes(300_000))
    assert sub.receive(timeout=1.0).tobytes() == b"hello"
    big = sub.receive(timeout=1.0)
    assert big.nbytes == 300_000 and big.array.shape == (300_000,)
    f = iox.Service("f32s", root=root).publish_subscribe(np.float32, max_len=1000).open_or_create()
    fp, fs = f.publisher(), f.subscriber()
    # max_len counts elements on open too (the service holds 1000 float32s).
    iox.Service("f32s", root=root).publish_subscribe(np.float32, max_len=1000).open()
    with pytest.raises(iox.IncompatibleService, match="largest sample"):
        iox.Service("f32s", root=root).publish_subscribe(np.float32, max_len=100_000).open()
    with fp.loan(10) as s:
        s.array[:] = np.arange(10)
        s.send()
    assert (fs.receive(timeout=1.0).array == np.arange(10, dtype=np.float32)).all()
    with pytest.raises(iox.Error):
        fp.send(np.zeros(5000, np.float32))  # longer than the largest chunk


def test_pool_exhausted_and_limits(root):
    svc = (iox.Service("tight", root=root).publish_subscribe(np.uint8, size_classes=[(64, 2)])
           .max_publishers(1).max_subscribers(1).allow_pool_exhaustion().open_or_create())
    pub = svc.publisher()
    a, b = pub.loan(8), pub.loan(8)
    with pytest.raises((iox.PoolExhausted, iox.LimitReached)):
        pub.loan(8)
    a.release(); b.release()
    svc2, pub2, sub2 = frames(root, name="held")
    for _ in range(3):
        pub2.send(np.zeros(SHAPE, np.uint8))
    held = [sub2.receive(), sub2.receive()]
    with pytest.raises(iox.LimitReached, match="drop"):
        sub2.receive()
    del held


def test_gil_released_while_blocking(root):
    svc, pub, sub = frames(root)
    count = 0
    stop = False

    def spin():
        nonlocal count
        while not stop:
            count += 1

    t = threading.Thread(target=spin)
    t.start()
    start = time.monotonic()
    assert sub.receive(timeout=0.5) is None
    stop = True
    t.join()
    assert time.monotonic() - start >= 0.45
    assert count > 1000, f"the other thread ran only {count} iterations while receive waited"


def test_receive_from_another_thread(root):
    svc, pub, sub = frames(root)
    got = []
    t = threading.Thread(target=lambda: got.append(sub.receive(timeout=5.0)))
    t.start()
    time.sleep(0.1)
    pub.send(np.full(SHAPE, 4, np.uint8))
    t.join()
    assert (got[0].array == 4).all()


def test_asyncio_reader(root):
    svc, pub, sub = frames(root)

    async def main():
        task = asyncio.ensure_future(sub.receive_async())
        await asyncio.sleep(0.05)
        assert not task.done()
        pub.send(np.full(SHAPE, 5, np.uint8))
        return await asyncio.wait_for(task, 5)

    assert (asyncio.run(main()).array == 5).all()

    async def with_add_reader():
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        loop.add_reader(sub.fileno(), ready.set)
        assert sub.receive() is None  # arms the descriptor
        pub.send(np.full(SHAPE, 6, np.uint8))
        await asyncio.wait_for(ready.wait(), 5)
        loop.remove_reader(sub.fileno())
        return sub.receive()

    assert (asyncio.run(with_add_reader()).array == 6).all()


def test_waitset_and_events(root):
    svc, pub, sub = frames(root)
    ev = iox.Service("robot/estop", root=root).event().open_or_create()
    notifier, listener = ev.notifier(3), ev.listener()
    with iox.WaitSet() as ws:
        ws.attach(sub)
        ws.attach(listener)
        assert ws.wait(0.05) == []
        notifier.notify()
        notifier.notify(7)
        assert ws.wait(1.0) == [listener]
        assert sorted(listener.wait()) == [3, 7]
        pub.send(np.zeros(SHAPE, np.uint8))
        assert sub in ws.wait(1.0)
        assert sub.receive() is not None
    assert listener.wait(0.01) == []

    async def main():
        task = asyncio.ensure_future(iox.wait_async(listener))
        await asyncio.sleep(0.02)
        notifier.notify(9)
        return await asyncio.wait_for(task, 5)

    assert asyncio.run(main()) == [9]


def test_publisher_and_loans_used_from_another_thread_raise_wrong_thread(root):
    svc, pub, sub = frames(root)
    loan = pub.loan()
    calls = {
        "send": lambda: pub.send(np.zeros(SHAPE, np.uint8)),
        "loan": lambda: pub.loan(),
        "wait_for_subscribers": lambda: pub.wait_for_subscribers(1, 0.0),
        "is_pinned": lambda: pub.is_pinned,
        "loan.array": lambda: loan.array,
        "loan.send": lambda: loan.send(),
        "loan.release": lambda: loan.release(),
    }
    raised = {}

    def use():
        threading.current_thread().name = "worker"
        for what, call in calls.items():
            try:
                call()
                raised[what] = None
            except BaseException as e:  # a panic would be a BaseException: catch all
                raised[what] = e

    t = threading.Thread(target=use)
    t.start()
    t.join()
    for what, e in raised.items():
        assert isinstance(e, iox.WrongThread), f"{what}: {e!r}"
        assert isinstance(e, iox.Error)
        assert "MainThread" in str(e) and "svc.publisher()" in str(e), str(e)
    # The owner thread still uses both, and a publisher made in the worker works there.
    loan.array[...] = 7
    assert loan.send() == 1
    assert int(sub.receive(timeout=1.0).array[0, 0, 0]) == 7
    sent = []
    t = threading.Thread(target=lambda: sent.append(svc.publisher().send(np.ones(SHAPE, np.uint8))))
    t.start()
    t.join()
    assert sent == [1]


def test_send_refuses_lossy_conversions_unless_asked(root):
    svc = iox.Service("floats", root=root).publish_subscribe(np.float32, max_len=16).open_or_create()
    pub, sub = svc.publisher(), svc.subscriber()
    for lossy in (np.array([0.1, 0.2]), [0.1, 0.2], np.array([1, 2], np.int64)):
        with pytest.raises(TypeError, match="casting"):
            pub.send(lossy)
    assert sub.receive() is None, "nothing was sent"
    assert pub.send(np.array([0.5, 1.5], np.float32)) == 1
    assert pub.send(np.array([1, 2], np.int16)) == 1  # safe: every int16 is a float32
    assert pub.send([0.1, 0.2], casting="same_kind") == 1
    got = [sub.receive().array.tolist() for _ in range(3)]
    assert got[0] == [0.5, 1.5] and got[1] == [1.0, 2.0]
    assert got[2] == pytest.approx([0.1, 0.2]) and got[2] != [0.1, 0.2]  # converted, as asked


def test_bad_names_are_refused_at_once_with_the_rule(root):
    for bad in ("", "camera front", "a//b", "/leading", "x*y", "-x"):
        with pytest.raises(iox.Error) as e:
            iox.Service(bad, root=root)
        assert bad == "" or "segments separated by single '/'" in str(e.value), str(e.value)
    assert iox.Service("robot1/arm.joint_states", root=root).name == "robot1/arm.joint_states"


def test_device_ptr_needs_pinning(root):
    svc, pub, sub = frames(root)
    pub.send(np.zeros(SHAPE, np.uint8))
    with pytest.raises(iox.Error, match="device address"):
        sub.receive(timeout=1.0).device_ptr


def test_a_publisher_dropped_on_another_thread_is_dropped_by_its_own(root):
    """The last reference to a publisher gone on a worker thread: the port waits,
    untouched, for its own thread's next call, which drops it (no leak, no unraisable
    error); and a publisher, client or server dropped inside a failing expression on
    another thread than its own keeps the exception (it crashed the interpreter)."""
    svc = iox.Service("drop/elsewhere", root=root).publish_subscribe(np.uint64).open_or_create()
    box = [svc.publisher()]
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    assert svc.port_counts()[0] == 1, "dropped on the wrong thread"
    svc.publisher().send(1)  # this thread's next call drops the kept port (and that one goes)
    assert svc.port_counts()[0] == 0
    out = subprocess.run([sys.executable, "-W", "error", "-c", textwrap.dedent("""
        import queue, threading, iox, numpy as np
        pubsub = iox.Service("drop/flying").publish_subscribe(np.uint64).open_or_create()
        reqres = iox.Service("drop/rr").request_response(np.uint64, np.uint64).open_or_create()
        def g(a, b):
            return a
        for make in (pubsub.publisher, reqres.client, reqres.server):
            q = queue.Queue()
            t = threading.Thread(target=lambda: q.put(make()))
            t.start(); t.join()
            try:
                g(q.get(), 1 / 0)
            except ZeroDivisionError:
                print("kept", flush=True)
    """)], capture_output=True, text=True, timeout=60, env=dict(os.environ, IOX_ROOT=root))
    assert out.returncode == 0 and out.stdout.split() == ["kept"] * 3, out.stderr


def test_a_daemon_thread_waiting_in_iox_at_exit_lets_the_process_exit(root):
    """Daemon threads blocked in a subscriber's, a listener's and a server's wait while
    the interpreter exits: the process exits cleanly (a thread coming back from a wait
    during finalization parks instead of taking the GIL, which CPython before 3.14
    answers with pthread_exit, an unwinding Rust cannot pass: it aborted)."""
    script = textwrap.dedent("""
        import atexit, time
        # Registered before iox's hook, so it runs after it (atexit is last in, first
        # out): finalization then lasts past the waits' 100 ms slices, and every waiting
        # thread comes back from one while the interpreter finalizes. Not a
        # synchronisation: the length of the window the test needs.
        atexit.register(time.sleep, 0.3)
        import math, threading, iox, numpy as np
        sub = iox.Service("exit/sub").publish_subscribe(np.uint64).open_or_create().subscriber()
        listener = iox.Service("exit/event").event().open_or_create().listener()
        svc = iox.Service("exit/rr").request_response(np.uint64, np.uint64).open_or_create()
        started = threading.Barrier(4)
        def serve():
            server = svc.server()
            started.wait()
            server.receive(timeout=math.inf)
        for target in (lambda: (started.wait(), sub.receive(timeout=math.inf)),
                       lambda: (started.wait(), listener.wait(math.inf)), serve):
            threading.Thread(target=target, daemon=True).start()
        started.wait()  # each is about to wait, and never comes back
        print("exiting", flush=True)
    """)
    for run in range(3):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, IOX_ROOT=root))
        assert out.returncode == 0 and out.stdout == "exiting\n", (run, out.returncode, out.stderr)


def test_a_listener_waits_forever_when_asked(root):
    ev = iox.Service("wait/inf", root=root).event().open_or_create()
    listener, notifier = ev.listener(), ev.notifier()
    t = threading.Timer(0.05, lambda: notifier.notify(5))
    t.start()
    assert listener.wait(math.inf) == [5]  # math.inf: no limit (was a panic)
    t.join()
