"""The SSE responses open in the agent, and how a stop ends them once the drain has.

The streams stay past their own grace (``server/factory.py``): a stream gets its task's
final event however long the drain's cancels take to be stored. A stream no such event
ends (a ``SubscribeToTask`` of a task parked in ``input-required``, one following a task
that runs on another replica or whose final state the store refused) would then stay
until uvicorn's bound on open connections, which cancels it: a truncated chunked body for
the client and an ERROR traceback in the log. :class:`StreamEnds` wraps the app (pure
ASGI, this server's alone) and, when the drain has ended, finishes each response as
sse-starlette's own end does: the final empty body chunk, later sends of the app dropped.
A stream whose task's last event the drain saw stored (finished, canceled, or parked
during the drain: ``shutdown.last_events``) ends once it has sent that event, the others
at once. Once the response is complete, the server answers the app's ``receive`` with
``http.disconnect`` (the ASGI contract), so sse-starlette stops the SDK's generator as
for a client that left.

``serve()``'s server wraps its app in one and ends the streams after its drain
(``ops/graceful_server.py``). An app of ``async_serve()`` has one as its outermost layer
(*hosted*): while a stream is open it watches for the uvicorn server that runs it to
begin its stop (``upstream/host_stops.py``), then runs the same drain and ends the
streams after it, as ``serve()`` does; the lifespan's shutdown, once the connections have
closed, finds that drain done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import request_info
from apcore_a2a.ops.shutdown import drain, last_events
from apcore_a2a.streams.tap import Answer
from apcore_a2a.upstream.host_stops import HostServer, host_stopping

if TYPE_CHECKING:
    from apcore_a2a.ops.operations import ServerView

logger = logging.getLogger("apcore_a2a")

_END: Message = {"type": "http.response.body", "body": b"", "more_body": False}
#: Seconds between two looks at the host's server while a hosted app has a stream open
#: (sse-starlette looks as often): the drain begins at most this long after the signal.
WATCH_EVERY = 0.5


class StopEnd:
    """One open stream's end by the stop, an SSE response's or a gRPC call's alike: it ends
    once it has sent its task's last event (the drain saw it stored), or at once."""

    __slots__ = ("answer", "awaited", "sent")

    def __init__(self, answer: Answer | None = None) -> None:
        #: what the stream answers (its task, and the state of the event the SDK yielded
        #: last: the answer notes each before its bytes are sent)
        self.answer = answer
        #: the task state of the last event sent, and the one whose event ends the stream
        self.sent: str | None = None
        self.awaited: str | None = None

    def sent_one(self) -> bool:
        """The stream has sent an event: whether it was the last one the stop awaits."""
        self.sent = self.answer.state if self.answer is not None else None
        return self.awaited is not None and self.sent == self.awaited

    def ends_now(self, ending: Mapping[str, str]) -> bool:
        """The stop: whether the stream ends now, or (``False``) once it has sent the event
        of its task's state in *ending*. Its end is no client's drop (``Answer.stopped``)."""
        answer = self.answer
        if answer is None:
            return True
        answer.stopped = True
        state = ending.get(answer.task_id or answer.run_task or "")
        if state is None or self.sent == state:
            return True
        self.awaited = state
        return False


class _Stream(StopEnd):
    """One SSE response of the app: its sends, and its end by the stop."""

    __slots__ = ("done", "lock", "send")

    def __init__(self, send: Send, scope: Scope) -> None:
        info = request_info(scope)
        super().__init__(info.answer if info and isinstance(info.answer, Answer) else None)
        self.send = send
        self.lock = asyncio.Lock()  # one message at a time: the app's, or the end
        self.done = False

    async def relay(self, message: Message) -> None:
        async with self.lock:
            if self.done:  # ended by the stop: the app's later sends go nowhere
                return
            await self.send(message)
            if message["type"] != "http.response.body":
                return
            if not message.get("more_body"):
                self.done = True
            elif self.sent_one():
                await self._end()  # its task's last event has gone: the stop ends it

    async def end(self) -> None:
        """Finish the response (the final empty body chunk), unless it is finished."""
        async with self.lock:
            await self._end()

    async def _end(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(OSError):  # the client has gone meanwhile
            await self.send(_END)


class StreamEnds:
    """Wraps *app*; :meth:`end` finishes its open SSE responses (see the module docstring)."""

    def __init__(self, app: ASGIApp, hosted: ServerView | None = None) -> None:
        self.app = app
        #: the agent of an app run by another server, whose stop this layer watches for
        self.hosted = hosted
        self._watch: asyncio.Task[None] | None = None
        self._host = HostServer()
        self._open: set[_Stream] = set()
        #: once the drain has ended: the tasks whose last event is on its way, by state
        self._ending: Mapping[str, str] | None = None
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
                elif self.hosted is not None and self._watch is None:
                    self._watch = asyncio.ensure_future(self._host_stop(self.hosted, scope))

        try:
            await self.app(scope, receive, watched)
        finally:
            if stream is not None:
                stream.done = True  # the app has returned: the server ends the response
                self._open.discard(stream)
                if not self._open and self._watch is not None and self._ending is None:
                    self._watch.cancel()  # idle, nothing watches (nor outlives the server)

    def end(self, ending: Mapping[str, str] | None = None) -> None:
        """Finish every open SSE response: those following a task of *ending* once they
        have sent the event of its state there (on its way to them), the others now; from
        now on, also each that begins."""
        self._ending = dict(ending or {})
        for stream in list(self._open):
            self._end(stream, self._ending)

    async def _host_stop(self, state: ServerView, scope: Scope) -> None:
        """While a stream is open: once the host's server begins to stop, drain as
        ``serve()`` does, then end the streams (idle, nothing watches)."""
        try:
            server = self._host.find(scope)
            while self._open and self._ending is None:
                if host_stopping(server):
                    await drain(state, state.ops.settings.shutdown_timeout)
                    self.end(last_events(state))
                    return
                await asyncio.sleep(WATCH_EVERY)
        except Exception:  # the drain logs its own failures; the streams end all the same
            logger.exception("Shutting down: the drain failed")
            self.end(last_events(state))
        finally:
            self._watch = None

    def _end(self, stream: _Stream, ending: Mapping[str, str]) -> None:
        if not stream.ends_now(ending):
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
