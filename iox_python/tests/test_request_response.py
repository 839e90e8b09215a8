"""Request-response from Python: clients and servers of dtypes, iox.Type structs and
bytes, streams of responses, the errors Rust has (no server, limits, a server or client
that went away, including SIGKILLed processes), asyncio, threads, and the same
services from Rust (examples/src/bin/reqres_peer.rs) and C++
(iox_ffi/examples/request_response.cpp), each in its own process. Through the ROS 2
gateway to rclpy: test_ros2.py."""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import iox
from conftest import spawn_python

# reqres_peer's types, as their derives record them.
GOAL = iox.Type("reqres_peer::RouteGoal", np.dtype([("x", "<f8"), ("y", "<f8"), ("steps", "<u8")], align=True))
WAYPOINT = iox.Type("reqres_peer::Waypoint", np.dtype([("index", "<u8"), ("x", "<f8"), ("y", "<f8")], align=True))


def squares(root, **limits):
    b = iox.Service("math/squares", root=root).request_response(np.uint64, np.uint64)
    for k, v in limits.items():
        getattr(b, k)(v)
    return b.open_or_create()


def wait_for(what, done, timeout=30.0):
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, f"{what} within {timeout} s"
        time.sleep(0.005)


def test_a_stream_of_typed_responses_in_one_process(root):
    svc = squares(root)
    assert "u64" in svc.request_type and "u64" in svc.response_type
    server, client = svc.server(), svc.client()
    assert svc.port_counts() == (1, 1)
    pending = client.send(7)
    req = server.receive(timeout=5.0)
    assert int(req.array) == 7 and req.array.shape == () and req.nbytes == 8 and req.is_connected
    with req:
        for k in range(1, 4):
            req.respond(7 ** k)
    assert not req.is_active
    # Iterating takes the stream to its end; receive then says None, and finished.
    assert [int(r.array) for r in pending] == [7, 49, 343]
    assert pending.is_finished and not pending.is_server_gone
    assert pending.receive() is None and pending.receive(timeout=1.0) is None
    # A stream with no response at all.
    pending = client.send(2)
    server.receive(timeout=5.0).finish()
    assert pending.receive(timeout=5.0) is None and pending.is_finished
    assert client.active_requests == 1  # until the pending response goes
    pending.close()
    # call(): the first response; a timeout when nobody answers.
    with pytest.raises(TimeoutError, match="no response within 0.05 s"):
        client.call(3, timeout=0.05)
    # call() gave up: the request is abandoned, and a server skips it.
    assert server.receive(timeout=0.05) is None and client.active_requests == 0


def test_slices_bytes_and_structs(root):
    svc = (iox.Service("text/reverse", root=root)
           .request_response(bytes, np.float32, request_max_len=64, response_max_len=16).create())
    server, client = svc.server(), svc.client()
    pending = client.send(b"hello")
    req = server.receive(timeout=5.0)
    assert req.tobytes() == b"hello" and len(req) == 5
    req.respond(np.arange(3, dtype=np.float32))
    req.respond(np.empty(0, np.float32))  # an empty slice is a response too
    req.finish()
    r = pending.receive(timeout=5.0)
    assert r.array.dtype == np.float32 and r.array.tolist() == [0.0, 1.0, 2.0] and len(r) == 3
    assert pending.receive(timeout=5.0).nbytes == 0
    # Longer than the service takes: refused, saying how long it may be.
    with pytest.raises(iox.Error, match="64"):
        client.send(b"x" * 65)
    # Structs: one record as a tuple, read by field.
    route = iox.Service("nav/route", root=root).request_response(GOAL, WAYPOINT).create()
    server, client = route.server(), route.client()
    pending = client.send((3.0, 6.0, 2))
    req = server.receive(timeout=5.0)
    assert (float(req.array["x"]), int(req.array["steps"])) == (3.0, 2)
    req.respond((0, 1.5, 3.0))
    req.finish()
    w = pending.receive(timeout=5.0).array
    assert (int(w["index"]), float(w["x"]), float(w["y"])) == (0, 1.5, 3.0)


def test_refusals_name_what_to_do(root):
    svc = squares(root, max_active_requests_per_client=1)
    client = svc.client()
    with pytest.raises(iox.NoServer, match="no server is connected"):
        client.send(1)
    server = svc.server()
    pending = client.send(1)
    with pytest.raises(iox.LimitReached, match="maximum of 1 active requests"):
        client.send(2)
    req = server.receive(timeout=5.0)
    assert req.is_connected
    pending.close()  # abandons it; the server's finish frees the slot
    with pytest.raises(iox.Error, match="was closed"):
        pending.receive()
    assert not req.is_connected
    with pytest.raises(iox.ClientGone, match="dropped its pending response"):
        req.respond(1)
    req.finish()
    client.send(3)  # the slot is free again
    # Values: numpy's casting rule, shapes, Python numbers out of range.
    with pytest.raises(TypeError, match="casting"):
        client.send(np.float64(1.5))
    with pytest.raises(OverflowError):
        client.send(-1)
    with pytest.raises(ValueError, match="shape"):
        client.send(np.array([1, 2], np.uint64))
    # Another program's types, limits or a missing slice length.
    with pytest.raises(iox.IncompatibleService, match="u32"):
        iox.Service("math/squares", root=root).request_response(np.uint64, np.uint32).open()
    with pytest.raises(iox.IncompatibleService, match="max_clients"):  # more than it has
        iox.Service("math/squares", root=root).request_response(np.uint64, np.uint64).max_clients(64).open()
    with pytest.raises(iox.Error, match="request_max_len"):
        iox.Service("math/text", root=root).request_response(bytes, bytes).create()
    with pytest.raises(iox.ServiceNotFound):
        iox.Service("math/none", root=root).request_response(np.uint8, np.uint8).open()


def test_views_keep_a_request_until_they_go(root):
    svc = iox.Service("text/views", root=root).request_response(bytes, bytes, request_max_len=8,
                                                                   response_max_len=8).create()
    server, client = svc.server(), svc.client()
    pending = client.send(b"abc")
    req = server.receive(timeout=5.0)
    view = req.array
    with pytest.raises(iox.ViewsAlive, match="1 numpy view"):
        req.finish()
    assert not view.flags.writeable
    # Leaving `with` while the view lives ends the stream when the view goes.
    with req:
        req.respond(b"x")
    assert pending.receive(timeout=5.0).tobytes() == b"x"
    assert pending.receive(timeout=0.05) is None and not pending.is_finished
    assert view.tobytes() == b"abc"
    del view
    assert pending.receive(timeout=5.0) is None and pending.is_finished


def test_ports_belong_to_their_thread(root):
    svc = squares(root)
    server, client = svc.server(), svc.client()
    pending = client.send(5)
    req = server.receive(timeout=5.0)
    errors = []

    def elsewhere():
        for call in (lambda: client.send(1), lambda: pending.receive(), lambda: server.receive(),
                     lambda: req.respond(1), lambda: req.finish(), lambda: req.__exit__(None, None, None)):
            try:
                call()
            except iox.WrongThread as e:
                errors.append(str(e))
    t = threading.Thread(target=elsewhere, name="worker")
    t.start()
    t.join()
    assert len(errors) == 6 and all('thread "MainThread"' in e for e in errors), errors
    assert req.is_active  # leaving `with` elsewhere left it the owner's to finish
    # The service handle may be shared: a port made in the worker is the worker's.
    got = []
    t = threading.Thread(target=lambda: got.append(int(svc.client().call(6, timeout=5.0).array)))
    t.start()
    other = server.receive(timeout=5.0)
    other.respond(36)
    other.finish()
    t.join()
    assert got == [36]
    req.finish()


def test_blocking_calls_release_the_gil(root):
    """A server thread answers while the main thread waits in receive(), and the
    server's respond waits (a buffer of 1) while the main thread takes responses."""
    svc = squares(root, max_response_buffer=1)
    ready = threading.Event()
    done = []

    def serve():
        server = svc.server()
        ready.set()
        req = server.receive(timeout=30.0)
        for k in range(20):
            req.respond(k)
        req.finish()
        done.append(True)
    t = threading.Thread(target=serve)
    t.start()
    assert ready.wait(30.0)
    client = svc.client()
    pending = client.send(1)
    got = []
    while (r := pending.receive(timeout=30.0)) is not None:
        got.append(int(r.array))
        del r
    t.join()
    assert got == list(range(20)) and done == [True]


def test_asyncio_server_and_client_in_one_loop(root):
    svc = squares(root)
    server, client = svc.server(), svc.client()

    async def serve(n):
        for _ in range(n):
            req = await server.receive_async()
            with req:
                x = int(req.array)
                for k in range(x):
                    req.respond(k * k)

    async def main():
        task = asyncio.ensure_future(serve(2))
        first = [int(r.array) async for r in client.send(4)]
        p = client.send(2)
        second = [int((await p.receive_async()).array), int((await p.receive_async()).array)]
        assert await p.receive_async() is None and p.is_finished
        await task
        return first, second
    assert asyncio.run(main()) == ([0, 1, 4, 9], [0, 1])


SERVER = """
    import sys, iox, numpy as np
    svc = iox.Service("math/squares").request_response(np.uint64, np.uint64).open_or_create()
    server = svc.server()
    print("ready", flush=True)
    req = server.receive(timeout=30.0)
    req.respond(1)
    print("holding", flush=True)
    sys.stdin.read()  # until killed
"""


@contextlib.contextmanager
def a_server_killed_mid_stream(client):
    """A server process (SERVER) that took the client's request for 4, answered once and
    was SIGKILLed: the request's pending response."""
    proc = spawn_python(SERVER, stdin=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == "ready\n"
        pending = client.send(4)
        assert proc.stdout.readline() == "holding\n"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        yield pending
    finally:
        proc.kill()


def test_a_sigkilled_server_ends_the_stream_with_server_gone(root):
    svc = squares(root)
    client = svc.client()
    with a_server_killed_mid_stream(client) as pending:
        # The response that arrived comes first; then the core's liveness look finds
        # the server dead and ends the stream.
        assert int(pending.receive(timeout=30.0).array) == 1
        with pytest.raises(iox.ServerGone, match="server handling this request is gone"):
            pending.receive(timeout=30.0)
        assert pending.is_finished and pending.is_server_gone
        assert pending.receive(timeout=1.0) is None
        pending.close()
    # The request was recovered, and a new server serves.
    wait_for("the dead server's request recovered", lambda: svc.requests_in_flight() == 0)
    server = svc.server()
    p = client.send(3)
    req = server.receive(timeout=5.0)
    req.respond(9)
    req.finish()
    assert int(p.receive(timeout=5.0).array) == 9


def test_asyncio_notices_a_sigkilled_server(root):
    client = squares(root).client()
    with a_server_killed_mid_stream(client) as pending:
        async def drain():
            return [int(r.array) async for r in pending]
        with pytest.raises(iox.ServerGone):
            asyncio.run(asyncio.wait_for(drain(), 30.0))


def test_a_sigkilled_client_is_client_gone_for_the_server(root):
    svc = squares(root)
    server = svc.server()
    proc = spawn_python("""
        import sys, iox, numpy as np
        svc = iox.Service("math/squares").request_response(np.uint64, np.uint64).open()
        pending = svc.client().send(8)
        print("sent", flush=True)
        sys.stdin.read()
    """, stdin=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == "sent\n"
        req = server.receive(timeout=30.0)
        assert int(req.array) == 8
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # The server's respond watches the client's liveness: ClientGone, not a hang.
        end = time.monotonic() + 30
        with pytest.raises(iox.ClientGone):
            while time.monotonic() < end:
                req.respond(64)
                time.sleep(0.01)
        req.finish()
    finally:
        proc.kill()
    wait_for("the dead client's request recovered", lambda: svc.requests_in_flight() == 0)


def test_many_client_processes_at_once(root):
    """Three client processes call a Python server concurrently; every call gets its
    own answer."""
    svc = squares(root, max_clients=4)
    server = svc.server()
    clients = [spawn_python(f"""
        import iox, numpy as np
        svc = iox.Service("math/squares").request_response(np.uint64, np.uint64).open()
        client = svc.client()
        for n in range({base}, {base} + 150):
            r = client.call(n, timeout=30.0)
            assert int(r.array) == n * n, (n, int(r.array))
        print("ok", flush=True)
    """) for base in (0, 1000, 2000)]
    served = 0
    try:
        while any(c.poll() is None for c in clients) or server.pending_requests:
            req = server.receive(timeout=0.1)
            if req is None:
                continue
            with req:
                req.respond(int(req.array) ** 2)
            served += 1
        for c in clients:
            out, err = c.communicate(timeout=30)
            assert c.returncode == 0 and out == "ok\n", err
    finally:
        for c in clients:
            c.kill()
    assert served == 450


def test_python_server_for_a_rust_client(root, rust_examples):
    svc = iox.Service("examples/route", root=root).request_response(GOAL, WAYPOINT).max_response_buffer(4).create()
    server = svc.server()
    rust = subprocess.Popen([os.path.join(rust_examples, "reqres_peer"), "ask", "4,2,2", "1,1,3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(2):
            req = server.receive(timeout=30.0)
            assert req is not None, "no request from the Rust client within 30 s"
            g = req.array
            x, y, steps = float(g["x"]), float(g["y"]), int(g["steps"])
            del g
            with req:
                for i in range(steps):
                    f = (i + 1) / steps
                    req.respond((i, x * f, y * f))
        out, err = rust.communicate(timeout=30)
    finally:
        rust.kill()
    assert rust.returncode == 0, err
    assert out.splitlines() == ["waypoint 0 2 1", "waypoint 1 4 2", "end",
                                f"waypoint 0 {1 / 3} {1 / 3}", f"waypoint 1 {2 / 3} {2 / 3}", "waypoint 2 1 1",
                                "end"]


def test_rust_server_for_a_python_client(root, rust_examples):
    rust = subprocess.Popen([os.path.join(rust_examples, "reqres_peer"), "serve", "--count", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert rust.stdout.readline() == "ready\n"
        svc = iox.Service("examples/route", root=root).request_response(GOAL, WAYPOINT).open()
        client = svc.client()
        got = [[(int(w.array["index"]), float(w.array["x"])) for w in client.send((6.0, 3.0, 3))]]
        pending = client.send((1.0, 0.0, 1))
        got.append([(int(w.array["index"]), float(w.array["x"])) for w in pending])
        assert pending.is_finished and not pending.is_server_gone
        _, err = rust.communicate(timeout=30)
    finally:
        rust.kill()
    assert rust.returncode == 0, err
    assert got == [[(0, 2.0), (1, 4.0), (2, 6.0)], [(0, 1.0)]]


def test_cpp_server_for_a_python_client(root, c_examples):
    cpp = subprocess.Popen([str(c_examples / "cpp_request_response"), "server", "--count", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert cpp.stdout.readline().startswith("server: waiting for 3 requests")
        svc = iox.Service("examples/squares", root=root).request_response(np.uint64, np.uint64).open()
        client = svc.client()
        assert [int(client.call(n, timeout=30.0).array) for n in (3, 4, 5)] == [9, 16, 25]
        _, err = cpp.communicate(timeout=30)
    finally:
        cpp.kill()
    assert cpp.returncode == 0, err


def test_python_server_for_a_cpp_client(root, c_examples):
    svc = iox.Service("examples/squares", root=root).request_response(np.uint64, np.uint64).open_or_create()
    server = svc.server()
    cpp = subprocess.Popen([str(c_examples / "cpp_request_response"), "client", "--count", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(3):
            req = server.receive(timeout=30.0)
            assert req is not None, "no request from the C++ client within 30 s"
            with req:
                req.respond(int(req.array) ** 2)
        out, err = cpp.communicate(timeout=30)
    finally:
        cpp.kill()
    assert cpp.returncode == 0, err
    assert out.splitlines() == [f"client: {n} squared is {n * n}" for n in (1, 2, 3)]


def test_a_response_dropped_on_another_thread_is_released_by_its_own(root):
    """What a port lends may be read anywhere, but is released on its port's thread:
    dropped elsewhere (the last reference, or a garbage collection running there), it
    waits, untouched, for its thread's next call."""
    svc = squares(root)
    server, client = svc.server(), svc.client()
    pending = client.send(2)
    req = server.receive(timeout=5.0)
    req.respond(4)
    req.finish()
    box = [pending.receive(timeout=5.0)]
    in_use = lambda: sum(used for _, _, used in iox.pool_usage("math/squares", root))
    held = in_use()

    def drop():
        assert int(box[0].array) == 4  # reading is fine anywhere
        box.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: a deferred drop is the normal way
        t = threading.Thread(target=drop)
        t.start()
        t.join()
    assert in_use() == held, "released on the wrong thread"
    assert client.active_requests == 1  # the client's thread calls: the response goes
    assert in_use() == held - 1


def test_module_docs_example_runs(root):
    """The example in iox/_request_response.py's docs, as written."""
    doc = iox._request_response.__doc__
    code = textwrap.dedent(doc.split("::\n", 1)[1].split("\n\n", 1)[0])
    code = code.replace("# in one process (or thread)", "").replace("# in another", "")
    out = subprocess.run([sys.executable, "-c", "import iox, numpy as np\n" + code],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["49"]


def test_values_shared_memory_cannot_carry_are_refused(root):
    """Python objects, unsized and sub-array dtypes, and bools that are not 0 or 1."""
    with pytest.raises(TypeError, match="Python objects"):
        iox.Type("Obj", object)
    with pytest.raises(TypeError, match="Python objects"):
        iox.Type("Rec", np.dtype([("o", object), ("x", "<f8")]))
    with pytest.raises(TypeError, match="no size"):
        iox.Type("Str", np.dtype("S"))
    with pytest.raises(TypeError, match="sub-array"):
        iox.Service("vec/req", root=root).request_response(iox.Type("Vec3", ("<f4", (3,))), np.uint8).create()
    flag = iox.Service("flags", root=root).request_response(np.bool_, np.bool_).create()
    server, client = flag.server(), flag.client()
    with pytest.raises(ValueError, match="other than 0 or 1"):
        client.send(np.array(7, np.uint8).view(np.bool_))
    rec = iox.Type("Flagged", np.dtype([("on", "?"), ("x", "<f4")], align=True))
    svc = iox.Service("flags/rec", root=root).request_response(rec, rec).create()
    s2, c2 = svc.server(), svc.client()
    raw = np.zeros(rec.dtype.itemsize, np.uint8)
    raw[0] = 2
    bad = raw.view(rec.dtype)[0]  # one record whose bool byte is 2
    with pytest.raises(ValueError, match="other than 0 or 1"):
        c2.send(bad)
    with pytest.raises(TypeError, match='field "on"'):
        c2.send((7, 1.5))  # an int into a bool field: not under casting="safe"
    with pytest.raises(TypeError, match='field "x"'):
        c2.send((True, 1.5))  # a Python float into float32: not safe, as a lone value
    pending = c2.send((True, np.float32(1.5)))
    req = s2.receive(timeout=5.0)
    with pytest.raises(ValueError, match="other than 0 or 1"):
        req.respond(bad)
    req.respond((False, 2.5), casting="same_kind")
    req.finish()
    assert bool(pending.receive(timeout=5.0).array["on"]) is False
    # The same check guards publishers.
    pub = iox.Service("flags/pub", root=root).publish_subscribe(np.bool_, shape=(2,)).create().publisher()
    with pytest.raises(ValueError, match="other than 0 or 1"):
        pub.send(np.array([1, 3], np.uint8).view(np.bool_))


def test_ctrl_c_ends_a_respond_waiting_on_a_full_queue(root):
    """A respond waits while the client takes nothing (here: the same thread, which
    never will); SIGINT ends the wait with KeyboardInterrupt instead of a hang. The
    child installs Python's own SIGINT handler first: a run started in the background by
    a non-interactive shell inherits SIGINT ignored, and Python then keeps it so."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, signal, threading, iox, numpy as np
        signal.signal(signal.SIGINT, signal.default_int_handler)
        svc = (iox.Service("math/full").request_response(np.uint64, np.uint64)
               .max_active_requests_per_client(1).max_response_buffer(1).create())
        server, client = svc.server(), svc.client()
        pending = client.send(1)
        req = server.receive(timeout=5.0)
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            for k in range(1000):
                req.respond(k)
        except KeyboardInterrupt:
            print("interrupted after", k >= 1, flush=True)
    """)], capture_output=True, text=True, timeout=60, env=dict(os.environ, IOX_ROOT=root))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "interrupted after True"


def test_an_asyncio_server_streams_more_than_the_queue_holds(root):
    """One loop, a server streaming 200 responses (more than the client's queue of 64
    holds) to a client reading them with async for: respond_async waits for room
    without blocking the loop (respond would: the client could never read)."""
    svc = squares(root)
    server, client = svc.server(), svc.client()

    async def serve():
        req = await server.receive_async()
        with req:
            for k in range(int(req.array)):
                await req.respond_async(k)

    async def main():
        task = asyncio.ensure_future(serve())
        got = [int(r.array) async for r in client.send(200)]
        await task
        return got
    assert asyncio.run(asyncio.wait_for(main(), 60.0)) == list(range(200))
    # try_respond: False, nothing sent, while the queue is full.
    pending = client.send(1)
    req = server.receive(timeout=5.0)
    sent = 0
    while req.try_respond(sent):
        sent += 1
    assert sent >= 64 and not req.try_respond(sent)
    req.finish()
    assert [int(r.array) for r in pending] == list(range(sent))


def test_what_a_user_gets_wrong_is_said_plainly(root):
    b = iox.Service("text/plain", root=root).request_response(bytes, bytes, request_max_len=64,
                                                               response_max_len=64).create()
    server, client = b.server(), b.client()
    with pytest.raises(TypeError, match=r"data.encode\(\)"):
        client.send("text")
    with pytest.raises(iox.Error, match="65 elements .* at most 64 fit .*request_max_len"):
        client.send(b"x" * 65)
    # Lists of Python ints take the dtype as scalars do.
    sl = iox.Service("ints", root=root).request_response(np.uint32, np.uint8, request_max_len=4,
                                                         response_max_len=4).create()
    s2, c2 = sl.server(), sl.client()
    pending = c2.send([1, 2, 3])  # kept: a dropped pending response abandons its request
    assert s2.receive(timeout=5.0).array.tolist() == [1, 2, 3]
    del pending
    with pytest.raises(OverflowError):
        c2.send([1, -2])
    with pytest.raises(TypeError, match='casting="unsafe"'):
        squares(root).client().send(1.5, casting="same_kind")
