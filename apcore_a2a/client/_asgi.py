"""In-process ("direct") transport: httpx requests served by an ASGI app, no socket.

``httpx.ASGITransport`` runs the app to completion before returning the response, so
an SSE stream would only arrive once the task ends and a resubscribe to a running task
could never be read while it runs. This transport hands body chunks to the caller as
the app sends them, signals ``http.disconnect`` when the caller closes the response,
and applies the client's read timeout (httpx enforces timeouts only in its network
transports). :class:`Lifespan` runs the app's startup/shutdown like a server would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx

#: ASGI scope extension marking a request made in the same process (no socket).
IN_PROCESS_EXTENSION = "apcore_a2a.in_process"

__all__ = ["ASGIApp", "DirectTransport", "Lifespan"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

logger = logging.getLogger("apcore_a2a.client")

_END = object()
_CLOSE_GRACE_S = 1.0


def _read_timeout(request: httpx.Request) -> float | None:
    timeouts = request.extensions.get("timeout") or {}
    value = timeouts.get("read")
    return float(value) if isinstance(value, int | float) else None


class _BodyStream(httpx.AsyncByteStream):
    def __init__(
        self,
        queue: asyncio.Queue[object],
        task: asyncio.Task[None],
        disconnected: asyncio.Event,
        read_timeout: float | None,
    ) -> None:
        self._queue = queue
        self._task = task
        self._disconnected = disconnected
        self._read_timeout = read_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                item = await asyncio.wait_for(self._queue.get(), self._read_timeout)
            except TimeoutError as exc:
                raise httpx.ReadTimeout("the in-process agent sent nothing in time") from exc
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise httpx.ReadError(f"the in-process agent failed: {item}") from item
            assert isinstance(item, bytes)
            yield item

    async def aclose(self) -> None:
        self._disconnected.set()
        if not self._task.done():
            # Streaming apps stop on http.disconnect; give them a moment, then cancel.
            await asyncio.wait({self._task}, timeout=_CLOSE_GRACE_S)
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class DirectTransport(httpx.AsyncBaseTransport):
    """An httpx transport that calls an ASGI app in the current event loop."""

    def __init__(self, app: ASGIApp, *, state: dict[str, Any] | None = None) -> None:
        self.app = app
        # Lifespan state is shared with every request scope, as ASGI servers do.
        self.state = state if state is not None else {}

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
            "state": dict(self.state),
            # No network between us and the app: its Host check (DNS rebinding) has
            # nothing to protect here, whatever name the caller used for it.
            "extensions": {IN_PROCESS_EXTENSION: {}},
        }
        queue: asyncio.Queue[object] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = loop.create_future()
        disconnected = asyncio.Event()
        body_sent = False

        async def receive() -> Message:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                if not started.done():
                    headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
                    started.set_result((int(message["status"]), headers))
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    queue.put_nowait(bytes(chunk))
                if not message.get("more_body", False):
                    queue.put_nowait(_END)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as exc:
                if not started.done():
                    started.set_exception(exc)
                else:
                    queue.put_nowait(exc)
                return
            if not started.done():
                started.set_exception(RuntimeError("the app returned without a response"))
            queue.put_nowait(_END)

        task = asyncio.create_task(run())
        try:
            status, headers = await asyncio.wait_for(
                asyncio.shield(started), _read_timeout(request)
            )
        except TimeoutError as exc:
            disconnected.set()
            task.cancel()
            raise httpx.ReadTimeout("the in-process agent did not answer in time") from exc
        except Exception:
            # What an ASGI server does with an app that crashed before answering.
            logger.exception("in-process agent raised before sending a response")
            return httpx.Response(500, text="Internal Server Error", request=request)
        stream = _BodyStream(queue, task, disconnected, _read_timeout(request))
        return httpx.Response(status, headers=headers, stream=stream, request=request)


class Lifespan:
    """Runs an ASGI app's lifespan protocol (startup, later shutdown) in this loop."""

    def __init__(self, app: ASGIApp, *, timeout: float | None = None) -> None:
        self.app = app
        self.timeout = timeout
        self.state: dict[str, Any] = {}
        self.supported = True
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": self.state}
        try:
            await self.app(scope, self._to_app.get, self._from_app.put)
        except Exception as exc:
            self.supported = False
            logger.debug("app does not take part in the lifespan protocol: %r", exc)

    async def _exchange(self, message: str) -> Message | None:
        """Send *message*; return the app's answer or ``None`` if the app stopped."""
        assert self._task is not None
        await self._to_app.put({"type": message})
        answer = asyncio.ensure_future(self._from_app.get())
        done, _ = await asyncio.wait(
            {answer, self._task}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if answer in done:
            return answer.result()
        answer.cancel()
        if not done:
            raise TimeoutError(f"the app did not answer {message} in time")
        return None

    async def startup(self) -> None:
        """Start the app; raise ``RuntimeError`` if its startup fails."""
        self._task = asyncio.create_task(self._run())
        answer = await self._exchange("lifespan.startup")
        if answer is None:
            return
        if answer["type"] == "lifespan.startup.failed":
            raise RuntimeError(answer.get("message") or "the app failed to start")

    async def shutdown(self) -> None:
        """Ask the app to shut down and wait for it (up to ``timeout`` seconds)."""
        if self._task is None or self._task.done():
            return
        try:
            answer = await self._exchange("lifespan.shutdown")
            if answer is not None and answer["type"] == "lifespan.shutdown.failed":
                logger.warning("in-process agent shutdown failed: %s", answer.get("message"))
            await asyncio.wait({self._task}, timeout=self.timeout)
        finally:
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
