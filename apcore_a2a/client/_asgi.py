"""In-process ("direct") transport: httpx requests served by an ASGI app, no socket.

Not ``httpx.ASGITransport``: it runs the app to completion before returning the response,
so an SSE stream of a running task could never be read while it runs
(tests/client/test_direct.py). This one hands each ``http.response.*`` message over as the
app sends it, signals ``http.disconnect`` on close, and applies the read timeout (httpx
enforces timeouts only in its network transports).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from asgi_lifespan import LifespanManager, LifespanNotSupported

from apcore_a2a.client.errors import A2AConnectionError

#: seconds to connect (and for an in-process app to start) when ``timeout`` is ``None``
CONNECT_TIMEOUT = 30.0

#: (scope, receive, send) -> None
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

logger = logging.getLogger("apcore_a2a.client")


class _Answer(httpx.AsyncByteStream):
    """What the app sends for one request, read as it is sent (each read within *timeout*)."""

    def __init__(self, app: ASGIApp, scope: dict[str, Any], body: bytes, timeout: Any) -> None:
        self._sent: asyncio.Queue[Any] = asyncio.Queue()
        self._gone = asyncio.Event()
        self._timeout, self._body = timeout, body
        self._body_read = False
        self._task = asyncio.create_task(self._run(app, scope))

    async def _run(self, app: ASGIApp, scope: dict[str, Any]) -> None:
        try:
            await app(scope, self._receive, self._sent.put)
        except Exception as exc:
            await self._sent.put(exc)
        await self._sent.put({"type": "http.response.body"})  # returned: no more body

    async def _receive(self) -> dict[str, Any]:
        if not self._body_read:
            self._body_read = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def next(self) -> Any:
        """The app's next message (or what it raised)."""
        try:
            return await asyncio.wait_for(self._sent.get(), self._timeout)
        except TimeoutError as exc:
            raise httpx.ReadTimeout("the in-process agent did not answer in time") from exc

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            message = await self.next()
            if isinstance(message, BaseException):
                raise httpx.ReadError(f"the in-process agent failed: {message}") from message
            if message.get("body"):
                yield bytes(message["body"])
            if not message.get("more_body", False):
                return

    async def aclose(self, grace: float = 1.0) -> None:
        self._gone.set()
        # Streaming apps stop on http.disconnect; give them a moment, then cancel.
        await asyncio.wait({self._task}, timeout=grace)
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _failing_loudly(app: ASGIApp) -> ASGIApp:
    """Raise on ``lifespan.startup.failed``: asgi-lifespan waits for "complete" only, so it
    would hang until the timeout."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        async def checked_send(message: Any) -> None:
            if str(message.get("type", "")).endswith(".failed"):
                raise RuntimeError(message.get("message") or "the app failed to start")
            await send(message)

        await app(scope, receive, checked_send)

    return wrapped


class DirectTransport(httpx.AsyncBaseTransport):
    """An httpx transport that calls an ASGI app in the current event loop."""

    def __init__(self, app: ASGIApp, lifespan: bool) -> None:
        self.app = app
        self._to_start = lifespan
        self._lifespan: LifespanManager | None = None
        self._lock = asyncio.Lock()

    async def start(self, bound: float) -> None:
        """Run the app's lifespan startup once (within *bound* seconds), if asked to."""
        async with self._lock:
            if not self._to_start:
                return
            manager = LifespanManager(_failing_loudly(self.app), bound, bound)
            try:
                await manager.__aenter__()
            except LifespanNotSupported:
                pass
            except Exception as exc:
                raise A2AConnectionError(
                    f"the in-process agent failed to start: {type(exc).__name__}: {exc}"
                ) from None
            else:
                self._lifespan, self.app = manager, manager.app  # requests see its state
            self._to_start = False

    async def aclose(self) -> None:
        if self._lifespan is not None:
            with contextlib.suppress(Exception):  # a failed shutdown is the app's to log
                await self._lifespan.__aexit__(None, None, None)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port),
            "client": ("127.0.0.1", 0),
            "root_path": "",
            "state": {},
            # Made in this process (server/lifecycle.py: IN_PROCESS): no network between
            # us and the app, so its Host check (DNS rebinding) has nothing to protect here.
            "extensions": {"apcore_a2a.in_process": {}},
        }
        timeout = (request.extensions.get("timeout") or {}).get("read")
        answer = _Answer(self.app, scope, await request.aread(), timeout)
        try:
            start = await answer.next()
        except httpx.ReadTimeout:
            await answer.aclose(grace=0)
            raise
        if isinstance(start, BaseException) or start.get("type") != "http.response.start":
            # What an ASGI server does with an app that crashed before answering.
            error = start if isinstance(start, BaseException) else None
            logger.error("in-process agent failed before sending a response", exc_info=error)
            return httpx.Response(500, text="Internal Server Error", request=request)
        headers = list(start.get("headers", []))
        return httpx.Response(start["status"], headers=headers, stream=answer, request=request)
