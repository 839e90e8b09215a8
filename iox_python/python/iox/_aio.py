"""asyncio: ``await subscriber.receive_async()`` and ``await listener_wait_async()``,
waiting on the port's readiness descriptor with ``loop.add_reader`` (no thread)."""

from __future__ import annotations

import asyncio


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.add_reader(fd, lambda: fut.done() or fut.set_result(None))
    try:
        await fut
    finally:
        loop.remove_reader(fd)


async def receive_async(subscriber):
    """The next sample: receives until one comes, sleeping on the descriptor between
    (an empty receive re-arms it; a wake-up may find nothing)."""
    fd = subscriber.fileno()  # arms the descriptor before the first look
    while True:
        sample = subscriber.receive()
        if sample is not None:
            return sample
        await _readable(fd)


async def wait_async(listener) -> list[int]:
    """The next event ids of a listener."""
    fd = listener.fileno()
    while True:
        ids = listener.wait()
        if ids:
            return ids
        await _readable(fd)
