"""The answer side of every A2A route, as pure ASGI middleware inside the request guard.

It reads the call's :class:`~apcore_a2a.streams.tap.Answer` (what the handler answered, as
objects), never the SDK's rendered events:

* an error the handler raised is answered from the exception, scrubbed
  (:mod:`~apcore_a2a.streams.scrub`), in place of the SDK's rendering of it: the JSON body
  of a call, the error frame of a stream; an error the route answered before reaching the
  handler is scrubbed from its (small) JSON body; so are the errors of the push status
  route (``push/status_route.py``, REST-shaped), which answers ours as the A2A routes do;
* each event frame of a resumable stream gets its SSE ``id`` (:mod:`~.resume`);
* every answer says ``Cache-Control: no-store``: it is one caller's (their task, their
  list, their extended card), and a shared cache in front of the agent keeps a ``GET``
  answer that says nothing against it (RFC 9111 §4.2.2) for the next caller of that URL;
  only ``Authorization`` stops such a cache by itself, and API keys travel in ``X-API-Key``;
* with ``cancel_on_disconnect``, a stream's task is canceled (:class:`StreamDrops`, which
  the gRPC binding's streams use too) when the client hung up before the last chunk of the
  last open stream of that task (the first task the answer names as the first frame
  leaves), or before the first frame: then the call's own run is stopped (the request guard
  notes that hang-up).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from a2a.types import CancelTaskRequest
from a2a.utils.errors import A2AError, TaskNotFoundError
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import RequestInfo, request_info
from apcore_a2a.streams.resume import last_event_id_of
from apcore_a2a.streams.scrub import Scrubbed, error_answer, error_body, said_in_request
from apcore_a2a.streams.tap import Answer

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext


class Followers(Protocol):
    """The open streams of each task on the other replicas (cluster mode)."""

    async def follow(self, task_id: str) -> str | None: ...
    async def unfollow(self, holder: str) -> None: ...
    async def elsewhere(self, task_id: str) -> bool: ...


logger = logging.getLogger("apcore_a2a.server")

#: JSON bodies larger than this are no error document of the SDK's
_MAX_ERROR_BODY = 64 * 1024


class StreamDrops:
    """``cancel_on_disconnect``, one policy for every binding: the open streams of each task
    (SSE and gRPC counted together), and the cancel of a task whose last stream its client
    dropped, through the SDK handler, as the caller who opened the stream (owner scoping
    applies as for the client's own CancelTask). A run with no task stored yet (a
    message-reply skill's module) is stopped through *runs* (the agent executor's
    ``abandon``): there is nothing to cancel, and nothing to keep. In cluster mode
    *followers* (``storage/followers.py``) shares each open stream with the other
    replicas, so that a stream on one of them keeps the task as one here does."""

    def __init__(self, handler: Any, runs: Any, followers: Followers | None = None) -> None:
        self.handler, self.runs, self.followers = handler, runs, followers
        self._open: dict[str, int] = {}
        self._noted: dict[str, list[str]] = {}  # task id -> followers' holders here

    async def sent(self, answer: Answer, task_id: str | None) -> str | None:
        """A frame of the stream that answers *answer* leaves, the stream following *task_id*
        so far: the task it follows now (the first the answer names, counted open then)."""
        if task_id is not None or answer.task_id is None:
            return task_id
        task_id = answer.task_id
        self._open[task_id] = self._open.get(task_id, 0) + 1
        if self.followers is not None:
            holder = await self.followers.follow(task_id)
            if holder is not None:
                self._noted.setdefault(task_id, []).append(holder)
        return task_id

    async def closed(
        self,
        task_id: str | None,
        answer: Answer,
        dropped: bool,
        call_context: Callable[[], ServerCallContext],
    ) -> None:
        """A stream of the call that answered *answer* ended: it followed *task_id* (``None``:
        no frame left), *dropped* if its client left before the last frame (before the
        first: ``answer.hung_up``); *call_context* makes the context of a cancel."""
        # Gone before the first frame, after the start of the answer (0.3's JSON-RPC route
        # answers that at once; a gRPC stream's first item): the request guard, which notes
        # a hang-up only before it, did not see this one.
        answer.hung_up = answer.hung_up or (dropped and task_id is None)
        dropped = dropped and not answer.stopped  # ended by a stop, not by its client
        if task_id is not None:
            left = self._open.pop(task_id) - 1
            if left > 0:  # another client still streams the task: it is left alone
                self._open[task_id] = left
            if self.followers is not None:
                noted = self._noted.get(task_id)
                if noted:
                    holder = noted.pop()
                    if not noted:
                        del self._noted[task_id]
                    await self.followers.unfollow(holder)
                if left <= 0 and dropped and await self.followers.elsewhere(task_id):
                    return  # a client streams it on another replica: left alone too
            if left <= 0 and dropped:
                await self._cancel(call_context(), task_id)
        elif answer.hung_up and not answer.stopped:
            # Gone before the first frame (a message-reply skill's module was still
            # running): no stream ever followed the run, so its task, or the run itself
            # when nothing is stored yet, goes with the client.
            unsent = answer.task_id or answer.run_task
            if unsent is not None and unsent not in self._open:
                await self._cancel(call_context(), unsent)

    async def _cancel(self, call_context: ServerCallContext, task_id: str) -> None:
        try:
            await self.handler.on_cancel_task(CancelTaskRequest(id=task_id), call_context)
        except TaskNotFoundError:
            if self.runs.abandon(task_id):
                logger.info("Client dropped the stream of run %s before its answer", task_id)
        except A2AError as exc:
            # Finished (or gone) meanwhile: nothing left to cancel.
            logger.debug("Dropped stream of task %s: not canceled (%s)", task_id, exc)
            return
        logger.info("Client dropped the only stream of task %s; canceled it", task_id)


@dataclass
class AnswerSide:
    """See the module docstring; *context_builder* makes a dropped stream's cancel context."""

    app: ASGIApp
    drops: StreamDrops | None = None
    context_builder: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if info is None or not (info.is_a2a or info.kind == "push"):
            await self.app(scope, receive, send)
            return
        answer = Answer.of(scope)
        send = _answering(send, scope, info, answer)
        if info.streaming:
            answer.last_event_id = last_event_id_of(scope)
        drops = self.drops
        if not info.streaming or drops is None:
            await self.app(scope, receive, send)
            return
        task_id: str | None = None
        complete = dropped = False

        async def watched_receive() -> Message:
            nonlocal dropped
            message = await receive()
            dropped = dropped or (message["type"] == "http.disconnect" and not complete)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal task_id, complete
            if message["type"] == "http.response.body":
                task_id = await drops.sent(answer, task_id)
                complete = not message.get("more_body", False)
            await send(message)

        try:
            await self.app(scope, watched_receive, watched_send)
        finally:
            builder = self.context_builder
            await drops.closed(task_id, answer, dropped, lambda: builder.build(Request(scope)))


def _answering(send: Send, scope: Scope, info: RequestInfo, answer: Answer) -> Send:
    """*send* with the answer's error answers and SSE ids (see the module docstring)."""
    start: Message | None = None
    streaming = replaced = False
    rest = info.binding == "rest"

    async def answered(message: Message) -> None:
        nonlocal start, streaming, replaced
        if message["type"] == "http.response.start":
            headers = MutableHeaders(raw=list(message.get("headers") or ()))
            headers.setdefault("cache-control", "no-store")
            message = {**message, "headers": headers.raw}
            content_type = dict(message.get("headers") or ()).get(b"content-type", b"")
            streaming = content_type.startswith(b"text/event-stream")
            if streaming:
                await send(message)
            else:
                start = message  # held until the body says what it answers
            return
        if message["type"] != "http.response.body" or replaced:
            if not replaced:
                await send(message)
            return
        if streaming:
            await send(_framed(message, scope, info, answer))
            return
        if start is None:
            await send(message)
            return
        held, start = start, None
        scrubbed: Scrubbed | None = None
        if answer.failure is not None:
            scrubbed = error_answer(info, answer.failure, said_in_request(scope, info))
        elif (not answer.reached or not info.is_a2a) and not message.get("more_body", False):
            # the route answered itself: before the handler, or (the push status route) after
            body = message.get("body", b"")
            if (not rest or held["status"] >= 400) and len(body) <= _MAX_ERROR_BODY:
                scrubbed = error_body(body, info, said_in_request(scope, info))
        if scrubbed is None:
            await send(held)
            await send(message)
            return
        replaced = message.get("more_body", False)
        answer.error_type = str(scrubbed.code)
        body = scrubbed.body()
        headers = MutableHeaders(raw=list(held.get("headers") or ()))
        headers["content-length"] = str(len(body))
        if scrubbed.retry_after is not None and scrubbed.status in (429, 503):
            headers["retry-after"] = str(scrubbed.retry_after)
        await send({**held, "status": scrubbed.status, "headers": headers.raw})
        await send({"type": "http.response.body", "body": body})

    return answered


def _framed(message: Message, scope: Scope, info: RequestInfo, answer: Answer) -> Message:
    """One chunk of an SSE answer: the event frame with its id, or the error frame."""
    body: bytes = message.get("body", b"")
    if body.startswith(b":") or not body:  # a keep-alive comment, or the end
        return message
    if answer.failure is not None:
        # The handler raised: this is the route's error frame, the stream's last.
        scrubbed = error_answer(info, answer.failure, said_in_request(scope, info))
        answer.error_type = str(scrubbed.code)
        event = b"" if info.binding == "jsonrpc" and info.version == "0.3" else b"event: error\r\n"
        return {**message, "body": event + b"data: " + scrubbed.body() + b"\r\n\r\n"}
    if answer.sse_id is not None:
        body = b"id: " + answer.sse_id.encode() + b"\r\n" + body
        answer.sse_id = None
    return {**message, "body": body}
