"""grpcio's records of a call metadata value that is not UTF-8: DEBUG, without traceback,
while a gRPC server of ours runs.

grpcio 1.85 logs one ERROR with a traceback ("Invalid encoding on b'...'") each time such
a call's metadata is read: five times a call to the agent (the interceptor's call details,
the edge, the caller key, the SDK's context builder), for any client that sends one,
credentials or not. It then hands the value over decoded as Latin-1, as uvicorn reads
an HTTP header, and the call is answered as one with that header over HTTP: nothing an
operator must act on. The record names no call, so the filter acts on every such record
of the process while one of our servers runs: a client's bytes, whichever server or
channel of the process read them.
"""

from __future__ import annotations

import logging
import threading

#: the logger of grpcio's Cython layer, which decodes metadata
LOGGER = "grpc._cython.cygrpc"
#: its record of a value that is not UTF-8 (``grpc_string.pyx.pxi``, ``_decode``)
INVALID = "Invalid encoding on %s"


class _ClientBytes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != INVALID:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.exc_info, record.exc_text = None, None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_FILTER = _ClientBytes()
_lock = threading.Lock()
_servers = 0  # running gRPC servers of ours: the filter is on while there is one


def attach() -> None:
    """A gRPC server of ours starts: grpcio's records of undecodable values become DEBUG."""
    global _servers
    with _lock:
        _servers += 1
        if _servers == 1:
            logging.getLogger(LOGGER).addFilter(_FILTER)


def detach() -> None:
    """A gRPC server of ours stopped; the last one takes the filter off."""
    global _servers
    with _lock:
        _servers -= 1
        if _servers == 0:
            logging.getLogger(LOGGER).removeFilter(_FILTER)
