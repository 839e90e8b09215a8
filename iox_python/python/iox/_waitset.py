"""A WaitSet for Python: one thread sleeps (epoll, via ``selectors``) until any
attached subscriber or listener is readable or a timeout passes. Built on the ports'
``fileno()``, which is what iox's Rust ``WaitSet`` waits on too."""

from __future__ import annotations

import selectors


class WaitSet:
    """``ws.attach(port)``; ``ws.wait(timeout)`` returns the ready ports (a list, empty
    on timeout). On readiness, receive until ``None``."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()

    def attach(self, port) -> None:
        self._sel.register(port.fileno(), selectors.EVENT_READ, port)

    def detach(self, port) -> None:
        self._sel.unregister(port.fileno())

    def wait(self, timeout: float | None = None) -> list:
        return [key.data for key, _ in self._sel.select(timeout)]

    def close(self) -> None:
        self._sel.close()

    def __enter__(self) -> "WaitSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
