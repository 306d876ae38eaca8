"""The answer side of every A2A route, as pure ASGI middleware inside the request guard.

It reads the call's :class:`~apcore_a2a.streams.tap.Answer` (what the handler answered, as
objects), never the SDK's rendered events:

* an error the handler raised is answered from the exception, scrubbed
  (:mod:`~apcore_a2a.streams.scrub`), in place of the SDK's rendering of it: the JSON body
  of a call, the error frame of a stream; an error the route answered before reaching the
  handler is scrubbed from its (small) JSON body;
* each event frame of a resumable stream gets its SSE ``id`` (:mod:`~.resume`);
* with ``cancel_on_disconnect``, a stream's task is canceled when the client drops its
  last stream of it (:mod:`~.drop`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import RequestInfo, request_info
from apcore_a2a.streams.drop import DropHandler, StreamWatch
from apcore_a2a.streams.resume import last_event_id_of
from apcore_a2a.streams.scrub import Scrubbed, error_answer, error_body
from apcore_a2a.streams.tap import Answer

#: JSON bodies larger than this are no error document of the SDK's
_MAX_ERROR_BODY = 64 * 1024


@dataclass
class AnswerSide:
    """See the module docstring."""

    app: ASGIApp
    on_stream_dropped: DropHandler | None = None
    #: open watched streams per task id (only with on_stream_dropped); one dict for the
    #: middleware of all routes
    task_streams: dict[str, int] = field(default_factory=dict)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if info is None or not info.is_a2a:
            await self.app(scope, receive, send)
            return
        answer = Answer.of(scope)
        send = _answering(send, info, answer)
        if not info.streaming:
            await self.app(scope, receive, send)
            return
        answer.last_event_id = last_event_id_of(scope)
        if self.on_stream_dropped is None:
            await self.app(scope, receive, send)
            return
        watch = StreamWatch(self.task_streams, answer)
        try:
            await self.app(scope, watch.wrap_receive(receive), watch.wrap_send(send))
        finally:
            if watch.close():
                assert watch.task_id is not None
                await self.on_stream_dropped(scope, watch.task_id)


def _answering(send: Send, info: RequestInfo, answer: Answer) -> Send:
    """*send* with the answer's error answers and SSE ids (see the module docstring)."""
    start: Message | None = None
    streaming = replaced = False
    rest = info.binding == "rest"

    async def answered(message: Message) -> None:
        nonlocal start, streaming, replaced
        if message["type"] == "http.response.start":
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
            await send(_framed(message, info, answer))
            return
        if start is None:
            await send(message)
            return
        held, start = start, None
        scrubbed: Scrubbed | None = None
        if answer.failure is not None:
            scrubbed = error_answer(info, answer.failure)
        elif not answer.reached and not message.get("more_body", False):
            body = message.get("body", b"")
            if (not rest or held["status"] >= 400) and len(body) <= _MAX_ERROR_BODY:
                scrubbed = error_body(body, rest)
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


def _framed(message: Message, info: RequestInfo, answer: Answer) -> Message:
    """One chunk of an SSE answer: the event frame with its id, or the error frame."""
    body: bytes = message.get("body", b"")
    if body.startswith(b":") or not body:  # a keep-alive comment, or the end
        return message
    if answer.failure is not None:
        # The handler raised: this is the route's error frame, the stream's last.
        scrubbed = error_answer(info, answer.failure)
        answer.error_type = str(scrubbed.code)
        event = b"" if info.binding == "jsonrpc" and info.version == "0.3" else b"event: error\r\n"
        return {**message, "body": event + b"data: " + scrubbed.body() + b"\r\n\r\n"}
    if answer.sse_id is not None:
        body = b"id: " + answer.sse_id.encode() + b"\r\n" + body
        answer.sse_id = None
    return {**message, "body": body}
