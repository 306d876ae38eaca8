"""A request head is bounded in time and in size on uvicorn's h11 and httptools protocols.

Time: a connection that has not sent a whole request head within ``header_timeout``
seconds is closed: of its opening, or of its previous response completing. uvicorn 0.55
bounds only the idle time after a response (``timeout_keep_alive``), and stops that timer
on the first byte of the next request: a client that connects and sends nothing, or sends
a request head one byte at a time, holds its connection (and a file descriptor) for ever
(slowloris). The timer runs while the connection waits for a request head: armed when it
opens and when a response completes with no request head already parsed; stopped when a
head is complete (a new request cycle exists). While a response is being sent none runs:
a long stream is the application's, and a request pipelined behind it is read only
afterwards.

Size: a request head still incomplete after :data:`HEAD_LIMIT` bytes is answered uvicorn's
``400 Invalid HTTP request received.`` with ``Connection: close``. uvicorn's h11 protocol
does that itself (h11's ``max_incomplete_event_size``, given as uvicorn's
``h11_max_incomplete_event_size``); its httptools protocol keeps a head of any size, 64 MB
held up to 127 MiB more, and copies a long URL or header value at each read (quadratic). The
httptools subclass here counts the bytes of the head being received as h11 counts them, and
answers as uvicorn's h11 protocol does.

uvicorn takes the protocol class through its public ``Config(http=...)``; the subclasses
read their (public but undocumented) ``transport``, ``loop``, ``cycle`` and ``logger``, and
extend their parser callbacks ``on_message_begin`` / ``on_headers_complete``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEAD_LIMIT", "bounded_head_protocol"]

#: Bytes of a request head (request line and headers) received before it is complete: h11's
#: default bound, which uvicorn's h11 users have always had, and the gRPC server's metadata
#: limit (``server/grpc.py``); room for a large JWT (8 KB) with the rest of a browser's
#: headers. A constant, not a setting: no setting bounds a head, and ``max_body_bytes``
#: (1 MiB by default) is the size of head this bound keeps out (httptools copies a long
#: header at each read); one value for both bindings keeps a header served on HTTP served
#: on gRPC. 16 KiB is also Node.js's default bound of a head and grpc's own hard limit.
HEAD_LIMIT = 16 * 1024


class _HeadDeadline:
    """The timer, mixed in before uvicorn's protocol class (which it calls through super)."""

    header_timeout: float = 10.0
    head_timer: asyncio.TimerHandle | None = None
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self.arm_head_timer()

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not None and self.cycle is not before:  # a request head completed
            self.disarm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        # A pipelined head already parsed has started a cycle whose response is pending.
        if not self.transport.is_closing() and self.cycle.response_complete:
            self.arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm_head_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def arm_head_timer(self) -> None:
        """(Re)start the wait for the next request head (none when ``header_timeout`` is 0)."""
        self.disarm_head_timer()
        if self.header_timeout:
            self.head_timer = self.loop.call_later(self.header_timeout, self.head_overdue)

    def disarm_head_timer(self) -> None:
        """Stop the wait: a head arrived, or the connection is gone."""
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def head_overdue(self) -> None:
        """Close the connection, unless it was handed to another protocol meanwhile."""
        self.head_timer = None
        owner: object = self.transport.get_protocol()
        if not self.transport.is_closing() and owner is self:
            self.transport.close()


class _HeadSize:
    """httptools' side of h11's ``max_incomplete_event_size``: the bytes of the head being
    received, counted after each read (from the read's last blank line in the read where it
    begins: a pipelined message before it with a ``Content-Length`` body counts the bytes of
    that body after its head too)."""

    #: bytes of the head being received; None while no head is
    head_bytes: int | None = None
    head_began = False
    transport: asyncio.Transport
    logger: Any

    def on_message_begin(self) -> None:
        super().on_message_begin()  # type: ignore[misc]
        self.head_bytes, self.head_began = 0, True

    def on_headers_complete(self) -> None:
        self.head_bytes = None
        super().on_headers_complete()  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        self.head_began = False
        super().data_received(data)  # type: ignore[misc]
        if self.head_bytes is None or self.transport.is_closing():
            return
        size = len(data)
        if self.head_began:  # after the message before it in this read, if any
            end = data.rfind(b"\r\n\r\n")  # of that message's head, or of its chunked body
            size -= end + 4 if end >= 0 else 0
        self.head_bytes += size
        if self.head_bytes > HEAD_LIMIT:
            message = "Invalid HTTP request received."  # uvicorn's h11 protocol's words
            self.logger.warning(message)
            self.send_400_response(message)  # type: ignore[attr-defined]


def bounded_head_protocol(header_timeout: float) -> type[asyncio.Protocol]:
    """The HTTP protocol class uvicorn's ``http="auto"`` would choose (httptools when
    installed, else h11), closing connections whose request head is late by
    *header_timeout* seconds (0: never) and answering a head over :data:`HEAD_LIMIT` bytes
    400; pass it as ``uvicorn.Config(http=...)``, with
    ``h11_max_incomplete_event_size=HEAD_LIMIT``."""
    bases: tuple[type, ...]
    try:  # as uvicorn.protocols.http.auto chooses
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        bases = (_HeadDeadline, H11Protocol)
    else:
        bases = (_HeadDeadline, _HeadSize, HttpToolsProtocol)
    return type(
        f"BoundedHead{bases[-1].__name__}",
        bases,
        {"header_timeout": header_timeout, "__module__": __name__},
    )
