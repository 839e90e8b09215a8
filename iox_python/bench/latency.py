"""One-way latency between two Python processes: iox vs iceoryx2's Python package vs
multiprocessing.Pipe (pickling) vs multiprocessing.shared_memory + a Queue.

    python iox_python/bench/latency.py            # all transports, 8 B / 1 MiB / 16 MiB

Method (the same for every transport): the sender has the array's data in its send
buffer (iox and iceoryx2: written into a loan; shared_memory: written into the
segment; Pipe: a numpy array), stamps CLOCK_MONOTONIC (time.perf_counter_ns, shared
by all processes) into its first 8 bytes, and sends. The receiver, once it holds a
numpy array of the received data (zero-copy views for iox, iceoryx2 and
shared_memory, the unpickled array for Pipe), reads the stamp and its own clock: the
difference is one sample. Messages go one at a time (the sender waits for the
receiver's acknowledgement before the next), so nothing queues. Receivers wait
blocking where the transport can (iox `receive(timeout)`, Pipe `recv`, Queue `get`);
iceoryx2's Python subscriber has no blocking receive, so it busy-polls, and iox is
also measured busy-polling (`receive()` in a loop) for a like-for-like row.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import tempfile
import time

import numpy as np

SIZES = [("8 B", 8), ("1 MiB", 1 << 20), ("16 MiB", 16 << 20)]


def iters_for(size: int, scale: float) -> int:
    return max(20, int((2000 if size <= 8 else 300 if size <= 1 << 20 else 60) * scale))


def stamp(buf: np.ndarray) -> None:
    buf[:8].view(np.int64)[0] = time.perf_counter_ns()


def latency_of(arr: np.ndarray) -> int:
    return time.perf_counter_ns() - int(arr[:8].view(np.int64)[0])


# --- iox ---------------------------------------------------------------------------

def iox_rx(name, size, n, polling, ack, out):
    import iox
    svc = iox.Service(name).publish_subscribe(np.uint8, shape=(size,)).open_or_create()
    sub = svc.subscriber()
    ack.put("ready")
    lat = []
    for _ in range(n):
        if polling:
            s = None
            while s is None:
                s = sub.receive()
        else:
            s = sub.receive(timeout=10.0)
        lat.append(latency_of(s.array))
        del s
        ack.put(1)
    out.put(lat)


def iox_tx(name, size, n, ack):
    import iox
    svc = iox.Service(name).publish_subscribe(np.uint8, shape=(size,)).open_or_create()
    pub = svc.publisher()
    pattern = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
    ack.get()
    pub.wait_for_subscribers(1, 10.0)
    for _ in range(n):
        with pub.loan() as s:
            a = s.array
            a[...] = pattern  # the data is produced in the loan (not timed)
            stamp(a)
            del a
            s.send()
        ack.get()


# --- iceoryx2 ----------------------------------------------------------------------

def ice_rx(name, size, n, polling, ack, out):
    import iceoryx2 as iox2
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    svc = (node.service_builder(iox2.ServiceName.new(name))
           .publish_subscribe(iox2.Slice[ctypes.c_uint8]).open_or_create())
    sub = svc.subscriber_builder().create()
    ack.put("ready")
    lat = []
    for _ in range(n):
        s = None
        while s is None:
            s = sub.receive()
        p = s.payload()
        arr = np.ctypeslib.as_array((ctypes.c_uint8 * p.number_of_elements).from_address(p.data_ptr))
        lat.append(latency_of(arr))
        del arr, p
        s.delete()
        ack.put(1)
    out.put(lat)


def ice_tx(name, size, n, ack):
    import iceoryx2 as iox2
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    svc = (node.service_builder(iox2.ServiceName.new(name))
           .publish_subscribe(iox2.Slice[ctypes.c_uint8]).open_or_create())
    pub = svc.publisher_builder().initial_max_slice_len(size).create()
    pattern = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
    ack.get()
    time.sleep(0.2)
    for _ in range(n):
        s = pub.loan_slice_uninit(size)
        arr = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(s.payload().data_ptr))
        arr[...] = pattern
        stamp(arr)
        del arr
        s.assume_init().send()
        ack.get()


# --- multiprocessing.Pipe ------------------------------------------------------------

def pipe_rx(conn, size, n, polling, ack, out):
    ack.put("ready")
    lat = []
    for _ in range(n):
        arr = conn.recv()
        lat.append(latency_of(arr))
        ack.put(1)
    out.put(lat)


def pipe_tx(conn, size, n, ack):
    arr = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
    ack.get()
    for _ in range(n):
        stamp(arr)
        conn.send(arr)
        ack.get()


# --- multiprocessing.shared_memory + Queue -----------------------------------------

def shm_rx(name, size, n, polling, ack, out, q):
    from multiprocessing import shared_memory
    shm = shared_memory.SharedMemory(name=name)
    ack.put("ready")
    lat = []
    for _ in range(n):
        length = q.get()
        arr = np.ndarray((length,), np.uint8, buffer=shm.buf)
        lat.append(latency_of(arr))
        del arr
        ack.put(1)
    shm.close()
    out.put(lat)


def shm_tx(name, size, n, ack, q):
    from multiprocessing import shared_memory
    shm = shared_memory.SharedMemory(name=name)
    pattern = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
    arr = np.ndarray((size,), np.uint8, buffer=shm.buf)
    ack.get()
    for _ in range(n):
        arr[...] = pattern
        stamp(arr)
        q.put(size)
        ack.get()
    del arr
    shm.close()


def run(transport: str, size: int, n: int, polling: bool) -> list[int]:
    ctx = mp.get_context("spawn")
    ack, out = ctx.Queue(), ctx.Queue()
    tag = f"bench/{transport}/{size}/{os.getpid()}"
    cleanup = None
    if transport == "iox":
        rx = ctx.Process(target=iox_rx, args=(tag, size, n, polling, ack, out))
        tx = ctx.Process(target=iox_tx, args=(tag, size, n, ack))
    elif transport == "iceoryx2":
        name = tag.replace("/", "_")
        rx = ctx.Process(target=ice_rx, args=(name, size, n, polling, ack, out))
        tx = ctx.Process(target=ice_tx, args=(name, size, n, ack))
    elif transport == "pipe":
        a, b = ctx.Pipe(duplex=False)
        rx = ctx.Process(target=pipe_rx, args=(a, size, n, polling, ack, out))
        tx = ctx.Process(target=pipe_tx, args=(b, size, n, ack))
    else:
        from multiprocessing import shared_memory
        shm = shared_memory.SharedMemory(create=True, size=size)
        q = ctx.Queue()
        rx = ctx.Process(target=shm_rx, args=(shm.name, size, n, polling, ack, out, q))
        tx = ctx.Process(target=shm_tx, args=(shm.name, size, n, ack, q))
        cleanup = shm
    rx.start()
    tx.start()
    lat = out.get(timeout=600)
    rx.join()
    tx.join()
    if cleanup is not None:
        cleanup.close()
        cleanup.unlink()
    return lat


def fmt(ns: float) -> str:
    return f"{ns / 1000:.1f} µs" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the message counts")
    ap.add_argument("--only", nargs="*", help="transports (iox, iox-poll, iceoryx2, pipe, shm)")
    args = ap.parse_args()
    os.environ.setdefault("IOX_ROOT", tempfile.mkdtemp(prefix="iox-bench-"))
    rows = [("iox (blocking receive)", "iox", False), ("iox (polling receive)", "iox", True),
            ("iceoryx2 0.10 Python (polling)", "iceoryx2", True), ("multiprocessing.Pipe", "pipe", False),
            ("shared_memory + Queue", "shm", False)]
    try:
        import iceoryx2  # noqa: F401
    except ImportError:
        print("iceoryx2 is not installed (pip install iceoryx2==0.10.*): its row is skipped")
        rows = [r for r in rows if r[1] != "iceoryx2"]
    if args.only:
        rows = [r for r in rows if (r[1] + ("-poll" if r[2] else "")) in args.only or r[1] in args.only]
    print("| transport | " + " | ".join(f"{label} median (p99)" for label, _ in SIZES) + " |")
    print("|---|" + "---|" * len(SIZES))
    for label, transport, polling in rows:
        cells = []
        for _, size in SIZES:
            lat = run(transport, size, iters_for(size, args.scale), polling)
            lat.sort()
            cells.append(f"{fmt(statistics.median(lat))} ({fmt(lat[int(len(lat) * 0.99) - 1])})")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
