"""The answer side of every A2A route, as pure ASGI middleware inside the request guard.

Every answer leaves with its errors scrubbed (:mod:`~apcore_a2a.streams.scrub`); a stream
also gets SSE event ids (:mod:`~apcore_a2a.streams.resume`) and, with
``cancel_on_disconnect``, a watch that cancels its task when the client drops the last
stream of it (:mod:`~apcore_a2a.streams.drop`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Receive, Scope, Send

from apcore_a2a.classify import request_info
from apcore_a2a.streams.drop import DropHandler, StreamWatch
from apcore_a2a.streams.resume import SSE_IDS_SCOPE_KEY, sse_id_send
from apcore_a2a.streams.scrub import scrubbing_send


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
        send = scrubbing_send(send)
        if not info.streaming:
            await self.app(scope, receive, send)
            return
        # Event ids of resumable subscriptions (streams/resume.py); unused by other streams.
        ids: deque[str] = deque()
        scope[SSE_IDS_SCOPE_KEY] = ids
        send = sse_id_send(send, ids)
        if self.on_stream_dropped is None:
            await self.app(scope, receive, send)
            return
        watch = StreamWatch(self.task_streams)
        try:
            await self.app(scope, watch.wrap_receive(receive), watch.wrap_send(send))
        finally:
            if watch.close():
                assert watch.task_id is not None
                await self.on_stream_dropped(scope, watch.task_id)
