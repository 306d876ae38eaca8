"""When the host's uvicorn has begun to stop, for an app of ``async_serve()`` it runs.

uvicorn tells an app nothing of a stop until its open connections have closed: only then
does the lifespan get its shutdown. An SSE stream is such a connection, so the drain the
lifespan runs came after the streams, which sse-starlette ended on its own clock
(``shutdown_grace_period`` after the signal), before their task's last event. uvicorn
has no public hook for "the stop has begun"; sse-starlette finds the server the same way
(its ``_get_uvicorn_server``): the SIGTERM handler uvicorn installs is the bound
``handle_exit`` of the serving ``uvicorn.Server``, whose public ``should_exit`` it sets.
A server with no signal handlers (run in a thread, or not uvicorn) is not seen, by
sse-starlette either: its stop then ends the streams itself, by its own bound.
"""

from __future__ import annotations

import signal

import uvicorn


def host_stopping() -> bool:
    """Whether the uvicorn server that took this process's SIGTERM has begun to stop."""
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return isinstance(server, uvicorn.Server) and bool(server.should_exit)
