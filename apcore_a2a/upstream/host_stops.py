"""When the host's uvicorn has begun to stop, for an app of ``async_serve()`` it runs.

uvicorn tells an app nothing of a stop until its open connections have closed: only then
does the lifespan get its shutdown. An SSE stream is such a connection, so the drain the
lifespan runs came after the streams, which sse-starlette ended on its own clock
(``shutdown_grace_period`` after the signal), before their task's last event. uvicorn
has no public hook for "the stop has begun", and gives the app no handle on its server.

:func:`serving_server` finds the ``uvicorn.Server`` whose ``serve()`` runs in the
request's own event loop (the coroutine frames of the loop's tasks): under ``uvicorn.run``,
a gunicorn worker, or a server run in a thread without signal handlers, stopped by a
signal, its ``handle_exit`` or its public ``should_exit`` alike. With two servers in one
loop, the one listening on the request's port. Failing that (uvicorn's ``serve`` laid
out otherwise), the server whose bound ``handle_exit`` took SIGTERM, as sse-starlette
finds it (its ``_get_uvicorn_server``). Not uvicorn (hypercorn): nothing is found, and
that server's own bound ends the streams.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import uvicorn
from starlette.types import Scope


class HostServer:
    """:func:`serving_server`, looked up once per event loop and port: the look walks
    every task of the loop (27 ms with 10,000 tasks), and a hosted app starts watching at
    each stream that opens after none was open. A server found stopping is looked up anew
    (a server that has ended keeps its ``should_exit``; another may serve the app now)."""

    def __init__(self) -> None:
        self._found: tuple[object, object, uvicorn.Server | None] | None = None

    def find(self, scope: Scope) -> uvicorn.Server | None:
        key = asyncio.get_running_loop(), (scope.get("server") or (None, None))[1]
        found = self._found
        if found is None or found[:2] != key or host_stopping(found[2]):
            found = self._found = (*key, serving_server(scope))
        return found[2]


def serving_server(scope: Scope) -> uvicorn.Server | None:
    """The uvicorn server that serves *scope*'s request (call it in the request's loop)."""
    found = list(dict.fromkeys(_in_loop()))
    if len(found) > 1:
        port = (scope.get("server") or (None, None))[1]
        found = [server for server in found if port in _ports(server)]
    if len(found) == 1:
        return found[0]
    owner = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return owner if isinstance(owner, uvicorn.Server) else None


def _in_loop() -> Iterator[uvicorn.Server]:
    for task in asyncio.all_tasks():
        coro: object = task.get_coro()
        while coro is not None:  # serve() awaited by its caller's coroutine (gunicorn's)
            frame = getattr(coro, "cr_frame", None)
            owner = frame.f_locals.get("self") if frame is not None else None
            if isinstance(owner, uvicorn.Server):
                yield owner
                break
            coro = getattr(coro, "cr_await", None)


def _ports(server: uvicorn.Server) -> set[object]:
    return {
        sock.getsockname()[1]
        for listener in server.servers
        for sock in listener.sockets
        if isinstance(sock.getsockname(), tuple)
    }


def host_stopping(server: uvicorn.Server | None) -> bool:
    """Whether *server* (:func:`serving_server`'s) has begun to stop."""
    return server is not None and bool(server.should_exit)
