"""The SSE responses open in ``serve()``, and how its stop ends them once the drain has.

``serve()`` lets its streams stay past their own grace (``server/factory.py``): a stream
gets its task's final event however long the drain's cancels take to be stored. A stream
the drain does not end (a ``SubscribeToTask`` of a task parked in ``input-required``, one
following a task that runs on another replica) would then stay until uvicorn's bound on
open connections, which cancels it: a truncated chunked body for the client and an ERROR
traceback in the log. :class:`StreamEnds` wraps the app (pure ASGI, this server's alone)
and, when the drain has ended, finishes each such response as sse-starlette's own end
does: the final empty body chunk, later sends of the app dropped. Once the response is
complete, the server answers the app's ``receive`` with ``http.disconnect`` (the ASGI
contract), so sse-starlette stops the SDK's generator as for a client that left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import request_info

logger = logging.getLogger("apcore_a2a")

_END: Message = {"type": "http.response.body", "body": b"", "more_body": False}


class _Stream:
    """One SSE response of the app: its sends, and its end by the stop."""

    __slots__ = ("done", "lock", "scope", "send")

    def __init__(self, send: Send, scope: Scope) -> None:
        self.send, self.scope = send, scope
        self.lock = asyncio.Lock()  # one message at a time: the app's, or the end
        self.done = False

    def task_id(self) -> str | None:
        info = request_info(self.scope)
        answer = getattr(info, "answer", None) if info is not None else None
        return getattr(answer, "task_id", None) or getattr(answer, "run_task", None)

    async def relay(self, message: Message) -> None:
        async with self.lock:
            if self.done:  # ended by the stop: the app's later sends go nowhere
                return
            await self.send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.done = True

    async def end(self) -> None:
        async with self.lock:
            if self.done:
                return
            self.done = True
            with contextlib.suppress(OSError):  # the client has gone meanwhile
                await self.send(_END)


class StreamEnds:
    """Wraps *app*; :meth:`end` finishes its open SSE responses (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._open: set[_Stream] = set()
        #: the tasks whose streams end by themselves (the stop's drain stored their end)
        self._ending: Collection[str] | None = None
        self._ends: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stream: _Stream | None = None

        async def watched(message: Message) -> None:
            nonlocal stream
            if stream is not None:
                await stream.relay(message)
                return
            await send(message)
            if message["type"] == "http.response.start" and _event_stream(message):
                stream = _Stream(send, scope)
                self._open.add(stream)
                if self._ending is not None:  # began as the drain ended
                    self._end(stream, self._ending)

        try:
            await self.app(scope, receive, watched)
        finally:
            if stream is not None:
                stream.done = True  # the app has returned: the server ends the response
                self._open.discard(stream)

    def end(self, ending: Collection[str] = ()) -> None:
        """Finish every open SSE response but those following a task of *ending* (their
        final event is on its way: they end by themselves); from now on, also each that
        begins."""
        self._ending = frozenset(ending)
        for stream in list(self._open):
            self._end(stream, self._ending)

    def _end(self, stream: _Stream, ending: Collection[str]) -> None:
        if stream.task_id() in ending:
            return
        task = asyncio.ensure_future(stream.end())
        self._ends.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._ends.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("Shutting down: a stream could not be ended: %r", task.exception())


def _event_stream(message: Message) -> bool:
    for key, value in message.get("headers", ()):
        if bytes(key).lower() == b"content-type":
            return bytes(value).split(b";")[0].strip().lower() == b"text/event-stream"
    return False
