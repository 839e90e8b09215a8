"""iox: zero-copy numpy arrays between processes over shared-memory services.

    svc = iox.Service("camera/front").publish_subscribe(np.uint8, shape=(480, 640, 3)).open_or_create()
    pub = svc.publisher()
    with pub.loan() as s:
        s.array[...] = frame
        s.send()
    sample = svc.subscriber().receive(timeout=0.1)   # None on timeout
    a = sample.array                                 # read-only view of the chunk

A per-sample user header beside the payload (a frame's stamp and size in front of its
pixels): ``publish_subscribe(bytes, max_len=..., user_header=iox.Type("FrameHeader",
dtype))``, then ``loan.header["width"] = 640`` and ``sample.header["width"]``.

Request-response: ``svc = iox.Service("math/square").request_response(np.uint64,
np.uint64).open_or_create()``, then ``svc.client().call(7)`` in one program and
``req = svc.server().receive(timeout=1.0); req.respond(...)`` in another (see
``iox._request_response``).

Access roles: ``.permissions(0o666).access(iox.AccessPolicy(publish_uids=[1001],
read_uids=[1002]))`` on the builder that creates a service lets uid 1001 publish and
uid 1002 only subscribe (its ``publisher()`` raises ``iox.NotAPublisher``); anyone
else is refused at open with ``iox.AccessDenied``. ``svc.access_policy`` reads it back.

Huge pages: ``.page_size("2m")`` (or ``"1g"``) on the builder puts the pool on hugetlb
pages the machine has reserved (too few raise ``iox.HugePagesUnavailable`` on create,
saying how many and how to reserve them), ``"thp"`` on transparent huge pages (best
effort); ``svc.page_size`` reads it back (``"4k"`` by default).

Threading: a Publisher and its loans, and a Client or Server and what they give out,
belong to the thread that made the port (using them from another raises
iox.WrongThread, naming it); services, subscribers,
samples, listeners and notifiers may be shared. Blocking calls release the GIL.
"""

from __future__ import annotations

import enum
import os

import numpy as np

from . import _iox
from ._aio import wait_async
from ._builder import _Builder
from ._blackboard import Blackboard, BlackboardBuilder, BlackboardReader, BlackboardWriter
from ._iox import (  # noqa: F401
    Error, IncompatibleService, LimitReached, Loan, Listener, Notifier, PoolExhausted,
    Publisher, PubSubService, EventService, Sample, ServiceExists, ServiceNotFound,
    Subscriber, ViewsAlive, WrongThread, TensorError, TensorPublisher, TensorLoan, TensorSubscriber,
    TensorSample, RequestResponseService, Client, PendingResponse, Response, Server, ActiveRequest,
    NoServer, ServerGone, ClientGone, AccessPolicy, AccessDenied, NotAPublisher, HugePagesUnavailable,
)
from ._request_response import RequestResponseBuilder
from ._types import Type, array_name, element
from . import ros2  # noqa: E402,F401  (iox.ros2: ROS 2 messages and images)
from ._waitset import WaitSet

#: The version of iox this package is (the Rust crates' and the C library's too).
__version__: str = _iox.__version__

__all__ = [
    "Service", "MemoryType", "pool_usage", "Type", "WaitSet", "wait_async", "Error", "IncompatibleService",
    "ServiceNotFound", "ServiceExists", "PoolExhausted", "LimitReached", "ViewsAlive", "WrongThread",
    "PubSubService", "Publisher", "Loan", "Subscriber", "Sample", "EventService", "Notifier",
    "Listener", "Blackboard", "BlackboardBuilder", "BlackboardReader", "BlackboardWriter",
    "TensorError", "TensorPublisher", "TensorLoan", "TensorSubscriber", "TensorSample",
    "RequestResponseBuilder", "RequestResponseService", "Client", "PendingResponse", "Response", "Server",
    "ActiveRequest", "NoServer", "ServerGone", "ClientGone", "AccessPolicy", "AccessDenied", "NotAPublisher",
    "HugePagesUnavailable",
]

# Device-memory ports: in a package built with the `cuda` feature (the default; the
# driver is loaded only when a CUDA_DEVICE service is used).
for _name in ("DevicePublisher", "DeviceLoan", "DeviceSubscriber", "DeviceSample"):
    if hasattr(_iox, _name):
        globals()[_name] = getattr(_iox, _name)
        __all__.append(_name)


def pool_usage(name: str, root: str | None = None) -> list[tuple[int, int, int]]:
    """``[(chunk_size, count, in_use), ...]`` of a service's pool, from its files."""
    return _iox.pool_usage(name, root or os.environ.get("IOX_ROOT") or "/dev/shm")


class MemoryType(enum.IntEnum):
    """Where a service's pool lives (codes as in Rust's ``MemoryType``).
    ``MemoryType(code)`` for codes >= 0x100 is not an enum member: pass the int."""

    CPU = 0
    LOCKED = 1
    CUDA_PINNED = 2
    CUDA_DEVICE = 3


class Service:
    """A service by name; ``root`` (a directory) instead of ``$IOX_ROOT`` or /dev/shm.
    The name is checked at once (segments of ASCII letters, digits and ``_ - . ~ : + = ,``
    separated by single ``/``, starting with a letter, digit or ``_``): a bad one raises
    ``iox.Error`` with the rule."""

    def __init__(self, name: str, root: str | None = None):
        _iox.check_name(name)  # raises iox.Error with the name rule
        self.name = name
        self.root = root

    def publish_subscribe(self, payload=None, shape=None, *, size_classes=None, chunk_sizes=None,
                          max_len=None, user_header=None) -> "PubSubBuilder":
        """A publish-subscribe builder. ``payload``: a numpy dtype (or scalar type),
        ``bytes`` or an ``iox.Type``. With ``shape``: fixed-shape arrays. Without:
        one value, unless ``size_classes`` / ``chunk_sizes`` (bytes) / ``max_len``
        (elements) make it a slice service of 1-D arrays of any length.

        ``user_header``: a per-sample header carried in front of the payload, given as
        payloads are (a numpy scalar type, or an ``iox.Type`` for a structured dtype),
        recorded with the service (name, size, alignment, fields) and checked on open
        as a Rust program's ``.user_header::<H>()`` is: every program of the service
        declares the same header, or none (else ``IncompatibleService`` naming both).
        Loans then have ``loan.header`` (writable, zeroed), samples ``sample.header``
        (read-only), both numpy views in place; ``pub.send(data, header=h)``.

        ``payload=None`` (or no payload) opens an existing service with the dtype and
        shape its recorded schema gives, e.g. one a Rust program created with a
        ``#[derive(ZeroCopySafe)]`` struct: a structured dtype with the struct's
        field names and offsets (``sample.array["x"]``), its arrays as shape
        (``[[f32; 3]; 4]`` is float32 of shape (4, 3)), a slice's element as the
        dtype. Only ``open()`` is possible then (creating needs a dtype); a service
        that records no schema raises ``iox.Error`` saying which dtype to pass. The
        service's user header, if it has one, comes from its recorded header schema
        the same way (unless ``user_header`` is given)."""
        return PubSubBuilder(self, payload, shape, size_classes, chunk_sizes, max_len, user_header)

    def request_response(self, request, response, *, request_max_len=None,
                         response_max_len=None) -> RequestResponseBuilder:
        """A request-response builder: requests of ``request``, responses of
        ``response``, each a numpy dtype (one value), an ``iox.Type`` or ``bytes``; with
        ``request_max_len`` / ``response_max_len`` (elements) a slice of up to that many.
        See ``iox._request_response``."""
        return RequestResponseBuilder(self, request, response, request_max_len, response_max_len)

    def event(self) -> "EventBuilder":
        return EventBuilder(self)

    def blackboard(self, key_dtype) -> "BlackboardBuilder":
        """A blackboard builder with keys of the integer dtype ``key_dtype`` (see
        ``iox._blackboard``)."""
        return BlackboardBuilder(self, key_dtype)


class PubSubBuilder(_Builder):
    def __init__(self, service, payload, shape, size_classes, chunk_sizes, max_len, user_header=None):
        super().__init__(service)
        if user_header is not None:
            # As a payload element: (Rust name, dtype, alignment); recorded in Rust.
            name, dtype, alignment = element(user_header)
            self._opts["user_header"] = (name, alignment, dtype)
        if payload is None:
            # The dtype comes from the service's schema (``_open``); the pool settings,
            # if given, are checked against the service's on open.
            if shape is not None:
                raise TypeError("publish_subscribe(None) takes the shape from the service: drop shape=")
            self._payload = None
            self._opts.update(size_classes=size_classes, chunk_sizes=chunk_sizes, max_len=max_len)
            return
        name, dtype, alignment = element(payload)
        slice_ = payload is bytes or any(x is not None for x in (size_classes, chunk_sizes, max_len))
        if slice_ and shape is not None:
            raise TypeError("a fixed shape and size classes exclude each other")
        if slice_:
            self._payload = ("slice", name, name, dtype.itemsize, alignment)
            self._shape = None
            self._opts.update(size_classes=size_classes, chunk_sizes=chunk_sizes,
                              max_len=max_len)
        else:
            shape = () if shape is None else tuple(int(n) for n in np.atleast_1d(shape)) if not isinstance(shape, int) else (shape,)
            size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
            self._payload = ("typed", array_name(name, shape), name, size, alignment)
            self._shape = list(shape)
        self._dtype = dtype

    def memory_type(self, memory_type: int):
        return self._set("memory_type", int(memory_type))

    def page_size(self, pages: str):
        """The pages the pool lives on: ``"4k"`` (the default), ``"2m"`` or ``"1g"``
        (hugetlb pages the machine has reserved, ``nr_hugepages``; too few raise
        ``iox.HugePagesUnavailable`` on create, saying how many to reserve) or
        ``"thp"`` (transparent huge pages, best effort). Checked on open: a service
        on other pages raises ``IncompatibleService``. An unknown one raises
        ``ValueError`` here. ``svc.page_size`` reads it back."""
        return self._set("page_size", _iox.page_size_short(str(pages)))

    def max_publishers(self, n: int):
        return self._set("max_publishers", n)

    def max_subscribers(self, n: int):
        return self._set("max_subscribers", n)

    def subscriber_buffer(self, n: int):
        return self._set("subscriber_buffer", n)

    def max_loans(self, n: int):
        return self._set("max_loans", n)

    def max_held(self, n: int):
        return self._set("max_held", n)

    def history(self, n: int):
        return self._set("history", n)

    def tensors(self, on: bool = True):
        """Each sample carries its tensor's shape and strides (a slice of numbers; always
        on for CUDA_DEVICE). Send with ``svc.tensor_publisher()``."""
        return self._set("tensors", bool(on))

    def permissions(self, mode: int):
        return self._set("permissions", mode)

    def access(self, policy: AccessPolicy):
        """Who may publish and who may only subscribe: an ``iox.AccessPolicy``,
        recorded when this builder creates the service (its uid the creator, always a
        publisher), checked against the service's when it opens one (a different one
        raises ``IncompatibleService``). The files' ``permissions`` must still admit
        every uid it names (e.g. ``0o666``). A reader's ``publisher()`` raises
        ``iox.NotAPublisher``; a process the policy does not name gets
        ``iox.AccessDenied`` at open. Not for ``CUDA_DEVICE`` services with readers."""
        if not isinstance(policy, AccessPolicy):
            raise TypeError(f"access() takes an iox.AccessPolicy, not {type(policy).__name__}")
        return self._set("access", policy)

    def allow_pool_exhaustion(self, allow: bool = True):
        return self._set("allow_pool_exhaustion", allow)

    def _open(self, mode):
        if self._payload is None:
            if mode != "open":
                raise TypeError(f"{mode}() needs the payload's dtype: publish_subscribe(None) only "
                                "opens an existing service (its recorded schema gives the dtype)")
            return _iox.open_pubsub_from_schema(self._service.name, self._opts)
        kind, name, element_name, size, alignment = self._payload
        return _iox.open_pubsub(self._service.name, mode, kind, name, element_name, size, alignment,
                                self._dtype, self._shape, self._opts)


class EventBuilder(_Builder):
    def max_notifiers(self, n: int):
        return self._set("max_notifiers", n)

    def max_listeners(self, n: int):
        return self._set("max_listeners", n)

    def event_id_max(self, n: int):
        return self._set("event_id_max", n)

    def _open(self, mode):
        return _iox.open_event(self._service.name, mode, self._opts)
