"""What every service builder shares: its service, its options dict (read by the
extension's open functions), the attribute methods, the open timeout and the three
ways to open."""

from __future__ import annotations

from ._attributes import AttributeMethods


class _Builder(AttributeMethods):
    def __init__(self, service):
        self._service = service
        self._opts: dict = {"root": service.root}

    def _set(self, key, value):
        self._opts[key] = value
        return self

    def timeout(self, seconds: float):
        return self._set("timeout", float(seconds))

    def open(self):
        return self._open("open")

    def create(self):
        return self._open("create")

    def open_or_create(self):
        return self._open("open_or_create")
