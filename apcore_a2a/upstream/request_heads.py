"""A connection that has not sent a whole request head within ``header_timeout`` seconds is
closed: of its opening, or of its previous response completing.

uvicorn 0.55 bounds only the idle time after a response (``timeout_keep_alive``), and
stops that timer on the first byte of the next request: a client that connects and sends
nothing, or sends a request head one byte at a time, holds its connection (and a file
descriptor) for ever (slowloris). uvicorn takes the protocol class through its public
``Config(http=...)``; the subclasses here add one timer to its h11 and httptools
protocols, reading their (public but undocumented) ``transport``, ``loop`` and ``cycle``.

The timer runs while the connection waits for a request head: armed when it opens and
when a response completes with no request head already parsed; stopped when a head is
complete (a new request cycle exists). While a response is being sent none runs: a long
stream is the application's, and a request pipelined behind it is read only afterwards.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["head_deadline_protocol"]


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
        """(Re)start the wait for the next request head."""
        self.disarm_head_timer()
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


def head_deadline_protocol(header_timeout: float) -> type[asyncio.Protocol]:
    """The HTTP protocol class uvicorn's ``http="auto"`` would choose (httptools when
    installed, else h11), closing connections whose request head is late by
    *header_timeout* seconds; pass it as ``uvicorn.Config(http=...)``."""
    base: type[asyncio.Protocol]
    try:  # as uvicorn.protocols.http.auto chooses
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        base = H11Protocol
    else:
        base = HttpToolsProtocol
    return type(
        f"HeadDeadline{base.__name__}",
        (_HeadDeadline, base),
        {"header_timeout": header_timeout, "__module__": __name__},
    )
