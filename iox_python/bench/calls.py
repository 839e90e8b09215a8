"""The cost of the Python calls themselves, in one process: `pub.send(value)` then
`sub.receive()`, and a loan written in place (`with pub.loan() as s: s.array[...] = 7;
s.send()`) then `sub.receive()`, of a `uint64` service; the best of 5 runs of 100,000
each, in ns per round.

    python iox_python/bench/calls.py

For comparing two builds of the package (a change to the binding's call path), run it
alternately with each build's interpreter, e.g. two venvs with `maturin develop
--release` from two checkouts:

    for i in 1 2 3 4 5; do old/bin/python calls.py; new/bin/python calls.py; done

Speed between processes is `latency.py`'s.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

import iox

N = 100_000


def main() -> None:
    root = tempfile.mkdtemp()
    svc = iox.Service("bench/calls", root=root).publish_subscribe(np.uint64).subscriber_buffer(16).create()
    pub, sub = svc.publisher(), svc.subscriber()
    value = np.uint64(7)

    def send_receive():
        for _ in range(N):
            pub.send(value)
            sub.receive()

    def loan_send_receive():
        for _ in range(N):
            with pub.loan() as s:
                s.array[...] = 7
                s.send()
            sub.receive()

    rows = []
    for name, run in (("send+receive", send_receive), ("loan+send+receive", loan_send_receive)):
        run()  # warm
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - t0)
        rows.append(f"{name}={best / N * 1e9:.0f}")
    print(" ".join(rows), "ns")


if __name__ == "__main__":
    main()
