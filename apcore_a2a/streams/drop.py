"""``cancel_on_disconnect``: a task whose last stream the client dropped is canceled.

:class:`StreamWatch` follows one SSE response (its task, as the call's answer names it,
and whether the client hung up before the last chunk); :func:`cancel_on_drop` cancels such a
task through the SDK handler, as the caller who opened the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from apcore_a2a.streams.tap import Answer

logger = logging.getLogger("apcore_a2a.server")

#: called with the request scope and task id when a task's last stream was dropped
DropHandler = Callable[[Scope, str], Awaitable[None]]


class StreamWatch:
    """Follows one SSE response: its task (the first the answer names, as the first frame
    leaves) and whether the client dropped it (``http.disconnect`` before the last chunk).
    *open_streams*, shared by all watches, counts streams per task: a task another client
    still streams is left alone."""

    def __init__(self, open_streams: dict[str, int], answer: Answer) -> None:
        self.open_streams = open_streams
        self.answer = answer
        self.task_id: str | None = None
        self.complete = False
        self.dropped = False

    def wrap_receive(self, receive: Receive) -> Receive:
        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not self.complete:
                self.dropped = True
            return message

        return watched

    def wrap_send(self, send: Send) -> Send:
        async def watched(message: Message) -> None:
            if message["type"] == "http.response.body":
                if self.task_id is None and self.answer.task_id is not None:
                    self.task_id = task_id = self.answer.task_id
                    self.open_streams[task_id] = self.open_streams.get(task_id, 0) + 1
                if not message.get("more_body", False):
                    self.complete = True
            await send(message)

        return watched

    def close(self) -> bool:
        """Stop counting this stream; ``True`` if it was dropped and was the task's last."""
        if self.task_id is None:
            return False
        left = self.open_streams.get(self.task_id, 1) - 1
        if left > 0:
            self.open_streams[self.task_id] = left
        else:
            self.open_streams.pop(self.task_id, None)
        return self.dropped and left <= 0


def cancel_on_drop(handler: Any, context_builder: Any) -> DropHandler:
    """A :data:`DropHandler` cancelling the task through the SDK handler, as the caller who
    opened the stream (owner scoping applies as for the client's own CancelTask)."""
    from a2a.types import CancelTaskRequest
    from a2a.utils.errors import A2AError
    from starlette.requests import Request

    async def cancel(scope: Scope, task_id: str) -> None:
        call_context = context_builder.build(Request(scope))
        try:
            await handler.on_cancel_task(CancelTaskRequest(id=task_id), call_context)
        except A2AError as exc:
            # Finished (or gone) meanwhile: nothing left to cancel.
            logger.debug("Dropped stream of task %s: not canceled (%s)", task_id, exc)
            return
        logger.info("Client dropped the only stream of task %s; canceled it", task_id)

    return cancel
