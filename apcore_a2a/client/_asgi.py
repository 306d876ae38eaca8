"""In-process ("direct") transport: httpx requests served by an ASGI app, no socket.

Not ``httpx.ASGITransport``: it runs the app to completion before returning the response,
so an SSE stream of a running task could never be read while it runs
(tests/client/test_direct.py). This one hands chunks over as they are sent, signals
``http.disconnect`` on close, and applies the read timeout (httpx enforces timeouts only
in its network transports).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx
from asgi_lifespan import LifespanManager, LifespanNotSupported

from apcore_a2a.client.errors import A2AConnectionError

#: seconds to connect (and for an in-process app to start) when ``timeout`` is ``None``
CONNECT_TIMEOUT = 30.0

#: ASGI scope extension marking a request made in the same process (no socket).
IN_PROCESS_EXTENSION = "apcore_a2a.in_process"
Message = MutableMapping[str, Any]
#: (scope, receive, send) -> None
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

logger = logging.getLogger("apcore_a2a.client")
_END = object()
_CLOSE_GRACE_S = 1.0


class _BodyStream(httpx.AsyncByteStream):
    def __init__(
        self, queue: asyncio.Queue[object], task: asyncio.Task[None], gone: asyncio.Event, t: Any
    ) -> None:
        self._queue, self._task, self._gone, self._timeout = queue, task, gone, t

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                item = await asyncio.wait_for(self._queue.get(), self._timeout)
            except TimeoutError as exc:
                raise httpx.ReadTimeout("the in-process agent sent nothing in time") from exc
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise httpx.ReadError(f"the in-process agent failed: {item}") from item
            yield item  # type: ignore[misc]

    async def aclose(self) -> None:
        self._gone.set()
        # Streaming apps stop on http.disconnect; give them a moment, then cancel.
        await asyncio.wait({self._task}, timeout=_CLOSE_GRACE_S)
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
        if not self._to_start:
            return
        async with self._lock:
            if not self._to_start:
                return
            manager = LifespanManager(_failing_loudly(self.app), bound, bound)
            try:
                await manager.__aenter__()
            except LifespanNotSupported:
                pass
            except Exception as exc:
                raise A2AConnectionError(f"the in-process agent failed to start: {exc}") from exc
            else:
                self._lifespan, self.app = manager, manager.app  # requests see its state
            self._to_start = False

    async def aclose(self) -> None:
        if self._lifespan is not None:
            with contextlib.suppress(Exception):  # a failed shutdown is the app's to log
                await self._lifespan.__aexit__(None, None, None)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
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
            # No network between us and the app: its Host check (DNS rebinding) has
            # nothing to protect here, whatever name the caller used for it.
            "extensions": {IN_PROCESS_EXTENSION: {}},
        }
        timeout = (request.extensions.get("timeout") or {}).get("read")
        queue: asyncio.Queue[object] = asyncio.Queue()
        started: asyncio.Future[tuple[int, Any]] = asyncio.get_running_loop().create_future()
        gone = asyncio.Event()
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start" and not started.done():
                started.set_result((int(message["status"]), list(message.get("headers", []))))
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    queue.put_nowait(bytes(message["body"]))
                if not message.get("more_body", False):
                    queue.put_nowait(_END)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as exc:
                (queue.put_nowait if started.done() else started.set_exception)(exc)
                return
            if not started.done():
                started.set_exception(RuntimeError("the app returned without a response"))
            queue.put_nowait(_END)

        task = asyncio.create_task(run())
        try:
            status, headers = await asyncio.wait_for(asyncio.shield(started), timeout)
        except TimeoutError as exc:
            gone.set()
            task.cancel()
            raise httpx.ReadTimeout("the in-process agent did not answer in time") from exc
        except Exception:
            # What an ASGI server does with an app that crashed before answering.
            logger.exception("in-process agent raised before sending a response")
            return httpx.Response(500, text="Internal Server Error", request=request)
        stream = _BodyStream(queue, task, gone, timeout)
        return httpx.Response(status, headers=headers, stream=stream, request=request)
