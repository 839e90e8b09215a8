"""Request-response from Python: clients send requests, each answered by one server
with a stream of responses (zero, one or many), as in Rust, C and C++::

    svc = iox.Service("math/square").request_response(np.uint64, np.uint64).open_or_create()
    server = svc.server()                      # in one process (or thread)
    client = svc.client()                      # in another
    pending = client.send(7)                   # a PendingResponse
    req = server.receive(timeout=1.0)          # an ActiveRequest
    with req:                                  # leaving it ends the stream
        req.respond(int(req.array) ** 2)
    print(int(pending.receive(timeout=1.0).array))   # 49

``client.call(8, timeout=1.0)`` sends and returns the first response.

Each side's type is given as a publish-subscribe payload is: a numpy dtype or scalar
type (one value), an ``iox.Type`` (one structured value, meeting a Rust
``#[iox(type_name = ...)]`` type), or ``bytes`` (any number of bytes, e.g. a ROS 2
service's CDR through the gateway ``iox-ros2``); a dtype with ``request_max_len`` /
``response_max_len`` is a slice of up to that many values. Creating a slice side needs
its longest length in elements. The types are recorded with the service, so a Rust,
C or C++ program of the same types meets it, and another program's types are refused
with ``iox.IncompatibleService`` naming both.

Streams: ``for r in pending`` (or ``async for``) takes responses until the server
finishes the request; ``pending.receive(timeout)`` returns ``None`` for both a timeout
and the end (``pending.is_finished`` tells which). ``receive()`` without a timeout
does not wait (as a subscriber's). A server ends a stream by ``finish()``, leaving
``with``, or dropping the request. A client that closes (or drops) its pending response
abandons the request: a server that has not taken it yet skips it, one that has gets
``iox.ClientGone`` on its next respond. In asyncio, ``await req.respond_async(data)``
(``respond`` would block the loop while the client's queue is full).

Errors as in Rust: ``iox.NoServer`` (no server connected: a client that starts beside
its server waits for ``svc.port_counts()[1] > 0``, ``(clients, servers)``),
``iox.LimitReached`` (``max_active_requests_per_client``, or a server's queue of this
client's requests is full), ``iox.ServerGone`` (the server's process died, or its
server closed with the request not yet taken: raised once, after the responses that
arrived), ``iox.ClientGone`` (a respond to a client that died or closed its pending
response). The longest slice is fixed when the service is created: an ``open()``
with another ``*_max_len`` is not refused, a longer request or response is (an
``iox.Error`` naming the limit in elements: ``*_max_len`` rounded up to whole chunks).

Threads: a client or server, and what it gives out (pending responses, responses,
requests), belong to the thread that made the port (``iox.WrongThread`` elsewhere);
the service handle may be shared. Blocking calls release the GIL.
"""

from __future__ import annotations

from . import _iox
from ._builder import _Builder
from ._types import element


def _side(spec, max_len):
    """(kind, Rust name, element size, alignment, dtype) of one side."""
    name, dtype, alignment = element(spec)
    if spec is bytes or max_len is not None:
        return ("slice", name, dtype.itemsize, alignment, dtype)
    return ("typed", name, dtype.itemsize, alignment, dtype)


class RequestResponseBuilder(_Builder):
    """Settings of a request-response service; ``open()``, ``create()`` or
    ``open_or_create()`` it. Limits set here are checked against an existing service."""

    def __init__(self, service, request, response, request_max_len=None, response_max_len=None):
        super().__init__(service)
        self._request = _side(request, request_max_len)
        self._response = _side(response, response_max_len)
        self._opts.update(request_max_len=request_max_len, response_max_len=response_max_len)

    def max_clients(self, n: int):
        return self._set("max_clients", n)

    def max_servers(self, n: int):
        return self._set("max_servers", n)

    def max_active_requests_per_client(self, n: int):
        return self._set("max_active_requests_per_client", n)

    def max_response_buffer(self, n: int):
        """Responses of one request that may wait for the client; a server's respond
        waits while they are all taken."""
        return self._set("max_response_buffer", n)

    def memory_type(self, memory_type: int):
        return self._set("memory_type", int(memory_type))

    def permissions(self, mode: int):
        return self._set("permissions", mode)

    def _open(self, mode):
        return _iox.open_request_response(self._service.name, mode, self._request, self._response, self._opts)
