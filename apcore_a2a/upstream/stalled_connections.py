"""A stopping uvicorn server cuts the connections whose clients read nothing.

uvicorn 0.55's graceful stop waits for every open connection until
``timeout_graceful_shutdown``. A client that stopped reading without closing (its TCP
receive window full) holds one for all that time: the app's send waits for the transport to
drain, which never comes; closing the transport does not help (asyncio's ``close`` waits
for the bytes still buffered). At the bound uvicorn cancels the app's task: an ERROR line
with a traceback per connection, and the transport, closed again, still waits. Only
``abort`` ends such a connection, and uvicorn has no hook that calls it.

:func:`stalled` reads the server's ``server_state.connections`` and each protocol's
``transport`` (public but undocumented, as ``request_heads.py`` reads them) and yields
those transports with bytes waiting for their client (asyncio's public
``get_write_buffer_size``); the stop (``ops/graceful_server.py``) decides which to cut,
and ``abort`` cuts one: uvicorn's protocol then sees the connection lost, the app's
pending send returns and its ``receive`` answers ``http.disconnect``.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
from collections.abc import Iterator
from typing import Any, cast

import uvicorn

__all__ = ["peer", "stalled", "unread"]


def stalled(server: uvicorn.Server) -> Iterator[asyncio.WriteTransport]:
    """The transports of *server*'s open HTTP connections that have bytes their client has
    not taken yet (closing ones included: asyncio closes them once those bytes are sent).
    uvloop's transports (uvicorn's loop when installed) are no ``asyncio.WriteTransport``
    by type, only by their methods."""
    for connection in list(server.server_state.connections):
        transport: Any = getattr(connection, "transport", None)
        if hasattr(transport, "abort") and transport.get_write_buffer_size():
            yield cast(asyncio.WriteTransport, transport)


def peer(transport: asyncio.BaseTransport) -> str:
    """The client's address, ``host:port``, for a log line."""
    name = transport.get_extra_info("peername")
    if isinstance(name, tuple) and len(name) >= 2:
        return f"{name[0]}:{name[1]}"
    return str(name or "an unknown client")


def unread(transport: asyncio.WriteTransport) -> int:
    """The bytes *transport*'s client has not taken: those the transport holds, and those
    the kernel sent but the client has not acknowledged (Linux's ``TIOCOUTQ``; elsewhere
    the transport's alone). A reading client moves the kernel's share first: on loopback
    the socket's send buffer grows to megabytes, and the transport's bytes move only once
    half of it has gone."""
    held = transport.get_write_buffer_size()
    sock = transport.get_extra_info("socket")
    if sock is None or not sys.platform.startswith("linux"):
        return held
    import fcntl
    import termios

    with contextlib.suppress(OSError):  # closed meanwhile
        (queued,) = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))
        return held + int(queued)
    return held
