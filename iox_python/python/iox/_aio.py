"""asyncio: ``await subscriber.receive_async()``, ``await server.receive_async()``,
``await pending.receive_async()`` (and ``async for`` over a pending response's stream),
``await request.respond_async(data)``
and ``await listener_wait_async()``,
waiting on the port's readiness descriptor with ``loop.add_reader`` (no thread)."""

from __future__ import annotations

import asyncio


async def _readable(fd: int, timeout: float | None = None) -> None:
    """Until ``fd`` is readable, or ``timeout`` seconds passed."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def wake():
        fut.done() or fut.set_result(None)

    loop.add_reader(fd, wake)
    timer = None if timeout is None else loop.call_later(timeout, wake)
    try:
        await fut
    finally:
        loop.remove_reader(fd)
        if timer is not None:
            timer.cancel()


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


async def response_async(pending):
    """The next response of a pending response, or ``None`` at the end of the stream.
    The descriptor wakes it for responses; it also looks every 50 ms, since a server
    that died rings no bell (the look finds it dead and ends the stream)."""
    fd = pending.fileno()
    while True:
        response = pending.receive()
        if response is not None or pending.is_finished:
            return response
        await _readable(fd, timeout=0.05)


async def next_response_async(pending):
    """``async for``'s step: the next response; ``StopAsyncIteration`` at the end."""
    response = await response_async(pending)
    if response is None:
        raise StopAsyncIteration
    return response


async def respond_async(request, data, casting="safe"):
    """``ActiveRequest.respond`` without blocking the loop: tries, and while the client's
    queue for the request is full, sleeps (0.1 ms, doubling up to 10 ms) and tries
    again (the queue has no readiness descriptor for room)."""
    pause = 0.0001
    while not request.try_respond(data, casting=casting):
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.01)
