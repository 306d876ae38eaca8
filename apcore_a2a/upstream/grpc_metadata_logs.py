"""grpcio's records of a call metadata value that is not UTF-8: DEBUG, without traceback,
in the calls of a gRPC server of ours.

grpcio 1.85 logs one ERROR with a traceback ("Invalid encoding on b'...'") each time such
a call's metadata is read: five times a call to the agent (the interceptor's call details,
the edge, the caller key, the SDK's context builder), for any client that sends one,
credentials or not. It then hands the value over decoded as Latin-1, as uvicorn reads
an HTTP header, and the call is answered as one with that header over HTTP: nothing an
operator must act on. The record names no call; it is made in the call's task, which
grpcio creates in the context its server was started in: our servers start in a context
that marks them (:func:`starting`), and the filter acts in that context only, so another
server or channel of the process keeps grpcio's records as they are.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Coroutine
from typing import Any

from apcore_a2a.upstream import WhileOurs

#: the logger of grpcio's Cython layer, which decodes metadata
LOGGER = "grpc._cython.cygrpc"
#: its record of a value that is not UTF-8 (``grpc_string.pyx.pxi``, ``_decode``)
INVALID = "Invalid encoding on %s"


#: set in the context our gRPC servers start in, so in their calls' tasks
_OURS: contextvars.ContextVar[bool] = contextvars.ContextVar("apcore_a2a_grpc", default=False)


async def starting(start: Coroutine[Any, Any, None]) -> None:
    """Await a gRPC server's *start* in a copy of this context that marks its calls ours
    (the caller's own context is left as it was); :func:`detach` once it has stopped."""
    marked = contextvars.copy_context()
    marked.run(_OURS.set, True)
    await asyncio.create_task(start, context=marked)
    _ON.attach()  # its calls' records of undecodable values become DEBUG


class _ClientBytes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != INVALID or not _OURS.get():
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.exc_info, record.exc_text = None, None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_ON = WhileOurs(_ClientBytes(), LOGGER)


def detach() -> None:
    """A gRPC server of ours stopped; the last one takes the filter off."""
    _ON.detach()
